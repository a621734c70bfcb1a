// Cross-tool tests of the tables stoke ingests from images and HDF5 files: DuckDB reads the files of
// the current version, the md5 of every `image` cell equals the md5 of its source file, and the
// scalar columns of an HDF5-derived table (datasets along axis 0, root attributes) hold what the
// files hold. Also a sharded, partitioned table, whose data files lie in per-shard directories.
//
//   cd tests/interop && npm ci && node --test        (or: node --test tests/interop/)
//
// The stoke binary comes from $STOKE_BIN (default: <repo>/build/stoke); the HDF5 fixtures are written
// with h5py by Debian's /usr/bin/python3 (python3-h5py), and that test is skipped without it.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { md5, npyPayload, queryRows, runStoke, sqlList, sqlStr, useStokeAndDuckDB } from './support.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const STOKE_SRC = process.env.STOKE_BIN || path.join(REPO, 'build', 'stoke');

let TMP;
let STOKE;
let duck;
let con;

useStokeAndDuckDB('stoke-sources-interop-', STOKE_SRC, (env) => ({ tmp: TMP, stoke: STOKE, duck, con } = env));

const stoke = (args, opts) => runStoke(STOKE, args, opts);
const rows = (sql) => queryRows(con, sql);
const num = (v) => (typeof v === 'bigint' ? Number(v) : v);
const liveFiles = (table) => JSON.parse(stoke(['inspect', table, '--json']).stdout).data_files.map((f) => path.join(table, f.path));

