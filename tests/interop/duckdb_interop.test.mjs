// Cross-tool tests: DuckDB reads the Parquet that stoke writes, and stoke reads
// the Parquet that DuckDB writes.
//
//   cd tests/interop && npm ci && node --test        (or: node --test tests/interop/)
//
// The stoke binary comes from $STOKE_BIN (default: <repo>/build/stoke); it is copied to a temporary
// directory first.
// Everything happens in a fresh temporary directory that is removed at the end.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { md5, npyPayload, queryRows, readCsv, runStoke, sqlList, sqlStr, useStokeAndDuckDB } from './support.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const STOKE_SRC = process.env.STOKE_BIN || path.join(REPO, 'build', 'stoke');

// ---------------------------------------------------------------------------
// helpers

let TMP;
let STOKE; // a copy of STOKE_SRC, so that a concurrent rebuild does not disturb a run
let duck; // DuckDBInstance
let con; // DuckDBConnection

useStokeAndDuckDB('stoke-interop-', STOKE_SRC, (env) => ({ tmp: TMP, stoke: STOKE, duck, con } = env));

const stoke = (args, opts) => runStoke(STOKE, args, opts);
const rows = (sql) => queryRows(con, sql);

// A JSON parser that keeps numbers as their source text (so BIGINTs beyond 2^53
// and the exact digits of floats survive) and keeps object keys in order.
class JsonNum {
  constructor(raw) {
    this.raw = raw;
  }
}
function parseJsonRaw(text) {
  let i = 0;
  const fail = (what) => {
    throw new Error(`bad JSON (${what}) at ${i}: ${text.slice(Math.max(0, i - 40), i + 40)}`);
  };
  const ws = () => {
    while (i < text.length && ' \t\r\n'.includes(text[i])) i++;
  };
  const STR = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
  const NUM = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  const str = () => {
    STR.lastIndex = i;
    const m = STR.exec(text);
    if (!m) fail('string');
    i = STR.lastIndex;
    return JSON.parse(m[0]);
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const entries = [];
      ws();
      if (text[i] === '}') {
        i++;
        return { entries };
      }
      for (;;) {
        ws();
        const k = str();
        ws();
        if (text[i++] !== ':') fail("':'");
        entries.push([k, value()]);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i++] !== '}') fail("'}'");
        return { entries };
      }
    }
    if (c === '[') {
      i++;
      const arr = [];
      ws();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value());
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i++] !== ']') fail("']'");
        return arr;
      }
    }
    if (c === '"') return str();
    for (const [lit, v] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ]) {
      if (text.startsWith(lit, i)) {
        i += lit.length;
        return v;
      }
    }
    NUM.lastIndex = i;
    const m = NUM.exec(text);
    if (!m) fail('value');
    i = NUM.lastIndex;
    return new JsonNum(m[0]);
  };
  const v = value();
  ws();
  if (i !== text.length) fail('trailing text');
  return v;
}

// `stoke cat --format json` output -> array of rows, each an array of [key, value].
function stokeCatJson(file, extra = []) {
  const r = stoke(['cat', file, '--format', 'json', ...extra]);
  const lines = r.stdout.split('\n');
  assert.equal(lines.pop(), '', 'cat output ends with a newline');
  return lines.map((line) => {
    JSON.parse(line); // must also be plain valid JSON
    const obj = parseJsonRaw(line);
    assert.ok(obj.entries, `each line is a JSON object: ${line.slice(0, 200)}`);
    return obj.entries;
  });
}

// DuckDB's view of a Parquet file in file order. BLOB columns come back already
// formatted the way stoke prints them.
async function duckFileOrder(file, { columns = null, offset = 0, limit = null } = {}) {
  const desc = await rows(`DESCRIBE SELECT * FROM read_parquet(${sqlStr(file)})`);
  const cols = desc
    .map((d) => ({ name: d.column_name, type: d.column_type }))
    .filter((c) => !columns || columns.includes(c.name));
  if (columns) cols.sort((a, b) => columns.indexOf(a.name) - columns.indexOf(b.name));
  const sel = cols.map((c) => {
    const q = `"${c.name}"`;
    if (c.type === 'BLOB') {
      return `CASE WHEN ${q} IS NULL THEN NULL ELSE 'md5:' || md5(${q}) || ' len:' || octet_length(${q}) END AS ${q}`;
    }
    return q;
  });
  const lim = limit === null ? '' : ` LIMIT ${limit}`;
  const data = await rows(
    `SELECT ${sel.join(', ')} FROM read_parquet(${sqlStr(file)}, file_row_number = true) ` +
      `ORDER BY file_row_number${lim} OFFSET ${offset}`,
  );
  return { cols, data };
}

