// Cross-tool tests of stoke's Delta tables: DuckDB reads exactly the Parquet
// files a stoke snapshot lists, and stoke opens a table whose Parquet files
// DuckDB wrote and whose _delta_log this test wrote by hand.
//
//   cd tests/interop && npm ci && node --test        (or: node --test tests/interop/)
//
// The stoke binary comes from $STOKE_BIN (default: <repo>/build/stoke); it is
// copied to the temporary directory first, so a concurrent rebuild does not
// disturb the run. Everything happens in a fresh temporary directory that is
// removed at the end.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { md5, npyPayload, queryRows, readCsv, runStoke, sqlList, sqlStr, useStokeAndDuckDB } from './support.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const STOKE_SRC = process.env.STOKE_BIN || path.join(REPO, 'build', 'stoke');

// ---------------------------------------------------------------------------
// helpers

let TMP;
let STOKE;
let duck; // DuckDBInstance
let con; // DuckDBConnection

useStokeAndDuckDB('stoke-table-interop-', STOKE_SRC, (env) => ({ tmp: TMP, stoke: STOKE, duck, con } = env));

const stoke = (args, opts) => runStoke(STOKE, args, opts);

const stokeJsonLines = (args) =>
  stoke(args)
    .stdout.split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l));
const stokeCount = (args) => Number(stoke([...args, '--count']).stdout.trim());

const rows = (sql) => queryRows(con, sql);
const num = (v) => (typeof v === 'bigint' ? Number(v) : v);

// Minimal CSV writer for synth's labels.csv (no quoting needed).
function writeCsv(file, header, rs) {
  fs.writeFileSync(file, [header.join(','), ...rs.map((r) => header.map((h) => r[h]).join(','))].join('\n') + '\n');
}

// stoke synth volumes into dir, with every file name (and labels.csv) prefixed.
function synth(dir, { samples, seed, prefix }) {
  stoke(['synth', 'volumes', '--samples', samples, '--out', dir, '--shape', '4,4,2', '--channels', 2,
    '--seed', seed, '--threads', 1]);
  const { header, rows: rs } = readCsv(path.join(dir, 'labels.csv'));
  for (const r of rs) {
    fs.renameSync(path.join(dir, r.file), path.join(dir, prefix + r.file));
    r.file = prefix + r.file;
  }
  writeCsv(path.join(dir, 'labels.csv'), header, rs);
  return rs;
}

// ---------------------------------------------------------------------------

describe('DuckDB reads the files of a stoke snapshot', () => {
  test('ingest + append + optimize: live files give the same rows, labels and tensor bytes', async () => {
    const dir = path.join(TMP, 'snap');
    fs.mkdirSync(dir);
    const table = path.join(dir, 'table');
    const srcA = path.join(dir, 'a');
    const srcB = path.join(dir, 'b');
    const labelsA = synth(srcA, { samples: 120, seed: 21, prefix: 'a_' });
    const labelsB = synth(srcB, { samples: 80, seed: 22, prefix: 'b_' });
    const common = ['--tensor-column', 'volume', '--rows-per-file', 10];
    stoke(['ingest', srcA, '--table', table, '--labels', path.join(srcA, 'labels.csv'), ...common]);
    stoke(['ingest', srcB, '--table', table, '--labels', path.join(srcB, 'labels.csv'), ...common]);
    stoke(['optimize', table]);

    const info = JSON.parse(stoke(['inspect', table, '--json']).stdout);
    assert.equal(info.version, 2);
    assert.equal(info.files, info.data_files.length);
    const live = info.data_files.map((f) => path.join(table, f.path));
    for (const f of live) assert.ok(fs.existsSync(f), f);
    // The directory still holds the 20 pre-optimize files: the snapshot is what matters.
    const onDisk = fs.readdirSync(table).filter((f) => f.endsWith('.parquet'));
    assert.equal(onDisk.length, 20 + live.length);

    const all = [...labelsA, ...labelsB];
    const labelSum = all.reduce((s, r) => s + Number(r.label), 0);
    const n = stokeCount(['query', table]);
    assert.equal(n, all.length);
    assert.equal(info.rows, n);
    const [d] = await rows(`SELECT count(*) AS n, sum(label) AS s FROM read_parquet(${sqlList(live)})`);
    assert.equal(num(d.n), n);
    assert.equal(num(d.s), labelSum);
    assert.equal(stokeCount(['query', table, '--where', 'label = 1']), labelSum);

    // The whole directory, snapshot ignored, double counts: a real difference.
    const [g] = await rows(`SELECT count(*) AS n FROM read_parquet(${sqlStr(path.join(table, '*.parquet'))})`);
    assert.equal(num(g.n), 2 * n);

    // md5 of the tensor cells: stoke == DuckDB == the .npy payload.
    const ids = [0, 1, 57, 119, 120, 150, 199];
    const ours = stokeJsonLines(['query', table, '--where', `id IN (${ids.join(', ')})`,
      '--select', 'id,file,volume', '--format', 'json']);
    assert.deepEqual(ours.map((r) => r.id).sort((a, b) => a - b), ids);
    const theirs = await rows(
      `SELECT id, file, md5(volume) AS m, octet_length(volume) AS len FROM read_parquet(${sqlList(live)}) ` +
        `WHERE id IN (${ids.join(', ')}) ORDER BY id`,
    );
    assert.equal(theirs.length, ids.length);
    for (const t of theirs) {
      const o = ours.find((r) => r.id === num(t.id));
      assert.equal(o.file, t.file);
      assert.equal(o.volume, `md5:${t.m} len:${num(t.len)}`, `id ${num(t.id)}`);
      const src = t.file.startsWith('a_') ? srcA : srcB;
      assert.equal(t.m, md5(npyPayload(fs.readFileSync(path.join(src, t.file)))), t.file);
    }
  });
});

