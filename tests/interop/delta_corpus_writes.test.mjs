// stoke's write commands on real Delta tables that carry writer features (the corpus in
// <repo>/../shared/corpus/delta-rs; $STOKE_DELTA_CORPUS overrides the folder; a fresh clone has no
// ../shared: the test then skips, saying so).
//
//   node --test tests/interop/delta_corpus_writes.test.mjs
//
// Each table whose protocol asks anything of writers (writer version 3 or more), that a reader may
// read and whose data files are there, is copied and written into with stoke: an append of .npy
// files, then optimize, checkpoint and vacuum --retain 0. After each command:
//   - optimize, checkpoint and vacuum either succeed or are refused with `unsupported:` naming the
//     features they cannot keep; the append is refused, with `unsupported:` or as a schema mismatch
//     (these tables do not have the columns of stoke's sample layout; appends into tables with writer
//     features are the last tests'). A refused command leaves every file of the table as it was;
//   - the table's rows, read by the independent reader (delta_reader.mjs: the log replayed by the
//     protocol, DuckDB over the live files, deletion vectors decoded here), are the rows it had
//     before, and stoke reads the same (checkTable);
//   - the log keeps the protocol's rules: versions dense; each new commit starts with its commitInfo,
//     its timestamp not below its predecessor's, with an inCommitTimestamp above the predecessor's
//     where the table has in-commit timestamps; an OPTIMIZE adds and removes with dataChange false,
//     each remove naming a file (and deletion vector) that was live;
//   - the tables the writer protocol singles out are among those written: change data feed, deletion
//     vectors, identity columns, in-commit timestamps and column mapping by optimize, column mapping
//     by checkpoint and vacuum too; appendOnly by the last test, which appends to a stoke table that
//     has it.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { queryRows, runStoke, sqlList, sqlStr, useStokeAndDuckDB } from './support.mjs';
import { checkTable, expectedState, findTables, listLog, readCommit } from './delta_reader.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const STOKE_SRC = process.env.STOKE_BIN || path.join(REPO, 'build', 'stoke');
const CORPUS = process.env.STOKE_DELTA_CORPUS || path.resolve(REPO, '..', 'shared', 'corpus', 'delta-rs');
const KNOWN_FAILURES = JSON.parse(fs.readFileSync(path.join(HERE, 'delta_corpus_known_failures.json'), 'utf8'));

const HAVE_CORPUS = fs.existsSync(CORPUS);
const SKIP_MESSAGE = `no Delta corpus at ${CORPUS} (a fresh clone has no ../shared; CI has it): delta corpus writes skipped`;
if (!HAVE_CORPUS) console.log(SKIP_MESSAGE);

// The last protocol and metaData of a table's JSON commits (enough to choose the tables: every table
// of the corpus keeps its commit 0, or a later protocol in a later commit).
function lastProtocolAndMetadata(tableDir) {
  const logDir = path.join(tableDir, '_delta_log');
  let protocol = null;
  let metaData = null;
  for (const [, name] of [...listLog(logDir).commits].sort((a, b) => a[0] - b[0])) {
    for (const a of readCommit(logDir, name)) {
      if (a.protocol) protocol = a.protocol;
      if (a.metaData) metaData = a.metaData;
    }
  }
  return { protocol, metaData };
}

// What the protocol asks of writers, as the names of the features in use (legacy versions included).
function writerFeatures({ protocol, metaData }) {
  if (!protocol) return [];
  const conf = metaData?.configuration || {};
  const schema = metaData?.schemaString || '';
  const out = new Set(Number(protocol.minWriterVersion) === 7 ? protocol.writerFeatures || [] : []);
  const w = Number(protocol.minWriterVersion);
  if (w >= 2 && w < 7) out.add('appendOnly');
  if (w >= 4 && w < 7) out.add('changeDataFeed');
  if (w >= 5 && w < 7) out.add('columnMapping');
  if (w >= 6 && w < 7) out.add('identityColumns');
  const inUse = new Set([...out].filter((f) => {
    if (f === 'appendOnly') return conf['delta.appendOnly'] === 'true';
    if (f === 'changeDataFeed') return conf['delta.enableChangeDataFeed'] === 'true';
    if (f === 'columnMapping') return (conf['delta.columnMapping.mode'] || 'none') !== 'none';
    if (f === 'identityColumns') return schema.includes('delta.identity.start');
    if (f === 'invariants') return schema.includes('delta.invariants');
    if (f === 'checkConstraints') return Object.keys(conf).some((k) => k.startsWith('delta.constraints.'));
    if (f === 'generatedColumns') return schema.includes('delta.generationExpression');
    return true;
  }));
  return [...inUse].sort();
}

