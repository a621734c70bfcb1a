// An independent reader of Delta tables for the conformance tests: a table's expected snapshot and
// rows computed from its log by the Delta protocol with DuckDB (see delta_corpus.test.mjs for what
// it does and how rows are normalised), and stoke's view of it compared (checkTable).

import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { queryRows, sqlList, sqlStr } from './support.mjs';
import {
  num,
  firstLine,
  parseJsonLines,
  INTEGER_TYPES,
  isNested,
  isCompared,
  decimalScale,
  canonNumber,
  canonDecimal,
  canonDateText,
  timestampTextToMicros,
  canonStoke,
  duckExpr,
  canonDuck,
  duckNestedExpr,
  multisetDiff,
} from './canonical.mjs';

const STOKE_TIMEOUT_MS = 60_000;

// ---------------------------------------------------------------------------
// Small helpers


function decodePath(p) {
  try {
    return decodeURIComponent(p);
  } catch {
    return p;
  }
}

// The file a log path names: relative to the table, or an absolute file:// URI.
function resolveDataPath(tableDir, p) {
  if (/^file:/i.test(p)) return fileURLToPath(p);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(p)) throw new Error(`non-local data file ${p}`);
  const decoded = decodePath(p);
  return path.isAbsolute(decoded) ? decoded : path.join(tableDir, decoded);
}

function dvUniqueId(dv) {
  if (!dv) return '';
  return `${dv.storageType}${dv.pathOrInlineDv}${dv.offset != null ? `@${dv.offset}` : ''}`;
}

