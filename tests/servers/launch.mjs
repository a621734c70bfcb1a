// Starts one test server on a free loopback port with a temporary location, prints
// "READY <port>" on stdout once it accepts connections, and stops it (removing the temporary
// location) on SIGTERM/SIGINT or when stdin closes (the parent test process went away).
//
//   node launch.mjs azurite                 Azure Blob emulator (Azurite), account devstoreaccount1
//                                           (STOKE_AZURITE_ARGS: more Azurite options)
//   node launch.mjs s3rver                  S3 emulator (s3rver), credentials S3RVER / S3RVER
//   node launch.mjs proxy <upstream-port> [listen-address]
//                                           fault-injecting HTTP proxy in front of a server (fault_proxy.mjs),
//                                           on 127.0.0.1 unless an address is given
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const [kind, ...args] = process.argv.slice(2);
const cleanups = [];

// s3rver 3.7.1 encrypts ListObjectsV2 continuation tokens with DES, which Node's OpenSSL 3 only
// offers through the legacy provider: run the s3rver launcher under --openssl-legacy-provider.
if (kind === 's3rver' && !process.execArgv.includes('--openssl-legacy-provider')) {
  const child = spawn(process.execPath, ['--openssl-legacy-provider', fileURLToPath(import.meta.url), kind, ...args],
    { stdio: 'inherit' });
  for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code) => process.exit(code ?? 1));
} else {
  startInThisProcess();
}

let stopping = false;

async function stop(code) {
  if (stopping) return;
  stopping = true;
  for (const c of cleanups.reverse()) {
    try { await c(); } catch { /* best effort */ }
  }
  process.exit(code);
}
function watchForStop() {
  process.on('SIGTERM', () => stop(0));
  process.on('SIGINT', () => stop(0));
  process.stdin.on('end', () => stop(0));
  process.stdin.on('close', () => stop(0));
  process.stdin.resume();
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function waitForPort(port, ms) {
  const deadline = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const sock = net.connect(port, '127.0.0.1');
      sock.on('connect', () => { sock.destroy(); resolve(); });
      sock.on('error', () => {
        sock.destroy();
        if (Date.now() > deadline) reject(new Error(`port ${port} did not open`));
        else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
}

function tempDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function main() {
  if (kind === 'azurite') {
    const location = tempDir('stoke-azurite-');
    const port = await freePort();
    const main = path.join(here, 'node_modules', 'azurite', 'dist', 'src', 'blob', 'main.js');
    // STOKE_AZURITE_ARGS: more options (e.g. --inMemoryPersistence), space-separated.
    const extra = (process.env.STOKE_AZURITE_ARGS || '').split(' ').filter((a) => a);
    // --inMemoryPersistence refuses --location (and keeps nothing on disk).
    const where = extra.includes('--inMemoryPersistence') ? [] : ['--location', location];
    const child = spawn(process.execPath, [main, '--blobHost', '127.0.0.1', '--blobPort', String(port),
      ...where, '--silent', '--skipApiVersionCheck', '--loose', '--disableProductStyleUrl', '--disableTelemetry',
      ...extra], { stdio: ['ignore', 'ignore', 'inherit'], cwd: location });
    cleanups.push(() => new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', resolve);
      child.kill('SIGTERM');
      setTimeout(() => { child.kill('SIGKILL'); resolve(); }, 3000);
    }));
    child.on('exit', (code) => { if (!stopping) { console.error(`azurite exited (${code})`); stop(1); } });
    await waitForPort(port, 30000);
    console.log(`READY ${port}`);
  } else if (kind === 's3rver') {
    const S3rver = require('s3rver');
    const directory = tempDir('stoke-s3rver-');
    const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory });
    const address = await server.run();
    cleanups.push(() => server.close());
    console.log(`READY ${address.port}`);
  } else if (kind === 'proxy') {
    const { startFaultProxy } = await import('./fault_proxy.mjs');
    const upstream = Number(args[0]);
    if (!upstream) throw new Error('usage: launch.mjs proxy <upstream-port> [listen-address]');
    const server = await startFaultProxy(upstream, args[1] || '127.0.0.1');
    cleanups.push(() => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }));
    console.log(`READY ${server.address().port}`);
  } else {
    throw new Error(`unknown server kind '${kind}' (azurite, s3rver, proxy)`);
  }
}

function startInThisProcess() {
  watchForStop();
  main().catch((e) => { console.error(`launch.mjs: ${e.stack || e}`); stop(1); });
}
