// Loading another writer's files: a table over two Parquet files that DuckDB wrote (its defaults:
// SNAPPY, OPTIONAL columns, no OffsetIndex), against the same rows rewritten in stoke's layout
// (`stoke optimize`, default codec choice), with `stoke bench load`, warm page cache.
// The runs alternate; each row is the median of BENCH_REPS (default 3).
//
//   node bench/foreign_file.mjs [STOKE_BIN]
//   env: BENCH_FOREIGN_ROWS (default 5000), BENCH_FOREIGN_BYTES (per row, default 16384, a
//   multiple of 64), BENCH_DIR (default build/bench-foreign), BENCH_REPS (default 3)
//
// Needs the interop tests' DuckDB package: (cd tests/interop && npm ci), as `make bench` does.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { dieAs, importDuckDB, stokeRunner } from './common.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const STOKE = path.resolve(process.argv[2] || path.join(REPO, 'build', 'stoke'));
const ROWS = Number(process.env.BENCH_FOREIGN_ROWS || 5000);
const BYTES = Number(process.env.BENCH_FOREIGN_BYTES || 16384);
const WORK = path.resolve(process.env.BENCH_DIR || path.join(REPO, 'build', 'bench-foreign'));
const REPS = Number(process.env.BENCH_REPS || 3);

const die = dieAs('foreign_file');
if (!fs.existsSync(STOKE)) die(`no stoke binary at ${STOKE}`);
if (!(ROWS > 0) || !(BYTES >= 64) || BYTES % 64 !== 0) die('need BENCH_FOREIGN_ROWS > 0 and BENCH_FOREIGN_BYTES a multiple of 64');

const duckdb = await importDuckDB(REPO, die);

const stoke = stokeRunner(STOKE, die);

const foreign = path.join(WORK, 'duckdb');
const ours = path.join(WORK, 'stoke');
fs.rmSync(WORK, { recursive: true, force: true });
fs.mkdirSync(path.join(foreign, '_delta_log'), { recursive: true });

// Rows of BYTES hex characters (SHA-256 chains: SNAPPY leaves them about their size, as with
// noisy tensors).
// Two files of half the rows each, so that `stoke optimize` compacts them into one file of stoke's.
const files = ['part-00000-duck.parquet', 'part-00001-duck.parquet'];
const instance = await duckdb.DuckDBInstance.create(':memory:');
const con = await instance.connect();
const q = (s) => `'${s.replaceAll("'", "''")}'`;
for (const [k, file] of files.entries()) {
  const first = Math.floor((k * ROWS) / files.length);
  const end = Math.floor(((k + 1) * ROWS) / files.length);
  await con.run(
    `COPY (SELECT i::BIGINT AS id, (i % 10)::INTEGER AS label, ` +
      `encode((SELECT string_agg(sha256(i::VARCHAR || '/' || j::VARCHAR), '') FROM range(${BYTES / 64}) r(j))) AS payload ` +
      `FROM range(${first}, ${end}) t(i)) TO ${q(path.join(foreign, file))} (FORMAT parquet)`,
  );
}
con.closeSync();
instance.closeSync();
const now = Date.now();
const schema = {
  type: 'struct',
  fields: [
    { name: 'id', type: 'long', nullable: true, metadata: {} },
    { name: 'label', type: 'integer', nullable: true, metadata: {} },
    { name: 'payload', type: 'binary', nullable: true, metadata: {} },
  ],
};
const actions = [
  { commitInfo: { timestamp: now, operation: 'CREATE TABLE', engineInfo: 'bench/foreign_file.mjs' } },
  { protocol: { minReaderVersion: 1, minWriterVersion: 2 } },
  {
    metaData: {
      id: crypto.randomUUID(), format: { provider: 'parquet', options: {} }, schemaString: JSON.stringify(schema),
      partitionColumns: [], configuration: { 'stoke.tensors': JSON.stringify({ payload: { dtype: 'uint8', shape: [BYTES] } }) },
      createdTime: now,
    },
  },
  ...files.map((file) => {
    const st = fs.statSync(path.join(foreign, file));
    return { add: { path: file, partitionValues: {}, size: st.size, modificationTime: Math.floor(st.mtimeMs), dataChange: true } };
  }),
];
fs.writeFileSync(path.join(foreign, '_delta_log', '00000000000000000000.json'), actions.map((a) => JSON.stringify(a)).join('\n') + '\n');
fs.cpSync(foreign, ours, { recursive: true });
stoke(['optimize', ours]);

const load = (table, extra) =>
  JSON.parse(stoke(['bench', 'load', table, '--epochs', 3, '--batch-size', 64, '--json', ...extra]));
// The default budget, whose decoded-page cache (a quarter of --prefetch-bytes) holds DuckDB's pages,
// and a small one whose cache is smaller than one of them: every batch then decodes its pages again.
const configs = [['default options', []], ['--prefetch-bytes 64MiB', ['--prefetch-bytes', 64 << 20]]];
load(foreign, []); // builds and caches both sample indexes (the foreign files' page maps included)
load(ours, []);
const median = (rs) => [...rs].sort((a, b) => a.samples_per_s - b.samples_per_s)[Math.floor(rs.length / 2)];
console.log(`foreign files: ${ROWS} rows of ${BYTES} B in two files DuckDB wrote (no OffsetIndex, SNAPPY, OPTIONAL, ` +
  `one page per column chunk) vs the same rows after \`stoke optimize\` (stoke's layout), ` +
  `stoke bench load --epochs 3 --batch-size 64, warm, median of ${REPS}, runs alternating`);
console.log('| options | DuckDB files samples/s | stoke layout samples/s | DuckDB / stoke | cells decoded |');
console.log('|---|---|---|---|---|');
const results = [];
for (const [name, extra] of configs) {
  const runs = { duckdb: [], stoke: [] };
  for (let k = 0; k < REPS; k++) {
    runs.duckdb.push(load(foreign, extra));
    runs.stoke.push(load(ours, extra));
  }
  const d = median(runs.duckdb);
  const s = median(runs.stoke);
  console.log(`| ${name} | ${d.samples_per_s.toFixed(0)} | ${s.samples_per_s.toFixed(0)} | ` +
    `${(d.samples_per_s / s.samples_per_s).toFixed(2)}x | ${d.cells_decoded} |`);
  results.push({ options: name, duckdb: d, stoke: s });
}
fs.appendFileSync(path.join(WORK, 'results.jsonl'), JSON.stringify({ rows: ROWS, bytes: BYTES, results }) + '\n');