// ---------------------------------------------------------------------------

describe('a Delta table whose log stoke did not write', () => {
  const SCHEMA = {
    type: 'struct',
    fields: [
      { name: 'id', type: 'long', nullable: true, metadata: {} },
      { name: 'label', type: 'integer', nullable: true, metadata: {} },
      { name: 'name', type: 'string', nullable: true, metadata: {} },
      { name: 'payload', type: 'binary', nullable: true, metadata: {} },
    ],
  };
  // [file, first id, rows, with stats]
  const FILES = [
    ['part-00000-duck.parquet', 0, 10, true],
    ['part-00001-duck.parquet', 10, 15, false],
    ['part-00002-duck.parquet', 25, 7, true],
  ];

  const rowsSql = (first, n) =>
    `SELECT i::BIGINT AS id, (i % 3 = 1)::INTEGER AS label, ` +
    `CASE WHEN i % 4 = 0 THEN NULL ELSE 'n' || i::VARCHAR END AS name, ` +
    `('blob-' || i::VARCHAR || repeat('x', i::INTEGER))::BLOB AS payload ` +
    `FROM range(${first}, ${first + n}) t(i)`;

  async function statsOf(file) {
    const [s] = await rows(
      `SELECT count(*) AS n, min(id) AS id0, max(id) AS id1, min(label) AS l0, max(label) AS l1, ` +
        `min(name) AS n0, max(name) AS n1, count(*) - count(name) AS nn FROM read_parquet(${sqlStr(file)})`,
    );
    return JSON.stringify({
      numRecords: num(s.n),
      minValues: { id: num(s.id0), label: num(s.l0), name: s.n0 },
      maxValues: { id: num(s.id1), label: num(s.l1), name: s.n1 },
      nullCount: { id: 0, label: 0, name: num(s.nn), payload: 0 },
    });
  }

  async function add(table, [file, , , withStats]) {
    const full = path.join(table, file);
    const a = {
      path: file,
      partitionValues: {},
      size: fs.statSync(full).size,
      modificationTime: Math.floor(fs.statSync(full).mtimeMs),
      dataChange: true,
    };
    if (withStats) a.stats = await statsOf(full);
    return { add: a };
  }

  const commit = (table, version, actions) =>
    fs.writeFileSync(
      path.join(table, '_delta_log', `${String(version).padStart(20, '0')}.json`),
      actions.map((a) => JSON.stringify(a)).join('\n') + '\n',
    );

  let table;
  let v0Files;
  let v1Files;

  before(async () => {
    table = path.join(TMP, 'foreign');
    fs.mkdirSync(path.join(table, '_delta_log'), { recursive: true });
    for (const [file, first, n] of FILES) {
      await con.run(`COPY (${rowsSql(first, n)}) TO ${sqlStr(path.join(table, file))} (FORMAT parquet)`);
    }
    const now = Date.now();
    commit(table, 0, [
      {
        commitInfo: {
          timestamp: now,
          operation: 'CREATE TABLE',
          operationParameters: { mode: 'ErrorIfExists', partitionBy: '[]' },
          isBlindAppend: true,
          engineInfo: 'hand-written (stoke interop test)',
        },
      },
      { protocol: { minReaderVersion: 1, minWriterVersion: 2 } },
      {
        metaData: {
          id: crypto.randomUUID(),
          format: { provider: 'parquet', options: {} },
          schemaString: JSON.stringify(SCHEMA),
          partitionColumns: [],
          configuration: {},
          createdTime: now,
        },
      },
      await add(table, FILES[0]),
      await add(table, FILES[1]),
    ]);
    commit(table, 1, [
      {
        commitInfo: {
          timestamp: now + 1000,
          operation: 'WRITE',
          operationParameters: { mode: 'Append', partitionBy: '[]' },
          readVersion: 0,
          isBlindAppend: false,
          engineInfo: 'hand-written (stoke interop test)',
        },
      },
      {
        remove: {
          path: FILES[0][0],
          deletionTimestamp: now + 1000,
          dataChange: true,
          extendedFileMetadata: true,
          partitionValues: {},
          size: fs.statSync(path.join(table, FILES[0][0])).size,
        },
      },
      await add(table, FILES[2]),
    ]);
    v0Files = [FILES[0][0], FILES[1][0]].map((f) => path.join(table, f));
    v1Files = [FILES[1][0], FILES[2][0]].map((f) => path.join(table, f));
  });

  test('inspect shows the live files and the schema', async () => {
    const r = stoke(['inspect', table]);
    assert.match(r.stdout, /version\s+1\b/);
    const info = JSON.parse(stoke(['inspect', table, '--json']).stdout);
    assert.equal(info.version, 1);
    assert.equal(info.files, 2);
    assert.deepEqual(info.data_files.map((f) => f.path).sort(), [FILES[1][0], FILES[2][0]]);
    assert.deepEqual(info.partition_columns, []);
    assert.deepEqual(info.schema.map((c) => c.name), ['id', 'label', 'name', 'payload']);
    const v0 = JSON.parse(stoke(['inspect', table, '--json', '--version', 0]).stdout);
    assert.equal(v0.version, 0);
    assert.deepEqual(v0.data_files.map((f) => f.path).sort(), [FILES[0][0], FILES[1][0]]);
  });

  for (const [version, filesOf] of [
    [null, () => v1Files],
    [0, () => v0Files],
  ]) {
    const vargs = version === null ? [] : ['--version', version];
    const what = version === null ? 'latest version' : `version ${version}`;

    test(`${what}: count, where, select id,name and payload md5 match DuckDB`, async () => {
      const list = sqlList(filesOf());
      const [d] = await rows(`SELECT count(*) AS n FROM read_parquet(${list})`);
      assert.equal(stokeCount(['query', table, ...vargs]), num(d.n));

      const [w] = await rows(`SELECT count(*) AS n FROM read_parquet(${list}) WHERE label = 1`);
      assert.equal(stokeCount(['query', table, '--where', 'label = 1', ...vargs]), num(w.n));
      const wIds = stokeJsonLines(['query', table, '--where', 'label = 1', '--select', 'id', '--format', 'json', ...vargs])
        .map((r) => r.id)
        .sort((a, b) => a - b);
      const dIds = (await rows(`SELECT id FROM read_parquet(${list}) WHERE label = 1 ORDER BY id`)).map((r) => num(r.id));
      assert.deepEqual(wIds, dIds);

      const [nn] = await rows(`SELECT count(*) AS n FROM read_parquet(${list}) WHERE name IS NULL`);
      assert.ok(num(nn.n) > 0);
      // Predicates that file statistics can prune (one file has none: it must be read).
      for (const where of ['name IS NULL', 'id < 12', 'id >= 25', 'id BETWEEN 8 AND 27', "name = 'n13'",
        'label = 0 AND name IS NOT NULL', 'id IN (3, 11, 30)']) {
        const [c] = await rows(`SELECT count(*) AS n FROM read_parquet(${list}) WHERE ${where}`);
        assert.equal(stokeCount(['query', table, '--where', where, ...vargs]), num(c.n), where);
      }

      const ours = stokeJsonLines(['query', table, '--select', 'id,name', '--format', 'json', ...vargs]).sort(
        (a, b) => a.id - b.id,
      );
      const theirs = (await rows(`SELECT id, name FROM read_parquet(${list}) ORDER BY id`)).map((r) => ({
        id: num(r.id),
        name: r.name,
      }));
      assert.deepEqual(ours, theirs);

      const blobs = stokeJsonLines(['query', table, '--select', 'id,payload', '--format', 'json', ...vargs]).sort(
        (a, b) => a.id - b.id,
      );
      const dBlobs = await rows(
        `SELECT id, md5(payload) AS m, octet_length(payload) AS len FROM read_parquet(${list}) ORDER BY id`,
      );
      assert.deepEqual(
        blobs.map((r) => [r.id, r.payload]),
        dBlobs.map((r) => [num(r.id), `md5:${r.m} len:${num(r.len)}`]),
      );
    });
  }
});