// Does one stoke JSON cell equal DuckDB's value? Returns null or a description.
function cellMismatch(type, got, want) {
  const show = (v) => (v instanceof JsonNum ? v.raw : typeof v === 'bigint' ? `${v}n` : JSON.stringify(v));
  const bad = () => `stoke ${show(got)} vs duckdb ${show(want)} (${type})`;
  if (want === null || want === undefined) return got === null ? null : bad();
  if (got === null) return bad();
  switch (type) {
    case 'BOOLEAN':
      return got === want ? null : bad();
    case 'TINYINT':
    case 'SMALLINT':
    case 'INTEGER':
      return got instanceof JsonNum && /^-?\d+$/.test(got.raw) && Number(got.raw) === want ? null : bad();
    case 'BIGINT':
      return got instanceof JsonNum && /^-?\d+$/.test(got.raw) && BigInt(got.raw) === BigInt(want) ? null : bad();
    case 'FLOAT':
    case 'DOUBLE': {
      if (Number.isNaN(want)) return got === 'nan' ? null : bad();
      if (want === Infinity) return got === 'inf' ? null : bad();
      if (want === -Infinity) return got === '-inf' ? null : bad();
      if (!(got instanceof JsonNum)) return bad();
      const g = Number(got.raw);
      // The sign of zero is checked by its own test ('keeps the sign of -0.0'), so that
      // one formatting slip does not drown every other difference here.
      if (g === 0 && want === 0) return null;
      if (type === 'FLOAT') return Object.is(Math.fround(g), Math.fround(want)) ? null : bad();
      return Object.is(g, want) ? null : bad();
    }
    case 'VARCHAR':
    case 'BLOB': // already "md5:... len:..."
      return got === want ? null : bad();
    default:
      return `unhandled type ${type}`;
  }
}

// Compare stoke cat's JSON with DuckDB's rows; returns up to 20 mismatch strings.
function compareRows(stokeRows, duckCols, duckRows, rowBase = 0) {
  const problems = [];
  const note = (s) => {
    if (problems.length < 20) problems.push(s);
  };
  if (stokeRows.length !== duckRows.length) {
    note(`row count: stoke ${stokeRows.length} vs duckdb ${duckRows.length}`);
  }
  const n = Math.min(stokeRows.length, duckRows.length);
  const names = duckCols.map((c) => c.name);
  for (let r = 0; r < n; r++) {
    const entries = stokeRows[r];
    const keys = entries.map(([k]) => k);
    if (keys.join('\u0001') !== names.join('\u0001')) {
      note(`row ${rowBase + r}: keys ${JSON.stringify(keys)} vs ${JSON.stringify(names)}`);
      continue;
    }
    for (let c = 0; c < duckCols.length; c++) {
      const m = cellMismatch(duckCols[c].type, entries[c][1], duckRows[r][names[c]]);
      if (m) note(`row ${rowBase + r} column ${names[c]}: ${m}`);
    }
  }
  return problems;
}

// The PageType of the page header at `offset` (Thrift compact: field 1, i32, zigzag).
function pageTypeAt(file, offset) {
  const fd = fs.openSync(file, 'r');
  try {
    const b = Buffer.alloc(2);
    fs.readSync(fd, b, 0, 2, offset);
    if (b[0] !== 0x15) return `unknown(${b[0]})`;
    return ['DATA_PAGE', 'INDEX_PAGE', 'DICTIONARY_PAGE', 'DATA_PAGE_V2'][b[1] >> 1] ?? `type ${b[1] >> 1}`;
  } finally {
    fs.closeSync(fd);
  }
}

// ---------------------------------------------------------------------------
// a. DuckDB reads stoke's files

