// Conformance of `stoke cat` on Parquet files that other systems wrote: the corpus in
// <repo>/../shared/corpus/parquet-testing (apache/parquet-testing; $STOKE_PARQUET_CORPUS overrides
// the folder). A user's fresh clone has no ../shared: the test then skips, saying so.
//
//   node --test tests/interop/parquet_corpus.test.mjs
//
// Every *.parquet file under data/ (subfolders included) and bad_data/, and every
// *.parquet.encrypted file, is one test:
//
//   - DuckDB reads the file (read_parquet, one thread, so in file order). Its column types are
//     mapped to Delta-style types (BOOLEAN boolean, TINYINT..BIGINT and the unsigned ones integers,
//     FLOAT float, DOUBLE double, DECIMAL(p,s) decimal(p,s), VARCHAR string, BLOB binary, DATE date,
//     TIMESTAMP[_TZ] timestamp, LIST/ARRAY array, STRUCT struct, MAP map), and every cell is
//     normalised to the canonical value canonical.mjs defines (the table at the top of
//     delta_corpus.test.mjs): exact integers and decimals, floats by value, timestamps as
//     microseconds, binary as md5 and length, nested values recursively. Columns of other types are
//     named in the test's output and not compared.
//   - stoke prints the file with `stoke cat --format json`; its rows are normalised by the same
//     types and compared with DuckDB's, row by row in file order.
//   - Files with a page whose CRC does not match (…-corrupt-checksum.parquet) must be refused with
//     an error that says so: DuckDB does not check page CRCs, stoke does.
//   - Encrypted files must be refused with an error that says the file is encrypted.
//   - Files of bad_data/ must give a clean error (exit status 1, an error line naming the file, no
//     signal, within the time limit); where DuckDB reads one, stoke may read it too, with DuckDB's
//     rows.
//   - Where DuckDB cannot read a file of data/, stoke's rows are not compared; stoke must read it or
//     fail cleanly.
//
// tests/interop/parquet_corpus_expectations.json lists, per file, what differs from the above and
// why: "footer_only" (the file is too large to print in a test; only its footer is read),
// "rows_differ" (rows where DuckDB's value is wrong, with the reason; stoke's value there must
// differ from DuckDB's, else the entry is stale), "same_rows_as" (DuckDB cannot read the file, which
// holds the same rows as another file of the corpus: stoke's rows are compared with DuckDB's reading
// of that one), "duckdb_columns" (the columns DuckDB can read; the others are not compared with
// DuckDB) and "equal_columns" (pairs of columns that hold the same values in different encodings:
// stoke must print them equal in every row). A listed file that is not in the corpus fails.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sqlStr, useStokeAndDuckDB } from './support.mjs';
import { firstLine, parseJsonLines, canonStokeNested, duckNestedExpr, canonDuckNested, typeText } from './canonical.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const STOKE_SRC = process.env.STOKE_BIN || path.join(REPO, 'build', 'stoke');
const CORPUS = process.env.STOKE_PARQUET_CORPUS || path.resolve(REPO, '..', 'shared', 'corpus', 'parquet-testing');
const EXPECTATIONS_FILE = path.join(HERE, 'parquet_corpus_expectations.json');
const STOKE_TIMEOUT_MS = 120_000;

const HAVE_CORPUS = fs.existsSync(path.join(CORPUS, 'data'));
const SKIP_MESSAGE = `no Parquet corpus at ${CORPUS} (a fresh clone has no ../shared; CI has it): parquet corpus conformance skipped`;
if (!HAVE_CORPUS) console.log(SKIP_MESSAGE);

// The corpus files, relative to CORPUS, sorted.
function findFiles(root) {
  const out = [];
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(r);
      else if (/\.parquet(\.encrypted)?$/.test(e.name)) out.push(r);
    }
  };
  for (const top of ['data', 'bad_data']) if (fs.existsSync(path.join(root, top))) walk(top);
  return out.sort();
}

// ---------------------------------------------------------------------------
// DuckDB's types -> Delta-style types (null: not compared)

