// Typed statistics in stoke's checkpoints against other writers' (the corpus in
// <repo>/../shared/corpus/delta-rs; $STOKE_DELTA_CORPUS overrides the folder; a fresh clone has no
// ../shared: the test then skips, saying so).
//
//   node --test tests/interop/delta_typed_stats.test.mjs
//
// For every checkpoint of the corpus whose adds carry stats_parsed or partitionValues_parsed
// (Databricks' and delta-rs' checkpoints), the table is copied, that checkpoint set aside, the
// table's metadata made to ask for typed statistics (delta.checkpoint.writeStatsAsStruct, where it
// did not), and `stoke checkpoint --version V` writes its own. Read by DuckDB, every value stoke's
// checkpoint gives for an add (numRecords, each column's minValues, maxValues and nullCount, each
// partition value) equals the other writer's for the same add, where that one gives it too; and
// stoke gives the top-level columns' statistics wherever the add's JSON statistics hold them.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { queryRows, runStoke, sqlStr, useStokeAndDuckDB } from './support.mjs';
import { listLog, readCommit } from './delta_reader.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const STOKE_SRC = process.env.STOKE_BIN || path.join(REPO, 'build', 'stoke');
const CORPUS = process.env.STOKE_DELTA_CORPUS || path.resolve(REPO, '..', 'shared', 'corpus', 'delta-rs');
const HAVE_CORPUS = fs.existsSync(CORPUS);
const SKIP_MESSAGE = `no Delta corpus at ${CORPUS} (a fresh clone has no ../shared; CI has it): typed statistics skipped`;
if (!HAVE_CORPUS) console.log(SKIP_MESSAGE);

// The classic checkpoints of the corpus: [table, file name, version].
function classicCheckpoints() {
  const out = [];
  for (const table of fs.readdirSync(CORPUS).sort()) {
    const log = path.join(CORPUS, table, '_delta_log');
    if (!fs.existsSync(log)) continue;
    for (const name of fs.readdirSync(log).sort()) {
      const m = /^(\d{20})\.checkpoint\.parquet$/.exec(name);
      if (m) out.push([table, name, Number(m[1])]);
    }
  }
  return out;
}

// Each add's typed statistics in checkpoint `file`, by path: {stats, partitions} as JSON (null where
// absent).
async function typedStats(con, file) {
  const fields = (await queryRows(con, `SELECT name FROM parquet_schema(${sqlStr(file)})`)).map((r) => r.name);
  const has = (name) => fields.includes(name);
  if (!has('stats_parsed') && !has('partitionValues_parsed')) return null;
  const stats = has('stats_parsed') ? 'to_json(add.stats_parsed)' : 'NULL';
  const parts = has('partitionValues_parsed') ? 'to_json(add.partitionValues_parsed)' : 'NULL';
  const rows = await queryRows(con, `SELECT add.path AS p, ${stats} AS s, ${parts} AS v FROM read_parquet(${sqlStr(file)})
      WHERE add IS NOT NULL`);
  return new Map(rows.map((r) => [r.p, { stats: r.s && JSON.parse(r.s), partitions: r.v && JSON.parse(r.v) }]));
}

// The JSON commit holding the last metaData at or before `version`, with writeStatsAsStruct set in it;
// every checkpoint goes (their metadata would stand for the commits'). False where commits 0 to
// `version` are not all there.
function askForTypedStats(dir, version) {
  const logDir = path.join(dir, '_delta_log');
  const commits = [...listLog(logDir).commits].filter(([v]) => v <= version).sort((a, b) => b[0] - a[0]);
  if (commits.length !== version + 1) return false;
  for (const name of fs.readdirSync(logDir)) {
    if (name.includes('.checkpoint.') || name === '_last_checkpoint') fs.rmSync(path.join(logDir, name));
  }
  for (const [, name] of commits) {
    const actions = readCommit(logDir, name);
    const md = actions.find((a) => a.metaData);
    if (!md) continue;
    md.metaData.configuration = { ...md.metaData.configuration, 'delta.checkpoint.writeStatsAsStruct': 'true' };
    fs.writeFileSync(path.join(logDir, name), actions.map((a) => JSON.stringify(a)).join('\n') + '\n');
    return true;
  }
  return false;  // the metadata is only in an older checkpoint
}

// A timestamp as DuckDB prints it, UTC or not: legacy writers annotate a timestamp's statistics
// TIMESTAMP_MICROS without the UTC flag of its data ("...177"), stoke as its column ("...177+00").
const sameInstant = (v) => (typeof v === 'string' ? v.replace(/^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?)\+00$/, '$1') : v);

// Where both give a value (not null), they are equal: a leaf of stoke's against the reference's.
function compareValues(mine, theirs, where, compared) {
  if (mine === null || mine === undefined || theirs === null || theirs === undefined) return;
  if (typeof mine === 'object' && typeof theirs === 'object') {
    for (const k of Object.keys(mine)) compareValues(mine[k], theirs[k], `${where}.${k}`, compared);
    return;
  }
  assert.deepEqual(sameInstant(mine), sameInstant(theirs), where);
  compared.n++;
}

describe('typed statistics in checkpoints, against other writers\'', { skip: !HAVE_CORPUS && SKIP_MESSAGE }, () => {
  let TMP;
  let STOKE;
  let con;
  useStokeAndDuckDB('stoke-typed-stats-', STOKE_SRC, (env) => ({ tmp: TMP, stoke: STOKE, con } = env));
  let checked = 0;

  for (const [table, name, version] of HAVE_CORPUS ? classicCheckpoints() : []) {
    test(`${table} ${name}`, async (t) => {
      const reference = await typedStats(con, path.join(CORPUS, table, '_delta_log', name));
      if (!reference) return t.diagnostic('no typed statistics in this checkpoint');
      const dir = path.join(TMP, `${table}-${version}`);
      fs.cpSync(path.join(CORPUS, table), dir, { recursive: true });
      if (!askForTypedStats(dir, version)) return t.diagnostic('its commits up to it are not all in the corpus');
      const r = runStoke(STOKE, ['checkpoint', dir, '--version', version], { ok: false });
      if (r.status !== 0) return t.diagnostic(`stoke does not checkpoint it: ${String(r.stderr).trim()}`);
      const mine = await typedStats(con, path.join(dir, '_delta_log', name));
      assert.ok(mine, 'stoke wrote no typed statistics');
      const compared = { n: 0 };
      for (const [p, theirs] of reference) {
        assert.ok(mine.has(p), `stoke's checkpoint has no add of ${p}`);
        const own = mine.get(p);
        compareValues(own.stats, theirs.stats, `${p} stats_parsed`, compared);
        compareValues(own.partitions, theirs.partitions, `${p} partitionValues_parsed`, compared);
      }
      t.diagnostic(`${reference.size} adds, ${compared.n} values equal to the other writer's`);
      checked += compared.n > 0 ? 1 : 0;
    });
  }

  test('some checkpoints were compared value by value', () => {
    assert.ok(checked >= 3, `only ${checked} checkpoints had values to compare`);
  });
});