describe('DuckDB reads stoke files', () => {
  const SAMPLES = 60;
  let src; // synth directory
  let labels; // parsed labels.csv
  let payloadMd5; // file name -> md5 of the .npy payload
  let payloadLen;

  before(() => {
    src = path.join(TMP, 'volumes');
    stoke(['synth', 'volumes', '--samples', String(SAMPLES), '--out', src, '--seed', '11',
      '--shape', '30,30,10', '--channels', '10', '--threads', '2']);
    labels = readCsv(path.join(src, 'labels.csv')).rows;
    assert.equal(labels.length, SAMPLES);
    payloadMd5 = new Map();
    payloadLen = new Map();
    for (const row of labels) {
      const p = npyPayload(fs.readFileSync(path.join(src, row.file)));
      payloadMd5.set(row.file, md5(p));
      payloadLen.set(row.file, p.length);
    }
    assert.equal(payloadMd5.size, SAMPLES);
  });

  test('DuckDB md5() hashes BLOB bytes like node crypto', async () => {
    const [r] = await rows(`SELECT md5('\\x00\\xFF\\x80abc'::BLOB) AS m`);
    assert.equal(r.m, md5(Buffer.from([0, 0xff, 0x80, 0x61, 0x62, 0x63])));
  });

  async function checkDataset(files, codecName) {
    const list = sqlList(files);

    // schema
    const desc = await rows(`DESCRIBE SELECT * FROM read_parquet(${list})`);
    assert.deepEqual(
      desc.map((d) => [d.column_name, d.column_type]),
      [
        ['id', 'BIGINT'],
        ['file', 'VARCHAR'],
        ['label', 'INTEGER'],
        ['x', 'DOUBLE'],
        ['y', 'DOUBLE'],
        ['split', 'VARCHAR'],
        ['volume', 'BLOB'],
      ],
    );

    // count and label sum
    const [agg] = await rows(
      `SELECT count(*) AS n, sum(label) AS s, count(DISTINCT id) AS ids, min(id) AS lo, max(id) AS hi ` +
        `FROM read_parquet(${list})`,
    );
    const labelSum = labels.reduce((a, r) => a + Number(r.label), 0);
    assert.equal(Number(agg.n), labels.length, 'row count');
    assert.equal(Number(agg.s), labelSum, 'label sum');
    assert.equal(Number(agg.ids), labels.length, 'ids are distinct');
    assert.equal(Number(agg.lo), 0);
    assert.equal(Number(agg.hi), labels.length - 1);

    // every row: volume bytes and the CSV attributes
    const got = await rows(
      `SELECT file, label, x, y, split, md5(volume) AS m, octet_length(volume) AS len ` +
        `FROM read_parquet(${list}) ORDER BY file`,
    );
    const want = [...labels].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
    assert.equal(got.length, want.length);
    for (let i = 0; i < want.length; i++) {
      const g = got[i];
      const w = want[i];
      assert.equal(g.file, w.file);
      assert.equal(g.label, Number(w.label), `label of ${w.file}`);
      assert.equal(g.x, Number(w.x), `x of ${w.file}`);
      assert.equal(g.y, Number(w.y), `y of ${w.file}`);
      assert.equal(g.split, w.split, `split of ${w.file}`);
      assert.equal(g.m, payloadMd5.get(w.file), `md5(volume) of ${w.file}`);
      assert.equal(Number(g.len), payloadLen.get(w.file), `length of volume of ${w.file}`);
    }

    // the codec and the key-value metadata, as DuckDB sees them
    const meta = await rows(
      `SELECT DISTINCT compression FROM parquet_metadata(${list})`,
    );
    if (codecName !== null) assert.deepEqual(meta.map((m) => m.compression), [codecName]);
    const kv = await rows(
      `SELECT DISTINCT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${list}) ` +
        `WHERE decode(key) = 'stoke.tensors'`,
    );
    assert.equal(kv.length, 1, 'one stoke.tensors value');
    assert.deepEqual(JSON.parse(kv[0].v), { volume: { dtype: 'float32', shape: [30, 30, 10, 10] } });
  }

  for (const [codec, duckName] of [
    ['zstd', 'ZSTD'],
    ['snappy', 'SNAPPY'],
    ['lz4_raw', 'LZ4_RAW'],
    ['gzip', 'GZIP'],
    ['uncompressed', 'UNCOMPRESSED'],
  ]) {
    test(`codec ${codec}: one file, several row groups`, async () => {
      const out = path.join(TMP, `stoke_${codec}.parquet`);
      stoke(['convert', 'npy', src, '--labels', path.join(src, 'labels.csv'), '--out', out,
        '--tensor-column', 'volume', '--codec', codec, '--row-group-size', '2MiB', '--threads', '2']);
      assert.ok(fs.statSync(out).isFile());
      const [rg] = await rows(
        `SELECT count(DISTINCT row_group_id) AS n FROM parquet_metadata(${sqlStr(out)})`,
      );
      assert.ok(Number(rg.n) >= 5, `several row groups (got ${rg.n})`);
      await checkDataset([out], duckName);
    });
  }

  test('codec auto (the default): a codec per column chunk, every byte as in the sources', async () => {
    const out = path.join(TMP, 'stoke_auto.parquet');
    stoke(['convert', 'npy', src, '--labels', path.join(src, 'labels.csv'), '--out', out,
      '--tensor-column', 'volume', '--row-group-size', '2MiB', '--threads', '2']);
    await checkDataset([out], null);
    const chunks = await rows(
      `SELECT path_in_schema AS col, string_agg(DISTINCT compression, ',' ORDER BY compression) AS codecs, ` +
        `count(*) AS n ` +
        `FROM parquet_metadata(${sqlStr(out)}) GROUP BY ALL ORDER BY col`,
    );
    const byColumn = Object.fromEntries(chunks.map((c) => [c.col, c.codecs.split(',')]));
    // float32 noise saves < 10 % with zstd: stored as it is; ids and 0/1 labels compress well (a
    // last row group of a few rows may not: zstd's frame costs more than it saves there)
    assert.deepEqual(byColumn.volume, ['UNCOMPRESSED']);
    assert.ok(byColumn.label.includes('ZSTD'), `label chunks: ${byColumn.label}`);
    assert.ok(byColumn.id.includes('ZSTD'), `id chunks: ${byColumn.id}`);
    assert.ok(Number(chunks[0].n) >= 5, 'several row groups');
  });

  test('directory output: several files via --target-file-size', async () => {
    const out = path.join(TMP, 'stoke_dir');
    stoke(['convert', 'npy', src, '--labels', path.join(src, 'labels.csv'), '--out', out,
      '--tensor-column', 'volume', '--codec', 'zstd', '--row-group-size', '1MiB',
      '--target-file-size', '4MiB', '--threads', '2']);
    const files = fs
      .readdirSync(out)
      .filter((f) => f.endsWith('.parquet'))
      .sort()
      .map((f) => path.join(out, f));
    assert.ok(files.length >= 3, `several part files (got ${files.length})`);
    await checkDataset(files, 'ZSTD');
    // every part file is a whole Parquet file on its own
    for (const f of files) {
      const [r] = await rows(`SELECT count(*) AS n FROM read_parquet(${sqlStr(f)})`);
      assert.ok(Number(r.n) > 0, `${f} has rows`);
    }
  });

  test('CSV typing and empty cells: DuckDB sees INT32/BOOLEAN/STRING/DOUBLE with NULLs', async () => {
    const dir = path.join(TMP, 'small');
    stoke(['synth', 'volumes', '--samples', '6', '--out', dir, '--seed', '5', '--shape', '3,2,2',
      '--channels', '2']);
    const csv = path.join(TMP, 'small_labels.csv');
    fs.writeFileSync(
      csv,
      [
        'file,label,score,flag,note,ratio',
        'volume_000000.npy,1,10,true,hello,0.5',
        'volume_000001.npy,0,,false,,1e3',
        'volume_000002.npy,1,-7,,with space,',
        'volume_000003.npy,0,2147483647,true,x,-2.25',
        'volume_000004.npy,1,-2147483648,false,déjà vu,0.1',
        'volume_000005.npy,0,0,true,,3',
      ].join('\n') + '\n',
    );
    const out = path.join(TMP, 'small.parquet');
    stoke(['convert', 'npy', dir, '--labels', csv, '--out', out, '--codec', 'snappy']);
    const desc = await rows(`DESCRIBE SELECT * FROM read_parquet(${sqlStr(out)})`);
    assert.deepEqual(
      desc.map((d) => [d.column_name, d.column_type]),
      [
        ['id', 'BIGINT'],
        ['file', 'VARCHAR'],
        ['label', 'INTEGER'],
        ['score', 'INTEGER'],
        ['flag', 'BOOLEAN'],
        ['note', 'VARCHAR'],
        ['ratio', 'DOUBLE'],
        ['data', 'BLOB'],
      ],
    );
    const got = await rows(
      `SELECT file, label, score, flag, note, ratio, md5(data) AS m FROM read_parquet(${sqlStr(out)}) ORDER BY file`,
    );
    assert.deepEqual(
      got.map(({ m, ...rest }) => rest),
      [
        { file: 'volume_000000.npy', label: 1, score: 10, flag: true, note: 'hello', ratio: 0.5 },
        { file: 'volume_000001.npy', label: 0, score: null, flag: false, note: null, ratio: 1000 },
        { file: 'volume_000002.npy', label: 1, score: -7, flag: null, note: 'with space', ratio: null },
        { file: 'volume_000003.npy', label: 0, score: 2147483647, flag: true, note: 'x', ratio: -2.25 },
        { file: 'volume_000004.npy', label: 1, score: -2147483648, flag: false, note: 'déjà vu', ratio: 0.1 },
        { file: 'volume_000005.npy', label: 0, score: 0, flag: true, note: null, ratio: 3 },
      ],
    );
    for (const g of got) {
      assert.equal(g.m, md5(npyPayload(fs.readFileSync(path.join(dir, g.file)))), `md5 of ${g.file}`);
    }
  });

  test("stoke cat and DuckDB agree on stoke's own file", async () => {
    const out = path.join(TMP, 'stoke_zstd.parquet');
    if (!fs.existsSync(out)) {
      stoke(['convert', 'npy', src, '--labels', path.join(src, 'labels.csv'), '--out', out,
        '--tensor-column', 'volume', '--codec', 'zstd', '--row-group-size', '2MiB']);
    }
    const { cols, data } = await duckFileOrder(out);
    assert.deepEqual(compareRows(stokeCatJson(out), cols, data), []);
  });
});