const DUCK_TYPE = {
  1: 'boolean', 2: 'byte', 3: 'short', 4: 'integer', 5: 'long', 6: 'short', 7: 'integer', 8: 'long', 9: 'long',
  10: 'float', 11: 'double', 12: 'timestamp', 13: 'date', 17: 'string', 18: 'binary', 31: 'timestamp',
};

function deltaType(duck) {
  if (duck.typeId in DUCK_TYPE) return DUCK_TYPE[duck.typeId];
  if (duck.typeId === 19) return `decimal(${duck.width},${duck.scale})`;
  if (duck.typeId === 24 || duck.typeId === 33) {
    const e = deltaType(duck.valueType);
    return e === null ? null : { type: 'array', elementType: e };
  }
  if (duck.typeId === 25) {
    const fields = duck.entryNames.map((name, i) => ({ name, type: deltaType(duck.entryTypes[i]) }));
    return fields.length && fields.every((f) => f.type !== null) ? { type: 'struct', fields } : null;
  }
  if (duck.typeId === 26) {
    const k = deltaType(duck.keyType);
    const v = deltaType(duck.valueType);
    return k === null || v === null ? null : { type: 'map', keyType: k, valueType: v };
  }
  return null;
}

const quoteIdent = (name) => `"${String(name).replaceAll('"', '""')}"`;

// DuckDB's reading of a file (`only`: just these columns): {error} or {columns: [{name, type, duck}], skipped: [names], rows: [[canon...]]}.
async function duckRows(con, file, only) {
  const projection = only ? only.map(quoteIdent).join(', ') : '*';
  let head;
  try {
    head = await con.runAndReadAll(`SELECT ${projection} FROM read_parquet(${sqlStr(file)}) LIMIT 0`);
  } catch (e) {
    return { error: firstLine(e.message) };
  }
  const names = head.columnNames();
  const ducks = head.columnTypesJson();
  const columns = [];
  const skipped = [];
  names.forEach((name, i) => {
    const type = deltaType(ducks[i]);
    if (type === null) skipped.push(`${name} (DuckDB ${String(head.columnTypes()[i]).slice(0, 40)})`);
    else columns.push({ name, type, duck: ducks[i] });
  });
  const exprs = columns.map((c, i) => `${duckNestedExpr(c.type, quoteIdent(c.name), c.duck)} AS c${i}`);
  const sql = `SELECT ${exprs.length ? exprs.join(', ') : '1 AS c'} FROM read_parquet(${sqlStr(file)})`;
  let reader;
  try {
    reader = await con.runAndReadAll(sql);
  } catch (e) {
    return { error: firstLine(e.message) };
  }
  const rows = reader.getRowObjectsJS().map((r) => columns.map((c, i) => canonDuckNested(c.type, r[`c${i}`])));
  return { columns, skipped, rows };
}

// ---------------------------------------------------------------------------
// stoke

// `stoke cat` of the file; with asDataset, `stoke query` of the file opened as a one-file plain
// Parquet dataset (its schema translated to Delta types, read as a table's files are).
function runStokeCat(stoke, file, extra = [], { asDataset = false } = {}) {
  const args = ['--no-progress', asDataset ? 'query' : 'cat', '--format', 'json', ...extra, file];
  const r = spawnSync(stoke, args, { encoding: 'utf8', maxBuffer: 1 << 30, timeout: STOKE_TIMEOUT_MS });
  if (r.error) return { error: `cannot run stoke: ${r.error.message}`, crashed: true };
  if (r.status !== 0 || r.signal) {
    const lines = String(r.stderr || '').split('\n').map((l) => l.trim()).filter((l) => l.length > 0);
    const message = lines.find((l) => /^stoke: error/.test(l)) || lines.at(-1) || '';
    return { error: message, status: r.status, signal: r.signal, crashed: Boolean(r.signal) || r.status !== 1 };
  }
  return { stdout: r.stdout };
}

// A clean refusal: exit status 1 and an error line that names the file.
function cleanError(r, file) {
  if (!r.error) return 'stoke read it';
  if (r.crashed) return `not a clean error (status ${r.status}, signal ${r.signal}): ${r.error}`;
  if (!r.error.startsWith('stoke: error:')) return `no error line: ${r.error}`;
  if (!r.error.includes(path.basename(file))) return `the error does not name the file: ${r.error}`;
  return null;
}

