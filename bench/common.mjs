// What the Node benchmarks share (bench/foreign_file.mjs, bench/hf_images.mjs): the interop tests'
// DuckDB package, and running the `stoke` command.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// A function that prints "NAME: message" to stderr and exits 1.
export function dieAs(name) {
  return (msg) => {
    console.error(`${name}: ${msg}`);
    process.exit(1);
  };
}

// @duckdb/node-api from tests/interop (installed by `npm ci` there, as `make bench` does).
export async function importDuckDB(repo, die) {
  try {
    const require = createRequire(path.join(repo, 'tests', 'interop', 'package.json'));
    return await import(pathToFileURL(require.resolve('@duckdb/node-api')).href);
  } catch (e) {
    return die(`@duckdb/node-api is missing (run: cd tests/interop && npm ci): ${e.message}`);
  }
}

// A function that runs `STOKE --no-progress ARGS...` and returns its stdout, or dies with its stderr.
export function stokeRunner(stokeBin, die) {
  return (args) => {
    const r = spawnSync(stokeBin, ['--no-progress', ...args.map(String)], { encoding: 'utf8', maxBuffer: 64 << 20 });
    if (r.status !== 0) die(`stoke ${args.join(' ')} failed: ${r.stderr}`);
    return r.stdout;
  };
}