// ---------------------------------------------------------------------------
// b. stoke reads DuckDB's files

const TABLE_ROWS = 5000;
// Deterministic: everything derives from i. NULLs, extremes, NaN/inf, -0.0,
// dictionary-friendly repeats, long strings and strings that need JSON escaping.
const CREATE_TABLE = `
CREATE OR REPLACE TABLE t AS
SELECT
  i::BIGINT AS id,
  CASE WHEN i % 7 = 3 THEN NULL ELSE (i % 3 = 0) END AS b,
  CASE WHEN i % 11 = 5 THEN NULL
       WHEN i = 1 THEN -2147483648
       WHEN i = 2 THEN 2147483647
       ELSE (i * 37 % 1000 - 500) END::INTEGER AS i32,
  CASE WHEN i % 13 = 2 THEN NULL
       WHEN i % 997 = 10 THEN 9223372036854775807
       WHEN i % 997 = 11 THEN -9223372036854775808
       ELSE i * 1234567891 - 100000000000 END::BIGINT AS i64,
  CASE WHEN i % 17 = 1 THEN NULL
       WHEN i % 500 = 3 THEN 'nan'::FLOAT
       WHEN i % 500 = 4 THEN 'inf'::FLOAT
       WHEN i % 500 = 5 THEN '-inf'::FLOAT
       WHEN i % 500 = 6 THEN '-0.0'::FLOAT
       WHEN i % 500 = 7 THEN 3.4028235e38::FLOAT
       WHEN i % 500 = 8 THEN 1e-45::FLOAT
       ELSE (i / 7.0 - 100)::FLOAT END AS f32,
  CASE WHEN i % 19 = 4 THEN NULL
       WHEN i % 500 = 13 THEN 'nan'::DOUBLE
       WHEN i % 500 = 14 THEN 'inf'::DOUBLE
       WHEN i % 500 = 15 THEN '-inf'::DOUBLE
       WHEN i % 500 = 16 THEN '-0.0'::DOUBLE
       WHEN i % 500 = 17 THEN 1.7976931348623157e308::DOUBLE
       WHEN i % 500 = 18 THEN 5e-324::DOUBLE
       WHEN i % 500 = 19 THEN 0.1::DOUBLE + 0.2::DOUBLE
       ELSE i / 3.0 - 50.0 + 1e-10 * i END::DOUBLE AS f64,
  CASE WHEN i % 23 = 6 THEN NULL
       WHEN i % 50 = 0 THEN repeat('long-' || (i % 9)::VARCHAR, 40) || ' é✓ "q" \\ tab' || chr(9) || 'nl' || chr(10) || 'ctl' || chr(1) || ' 😀'
       WHEN i % 50 = 25 THEN ''
       ELSE 'cat_' || (i % 10)::VARCHAR END AS s,
  CASE WHEN i % 31 = 9 THEN NULL
       WHEN i % 100 = 1 THEN repeat(md5(i::VARCHAR), 100)
       ELSE 'row-' || i::VARCHAR || '-' || md5(i::VARCHAR) END AS u,
  CASE WHEN i % 29 = 8 THEN NULL
       WHEN i % 97 = 50 THEN ''::BLOB
       ELSE ('blob' || (i % 97)::VARCHAR)::BLOB || '\\x00\\xFF'::BLOB END AS bl,
  CASE WHEN i % 37 = 0 THEN NULL ELSE unhex(md5(i::VARCHAR) || md5((i + 1)::VARCHAR)) END AS bu
FROM range(${TABLE_ROWS}) r(i)`;