const rowText = (row) => JSON.stringify(row);

// Compares stoke's rows with DuckDB's; -> null or the first difference. skipRows: row indexes whose
// DuckDB value is known to be wrong (they must differ).
function compareRows(expected, columns, stdout, skipRows) {
  let got;
  try {
    got = parseJsonLines(stdout);
  } catch (e) {
    return `stoke's JSON unreadable: ${e.message}`;
  }
  if (got.length !== expected.rows.length) return `rows: stoke printed ${got.length}, DuckDB reads ${expected.rows.length}`;
  for (let r = 0; r < got.length; r++) {
    const missing = columns.filter((c) => !(c.name in got[r])).map((c) => c.name);
    if (missing.length) return `row ${r}: stoke printed no column ${missing.join(', ')} (it printed ${Object.keys(got[r]).join(', ')})`;
    const actual = columns.map((c) => canonStokeNested(c.type, got[r][c.name]));
    const same = rowText(actual) === rowText(expected.rows[r]);
    if (skipRows.has(r)) {
      if (same) return `row ${r} is listed as one where DuckDB is wrong, but stoke agrees with it: remove it from the expectations`;
      continue;
    }
    if (!same) {
      const cols = columns.filter((c, i) => rowText(actual[i]) !== rowText(expected.rows[r][i]));
      const c = cols[0];
      const i = columns.indexOf(c);
      return `row ${r} column ${c.name} (${typeText(c.type)}): stoke ${rowText(actual[i])}, DuckDB ${rowText(expected.rows[r][i])}`;
    }
  }
  return null;
}

// Pairs of columns that must print the same in every row of stoke's output; -> null or the first
// difference.
function equalColumns(stdout, pairs) {
  const rows = parseJsonLines(stdout);
  for (const [a, b] of pairs) {
    for (let r = 0; r < rows.length; r++) {
      if (!(a in rows[r]) || !(b in rows[r])) return `row ${r}: stoke printed no column ${a in rows[r] ? b : a}`;
      if (rowText(rows[r][a]) !== rowText(rows[r][b])) {
        return `row ${r}: ${b} is ${rowText(rows[r][b])}, but ${a} is ${rowText(rows[r][a])}`;
      }
    }
  }
  return null;
}