// Every file under dir, as paths relative to it.
function walk(dir, prefix = '') {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(path.join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`]);
}

describe('DuckDB reads an image table', () => {
  test('md5 of every image cell equals md5 of its source file; labels, sizes and metadata', async () => {
    const src = path.join(TMP, 'imgs');
    const table = path.join(TMP, 'img_table');
    stoke(['synth', 'images', '--out', src, '--images', 30, '--classes', 3, '--min-size', 40, '--max-size', 90,
      '--png-fraction', 0.3, '--seed', 7]);
    stoke(['ingest', src, '--table', table, '--rows-per-file', 7]);
    const files = walk(src).sort();
    assert.equal(files.length, 30);
    const live = liveFiles(table);
    assert.equal(live.length, 5);

    const got = await rows(
      `SELECT id, file, label, width, height, channels, md5(image) AS m, octet_length(image) AS len ` +
        `FROM read_parquet(${sqlList(live)}) ORDER BY id`,
    );
    assert.equal(got.length, files.length);
    for (const [i, r] of got.entries()) {
      assert.equal(num(r.id), i);
      assert.equal(r.file, files[i]);  // ids follow the sorted listing
      const bytes = fs.readFileSync(path.join(src, r.file));
      assert.equal(r.m, md5(bytes), r.file);
      assert.equal(num(r.len), bytes.length, r.file);
      assert.equal(num(r.label), Number(r.file.slice('class_'.length, 'class_000'.length)));
      assert.ok(num(r.width) >= 40 && num(r.width) <= 90 && num(r.height) >= 40 && num(r.height) <= 90);
      assert.equal(num(r.channels), 3);
    }
    // stoke prints the same md5 for each cell.
    const ours = stoke(['query', table, '--select', 'file,image', '--format', 'json']).stdout.trim().split('\n')
      .map((l) => JSON.parse(l));
    for (const r of ours) assert.ok(r.image.startsWith(`md5:${md5(fs.readFileSync(path.join(src, r.file)))}`), r.file);

    // The footer's key-value metadata, as DuckDB sees it.
    const kv = await rows(
      `SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${sqlList([live[0]])}) ORDER BY k`,
    );
    const meta = Object.fromEntries(kv.map((r) => [r.k, r.v]));
    assert.deepEqual(JSON.parse(meta['stoke.classes']), { label: ['class_000', 'class_001', 'class_002'] });
    assert.deepEqual(JSON.parse(meta['stoke.images']), { image: { formats: ['jpeg', 'png'] } });
    assert.deepEqual(JSON.parse(meta['stoke.blobs']), ['image']);
    // One data page per image (as stoke lists the file's pages), uncompressed: JPEG and PNG bytes
    // do not compress.
    const layout = JSON.parse(stoke(['inspect', '--json', '--pages', live[0]]).stdout);
    const image = layout.row_groups[0].columns.find((c) => c.name === 'image');
    assert.equal(image.pages, 7);
    assert.equal(image.codec, 'UNCOMPRESSED');
    assert.ok(image.page_list.every((p) => p.values === 1 && p.crc));
  });
});

describe('DuckDB reads an HDF5-derived table', () => {
  const python = '/usr/bin/python3';
  const hasH5py = spawnSync(python, ['-c', 'import h5py'], { encoding: 'utf8' }).status === 0;

  test('scalars of datasets along axis 0 and of root attributes', { skip: !hasH5py && 'python3-h5py not installed' },
    async () => {
      const src = path.join(TMP, 'h5');
      const table = path.join(TMP, 'h5_table');
      fs.mkdirSync(src);
      // File f holds 5 + f samples: label[i] = f * 10 + i, images (n, 4, 4) float32 chunked + gzip,
      // attributes site = "site-f", depth = 100 * f.
      const script = [
        'import sys, h5py, numpy as np',
        'for f in range(3):',
        '    n = 5 + f',
        "    with h5py.File(f'{sys.argv[1]}/run{f}.h5', 'w') as h:",
        "        h.create_dataset('label', data=np.arange(n, dtype='i4') + 10 * f)",
        "        h.create_dataset('images', data=np.full((n, 4, 4), f, dtype='f4'), chunks=(2, 4, 4), compression='gzip', shuffle=True)",
        "        h.attrs['site'] = f'site-{f}'",
        "        h.attrs['depth'] = 100 * f",
      ].join('\n');
      const py = spawnSync(python, ['-c', script, src], { encoding: 'utf8' });
      assert.equal(py.status, 0, py.stderr);
      stoke(['ingest', src, '--table', table]);
      const live = liveFiles(table);
      const got = await rows(
        `SELECT file, "index" AS i, label, site, depth, octet_length(images) AS len FROM read_parquet(${sqlList(live)}) ` +
          `ORDER BY id`,
      );
      assert.equal(got.length, 5 + 6 + 7);
      for (const r of got) {
        const f = Number(r.file.slice(3, 4));
        assert.equal(num(r.label), 10 * f + num(r.i));
        assert.equal(r.site, `site-${f}`);
        assert.equal(num(r.depth), 100 * f);
        assert.equal(num(r.len), 4 * 4 * 4);
      }
      const [s] = await rows(`SELECT sum(label) AS s, count(DISTINCT file) AS n FROM read_parquet(${sqlList(live)})`);
      assert.equal(num(s.n), 3);
      assert.equal(num(s.s), [0, 1, 2].reduce((a, f) => a + Array.from({ length: 5 + f }, (_, i) => 10 * f + i).reduce((x, y) => x + y, 0), 0));
    });
});

describe('DuckDB reads a sharded, partitioned table', () => {
  test('files in <partition>/shard-<i>-of-<N>/: through the log and through a recursive glob', async () => {
    const src = path.join(TMP, 'vols');
    const table = path.join(TMP, 'sharded');
    stoke(['synth', 'volumes', '--samples', 24, '--shape', '4,4,2', '--channels', 1, '--out', src, '--seed', 3]);
    for (let i = 0; i < 3; i++) {
      stoke(['ingest', src, '--labels', path.join(src, 'labels.csv'), '--table', table, '--partition-by', 'label',
        '--rows-per-file', 2, '--tensor-column', 'volume', '--shard', `${i}/3`]);
    }
    const live = liveFiles(table);
    assert.ok(live.length >= 12, `${live.length} files for 24 rows of at most 2 per file`);
    const shards = new Set();
    for (const f of live) {
      const m = path.relative(table, f).match(/^label=\d+\/(shard-[0-2]-of-3)\/part-[^/]+\.parquet$/);
      assert.ok(m, f);
      shards.add(m[1]);
    }
    assert.deepEqual([...shards].sort(), ['shard-0-of-3', 'shard-1-of-3', 'shard-2-of-3']);
    const names = fs.readdirSync(src).filter((n) => n.endsWith('.npy')).sort();
    assert.equal(names.length, 24);
    const want = new Map(names.map((n) => [n, md5(npyPayload(fs.readFileSync(path.join(src, n))))]));
    const check = async (from, what) => {
      const got = await rows(`SELECT id, file, md5(volume) AS m FROM ${from} ORDER BY id`);
      assert.equal(got.length, 24, what);
      for (const [i, r] of got.entries()) {
        assert.equal(num(r.id), i, `${what}: ids follow the sorted listing`);
        assert.equal(r.file, names[i], what);
        assert.equal(r.m, want.get(r.file), `${what}: ${r.file}`);
      }
    };
    await check(`read_parquet(${sqlList(live)})`, 'the files the log names');
    await check(`read_parquet(${sqlStr(path.join(table, '**', '*.parquet'))}, hive_partitioning = true)`,
      'a recursive glob');
  });
});