describe('DuckDB reads the checkpoints stoke writes', () => {
  test('a checkpoint holds the protocol, the metadata, every live add and the tombstones', async () => {
    const dir = path.join(TMP, 'checkpointed');
    const src = path.join(dir, 'src');
    const table = path.join(dir, 'table');
    fs.mkdirSync(src, { recursive: true });
    const all = synth(src, { samples: 12, seed: 11, prefix: 'c_' });
    // 12 one-file appends (versions 0..11): stoke checkpoints version 10 by itself.
    const staged = path.join(dir, 'staged');
    fs.mkdirSync(staged);
    for (const r of all) fs.renameSync(path.join(src, r.file), path.join(staged, r.file));
    for (const r of all) {
      fs.renameSync(path.join(staged, r.file), path.join(src, r.file));
      stoke(['--no-progress', 'ingest', src, '--labels', path.join(src, 'labels.csv'), '--table', table]);
    }
    stoke(['--no-progress', 'optimize', table]);  // version 12: 12 removes, 1 add
    stoke(['checkpoint', table]);
    const log = path.join(table, '_delta_log');
    assert.ok(fs.existsSync(path.join(log, '00000000000000000010.checkpoint.parquet')));
    const last = JSON.parse(fs.readFileSync(path.join(log, '_last_checkpoint'), 'utf8'));
    assert.equal(last.version, 12);

    const cp = sqlStr(path.join(log, '00000000000000000012.checkpoint.parquet'));
    const [counts] = await rows(`SELECT count(protocol) AS p, count(metaData) AS m, count(add) AS a,
        count(remove) AS r FROM read_parquet(${cp})`);
    assert.deepEqual([num(counts.p), num(counts.m), num(counts.a), num(counts.r)], [1, 1, 1, 12]);
    const [meta] = await rows(`SELECT metaData.schemaString AS s, protocol FROM read_parquet(${cp})
        WHERE metaData IS NOT NULL OR protocol IS NOT NULL ORDER BY s NULLS LAST LIMIT 1`);
    assert.match(meta.s, /"name":"volume"|"name":"data"/);
    const [add] = await rows(`SELECT add.path AS path, add.size AS size, add.stats AS stats,
        add.dataChange AS dc FROM read_parquet(${cp}) WHERE add IS NOT NULL`);
    const live = JSON.parse(stoke(['inspect', table, '--json']).stdout).data_files;
    assert.equal(live.length, 1);
    assert.equal(add.path, live[0].path);
    assert.equal(num(add.size), live[0].size);
    assert.equal(JSON.parse(add.stats).numRecords, 12);
    assert.equal(add.dc, false);

    // stoke opens the table from the checkpoint alone once the commits before it are gone.
    for (let v = 0; v <= 12; v++) fs.rmSync(path.join(log, String(v).padStart(20, '0') + '.json'));
    assert.equal(stokeCount(['query', table]), 12);
  });
});