// Tables: directories with a _delta_log, one or two levels below the root.
export function findTables(root) {
  const out = [];
  const dirs = (d) =>
    fs
      .readdirSync(d, { withFileTypes: true })
      .filter((e) => e.isDirectory() && !e.name.startsWith('.') && e.name !== '_delta_log')
      .map((e) => e.name)
      .sort();
  for (const a of dirs(root)) {
    const da = path.join(root, a);
    if (fs.existsSync(path.join(da, '_delta_log'))) {
      out.push(a);
      continue;
    }
    for (const b of dirs(da)) {
      if (fs.existsSync(path.join(da, b, '_delta_log'))) out.push(`${a}/${b}`);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Partition values

// A partition value from the log -> canonical.
function canonPartition(type, s) {
  if (s === null || s === undefined || s === '') return null;
  if (INTEGER_TYPES.has(type)) return /^\s*[+-]?\d+\s*$/.test(s) ? BigInt(s.trim()).toString() : `?${s}`;
  if (type === 'float' || type === 'double') return canonNumber(Number(s), type === 'float');
  if (type === 'boolean') return String(s.toLowerCase() === 'true');
  if (type === 'string') return s;
  if (type === 'binary') {
    const b = Buffer.from(s, 'latin1');
    return `md5:${crypto.createHash('md5').update(b).digest('hex')} len:${b.length}`;
  }
  if (type === 'date') return canonDateText(s);
  if (type === 'timestamp' || type === 'timestamp_ntz') return timestampTextToMicros(s);
  if (type.startsWith('decimal')) return canonDecimal(s, decimalScale(type));
  return `?${s}`;
}

// ---------------------------------------------------------------------------
// Deletion vectors (PROTOCOL.md "Deletion Vector Format")

const Z85 = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#';
const Z85_INDEX = new Map([...Z85].map((c, i) => [c, i]));

function z85Decode(s) {
  if (s.length % 5 !== 0) throw new Error(`Z85 text of length ${s.length}`);
  const out = Buffer.alloc((s.length / 5) * 4);
  for (let i = 0; i < s.length; i += 5) {
    let v = 0;
    for (let k = 0; k < 5; k++) {
      const d = Z85_INDEX.get(s[i + k]);
      if (d === undefined) throw new Error(`Z85: bad character ${s[i + k]}`);
      v = v * 85 + d;
    }
    out.writeUInt32BE(v >>> 0, (i / 5) * 4);
  }
  return out;
}

// The row indexes of a serialized 64-bit RoaringBitmapArray (with Delta's magic number), as Numbers.
function decodeRoaringArray(buf) {
  let p = 0;
  const magic = buf.readUInt32LE(p);
  p += 4;
  if (magic !== 1681511377) throw new Error(`DV magic number ${magic}`);
  const buckets = Number(buf.readBigUInt64LE(p));
  p += 8;
  const rows = [];
  for (let b = 0; b < buckets; b++) {
    const high = buf.readUInt32LE(p);
    p += 4;
    // One 32-bit RoaringBitmap (RoaringFormatSpec).
    const cookie = buf.readUInt32LE(p);
    p += 4;
    let size;
    let runFlags = null;
    if ((cookie & 0xffff) === 12347) {
      size = (cookie >>> 16) + 1;
      runFlags = buf.subarray(p, p + ((size + 7) >> 3));
      p += (size + 7) >> 3;
    } else if (cookie === 12346) {
      size = buf.readUInt32LE(p);
      p += 4;
    } else throw new Error(`roaring cookie ${cookie}`);
    const keys = [];
    const cards = [];
    for (let c = 0; c < size; c++) {
      keys.push(buf.readUInt16LE(p));
      cards.push(buf.readUInt16LE(p + 2) + 1);
      p += 4;
    }
    if (!runFlags || size >= 4) p += 4 * size; // offset header
    const base = high * 2 ** 32;
    for (let c = 0; c < size; c++) {
      const hi = base + keys[c] * 65536;
      if (runFlags && runFlags[c >> 3] & (1 << (c & 7))) {
        const runs = buf.readUInt16LE(p);
        p += 2;
        for (let r = 0; r < runs; r++) {
          const start = buf.readUInt16LE(p);
          const len = buf.readUInt16LE(p + 2) + 1;
          p += 4;
          for (let k = 0; k < len; k++) rows.push(hi + start + k);
        }
      } else if (cards[c] > 4096) {
        for (let w = 0; w < 1024; w++) {
          const word = buf.readBigUInt64LE(p + 8 * w);
          if (word === 0n) continue;
          for (let bit = 0; bit < 64; bit++) if ((word >> BigInt(bit)) & 1n) rows.push(hi + w * 64 + bit);
        }
        p += 8192;
      } else {
        for (let k = 0; k < cards[c]; k++) rows.push(hi + buf.readUInt16LE(p + 2 * k));
        p += 2 * cards[c];
      }
    }
  }
  return rows;
}

function uuidFromZ85(s) {
  const h = z85Decode(s).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// The deleted row indexes of a deletion vector descriptor; throws when it cannot be read.
function readDeletionVector(tableDir, dv) {
  let data;
  if (dv.storageType === 'i') {
    data = z85Decode(dv.pathOrInlineDv).subarray(0, dv.sizeInBytes);
  } else {
    let file;
    if (dv.storageType === 'u') {
      const s = dv.pathOrInlineDv;
      const prefix = s.slice(0, s.length - 20);
      file = path.join(tableDir, prefix, `deletion_vector_${uuidFromZ85(s.slice(-20))}.bin`);
    } else if (dv.storageType === 'p') {
      file = resolveDataPath(tableDir, dv.pathOrInlineDv);
    } else throw new Error(`DV storage type ${dv.storageType}`);
    const all = fs.readFileSync(file);
    const offset = dv.offset ?? 1; // a DV file starts with its format version byte; the first DV follows it
    if (offset === 1 && all[0] !== 1) throw new Error(`DV file format version ${all[0]}`);
    const size = all.readUInt32BE(offset);
    if (size !== dv.sizeInBytes) throw new Error(`DV size ${size}, descriptor says ${dv.sizeInBytes}`);
    data = all.subarray(offset + 4, offset + 4 + size);
    const crc = all.readUInt32BE(offset + 4 + size);
    if (typeof zlib.crc32 === 'function' && zlib.crc32(data) >>> 0 !== crc) throw new Error('DV checksum mismatch');
  }
  const rows = decodeRoaringArray(data);
  if (dv.cardinality != null && rows.length !== Number(dv.cardinality)) {
    throw new Error(`DV decodes to ${rows.length} rows, cardinality ${dv.cardinality}`);
  }
  return rows;
}

// ---------------------------------------------------------------------------
// Log replay (PROTOCOL.md "Action Reconciliation", "Checkpoints", "Last Checkpoint File")

const KNOWN_READER_FEATURES = new Set([
  'columnMapping', 'deletionVectors', 'timestampNtz', 'v2Checkpoint', 'catalogManaged', 'vacuumProtocolCheck',
  'variantType', 'variantShredding', 'typeWidening',
]);

export function listLog(logDir) {
  const commits = new Map(); // version -> file
  const checkpoints = new Map(); // version -> [{kind, files}]
  const multi = new Map(); // `${version}.${parts}` -> Set(part)
  for (const name of fs.readdirSync(logDir)) {
    let m;
    if ((m = /^(\d{20})\.json$/.exec(name))) commits.set(Number(m[1]), name);
    else if ((m = /^(\d{20})\.checkpoint\.parquet$/.exec(name))) addCp(Number(m[1]), { kind: 'classic', files: [name] });
    else if ((m = /^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$/.exec(name))) {
      const key = `${Number(m[1])}.${Number(m[3])}`;
      if (!multi.has(key)) multi.set(key, new Map());
      multi.get(key).set(Number(m[2]), name);
    } else if ((m = /^(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)$/.exec(name))) {
      addCp(Number(m[1]), { kind: `v2-${m[3]}`, files: [name] });
    }
  }
  for (const [key, parts] of multi) {
    const [v, n] = key.split('.').map(Number);
    // A multi-part checkpoint with missing parts must be ignored.
    if (n > 1 && parts.size === n && [...Array(n).keys()].every((k) => parts.has(k + 1))) {
      addCp(v, { kind: `multi-part(${n})`, files: [...Array(n).keys()].map((k) => parts.get(k + 1)) });
    }
  }
  function addCp(v, cp) {
    if (!checkpoints.has(v)) checkpoints.set(v, []);
    checkpoints.get(v).push(cp);
  }
  return { commits, checkpoints };
}

async function parquetActions(con, files) {
  const rs = await queryRows(con, `SELECT to_json(t) AS j FROM read_parquet(${sqlList(files)}, union_by_name = true) t`);
  return rs.map((r) => JSON.parse(r.j));
}

// The actions of one checkpoint, sidecars included.
async function checkpointActions(con, logDir, cp) {
  let actions = [];
  for (const f of cp.files) {
    const full = path.join(logDir, f);
    if (f.endsWith('.json')) {
      actions.push(...fs.readFileSync(full, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l)));
    } else {
      actions.push(...(await parquetActions(con, [full])));
    }
  }
  const sidecars = actions.filter((a) => a.sidecar).map((a) => a.sidecar.path);
  if (sidecars.length > 0) {
    const files = sidecars.map((p) =>
      /^[a-z][a-z0-9+.-]*:/i.test(p) ? resolveDataPath(logDir, p) : path.join(logDir, '_sidecars', decodePath(p)),
    );
    actions.push(...(await parquetActions(con, files)));
  }
  return actions;
}

export function readCommit(logDir, name) {
  return fs
    .readFileSync(path.join(logDir, name), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

// Applies actions to a state: {protocol, metaData, files: Map(key -> add)}, key = path NUL dvId.
// A snapshot holds one add per path (the newest (path, dvId) pair seen for it).
function apply(state, actions, { fromCheckpoint }) {
  for (const a of actions) {
    if (a.protocol) state.protocol = a.protocol;
    if (a.metaData) state.metaData = a.metaData;
    if (a.add) {
      const p = decodePath(a.add.path);
      for (const k of state.files.keys()) if (k.startsWith(`${p}\u0000`)) state.files.delete(k);
      state.files.set(`${p}\u0000${dvUniqueId(a.add.deletionVector)}`, a.add);
    }
    if (a.remove && !fromCheckpoint) {
      state.files.delete(`${decodePath(a.remove.path)}\u0000${dvUniqueId(a.remove.deletionVector)}`);
    }
  }
}

async function replayLog(con, tableDir) {
  const logDir = path.join(tableDir, '_delta_log');
  const notes = [];
  const { commits, checkpoints } = listLog(logDir);
  const versions = [...commits.keys(), ...checkpoints.keys()];
  if (versions.length === 0) throw new Error('empty _delta_log');
  const latest = Math.max(...versions);

  // _last_checkpoint is a hint: check what it says, but use the newest complete checkpoint listed.
  const lastFile = path.join(logDir, '_last_checkpoint');
  if (fs.existsSync(lastFile)) {
    let hint = null;
    try {
      hint = JSON.parse(fs.readFileSync(lastFile, 'utf8'));
    } catch (e) {
      notes.push(`_last_checkpoint unreadable (${e.message})`);
    }
    const newest = Math.max(-1, ...[...checkpoints.keys()].filter((v) => v <= latest));
    if (hint && !checkpoints.has(hint.version)) notes.push(`_last_checkpoint names version ${hint.version}, which has no complete checkpoint`);
    else if (hint && hint.version < newest) notes.push(`_last_checkpoint names version ${hint.version}; a newer checkpoint (${newest}) is listed`);
  }

  const candidates = [...checkpoints.keys()].filter((v) => v <= latest).sort((a, b) => b - a);
  let state = null;
  let used = null;
  for (const v of candidates) {
    for (const cp of checkpoints.get(v)) {
      try {
        const s = { protocol: null, metaData: null, files: new Map() };
        apply(s, await checkpointActions(con, logDir, cp), { fromCheckpoint: true });
        if (!s.protocol || !s.metaData) throw new Error('no protocol or metaData');
        state = s;
        used = { version: v, kind: cp.kind };
        break;
      } catch (e) {
        notes.push(`checkpoint ${v} (${cp.kind}) unreadable: ${firstLine(e.message)}`);
      }
    }
    if (state) break;
  }
  const start = used ? used.version + 1 : 0;
  if (!state) state = { protocol: null, metaData: null, files: new Map() };
  for (let v = start; v <= latest; v++) {
    if (!commits.has(v)) throw new Error(`commit ${v} missing (replay from ${used ? `checkpoint ${used.version}` : 'version 0'})`);
    apply(state, readCommit(logDir, commits.get(v)), { fromCheckpoint: false });
  }
  if (!state.protocol || !state.metaData) throw new Error('no protocol or metaData in the log');

  // Check of the replay: from commit 0, without checkpoints, where the log still has all commits.
  if (used && [...Array(latest + 1).keys()].every((v) => commits.has(v))) {
    const plain = { protocol: null, metaData: null, files: new Map() };
    for (let v = 0; v <= latest; v++) apply(plain, readCommit(logDir, commits.get(v)), { fromCheckpoint: false });
    const a = [...state.files.keys()].sort().join('\n');
    const b = [...plain.files.keys()].sort().join('\n');
    if (a !== b) notes.push(`REPLAY DISAGREES: checkpoint ${used.version} + commits gives ${state.files.size} files, commits 0..${latest} give ${plain.files.size}`);
  }
  return { version: latest, checkpoint: used, protocol: state.protocol, metaData: state.metaData, adds: [...state.files.values()], notes };
}

// Why a reader must refuse the table (protocol versions and reader features), or null.
function mustRefuse(protocol) {
  const rv = Number(protocol.minReaderVersion);
  if (rv > 3) return `minReaderVersion ${rv}`;
  if (rv === 3) {
    const unknown = (protocol.readerFeatures || []).filter((f) => !KNOWN_READER_FEATURES.has(f.replace(/-preview$/, '')));
    if (unknown.length) return `unknown reader feature${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}`;
  }
  return null;
}

function numRecordsOf(add) {
  if (add.stats) {
    try {
      const s = typeof add.stats === 'string' ? JSON.parse(add.stats) : add.stats;
      if (s && s.numRecords != null) return Number(s.numRecords);
    } catch {
      /* no usable stats */
    }
  }
  if (add.stats_parsed && add.stats_parsed.numRecords != null) return Number(add.stats_parsed.numRecords);
  return null;
}

// ---------------------------------------------------------------------------
// Expected state of one table

export async function expectedState(con, tableDir) {
  const log = await replayLog(con, tableDir);
  const notes = [...log.notes];
  const refuse = mustRefuse(log.protocol);
  if (refuse) return { refuse, notes, log };

  const md = log.metaData;
  const schema = JSON.parse(md.schemaString);
  const conf = md.configuration || {};
  const partitionCols = md.partitionColumns || [];
  const pr = log.protocol;
  const cmHonoured =
    Number(pr.minReaderVersion) === 2 || (Number(pr.minReaderVersion) === 3 && (pr.readerFeatures || []).includes('columnMapping'));
  const cmMode = cmHonoured ? conf['delta.columnMapping.mode'] || 'none' : 'none';
  if (cmMode === 'id') notes.push('column mapping mode id: columns resolved by physical name');
  const physical = (f) => (cmMode !== 'none' && f.metadata?.['delta.columnMapping.physicalName']) || f.name;

  const fields = schema.fields.map((f) => ({ name: f.name, type: f.type, physical: physical(f) }));
  // Nested fields of a column-mapped table have physical names too; they are not resolved here
  // (stoke does not read column mapping yet), so such nested columns are not compared.
  const nestedMapped = (f) => isNested(f.type) && cmMode !== 'none';
  const compared = fields.filter((f) => isCompared(f.type) && !nestedMapped(f));
  const skipped = fields.filter((f) => !compared.includes(f)).map((f) => f.name);
  if (fields.some(nestedMapped)) notes.push('column mapping: nested columns not compared (nested physical names not resolved)');
  const isPartition = (f) => partitionCols.includes(f.name);

  // Live files, their partition values and deletion vectors.
  const files = log.adds.map((a) => ({
    full: resolveDataPath(tableDir, a.path),
    pv: a.partitionValues || {},
    dv: a.deletionVector || null,
    numRecords: numRecordsOf(a),
  }));
  // Some tables of the corpus are logs only (their data files were not kept): then only what the
  // log says can be checked, the count where every live file has numRecords.
  const absent = files.filter((f) => !fs.existsSync(f.full));
  if (absent.length > 0) {
    notes.push(`log only: ${absent.length} of ${files.length} live data files are not in the corpus (e.g. ${path.relative(tableDir, absent[0].full)})`);
    const stats = files.every((f) => f.numRecords != null);
    const statsCount = stats ? files.reduce((n, f) => n + f.numRecords - Number(f.dv?.cardinality || 0), 0) : null;
    return { logOnly: true, statsCount, compared, skipped, notes, log, files };
  }

  let deleted = new Map(); // full path -> row indexes
  let valuesChecked = true;
  let dvCardinality = 0;
  for (const f of files.filter((x) => x.dv)) {
    dvCardinality += Number(f.dv.cardinality || 0);
    try {
      deleted.set(f.full, readDeletionVector(tableDir, f.dv));
    } catch (e) {
      valuesChecked = false;
      notes.push(`deletion vector of ${path.basename(f.full)} not decoded (${firstLine(e.message)}): values not independently checked`);
    }
  }
  if (!valuesChecked) deleted = new Map();

  if (files.length === 0) return { count: 0, rows: [], compared, skipped, notes, log, valuesChecked: true, files };

  const opts = `union_by_name = true, hive_partitioning = false, filename = '__stoke_file', file_row_number = true`;
  const src = `read_parquet(${sqlList(files.map((f) => f.full))}, ${opts})`;
  // Physical row counts per file, checked against stats.
  const counts = new Map(
    (await queryRows(con, `SELECT __stoke_file AS f, count(*) AS n FROM ${src} GROUP BY ALL`)).map((r) => [r.f, num(r.n)]),
  );
  let count = 0;
  for (const f of files) {
    const n = counts.get(f.full) ?? 0;
    if (f.numRecords != null && f.numRecords !== n) notes.push(`${path.basename(f.full)}: ${n} rows, stats say numRecords ${f.numRecords}`);
    count += n - (f.dv ? (valuesChecked ? deleted.get(f.full).length : Number(f.dv.cardinality || 0)) : 0);
  }
  if (!valuesChecked) return { count, rows: null, compared, skipped, notes, log, valuesChecked, files, dvCardinality };

  // Rows: data columns from the files, partition columns from the log.
  const described = new Map(
    (await queryRows(con, `DESCRIBE SELECT * FROM ${src}`)).map((r) => [r.column_name.toLowerCase(), r.column_type]),
  );
  let duckTypes = new Map(); // nested columns: DuckDB's type of each, as a columnTypesJson entry
  if (compared.some((f) => isNested(f.type) && !isPartition(f))) {
    const r = await con.runAndReadAll(`SELECT * FROM ${src} LIMIT 0`);
    const ts = r.columnTypesJson();
    duckTypes = new Map(r.columnNames().map((c, i) => [c.toLowerCase(), ts[i]]));
  }
  const withFile = compared.some(isPartition); // the file name is fetched only where it is needed
  const exprs = withFile ? ['__stoke_file'] : ['NULL'];
  for (const f of compared) {
    if (isPartition(f)) continue;
    const t = described.get(f.physical.toLowerCase());
    const col = `"${f.physical.replaceAll('"', '""')}"`;
    if (t === undefined) exprs.push('NULL');
    else if (isNested(f.type)) exprs.push(duckNestedExpr(f.type, col, duckTypes.get(f.physical.toLowerCase())));
    else exprs.push(duckExpr(f.type, col, t));
  }
  let where = '';
  const dvFiles = [...deleted.entries()].filter(([, rows]) => rows.length > 0);
  if (dvFiles.length > 0) {
    where = `WHERE NOT (${dvFiles
      .map(([file, rows]) => `(__stoke_file = ${sqlStr(file)} AND file_row_number IN (${rows.join(', ')}))`)
      .join(' OR ')})`;
  }
  const result = await con.runAndReadAll(`SELECT ${exprs.join(', ')} FROM ${src} ${where}`);
  const byFile = new Map(files.map((f) => [f.full, f]));
  const pvPhysical = (file, f) => {
    const pv = byFile.get(file).pv;
    return f.physical in pv ? pv[f.physical] : pv[f.name];
  };
  const columns = result.getColumnsJS(); // much faster than row by row
  const n = result.currentRowCount;
  const cells = [];
  let k = 1;
  for (const f of compared) {
    if (isPartition(f)) {
      const memo = new Map(); // by file
      cells.push(columns[0].map((file) => {
        if (!memo.has(file)) memo.set(file, canonPartition(f.type, pvPhysical(file, f)));
        return memo.get(file);
      }));
    } else {
      cells.push(columns[k++].map((v) => canonDuck(f.type, v)));
    }
  }
  const rows = new Array(n);
  for (let r = 0; r < n; r++) rows[r] = JSON.stringify(cells.map((c) => c[r]));
  if (rows.length !== count) throw new Error(`replay: ${rows.length} rows read, ${count} counted`);
  return { count, rows, compared, skipped, notes, log, valuesChecked, files };
}

// ---------------------------------------------------------------------------
// stoke's view of one table, compared

export function runStokeQuery(stoke, tableDir, extra) {
  const r = spawnSync(stoke, ['--no-progress', 'query', tableDir, ...extra], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    timeout: STOKE_TIMEOUT_MS,
  });
  if (r.error) return { error: `cannot run stoke: ${r.error.message}`, crashed: true };
  if (r.status !== 0 || r.signal) {
    // The error line (stoke may log warnings before it).
    const lines = String(r.stderr || '').split('\n').map((l) => l.trim()).filter((l) => l.length > 0);
    const message = lines.find((l) => /^stoke: error/.test(l)) || lines.at(-1) || firstLine(r.stdout);
    return {
      error: `stoke query ${extra.join(' ')} failed (status ${r.status}${r.signal ? `, ${r.signal}` : ''}): ${message}`,
      crashed: Boolean(r.signal), // a crash is never a refusal
    };
  }
  return { stdout: r.stdout };
}


// -> {ok, reason, notes}
export async function checkTable(con, stoke, tableDir) {
  let exp;
  try {
    exp = await expectedState(con, tableDir);
  } catch (e) {
    return { ok: false, reason: `independent replay failed: ${firstLine(e.message)}`, notes: [], replayError: true };
  }
  const notes = exp.notes;
  const cp = exp.log.checkpoint ? `checkpoint ${exp.log.checkpoint.version} (${exp.log.checkpoint.kind})` : 'no checkpoint';
  notes.unshift(
    exp.refuse
      ? `version ${exp.log.version}, ${cp}: a reader must refuse it (${exp.refuse})`
      : `version ${exp.log.version}, ${cp}, ${exp.files.length} live files${exp.logOnly ? '' : `, ${exp.count} rows expected`}`,
  );
  if (exp.refuse) {
    const r = runStokeQuery(stoke, tableDir, ['--count']);
    if (r.error && !r.crashed) return { ok: true, notes: [...notes, `refused as it must (${exp.refuse}): ${r.error}`], refused: true };
    if (r.error) return { ok: false, reason: r.error, notes };
    return { ok: false, reason: `stoke read it (count ${r.stdout.trim()}), but a reader must refuse it: ${exp.refuse}`, notes };
  }
  if (exp.logOnly) {
    // stoke's count may come from the log's statistics; rows cannot be read.
    const c = runStokeQuery(stoke, tableDir, ['--count']);
    if (exp.statsCount != null) {
      if (c.error) return { ok: false, reason: c.error, notes };
      if (c.stdout.trim() !== String(exp.statsCount)) return { ok: false, reason: `count: stoke ${c.stdout.trim()}, the log's numRecords give ${exp.statsCount}`, notes };
      notes[0] += `, ${exp.statsCount} rows by the log's numRecords`;
    } else if (!c.error) {
      return { ok: false, reason: `count: stoke printed ${c.stdout.trim()}, but data files are absent and the log has no numRecords for them`, notes };
    } else if (c.crashed) {
      return { ok: false, reason: c.error, notes };
    }
    const j = runStokeQuery(stoke, tableDir, ['--format', 'json', '--limit', '-1']);
    if (j.crashed) return { ok: false, reason: j.error, notes };
    if (!j.error) return { ok: false, reason: `stoke printed ${parseJsonLines(j.stdout).length} rows, but live data files are absent`, notes };
    notes.push(`stoke reports the absent files: ${j.error}`);
    return { ok: true, notes };
  }
  const c = runStokeQuery(stoke, tableDir, ['--count']);
  if (c.error) return { ok: false, reason: c.error, notes };
  const stokeCount = c.stdout.trim();
  if (stokeCount !== String(exp.count)) return { ok: false, reason: `count: stoke ${stokeCount}, expected ${exp.count}`, notes };

  const j = runStokeQuery(stoke, tableDir, ['--format', 'json', '--limit', '-1']);
  if (j.error) return { ok: false, reason: j.error, notes };
  let got;
  try {
    got = parseJsonLines(j.stdout);
  } catch (e) {
    return { ok: false, reason: `stoke's JSON unreadable: ${e.message}`, notes };
  }
  if (got.length !== exp.count) return { ok: false, reason: `json rows: stoke printed ${got.length}, expected ${exp.count}`, notes };
  if (exp.skipped.length) notes.push(`not compared (variant or other types): ${exp.skipped.join(', ')}`);
  if (!exp.valuesChecked) return { ok: true, notes, valuesUnchecked: true };

  if (got.length > 0) {
    const missingCols = exp.compared.filter((f) => !(f.name in got[0])).map((f) => f.name);
    if (missingCols.length) {
      return { ok: false, reason: `stoke's rows lack column${missingCols.length > 1 ? 's' : ''} ${missingCols.join(', ')} (it printed: ${Object.keys(got[0]).join(', ')})`, notes };
    }
  }
  const names = exp.compared.map((f) => f.name);
  const types = exp.compared.map((f) => f.type);
  const actual = got.map((row) => JSON.stringify(names.map((name, i) => canonStoke(types[i], row[name]))));
  const expected = exp.rows;
  actual.sort();
  expected.sort();
  if (actual.length === expected.length && actual.every((r, i) => r === expected[i])) return { ok: true, notes };
  const { missing, extra } = multisetDiff(expected, actual);
  const columnList = JSON.stringify(names);
  // Name the columns that differ in the first pair.
  let cols = '';
  if (missing.length && extra.length) {
    const a = JSON.parse(missing[0]);
    const b = JSON.parse(extra[0]);
    const diff = exp.compared.filter((f, i) => JSON.stringify(a[i]) !== JSON.stringify(b[i])).map((f) => f.name);
    cols = ` (e.g. column${diff.length > 1 ? 's' : ''} ${diff.join(', ')})`;
  }
  return {
    ok: false,
    reason: `values: ${missing.length} expected rows not printed by stoke, ${extra.length} printed rows not expected${cols}; ` +
      `columns ${columnList}; expected e.g. ${missing[0] ?? '-'}, stoke printed e.g. ${extra[0] ?? '-'}`,
    notes,
  };
}
