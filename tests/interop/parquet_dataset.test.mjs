// Plain Parquet datasets (no Delta log) that DuckDB wrote: a Hive-partitioned directory and a glob
// of files, read by `stoke query` and `stoke cat` with the rows DuckDB reads from the same files.
//
//   cd tests/interop && npm ci && node --test parquet_dataset.test.mjs

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { queryRows, runStoke, sqlStr, useStokeAndDuckDB } from './support.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const STOKE_SRC = process.env.STOKE_BIN || path.join(REPO, 'build', 'stoke');

let TMP;
let STOKE;
let con;
useStokeAndDuckDB('stoke-parquet-dataset-', STOKE_SRC, (env) => ({ tmp: TMP, stoke: STOKE, con } = env));

const jsonLines = (text) => text.split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
const byId = (a, b) => a.id - b.id;
// DuckDB's values as JSON: BIGINTs as numbers, lists as arrays, structs as objects.
function plain(v) {
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

async function duckRows(sql) {
  return (await queryRows(con, sql)).map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, plain(v)])));
}

describe('plain Parquet datasets', () => {
  test('a Hive-partitioned directory reads as DuckDB reads it, partition columns included', async () => {
    const dir = path.join(TMP, 'hive');
    await con.run(`COPY (SELECT i AS id, i % 3 AS part, DATE '2024-01-01' + (i % 2)::INTEGER AS day,
                          [i * 0.5, i * 1.5]::FLOAT[] AS vec, {'a': i, 'b': 'x' || i} AS s,
                          CASE WHEN i % 4 = 0 THEN NULL ELSE 'n' || i END AS name
                   FROM range(40) t(i))
                   TO ${sqlStr(dir)} (FORMAT PARQUET, PARTITION_BY (part, day), ROW_GROUP_SIZE 4)`);
    fs.writeFileSync(path.join(dir, '_SUCCESS'), '');  // as Spark leaves it: not data
    const want = await duckRows(`SELECT id, vec, s, name, part, strftime(day, '%Y-%m-%d') AS day
                                 FROM read_parquet(${sqlStr(dir + '/**/*.parquet')}, hive_partitioning = true)`);
    const got = jsonLines(runStoke(STOKE, ['query', dir, '--format', 'json']).stdout);
    assert.equal(got.length, 40);
    assert.deepEqual(got.sort(byId), want.sort(byId));
    const filtered = jsonLines(runStoke(STOKE, ['query', dir, '--where', "part = 2 AND day = DATE '2024-01-02'",
      '--select', 'id', '--format', 'json']).stdout);
    assert.deepEqual(filtered.map((r) => r.id).sort((a, b) => a - b), want.filter((r) => r.part === 2 && r.day === '2024-01-02').map((r) => r.id).sort((a, b) => a - b));
    const inspect = JSON.parse(runStoke(STOKE, ['inspect', dir, '--json']).stdout);
    assert.equal(inspect.plain_parquet, true);
    assert.deepEqual(inspect.partition_columns, ['part', 'day']);
  });

  test('a glob names the files it matches; cat prints them with offset and limit', async () => {
    const dir = path.join(TMP, 'hf', 'data');
    fs.mkdirSync(dir, { recursive: true });
    for (const [name, lo, hi] of [['train-00000-of-00002', 0, 5], ['train-00001-of-00002', 5, 9], ['test-00000-of-00001', 100, 102]]) {
      await con.run(`COPY (SELECT i AS id, 'r' || i AS text FROM range(${lo}, ${hi}) t(i)) TO ${sqlStr(path.join(dir, name + '.parquet'))} (FORMAT PARQUET)`);
    }
    const glob = path.join(TMP, 'hf', 'data', 'train-*.parquet');
    const want = await duckRows(`SELECT id, text FROM read_parquet(${sqlStr(glob)}) ORDER BY id`);
    assert.deepEqual(jsonLines(runStoke(STOKE, ['cat', glob, '--format', 'json']).stdout), want);
    assert.deepEqual(jsonLines(runStoke(STOKE, ['cat', glob, '--format', 'json', '--offset', 3, '--limit', 4]).stdout), want.slice(3, 7));
    const none = runStoke(STOKE, ['query', path.join(dir, 'valid-*.parquet')], { ok: false });
    assert.match(none.stderr, /no Parquet files/);
  });
});
