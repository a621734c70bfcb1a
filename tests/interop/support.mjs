// Helpers shared by the interop tests: copying and running the stoke binary, querying DuckDB, and reading the
// files stoke synth writes.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { before, after } from 'node:test';
import { DuckDBInstance } from '@duckdb/node-api';

// Runs `binary --no-progress ...args`; throws unless it exits 0 (when ok). raw: stdout as a Buffer.
// Copies the stoke binary `src` to `dst` (executable), so that a concurrent rebuild does not disturb
// a run; waits up to 10 s while the binary is being replaced.
export async function copyStokeBinary(src, dst) {
  for (let attempt = 0; ; attempt++) {
    try {
      fs.copyFileSync(src, dst);
      break;
    } catch (e) {
      if (attempt >= 50) throw new Error(`cannot copy ${src}: ${e.message} (set STOKE_BIN?)`);
      await new Promise((r) => setTimeout(r, 200)); // being rebuilt right now
    }
  }
  fs.chmodSync(dst, 0o755);
}

// A test file's (or suite's) surroundings: a fresh temporary directory (`tmp`, named with `prefix`)
// holding a copy of the stoke binary `stokeSrc` (`stoke`), and a one-thread in-memory DuckDB
// (`duck`, `con`: one thread writes deterministic row groups, and nothing here is big), set up by the
// before() hook this registers, which then calls onReady(env) (a second root-level hook is not
// awaited after the first: set the test file's variables there); an after() hook closes DuckDB and
// removes the directory.
export function useStokeAndDuckDB(prefix, stokeSrc, onReady = () => {}) {
  const env = { tmp: null, stoke: null, duck: null, con: null };
  before(async () => {
    env.tmp = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    env.stoke = path.join(env.tmp, 'stoke');
    await copyStokeBinary(stokeSrc, env.stoke);
    env.duck = await DuckDBInstance.create(':memory:', { threads: '1' });
    env.con = await env.duck.connect();
    onReady(env);
  });
  after(() => {
    try {
      env.con?.closeSync();
      env.duck?.closeSync();
    } finally {
      if (env.tmp) fs.rmSync(env.tmp, { recursive: true, force: true });
    }
  });
  return env;
}

export function runStoke(binary, args, { ok = true, raw = false } = {}) {
  const r = spawnSync(binary, ['--no-progress', ...args.map(String)], {
    encoding: raw ? 'buffer' : 'utf8',
    maxBuffer: 512 * 1024 * 1024,
  });
  if (r.error) throw new Error(`cannot run ${binary}: ${r.error.message} (set STOKE_BIN?)`);
  if (ok && (r.status !== 0 || r.signal)) {
    throw new Error(
      `stoke ${args.join(' ')} failed: status=${r.status} signal=${r.signal}\n` +
        `stderr: ${r.stderr}\nstdout: ${String(r.stdout).slice(0, 2000)}`,
    );
  }
  return r;
}

// The rows of a DuckDB query as plain JS objects.
export async function queryRows(con, sql) {
  const reader = await con.runAndReadAll(sql);
  return reader.getRowObjectsJS();
}

export const sqlStr = (s) => `'${String(s).replaceAll("'", "''")}'`;
export const sqlList = (files) => `[${files.map(sqlStr).join(', ')}]`;
export const md5 = (buf) => crypto.createHash('md5').update(buf).digest('hex');

// The array bytes of a .npy file (everything after the header).
export function npyPayload(buf) {
  assert.equal(buf.subarray(0, 6).toString('latin1'), '\x93NUMPY', 'npy magic');
  const start = buf[6] === 1 ? 10 + buf.readUInt16LE(8) : 12 + buf.readUInt32LE(8);
  return buf.subarray(start);
}

// Minimal CSV reader for synth's labels.csv and the files the tests write (no quoting needed).
export function readCsv(file) {
  const lines = fs.readFileSync(file, 'utf8').split(/\r?\n/).filter((l) => l.length > 0);
  const header = lines[0].split(',');
  const rows = lines.slice(1).map((l) => {
    const cells = l.split(',');
    assert.equal(cells.length, header.length, `CSV row width: ${l}`);
    return Object.fromEntries(header.map((h, i) => [h, cells[i]]));
  });
  return { header, rows };
}
