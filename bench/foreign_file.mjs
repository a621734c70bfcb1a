// Loading another writer's file: a table over one Parquet file that DuckDB wrote (its defaults:
// SNAPPY, OPTIONAL columns, no OffsetIndex), against the same rows rewritten in stoke's layout
// (`stoke optimize --sort-by id`, default codec choice), with `stoke bench load`, warm page cache.
// The runs alternate; each row is the median of BENCH_REPS (default 3).
//
//   node bench/foreign_file.mjs [STOKE_BIN]
//   env: BENCH_FOREIGN_ROWS (default 5000), BENCH_FOREIGN_BYTES (per row, default 16384, a
//   multiple of 64), BENCH_DIR (default build/bench-foreign), BENCH_REPS (default 3)
//
// Needs the interop tests' DuckDB package: (cd tests/interop && npm ci), as `make bench` does.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const STOKE = path.resolve(process.argv[2] || path.join(REPO, 'build', 'stoke'));
const ROWS = Number(process.env.BENCH_FOREIGN_ROWS || 5000);
const BYTES = Number(process.env.BENCH_FOREIGN_BYTES || 16384);
const WORK = path.resolve(process.env.BENCH_DIR || path.join(REPO, 'build', 'bench-foreign'));
const REPS = Number(process.env.BENCH_REPS || 3);

function die(msg) {
  console.error(`foreign_file: ${msg}`);
  process.exit(1);
}
if (!fs.existsSync(STOKE)) die(`no stoke binary at ${STOKE}`);
if (!(ROWS > 0) || !(BYTES >= 64) || BYTES % 64 !== 0) die('need BENCH_FOREIGN_ROWS > 0 and BENCH_FOREIGN_BYTES a multiple of 64');

let duckdb;
try {
  const require = createRequire(path.join(REPO, 'tests', 'interop', 'package.json'));
  duckdb = await import(pathToFileURL(require.resolve('@duckdb/node-api')).href);
} catch (e) {
  die(`@duckdb/node-api is missing (run: cd tests/interop && npm ci): ${e.message}`);
}

function stoke(args) {
  const r = spawnSync(STOKE, ['--no-progress', ...args.map(String)], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) die(`stoke ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

const foreign = path.join(WORK, 'duckdb');
const ours = path.join(WORK, 'stoke');
fs.rmSync(WORK, { recursive: true, force: true });
fs.mkdirSync(path.join(foreign, '_delta_log'), { recursive: true });

// Rows of BYTES hex characters (SHA-256 chains: SNAPPY leaves them about their size, as with
// noisy tensors).
const file = 'part-00000-duck.parquet';
const instance = await duckdb.DuckDBInstance.create(':memory:');
const con = await instance.connect();
const q = (s) => `'${s.replaceAll("'", "''")}'`;
await con.run(
  `COPY (SELECT i::BIGINT AS id, (i % 10)::INTEGER AS label, ` +
    `encode((SELECT string_agg(sha256(i::VARCHAR || '/' || j::VARCHAR), '') FROM range(${BYTES / 64}) r(j))) AS payload ` +
    `FROM range(${ROWS}) t(i)) TO ${q(path.join(foreign, file))} (FORMAT parquet)`,
);
con.closeSync();
instance.closeSync();
const full = path.join(foreign, file);
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
  { add: { path: file, partitionValues: {}, size: fs.statSync(full).size, modificationTime: Math.floor(fs.statSync(full).mtimeMs), dataChange: true } },
];
fs.writeFileSync(path.join(foreign, '_delta_log', '00000000000000000000.json'), actions.map((a) => JSON.stringify(a)).join('\n') + '\n');
fs.cpSync(foreign, ours, { recursive: true });
stoke(['optimize', ours, '--sort-by', 'id']);

const load = (table) => JSON.parse(stoke(['bench', 'load', table, '--epochs', 3, '--batch-size', 64, '--json']));
const runs = { duckdb: [], stoke: [] };
load(foreign); // builds and caches both sample indexes (the foreign file's page map included)
load(ours);
for (let k = 0; k < REPS; k++) {
  runs.duckdb.push(load(foreign));
  runs.stoke.push(load(ours));
}
const median = (rs) => [...rs].sort((a, b) => a.samples_per_s - b.samples_per_s)[Math.floor(rs.length / 2)];
const d = median(runs.duckdb);
const s = median(runs.stoke);
console.log(`foreign file: ${ROWS} rows of ${BYTES} B, DuckDB's file vs stoke's layout of the same rows, ` +
  `stoke bench load --epochs 3 --batch-size 64, warm, median of ${REPS}`);
console.log('| file | samples/s | MB/s | cells decoded | vs stoke layout |');
console.log('|---|---|---|---|---|');
for (const [name, r] of [['DuckDB-written (no OffsetIndex, SNAPPY, OPTIONAL)', d], ['stoke layout (optimize --sort-by id)', s]]) {
  console.log(`| ${name} | ${r.samples_per_s.toFixed(0)} | ${r.mb_per_s.toFixed(1)} | ${r.cells_decoded} | ` +
    `${(r.samples_per_s / s.samples_per_s).toFixed(2)}x |`);
}
fs.appendFileSync(path.join(WORK, 'results.jsonl'), JSON.stringify({ rows: ROWS, bytes: BYTES, duckdb: d, stoke: s }) + '\n');