const DUCK_FILES = [
  // [name, COPY options]
  ['snappy', 'COMPRESSION snappy, ROW_GROUP_SIZE 1000'],
  ['zstd', 'COMPRESSION zstd, ROW_GROUP_SIZE 1000'],
  ['v2_zstd', 'COMPRESSION zstd, ROW_GROUP_SIZE 1000, PARQUET_VERSION V2'],
  ['v2_snappy', 'COMPRESSION snappy, ROW_GROUP_SIZE 1000, PARQUET_VERSION V2'],
  ['gzip', 'COMPRESSION gzip, ROW_GROUP_SIZE 1000'],
  ['lz4', 'COMPRESSION lz4, ROW_GROUP_SIZE 1000'],
  ['uncompressed', 'COMPRESSION uncompressed, ROW_GROUP_SIZE 1000'],
];

function copyStatement(file, opts) {
  return `COPY (SELECT * FROM t ORDER BY id) TO ${sqlStr(file)} (FORMAT parquet, ${opts})`;
}

describe('stoke reads DuckDB files', () => {
  before(async () => {
    await con.run(CREATE_TABLE);
  });

  for (const [name, opts] of DUCK_FILES) {
    test(`${name}: stoke cat --format json equals DuckDB row by row`, async (t) => {
      const file = path.join(TMP, `duck_${name}.parquet`);
      await con.run(copyStatement(file, opts));
      const [rg] = await rows(
        `SELECT count(DISTINCT row_group_id) AS n FROM parquet_metadata(${sqlStr(file)})`,
      );
      assert.ok(Number(rg.n) >= 2, `DuckDB wrote several row groups (got ${rg.n})`);

      const { cols, data } = await duckFileOrder(file);
      assert.equal(data.length, TABLE_ROWS);
      assert.deepEqual(
        cols.map((c) => c.type),
        ['BIGINT', 'BOOLEAN', 'INTEGER', 'BIGINT', 'FLOAT', 'DOUBLE', 'VARCHAR', 'VARCHAR', 'BLOB', 'BLOB'],
      );
      // Which page kinds and encodings this file really exercises (DuckDB 1.5.6 writes
      // DATA_PAGE v1 headers even with PARQUET_VERSION V2; only the encodings change).
      const chunks = await rows(
        `SELECT DISTINCT data_page_offset, encodings FROM parquet_metadata(${sqlStr(file)})`,
      );
      const kinds = new Set(chunks.map((c) => pageTypeAt(file, Number(c.data_page_offset))));
      const encs = new Set(chunks.flatMap((c) => c.encodings.split(',').map((e) => e.trim())));
      t.diagnostic(`page types ${[...kinds].sort()}; encodings ${[...encs].sort()}`);

      const problems = compareRows(stokeCatJson(file), cols, data);
      assert.deepEqual(problems, [], `made by: ${copyStatement(file, opts)}`);
    });

    test(`${name}: stoke inspect (text, --pages, --json) agrees with DuckDB metadata`, async () => {
      const file = path.join(TMP, `duck_${name}.parquet`);
      if (!fs.existsSync(file)) await con.run(copyStatement(file, opts));
      stoke(['inspect', file]);
      stoke(['inspect', file, '--pages']);
      const info = JSON.parse(stoke(['inspect', file, '--json']).stdout);
      const meta = await rows(
        `SELECT row_group_id, row_group_num_rows, path_in_schema, num_values, compression ` +
          `FROM parquet_metadata(${sqlStr(file)}) ORDER BY row_group_id, column_id`,
      );
      assert.equal(info.rows, TABLE_ROWS);
      const groups = [...new Set(meta.map((m) => Number(m.row_group_id)))];
      assert.equal(info.row_groups.length, groups.length, 'row group count');
      for (const g of groups) {
        const cols = meta.filter((m) => Number(m.row_group_id) === g);
        const rgInfo = info.row_groups[g];
        assert.equal(rgInfo.rows, Number(cols[0].row_group_num_rows), `rows of row group ${g}`);
        assert.deepEqual(
          rgInfo.columns.map((c) => [c.name, c.codec, c.num_values]),
          cols.map((c) => [c.path_in_schema, c.compression, Number(c.num_values)]),
          `columns of row group ${g}`,
        );
      }
      assert.deepEqual(
        info.schema.map((s) => s.name),
        ['id', 'b', 'i32', 'i64', 'f32', 'f64', 's', 'u', 'bl', 'bu'],
      );
    });
  }

  test('stoke cat --format json keeps the sign of -0.0 (FLOAT and DOUBLE)', async () => {
    const file = path.join(TMP, 'duck_negzero.parquet');
    const stmt =
      `COPY (SELECT '-0.0'::FLOAT AS f32, '-0.0'::DOUBLE AS f64, 0.0::DOUBLE AS z) ` +
      `TO ${sqlStr(file)} (FORMAT parquet)`;
    await con.run(stmt);
    const [row] = await rows(`SELECT signbit(f32) AS a, signbit(f64) AS b FROM read_parquet(${sqlStr(file)})`);
    assert.deepEqual(row, { a: true, b: true }, 'DuckDB stored -0.0');
    const [cells] = stokeCatJson(file);
    const text = Object.fromEntries(cells.map(([k, v]) => [k, v instanceof JsonNum ? v.raw : v]));
    assert.ok(Object.is(Number(text.f32), -0), `f32 printed as ${text.f32}, want -0 (made by: ${stmt})`);
    assert.ok(Object.is(Number(text.f64), -0), `f64 printed as ${text.f64}, want -0 (made by: ${stmt})`);
    assert.ok(Object.is(Number(text.z), 0), `z printed as ${text.z}`);
  });

  test('stoke inspect on long UTF-8 strings (statistics cut inside a character)', async () => {
    // min/max statistics are shortened for display; byte 37 here falls inside 'é'.
    const file = path.join(TMP, 'duck_utf8.parquet');
    const value = `${'a'.repeat(36)}é${'b'.repeat(10)}`;
    const stmt = `COPY (SELECT ${sqlStr(value)} AS s) TO ${sqlStr(file)} (FORMAT parquet)`;
    await con.run(stmt);
    const utf8 = new TextDecoder('utf-8', { fatal: true });
    const problems = [];
    for (const args of [['inspect', file], ['inspect', file, '--json'], ['cat', file, '--format', 'json']]) {
      const what = `stoke ${args.slice(0, 1).concat(args.slice(2)).join(' ')}`;
      const r = stoke(args, { ok: false, raw: true });
      if (r.signal || r.status !== 0) {
        problems.push(`${what}: exit ${r.status} signal ${r.signal}: ${r.stderr.toString('utf8').trim()}`);
        continue;
      }
      let text;
      try {
        text = utf8.decode(r.stdout);
      } catch {
        problems.push(`${what}: printed invalid UTF-8`);
        continue;
      }
      try {
        if (args[0] === 'inspect' && args.includes('--json')) JSON.parse(text);
        if (args[0] === 'cat') assert.deepEqual(JSON.parse(text), { s: value });
      } catch (e) {
        problems.push(`${what}: ${e.message}`);
      }
    }
    assert.deepEqual(problems, [], `made by: ${stmt}`);
  });

  test('stoke cat --columns/--offset/--limit across row groups equals DuckDB', async () => {
    const file = path.join(TMP, 'duck_v2_zstd.parquet');
    const opts = DUCK_FILES.find(([n]) => n === 'v2_zstd')[1];
    if (!fs.existsSync(file)) await con.run(copyStatement(file, opts));
    for (const [columns, offset, limit] of [
      [['u', 'i64', 'bl'], 1500, 1200],
      [['f32'], 4990, 100],
      [['s', 'b'], 0, 1],
      [['f64', 'id'], 2047, 3],
    ]) {
      const { cols, data } = await duckFileOrder(file, { columns, offset, limit });
      const got = stokeCatJson(file, ['--columns', columns.join(','), '--offset', String(offset),
        '--limit', String(limit)]);
      assert.deepEqual(compareRows(got, cols, data, offset), [],
        `--columns ${columns} --offset ${offset} --limit ${limit}`);
    }
  });
});