// -> {ok, reason, notes}
async function checkFile(con, stoke, rel, expect) {
  const file = path.join(CORPUS, rel);
  const notes = [];
  const badData = rel.startsWith('bad_data/');
  const encrypted = rel.endsWith('.encrypted');
  const corruptCrc = /corrupt-checksum/.test(rel);
  if (encrypted || corruptCrc) {
    const r = runStokeCat(stoke, file);
    const unclean = cleanError(r, file);
    if (unclean) return { ok: false, reason: unclean };
    const want = encrypted ? /encrypted/i : /CRC mismatch/;
    if (!want.test(r.error)) return { ok: false, reason: `refused, but the error does not say why (${want}): ${r.error}` };
    return { ok: true, notes: [`refused as it must: ${r.error}`] };
  }
  if (expect.footer_only) {
    const r = runStokeCat(stoke, file, ['--limit', '0']);
    if (r.error) return { ok: false, reason: r.error };
    notes.push(`footer only (${expect.footer_only})`);
    return { ok: true, notes };
  }
  const source = expect.same_rows_as ? path.join(CORPUS, expect.same_rows_as) : file;
  const exp = await duckRows(con, source, expect.duckdb_columns);
  if (expect.same_rows_as) notes.push(`compared with DuckDB's rows of ${expect.same_rows_as} (${expect.why})`);
  if (expect.duckdb_columns) notes.push(`DuckDB reads only ${expect.duckdb_columns.join(', ')} (${expect.why})`);
  const r = runStokeCat(stoke, file);
  if (exp.error) {
    notes.push(`DuckDB cannot read it (${exp.error}): rows not compared`);
    if (r.error) {
      const unclean = cleanError(r, file);
      if (unclean) return { ok: false, reason: unclean, notes };
      notes.push(`stoke refuses it too: ${r.error}`);
    } else {
      if (badData) return { ok: false, reason: `stoke read a malformed file that DuckDB refuses (${exp.error})`, notes };
      notes.push(`stoke reads it: ${parseJsonLines(r.stdout).length} rows`);
    }
    return { ok: true, notes };
  }
  if (exp.skipped.length) notes.push(`not compared: ${exp.skipped.join(', ')}`);
  if (r.error) {
    if (badData) {
      const unclean = cleanError(r, file);
      if (unclean) return { ok: false, reason: unclean, notes };
      return { ok: true, notes: [...notes, `refused (DuckDB reads it): ${r.error}`] };
    }
    return { ok: false, reason: r.error, notes };
  }
  const skipRows = new Map((expect.rows_differ || []).map((d) => [d.row, d.why]));
  const diff = compareRows(exp, exp.columns, r.stdout, skipRows) || equalColumns(r.stdout, expect.equal_columns || []);
  if (diff) return { ok: false, reason: diff, notes };
  const asDataset = runStokeCat(stoke, file, [], { asDataset: true });
  if (asDataset.error) return { ok: false, reason: `as a plain Parquet dataset: ${asDataset.error}`, notes };
  const datasetDiff = compareRows(exp, exp.columns, asDataset.stdout, skipRows);
  if (datasetDiff) return { ok: false, reason: `as a plain Parquet dataset: ${datasetDiff}`, notes };
  notes.push('the same rows opened as a one-file plain Parquet dataset');
  for (const [a, b] of expect.equal_columns || []) notes.push(`${b} equals ${a} in every row`);
  for (const [row, why] of skipRows) notes.push(`row ${row} not compared: ${why}`);
  notes.push(`${exp.rows.length} rows equal DuckDB's over ${exp.columns.length} columns`);
  return { ok: true, notes };
}

// ---------------------------------------------------------------------------

describe('stoke reads the Parquet files of the shared corpus', { skip: !HAVE_CORPUS && SKIP_MESSAGE }, () => {
  let TMP;
  let STOKE;
  let duck;
  let con;
  const files = HAVE_CORPUS ? findFiles(CORPUS) : [];
  const expectations = fs.existsSync(EXPECTATIONS_FILE) ? JSON.parse(fs.readFileSync(EXPECTATIONS_FILE, 'utf8')) : {};
  const summary = { files: files.length, compared: 0, refused: 0, notCompared: 0, failed: [] };

  useStokeAndDuckDB('stoke-parquet-corpus-', STOKE_SRC, (env) => ({ tmp: TMP, stoke: STOKE, duck, con } = env));

  after(() => {
    console.log(
      `parquet corpus: ${summary.files} files, ${summary.compared} with DuckDB's rows, ${summary.refused} refused as they must, ` +
        `${summary.notCompared} not compared` + (summary.failed.length ? `, ${summary.failed.length} failed: ${summary.failed.join(', ')}` : ''),
    );
  });

  test('the expectations name only files of the corpus, each with a reason', () => {
    for (const [name, e] of Object.entries(expectations)) {
      assert.ok(files.includes(name), `${name} is listed in parquet_corpus_expectations.json but is not in the corpus`);
      assert.ok(
        e.footer_only || e.why || (e.rows_differ && e.rows_differ.every((d) => Number.isInteger(d.row) && d.why)),
        `${name}: give a reason`,
      );
      if (e.same_rows_as) assert.ok(files.includes(e.same_rows_as), `${name}: ${e.same_rows_as} is not in the corpus`);
    }
  });

  for (const rel of files) {
    test(rel, async (t) => {
      const r = await checkFile(con, STOKE, rel, expectations[rel] || {});
      for (const n of r.notes || []) t.diagnostic(n);
      if (!r.ok) {
        summary.failed.push(rel);
        assert.fail(`${rel}: ${r.reason}`);
      }
      const text = (r.notes || []).join(' ');
      if (/refused|refuses/.test(text)) summary.refused++;
      else if (/equal DuckDB's/.test(text)) summary.compared++;
      else summary.notCompared++;
    });
  }
});