// ---------------------------------------------------------------------------

describe('a 5,000-row file DuckDB wrote, loaded as a tensor table', () => {
  const ROWS = 5000;
  const BYTES = 4096;
  const PYTHONPATH = process.env.STOKE_PYTHONPATH || path.join(REPO, 'build', 'python');
  let table;

  before(async () => {
    table = path.join(TMP, 'duck-tensors');
    fs.mkdirSync(path.join(table, '_delta_log'), { recursive: true });
    const file = 'part-00000-duck.parquet';
    // 4,096 bytes per row (md5 hex of the id, repeated): DuckDB's defaults (SNAPPY, an OPTIONAL
    // column, no OffsetIndex) are what a user's file has.
    await con.run(
      `COPY (SELECT i::BIGINT AS id, (i % 10)::INTEGER AS label, ` +
        `encode(repeat(md5(i::VARCHAR), ${BYTES / 32})) AS payload FROM range(${ROWS}) t(i)) ` +
        `TO ${sqlStr(path.join(table, file))} (FORMAT parquet)`,
    );
    const full = path.join(table, file);
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
      { commitInfo: { timestamp: now, operation: 'CREATE TABLE', engineInfo: 'hand-written (stoke interop test)' } },
      { protocol: { minReaderVersion: 1, minWriterVersion: 2 } },
      {
        metaData: {
          id: crypto.randomUUID(),
          format: { provider: 'parquet', options: {} },
          schemaString: JSON.stringify(schema),
          partitionColumns: [],
          // stoke's convention for the tensor's dtype and shape (docs/format.md).
          configuration: { 'stoke.tensors': JSON.stringify({ payload: { dtype: 'uint8', shape: [BYTES] } }) },
          createdTime: now,
        },
      },
      {
        add: {
          path: file, partitionValues: {}, size: fs.statSync(full).size,
          modificationTime: Math.floor(fs.statSync(full).mtimeMs), dataChange: true,
        },
      },
    ];
    fs.writeFileSync(path.join(table, '_delta_log', '00000000000000000000.json'),
      actions.map((a) => JSON.stringify(a)).join('\n') + '\n');
  });

  // Every sample the Python loader delivers, as md5 by id, checked against DuckDB's cells.
  async function expectLoaderMatchesDuckDB() {
    const code = [
      'import hashlib, json, sys',
      'import stoke',
      'out = {}',
      'loader = stoke.Loader(stoke.open_table(sys.argv[1]), batch_size=64, shuffle="global", seed=3,',
      '                      columns=["id", "payload"], to="numpy")',
      'for b in loader:',
      '    for i, p in zip(b["id"], b["payload"]):',
      '        out[int(i)] = hashlib.md5(p.tobytes()).hexdigest()',
      'print(json.dumps(out))',
    ].join('\n');
    const r = spawnSync('/usr/bin/python3', ['-c', code, table], {
      encoding: 'utf8', maxBuffer: 64 << 20, env: { ...process.env, PYTHONPATH },
    });
    assert.equal(r.status, 0, `python loader failed: ${r.stderr}`);
    const ours = JSON.parse(r.stdout);
    assert.equal(Object.keys(ours).length, ROWS);
    const theirs = await rows(
      `SELECT id, md5(payload) AS m, octet_length(payload) AS n FROM read_parquet(${sqlStr(path.join(table, 'part-00000-duck.parquet'))})`,
    );
    assert.equal(theirs.length, ROWS);
    for (const t of theirs) {
      assert.equal(num(t.n), BYTES);
      assert.equal(ours[String(num(t.id))], t.m, `id ${num(t.id)}`);
    }
  }

  test('every sample the loader delivers equals the cell DuckDB wrote', expectLoaderMatchesDuckDB);

  test('its samples are read page by page, not by decoding the column chunk', () => {
    const run = JSON.parse(stoke(['bench', 'load', table, '--batch-size', 64, '--epochs', 1, '--json']).stdout);
    assert.equal(run.samples, ROWS);
    assert.equal(run.cells_decoded, 0);
  });

  test('optimize rewrites it in stoke layout (tensor column REQUIRED), byte for byte', async () => {
    stoke(['optimize', table]);
    const info = JSON.parse(stoke(['inspect', table, '--json']).stdout);
    assert.equal(info.version, 1);
    assert.equal(info.rows, ROWS);
    const file = path.join(table, info.data_files[0].path);
    const [col] = await rows(`SELECT path_in_schema, type FROM parquet_metadata(${sqlStr(file)}) WHERE path_in_schema = 'payload'`);
    assert.ok(col, 'payload column chunk');
    const [schema] = await rows(`SELECT repetition_type FROM parquet_schema(${sqlStr(file)}) WHERE name = 'payload'`);
    assert.equal(schema.repetition_type, 'REQUIRED');
    await expectLoaderMatchesDuckDB();
  });
});