// Every file under `dir` with its size and modification time, to tell that nothing changed.
function treeState(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        const st = fs.statSync(p);
        out.push(`${path.relative(dir, p)} ${st.size} ${st.mtimeMs}`);
      }
    }
  };
  walk(dir);
  return out.sort().join('\n');
}

// The commits of `tableDir` by version, and that the versions are dense.
function commitsOf(tableDir) {
  const commits = listLog(path.join(tableDir, '_delta_log')).commits;
  const versions = [...commits.keys()].sort((a, b) => a - b);
  for (let i = 1; i < versions.length; i++) {
    assert.equal(versions[i], versions[i - 1] + 1, `${tableDir}: commit ${versions[i - 1] + 1} is missing`);
  }
  return { commits, latest: versions.at(-1) };
}

const commitTime = (info) => info.inCommitTimestamp ?? info.timestamp;

// The rules a commit stoke wrote (`version`) keeps against its predecessor and the state before it.
function checkNewCommit(tableDir, commits, version, before, ict) {
  const logDir = path.join(tableDir, '_delta_log');
  const actions = readCommit(logDir, commits.get(version));
  const info = actions[0].commitInfo;
  assert.ok(info, `version ${version}: the first line is not its commitInfo`);
  const previous = readCommit(logDir, commits.get(version - 1)).find((a) => a.commitInfo)?.commitInfo;
  if (previous) assert.ok(info.timestamp >= previous.timestamp, `version ${version}: its timestamp is below its predecessor's`);
  if (ict) {
    assert.ok(Number.isInteger(info.inCommitTimestamp), `version ${version}: no inCommitTimestamp on a table that has them`);
    if (previous) assert.ok(info.inCommitTimestamp > commitTime(previous), `version ${version}: inCommitTimestamp not above its predecessor's`);
  }
  if (info.operation === 'OPTIMIZE') {
    const live = new Set(before.log.adds.map((a) => `${decodeURIComponent(a.path)}\0${JSON.stringify(a.deletionVector ?? null)}`));
    for (const a of actions) {
      if (a.add) assert.equal(a.add.dataChange, false, `version ${version}: an OPTIMIZE add with dataChange true`);
      if (!a.remove) continue;
      assert.equal(a.remove.dataChange, false, `version ${version}: an OPTIMIZE remove with dataChange true`);
      const key = `${decodeURIComponent(a.remove.path)}\0${JSON.stringify(a.remove.deletionVector ?? null)}`;
      assert.ok(live.has(key), `version ${version}: removes ${a.remove.path} with a deletion vector it did not have`);
    }
  }
}

// Commits the next version of the table at `dir` by hand, as another writer would: `actions` after a
// commitInfo of `operation` (with an inCommitTimestamp when `ict`), timestamped after its predecessor.
function commitByHand(dir, operation, actions, { ict = false } = {}) {
  const { commits, latest } = commitsOf(dir);
  const logDir = path.join(dir, '_delta_log');
  const previous = readCommit(logDir, commits.get(latest)).find((a) => a.commitInfo)?.commitInfo;
  const timestamp = Math.max(Date.now(), previous ? commitTime(previous) + 1 : 0);
  const info = { timestamp, operation, operationParameters: {}, ...(ict ? { inCommitTimestamp: timestamp } : {}) };
  const lines = [{ commitInfo: info }, ...actions].map((a) => JSON.stringify(a)).join('\n') + '\n';
  fs.writeFileSync(path.join(logDir, `${String(latest + 1).padStart(20, '0')}.json`), lines, { flag: 'wx' });
  return { version: latest + 1, timestamp };
}

// The table's protocol and metaData at its latest version, from the independent reader.
async function protocolAndMetadata(con, dir) {
  const state = await expectedState(con, dir);
  return { protocol: state.log.protocol, metaData: state.log.metaData };
}

// A refusal that names the writer features a command cannot keep.
const FEATURE_REFUSAL = /stoke: error: unsupported: .* uses .*, which stoke's .* does not keep; nothing was written/;
// ... or, for an append, a schema that is not stoke's sample layout.
const SCHEMA_MISMATCH = /stoke: error: invalid argument: ingest: schema mismatch between table/;