// ---------------------------------------------------------------------------
// c. bad input

describe('bad input', () => {
  test('truncated or cut DuckDB files: exit 1 with the file name, no crash', async () => {
    await con.run(CREATE_TABLE);
    const good = path.join(TMP, 'bad_source.parquet');
    await con.run(copyStatement(good, 'COMPRESSION snappy, ROW_GROUP_SIZE 1000'));
    const bytes = fs.readFileSync(good);
    const footerLen = bytes.readUInt32LE(bytes.length - 8);
    const tail = bytes.subarray(bytes.length - footerLen - 8);
    const cases = {
      empty: Buffer.alloc(0),
      magic_only: bytes.subarray(0, 4),
      head_100: bytes.subarray(0, 100),
      half: bytes.subarray(0, Math.floor(bytes.length / 2)),
      minus_1: bytes.subarray(0, bytes.length - 1),
      minus_8: bytes.subarray(0, bytes.length - 8),
      footer_cut: Buffer.concat([bytes.subarray(0, bytes.length - 8 - Math.floor(footerLen / 2)),
        bytes.subarray(bytes.length - 8)]),
      // an intact footer whose column chunks point past the (shortened) data
      data_cut: Buffer.concat([bytes.subarray(0, Math.floor((bytes.length - tail.length) / 2)), tail]),
    };
    for (const [name, buf] of Object.entries(cases)) {
      const f = path.join(TMP, `truncated_${name}.parquet`);
      fs.writeFileSync(f, buf);
      for (const args of [['cat', f, '--format', 'json'], ['inspect', f]]) {
        if (name === 'data_cut' && args[0] === 'inspect') args.push('--pages'); // must read page headers
        const r = stoke(args, { ok: false });
        assert.equal(r.signal, null, `${args.join(' ')}: killed by ${r.signal}\n${r.stderr}`);
        assert.equal(r.status, 1, `${args.join(' ')}: exit ${r.status}\n${r.stderr}`);
        assert.ok(r.stderr.includes(path.basename(f)),
          `${args.join(' ')}: the message names the file: ${r.stderr}`);
      }
    }
  });

  test('a STRING column holding invalid UTF-8: cat --format json / inspect --json do not crash', () => {
    const dir = path.join(TMP, 'latin1');
    stoke(['synth', 'volumes', '--samples', '3', '--out', dir, '--seed', '1', '--shape', '2,2,2',
      '--channels', '1']);
    const csv = path.join(TMP, 'latin1.csv');
    // 'café' in Latin-1: the 0xE9 byte is not valid UTF-8
    fs.writeFileSync(csv, Buffer.from(
      'file,label,note\nvolume_000000.npy,1,caf\xe9\nvolume_000001.npy,0,ok\nvolume_000002.npy,0,ok\n',
      'latin1'));
    const out = path.join(TMP, 'latin1.parquet');
    const conv = stoke(['convert', 'npy', dir, '--labels', csv, '--out', out], { ok: false });
    assert.equal(conv.signal, null, `convert killed by ${conv.signal}: ${conv.stderr}`);
    if (conv.status !== 0) {
      // Rejecting the CSV is fine, with a clean error naming it.
      assert.equal(conv.status, 1, conv.stderr);
      assert.ok(conv.stderr.includes('latin1.csv'), conv.stderr);
      return;
    }
    for (const args of [['cat', out, '--format', 'json'], ['inspect', out, '--json']]) {
      const r = stoke(args, { ok: false });
      assert.equal(r.signal, null, `stoke ${args.join(' ')}: killed by ${r.signal}\n${r.stderr}`);
      assert.ok(r.status === 0 || r.status === 1, `stoke ${args.join(' ')}: exit ${r.status}\n${r.stderr}`);
      if (r.status === 0) {
        const docs = args[0] === 'cat' ? r.stdout.trim().split('\n') : [r.stdout];
        for (const d of docs) JSON.parse(d);
      }
    }
  });
});
