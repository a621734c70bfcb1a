// Plain Parquet datasets (no Delta log) that DuckDB wrote: a Hive-partitioned directory and a glob
// of files, read by `stoke query` and `stoke cat` with the rows DuckDB reads from the same files.
//
//   cd tests/interop && npm ci && node --test parquet_dataset.test.mjs

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { md5, npyPayload, queryRows, runStoke, sqlStr, useStokeAndDuckDB } from './support.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const STOKE_SRC = process.env.STOKE_BIN || path.join(REPO, 'build', 'stoke');
// The Python module built beside the binary: the loader's tensors are read through it.
const PY_PATH = process.env.STOKE_PYTHONPATH || path.join(path.dirname(path.resolve(STOKE_SRC)), 'python');
const HAVE_PY = fs.existsSync(path.join(PY_PATH, 'stoke')) && fs.readdirSync(path.join(PY_PATH, 'stoke')).some((f) => f.startsWith('_stoke'));

// Every row `stoke.Loader(location, **options)` delivers, as JSON: scalars as they are, arrays as
// {shape, dtype, md5 of their bytes}.
const LOAD_SCRIPT = `
import hashlib, json, sys
import stoke
location, options = sys.argv[1], json.loads(sys.argv[2])
rows = []
for b in stoke.Loader(location, to="numpy", **options):
    for i in range(len(b[options["columns"][0]])):
        row = {}
        for c in options["columns"]:
            v = b[c][i]
            if getattr(v, "ndim", 0) > 0:
                row[c] = {"shape": list(v.shape), "dtype": str(v.dtype), "md5": hashlib.md5(v.tobytes()).hexdigest()}
            else:
                row[c] = v.item() if hasattr(v, "item") else v
        rows.append(row)
print(json.dumps(rows))
`;
function pythonLoad(location, options) {
  const r = spawnSync('/usr/bin/python3', ['-c', LOAD_SCRIPT, location, JSON.stringify(options)], {
    encoding: 'utf8', maxBuffer: 1 << 28, env: { ...process.env, PYTHONPATH: PY_PATH },
  });
  assert.equal(r.status, 0, `python loader: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

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

  test('ragged and null arrays load padded and filled as asked, with the values DuckDB reads', { skip: !HAVE_PY && `no stoke Python module under ${PY_PATH}` }, async () => {
    const file = path.join(TMP, 'ragged.parquet');
    await con.run(`COPY (SELECT i AS id,
                          CASE i % 5 WHEN 0 THEN NULL WHEN 1 THEN []::FLOAT[] WHEN 2 THEN [i, NULL, i + 0.5]::FLOAT[]
                               ELSE list_transform(range(i % 4 + 1), x -> (i * 10 + x)::FLOAT) END AS seq,
                          CASE i % 3 WHEN 0 THEN [[i], NULL, [i + 1, NULL, i + 2]]::INTEGER[][]
                               WHEN 1 THEN [[], [i]]::INTEGER[][] ELSE NULL END AS grid
                   FROM range(30) t(i))
                   TO ${sqlStr(file)} (FORMAT PARQUET, COMPRESSION zstd)`);
    const duck = await duckRows(`SELECT id, seq, grid FROM read_parquet(${sqlStr(file)})`);
    // DuckDB's row padded as stoke is asked to: each list's elements first, then the fill; nulls the fill.
    const padded = (v, shape, fill) => {
      const out = [];
      const walk = (x, depth) => {
        const n = shape[depth];
        for (let k = 0; k < n; ++k) {
          const e = Array.isArray(x) && k < x.length ? x[k] : null;
          if (depth + 1 === shape.length) out.push(e === null ? fill : e);
          else walk(e, depth + 1);
        }
      };
      walk(v, 0);
      return out;
    };
    const options = { columns: ['id', 'seq', 'grid'], batch_size: 4, shuffle: 'global', seed: 5,
      pad: { seq: [4], grid: [3, 3] }, fill: { seq: -1.5, grid: -7 } };
    const got = pythonLoad(file, options);
    assert.equal(got.length, 30);
    const want = new Map(duck.map((r) => [r.id, r]));
    for (const r of got) {
      const d = want.get(r.id);
      assert.deepEqual([r.seq.shape, r.seq.dtype, r.grid.shape, r.grid.dtype], [[4], 'float32', [3, 3], 'int32']);
      assert.equal(r.seq.md5, md5(Buffer.from(new Float32Array(padded(d.seq, [4], -1.5)).buffer)), `seq of row ${r.id}`);
      assert.equal(r.grid.md5, md5(Buffer.from(new Int32Array(padded(d.grid, [3, 3], -7)).buffer)), `grid of row ${r.id}`);
    }
    // The command line takes the same options; without them the first ragged or null row is an error naming it.
    const bench = runStoke(STOKE, ['bench', 'load', file, '--columns', 'seq,grid', '--pad', 'seq=4', '--pad', 'grid=3,3',
      '--fill', 'seq=-1.5', '--fill', 'grid=-7', '--json']);
    assert.equal(JSON.parse(bench.stdout.trim().split('\n').pop()).samples, 30);
    const refused = runStoke(STOKE, ['bench', 'load', file, '--columns', 'seq', '--shuffle', 'none'], { ok: false });
    assert.match(refused.stderr, /ragged\.parquet.*row \d+.*(a null row|an empty list|a ragged list|a null element)/s);
    const fraction = runStoke(STOKE, ['bench', 'load', file, '--columns', 'grid', '--pad', 'grid=3,3', '--fill', 'grid=0.5'], { ok: false });
    assert.match(fraction.stderr, /fill\['grid'\]: fill value 0\.5 is not a int32 value/);
  });

  test('Petastorm .npy cells and Hugging Face image structs load as tensors and images', { skip: !HAVE_PY && `no stoke Python module under ${PY_PATH}` }, async () => {
    const npy = path.join(TMP, 'npy');
    const img = path.join(TMP, 'img');
    runStoke(STOKE, ['synth', 'volumes', '--samples', 10, '--shape', '3,4,5', '--channels', 2, '--out', npy, '--seed', 3, '--threads', 1]);
    runStoke(STOKE, ['synth', 'images', '--images', 9, '--classes', 3, '--min-size', 48, '--max-size', 48, '--out', img]);
    const peta = path.join(TMP, 'petastorm.parquet');
    await con.run(`COPY (SELECT filename AS file, content AS volume FROM read_blob(${sqlStr(npy + '/*.npy')}))
                   TO ${sqlStr(peta)} (FORMAT PARQUET, ROW_GROUP_SIZE 4)`);
    const want = new Map();
    for (const f of fs.readdirSync(npy).filter((f) => f.endsWith('.npy'))) want.set(path.join(npy, f), md5(npyPayload(fs.readFileSync(path.join(npy, f)))));
    const got = pythonLoad(peta, { columns: ['file', 'volume'], batch_size: 3, shuffle: 'global', seed: 1 });
    assert.equal(got.length, 10);
    const checkVolumes = (rows) => {
      assert.equal(rows.length, 10);
      for (const r of rows) {
        assert.deepEqual([r.volume.shape, r.volume.dtype], [[3, 4, 5, 2], 'float32'], r.file);
        assert.equal(r.volume.md5, want.get(r.file), r.file);
      }
    };
    checkVolumes(got);
    // Re-laid out by ingest (one sample per page), the same values come back.
    const petaTable = path.join(TMP, 'petastorm_table');
    runStoke(STOKE, ['ingest', peta, '--table', petaTable]);
    checkVolumes(pythonLoad(petaTable, { columns: ['source_file', 'volume'], batch_size: 3, shuffle: 'global', seed: 1 })
      .map((r) => ({ file: r.source_file, volume: r.volume })));

    const hf = path.join(TMP, 'hf_images', 'data');
    fs.mkdirSync(hf, { recursive: true });
    const features = { info: { features: { image: { _type: 'Image' }, label: { _type: 'ClassLabel', names: ['zero', 'one', 'two'] },
      emb: { _type: 'Array2D', shape: [2, 3], dtype: 'float32' } } } };
    await con.run(`COPY (SELECT {'bytes': content, 'path': filename} AS image,
                                CAST(regexp_extract(filename, 'class_(\\d+)', 1) AS INTEGER) AS label,
                                [[1.5, 2.5, 3.5], [4.5, 5.5, octet_length(content)::FLOAT]]::FLOAT[3][2] AS emb
                         FROM read_blob(${sqlStr(img + '/*/*.jpg')}))
                   TO ${sqlStr(path.join(hf, 'train-00000-of-00001.parquet'))}
                   (FORMAT PARQUET, ROW_GROUP_SIZE 4, KV_METADATA {huggingface: ${sqlStr(JSON.stringify(features))}})`);
    const glob = path.join(hf, 'train-*.parquet');
    const duck = await duckRows(`SELECT label, octet_length(image.bytes) AS size FROM read_parquet(${sqlStr(glob)})`);
    const embMd5 = (size) => md5(Buffer.from(new Float32Array([1.5, 2.5, 3.5, 4.5, 5.5, size]).buffer));
    const rows = pythonLoad(glob, { columns: ['image', 'label', 'emb'], batch_size: 4, shuffle: 'global', seed: 2 });
    assert.equal(rows.length, duck.length);
    assert.deepEqual(rows.map((r) => r.label).sort(), duck.map((r) => r.label).sort());
    assert.deepEqual(rows.map((r) => r.emb.md5).sort(), duck.map((r) => embMd5(r.size)).sort());
    for (const r of rows) {
      assert.deepEqual([r.image.shape, r.image.dtype], [[48, 48, 3], 'uint8']);
      assert.deepEqual([r.emb.shape, r.emb.dtype], [[2, 3], 'float32']);
    }
    const info = JSON.parse(runStoke(STOKE, ['inspect', glob, '--json']).stdout);
    assert.deepEqual(info['stoke.classes'], { label: ['zero', 'one', 'two'] });
    const hfTable = path.join(TMP, 'hf_table');
    runStoke(STOKE, ['ingest', glob, '--table', hfTable]);
    const ingested = pythonLoad(hfTable, { columns: ['image', 'label', 'emb'], batch_size: 4, shuffle: 'global', seed: 2 });
    assert.deepEqual(ingested.map((r) => r.emb.md5).sort(), duck.map((r) => embMd5(r.size)).sort());
    assert.deepEqual(ingested.map((r) => r.label).sort(), duck.map((r) => r.label).sort());
    const tableInfo = JSON.parse(runStoke(STOKE, ['inspect', hfTable, '--json']).stdout);
    assert.deepEqual(tableInfo['stoke.classes'], { label: ['zero', 'one', 'two'] });
    assert.deepEqual(tableInfo['stoke.images'], { image: { formats: ['jpeg'] } });
  });
});