// Runs `stoke args...` on a table copy; returns whether it wrote. A refusal must match `refusal` and
// leave every file of the table as it was.
function write(stoke, tableDir, args, refusal = FEATURE_REFUSAL) {
  const before = treeState(tableDir);
  const r = runStoke(stoke, args, { ok: false });
  if (r.status === 0) return { wrote: true, out: r.stdout.trim() };
  const err = String(r.stderr).split('\n').find((l) => l.startsWith('stoke: error')) || String(r.stderr);
  assert.ok(!r.signal, `stoke ${args.join(' ')} crashed (${r.signal}): ${r.stderr}`);
  assert.match(err, refusal, `stoke ${args.join(' ')}: not the refusal expected: ${err}`);
  assert.equal(treeState(tableDir), before, `stoke ${args.join(' ')} was refused but changed the table`);
  return { wrote: false, out: err };
}

describe('stoke writes into the Delta tables of the shared corpus that have writer features', { skip: !HAVE_CORPUS && SKIP_MESSAGE }, () => {
  let TMP;
  let STOKE;
  let con;
  useStokeAndDuckDB('stoke-delta-writes-', STOKE_SRC, (env) => ({ tmp: TMP, stoke: STOKE, con } = env));
  const chosen = HAVE_CORPUS
    ? findTables(CORPUS)
        .filter((name) => !(name in KNOWN_FAILURES))
        .map((name) => ({ name, ...lastProtocolAndMetadata(path.join(CORPUS, name)) }))
        .filter((t) => t.protocol && Number(t.protocol.minWriterVersion) >= 3)
    : [];
  const covered = new Set();

  for (const table of chosen) {
    test(table.name, async (t) => {
      const dir = path.join(TMP, table.name.replaceAll('/', '_'));
      fs.cpSync(path.join(CORPUS, table.name), dir, { recursive: true });
      const original = await expectedState(con, dir).catch((e) => ({ error: e.message }));
      if (original.error || original.refuse || original.logOnly) {
        t.diagnostic(`not written: ${original.error || original.refuse || 'its data files are not in the corpus'}`);
        return;
      }
      const features = writerFeatures(table);
      t.diagnostic(`writer features in use: ${features.join(', ') || 'none'}`);
      const ict = table.metaData?.configuration?.['delta.enableInCommitTimestamps'] === 'true';
      const src = path.join(TMP, 'npy');
      if (!fs.existsSync(src)) runStoke(STOKE, ['synth', 'volumes', '--out', src, '--samples', 3, '--shape', '2,2,2', '--channels', 1]);
      const steps = [['ingest', src, '--table', dir], ['optimize', dir], ['checkpoint', dir], ['vacuum', dir, '--retain', 0]];
      for (const args of steps) {
        const state = await expectedState(con, dir);
        const { latest } = commitsOf(dir);
        const append = args[0] === 'ingest';
        const refusal = append ? SCHEMA_MISMATCH : null;
        const r = write(STOKE, dir, args, refusal ? new RegExp(`${FEATURE_REFUSAL.source}|${refusal.source}`) : FEATURE_REFUSAL);
        assert.ok(!(append && r.wrote), 'an append of .npy files into a table of other columns was written');
        t.diagnostic(`${args[0]}: ${r.wrote ? 'written' : 'refused'}: ${r.out.split('\n').at(-1)}`);
        const { commits, latest: now } = commitsOf(dir);
        for (let v = latest + 1; v <= now; v++) checkNewCommit(dir, commits, v, state, ict);
        const after = await expectedState(con, dir);
        assert.deepEqual([...after.rows].sort(), [...original.rows].sort(), `${args[0]} changed the table's rows`);
        const check = await checkTable(con, STOKE, dir);
        assert.ok(check.ok, `after ${args[0]}, stoke reads the table otherwise: ${check.reason}`);
        if (r.wrote) for (const f of features) covered.add(`${f} by ${args[0]}`);
      }
    });
  }

  test('the tables the writer protocol singles out were written into', () => {
    const required = ['changeDataFeed by optimize', 'deletionVectors by optimize', 'deletionVectors by vacuum',
      'identityColumns by optimize', 'inCommitTimestamp by optimize', 'columnMapping by optimize', 'columnMapping by checkpoint',
      'columnMapping by vacuum'];
    for (const f of required) {
      assert.ok(covered.has(f), `no table with ${f.replace(' by ', ' in use was written into by ')} (written: ${[...covered].sort().join(', ')})`);
    }
  });

  // A table of stoke's own layout, after another writer turned features on (as Spark's ALTER TABLE
  // SET TBLPROPERTIES does), takes appends, optimize, checkpoint and vacuum keeping them, and refuses
  // an overwrite, which appendOnly forbids.
  test('a stoke table with appendOnly, change data feed, in-commit timestamps, domains and v2 checkpoints', async (t) => {
    const dir = path.join(TMP, 'featured');
    const day1 = path.join(TMP, 'day1');
    const day2 = path.join(TMP, 'day2');
    runStoke(STOKE, ['synth', 'volumes', '--out', day1, '--samples', 4, '--shape', '2,2,2', '--channels', 1, '--seed', 1]);
    runStoke(STOKE, ['synth', 'volumes', '--out', day2, '--samples', 3, '--shape', '2,2,2', '--channels', 1, '--seed', 2]);
    runStoke(STOKE, ['ingest', day1, '--table', dir]);
    const { protocol, metaData } = await protocolAndMetadata(con, dir);
    assert.equal(Number(protocol.minWriterVersion), 2);
    const version = commitsOf(dir).latest + 1;
    const enabled = commitByHand(dir, 'SET TBLPROPERTIES', [
      { protocol: { minReaderVersion: 3, minWriterVersion: 7, readerFeatures: ['v2Checkpoint'],
                    writerFeatures: ['appendOnly', 'invariants', 'changeDataFeed', 'domainMetadata', 'inCommitTimestamp', 'v2Checkpoint'] } },
      { metaData: { ...metaData, configuration: { ...metaData.configuration, 'delta.appendOnly': 'true',
          'delta.enableChangeDataFeed': 'true', 'delta.enableInCommitTimestamps': 'true', 'delta.checkpointPolicy': 'v2',
          'delta.inCommitTimestampEnablementVersion': String(version) } } },
      { domainMetadata: { domain: 'user.owner', configuration: '{"team":"ml"}', removed: false } },
    ], { ict: true });
    const config = (await protocolAndMetadata(con, dir)).metaData.configuration;
    assert.equal(config['delta.inCommitTimestampEnablementVersion'], String(enabled.version));
    // The enablement timestamp is the enabling commit's in-commit timestamp: set by the same writer.
    const md2 = (await protocolAndMetadata(con, dir)).metaData;
    commitByHand(dir, 'SET TBLPROPERTIES', [{ metaData: { ...md2, configuration: { ...md2.configuration,
      'delta.inCommitTimestampEnablementTimestamp': String(enabled.timestamp) } } }], { ict: true });

    for (const args of [['ingest', day2, '--table', dir], ['optimize', dir], ['checkpoint', dir], ['vacuum', dir, '--retain', 0]]) {
      const state = await expectedState(con, dir);
      const { latest } = commitsOf(dir);
      const r = write(STOKE, dir, args);
      assert.ok(r.wrote, `${args[0]} was refused: ${r.out}`);
      const { commits, latest: now } = commitsOf(dir);
      for (let v = latest + 1; v <= now; v++) checkNewCommit(dir, commits, v, state, true);
      const check = await checkTable(con, STOKE, dir);
      assert.ok(check.ok, `after ${args[0]}, stoke reads the table otherwise: ${check.reason}`);
      assert.equal((await expectedState(con, dir)).count, 7, `after ${args[0]}`);
    }
    const refused = write(STOKE, dir, ['ingest', day1, '--table', dir, '--mode', 'overwrite']);
    assert.equal(refused.wrote, false);
    assert.match(refused.out, /appendOnly/);
    // The checkpoint is one classic file in the V2 spec, and it keeps the domain.
    const logDir = path.join(dir, '_delta_log');
    const checkpoints = fs.readdirSync(logDir).filter((n) => n.includes('.checkpoint.'));
    assert.equal(checkpoints.length, 1, checkpoints.join(', '));
    assert.match(checkpoints[0], /^\d{20}\.checkpoint\.parquet$/);
    const rows = await queryRows(con, `SELECT to_json(checkpointMetadata) AS m, to_json(domainMetadata) AS d
        FROM read_parquet(${sqlStr(path.join(logDir, checkpoints[0]))}) WHERE checkpointMetadata IS NOT NULL OR domainMetadata IS NOT NULL`);
    const got = rows.map((r) => [r.m && JSON.parse(r.m), r.d && JSON.parse(r.d)]);
    assert.equal(got.filter(([m]) => m).length, 1, 'one checkpointMetadata row');
    assert.deepEqual(got.filter(([, d]) => d).map(([, d]) => d), [{ domain: 'user.owner', configuration: '{"team":"ml"}', removed: false }]);
    t.diagnostic(`written: append, optimize, checkpoint (${checkpoints[0]}), vacuum; overwrite refused: ${refused.out}`);
  });

  // A table of stoke's layout that another writer column-mapped (mode name, as Spark's upgrade does:
  // physical names are the names, ids by position), whose tensor column it renamed and whose `id` it
  // declared an identity column: stoke's append writes the physical names and field ids and the
  // identity's next values, raising its high-water mark; optimize, checkpoint and vacuum keep them,
  // and the rows the independent reader finds through the mapping are the ones stoke reads.
  test('a stoke table with column mapping, a renamed column and an identity column', async (t) => {
    const dir = path.join(TMP, 'mapped');
    const day1 = path.join(TMP, 'mapped_day1');
    const day2 = path.join(TMP, 'mapped_day2');
    runStoke(STOKE, ['synth', 'volumes', '--out', day1, '--samples', 4, '--shape', '2,2,2', '--channels', 1, '--seed', 1]);
    runStoke(STOKE, ['synth', 'volumes', '--out', day2, '--samples', 3, '--shape', '2,2,2', '--channels', 1, '--seed', 2]);
    runStoke(STOKE, ['ingest', day1, '--table', dir]);
    const { metaData } = await protocolAndMetadata(con, dir);
    const unmapped = new Set((await expectedState(con, dir)).log.adds.map((a) => a.path));
    const schema = JSON.parse(metaData.schemaString);
    schema.fields.forEach((f, i) => {
      f.metadata = { ...f.metadata, 'delta.columnMapping.id': i + 1, 'delta.columnMapping.physicalName': f.name };
      if (f.name === 'data') f.name = 'voxels';
      if (f.name === 'id') Object.assign(f.metadata, { 'delta.identity.start': 1000, 'delta.identity.step': 1, 'delta.identity.allowExplicitInsert': false });
    });
    commitByHand(dir, 'RENAME COLUMN', [
      { protocol: { minReaderVersion: 2, minWriterVersion: 6 } },
      { metaData: { ...metaData, schemaString: JSON.stringify(schema), configuration: { ...metaData.configuration,
          'delta.columnMapping.mode': 'name', 'delta.columnMapping.maxColumnId': String(schema.fields.length) } } },
    ]);
    for (const args of [['ingest', day2, '--table', dir, '--tensor-column', 'voxels'], ['optimize', dir], ['checkpoint', dir],
      ['vacuum', dir, '--retain', 0]]) {
      const state = await expectedState(con, dir);
      const { latest } = commitsOf(dir);
      const r = write(STOKE, dir, args);
      assert.ok(r.wrote, `${args[0]} was refused: ${r.out}`);
      const { commits, latest: now } = commitsOf(dir);
      for (let v = latest + 1; v <= now; v++) checkNewCommit(dir, commits, v, state, false);
      const after = await expectedState(con, dir);
      assert.equal(after.count, 7, `after ${args[0]}`);
      const check = await checkTable(con, STOKE, dir);
      assert.ok(check.ok, `after ${args[0]}, stoke reads the table otherwise: ${check.reason}`);
      // Every data file written since names its columns by physical name, with the column's id.
      for (const add of after.log.adds.filter((a) => !unmapped.has(a.path))) {
        const fields = await queryRows(con, `SELECT name, field_id FROM parquet_schema(${sqlStr(path.join(dir, decodeURIComponent(add.path)))})
            WHERE field_id IS NOT NULL ORDER BY field_id`);
        assert.deepEqual(fields.map((f) => [f.name, Number(f.field_id)]),
          schema.fields.map((f, i) => [f.metadata['delta.columnMapping.physicalName'], i + 1]), `${add.path} after ${args[0]}`);
      }
    }
    const ids = await queryRows(con, `SELECT id FROM read_parquet(${sqlList((await expectedState(con, dir)).log.adds.map((a) =>
      path.join(dir, decodeURIComponent(a.path))))}) ORDER BY id`);
    assert.deepEqual(ids.map((r) => Number(r.id)), [0, 1, 2, 3, 1000, 1001, 1002]);
    const idField = JSON.parse((await protocolAndMetadata(con, dir)).metaData.schemaString).fields.find((f) => f.name === 'id');
    assert.equal(idField.metadata['delta.identity.highWaterMark'], 1002);
    const loaded = runStoke(STOKE, ['bench', 'load', dir, '--columns', 'voxels', '--epochs', 1, '--batch-size', 7]);
    assert.match(loaded.stdout, /^bench load: 7 rows,/, loaded.stdout);
    t.diagnostic(`written: append, optimize, checkpoint, vacuum under column mapping and an identity column; loaded: ${loaded.stdout.trim().split('\n').at(-1)}`);
  });
});
