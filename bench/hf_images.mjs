// A Hugging Face image dataset loaded in place against the same images ingested from their
// ImageFolder: BENCH_IMAGES JPEGs from `stoke synth images` (200-500 px, 10 classes), written once as
// an ImageFolder and once as a Parquet file the way `datasets` lays out an Image feature (a struct
// {bytes, path}, the class index in `label`, the features in the file's `huggingface` key-value
// metadata, row groups of 100 images; written by DuckDB, which like pyarrow's defaults writes no
// OffsetIndex), then `stoke ingest` of the ImageFolder with the defaults. `stoke bench load` of both
// with RandomResizedCrop(224), RandomHorizontalFlip, ToTensor and Normalize (ImageNet), one epoch
// of batch 32, default options (global shuffle) and with a block shuffle, warm page cache. The runs
// alternate; each row is the median of BENCH_REPS (default 3). Target: in place >= 0.9x ingested.
//
//   node bench/hf_images.mjs [STOKE_BIN]
//   env: BENCH_IMAGES (default 5000), BENCH_DIR (default build/bench-hf), BENCH_REPS (default 3)
//
// Needs the interop tests' DuckDB package: (cd tests/interop && npm ci), as `make bench` does.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { dieAs, importDuckDB, stokeRunner } from './common.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const STOKE = path.resolve(process.argv[2] && process.argv[2] !== '--write' ? process.argv[2] : path.join(REPO, 'build', 'stoke'));
const IMAGES = Number(process.env.BENCH_IMAGES || 5000);
const WORK = path.resolve(process.env.BENCH_DIR || path.join(REPO, 'build', 'bench-hf'));
const REPS = Number(process.env.BENCH_REPS || 3);
const TRANSFORMS = ['random_resized_crop:224', 'hflip', 'to_tensor',
  'normalize:mean=0.485/0.456/0.406,std=0.229/0.224/0.225'];

const die = dieAs('hf_images');
if (!fs.existsSync(STOKE)) die(`no stoke binary at ${STOKE}`);
if (!(IMAGES >= 100)) die('need BENCH_IMAGES >= 100');

const duckdb = await importDuckDB(REPO, die);

const stoke = stokeRunner(STOKE, die);

// The Parquet file of a `datasets` Image feature, from the ImageFolder.
async function writeHuggingFace(folder, file) {
  const classes = fs.readdirSync(folder).filter((d) => d.startsWith('class_')).sort();
  const features = {
    image: { _type: 'Image' },
    label: { names: classes, _type: 'ClassLabel' },
  };
  const meta = JSON.stringify({ info: { features } }).replaceAll("'", "''");
  const instance = await duckdb.DuckDBInstance.create(':memory:');
  const con = await instance.connect();
  await con.run(`COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image,
                             CAST(regexp_extract(filename, 'class_(\\d+)', 1) AS BIGINT) AS label
                      FROM read_blob('${folder}/*/*.jpg') ORDER BY filename)
                 TO '${file}' (FORMAT parquet, ROW_GROUP_SIZE 100, KV_METADATA {huggingface: '${meta}'})`);
}

function load(location, shuffle) {
  const args = ['bench', 'load', location, '--columns', 'image', '--batch-size', 32, '--epochs', 1, '--json',
    '--shuffle', shuffle];
  for (const t of TRANSFORMS) args.push('--transform', t);
  const j = JSON.parse(stoke(args).trim().split('\n').pop());
  return { samples_per_s: j.samples_per_s, max_rss_mb: j.max_rss_mb };
}

// `node hf_images.mjs --write FOLDER FILE` writes the file and exits: the DuckDB work runs in a child
// process, so that the benchmarking process stays small (a process's children inherit its peak RSS
// as their own starting figure, which getrusage's ru_maxrss then reports).
if (process.argv[2] === '--write') {
  await writeHuggingFace(process.argv[3], process.argv[4]);
  process.exit(0);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

fs.rmSync(WORK, { recursive: true, force: true });
const folder = path.join(WORK, 'folder');
const hf = path.join(WORK, 'hf', 'train-00000-of-00001.parquet');
const table = path.join(WORK, 'table');
fs.mkdirSync(path.dirname(hf), { recursive: true });
stoke(['synth', 'images', '--out', folder, '--images', IMAGES]);
const written = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--write', folder, hf], { stdio: 'inherit' });
if (written.status !== 0) die('writing the Hugging Face file failed');
stoke(['ingest', folder, '--table', table]);
for (const dir of [path.dirname(hf), table]) {
  spawnSync('sh', ['-c', `find '${dir}' -name '*.parquet' -exec cat {} + >/dev/null`]);
}

const runs = [
  ['in place (Hugging Face Parquet), global shuffle', hf, 'global'],
  ['in place (Hugging Face Parquet), block shuffle', hf, 'block'],
  ['after stoke ingest of the ImageFolder, global shuffle', table, 'global'],
];
const results = runs.map(() => []);
for (let r = 0; r < REPS; ++r) runs.forEach(([, loc, shuffle], k) => results[k].push(load(loc, shuffle)));
const ingested = median(results[2].map((x) => x.samples_per_s));
console.log(`hf_images: ${IMAGES} JPEGs, batch 32, RandomResizedCrop(224) + flip + to_tensor + normalize, ` +
  `median of ${REPS} (images/s; ratio: of the ingested table's)`);
console.log(`${'run'.padEnd(58)} ${'images/s'.padStart(10)} ${'ratio'.padStart(8)} ${'peak MB'.padStart(9)}`);
runs.forEach(([name], k) => {
  const ips = median(results[k].map((x) => x.samples_per_s));
  const rss = Math.max(...results[k].map((x) => x.max_rss_mb));
  console.log(`${name.padEnd(58)} ${ips.toFixed(1).padStart(10)} ${(ips / ingested).toFixed(2).padStart(8)} ` +
    `${rss.toFixed(0).padStart(9)}`);
});
