// Canonical cell values shared by the conformance tests over other systems' files (the Delta and
// Parquet corpora): stoke's JSON, parsed exactly, and DuckDB's values, rebuilt in SQL, are both
// normalised to one canonical value per cell by a Delta-style type (a type name such as 'long' or
// 'decimal(9,2)', or a nested {type: 'struct' | 'array' | 'map', ...} object). The canonical forms
// are described at the top of delta_corpus.test.mjs.

// ---------------------------------------------------------------------------
// Small helpers

export const num = (v) => (typeof v === 'bigint' ? Number(v) : v);
export const firstLine = (s) =>
  String(s || '')
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.length > 0) || '';

// ---------------------------------------------------------------------------
// Exact JSON: numbers keep their text (stoke prints int64 values that doubles cannot hold).

export class Num {
  constructor(text) {
    this.text = text;
  }
}

export function parseJsonExact(s) {
  let i = 0;
  const ws = () => {
    while (i < s.length && (s[i] === ' ' || s[i] === '\n' || s[i] === '\r' || s[i] === '\t')) i++;
  };
  const value = () => {
    ws();
    const c = s[i];
    if (c === '{') {
      i++;
      const o = {};
      ws();
      if (s[i] === '}') {
        i++;
        return o;
      }
      for (;;) {
        ws();
        const k = str();
        ws();
        if (s[i++] !== ':') throw new Error(`JSON: ':' expected at ${i - 1}`);
        o[k] = value();
        ws();
        const d = s[i++];
        if (d === '}') return o;
        if (d !== ',') throw new Error(`JSON: ',' or '}' expected at ${i - 1}`);
      }
    }
    if (c === '[') {
      i++;
      const a = [];
      ws();
      if (s[i] === ']') {
        i++;
        return a;
      }
      for (;;) {
        a.push(value());
        ws();
        const d = s[i++];
        if (d === ']') return a;
        if (d !== ',') throw new Error(`JSON: ',' or ']' expected at ${i - 1}`);
      }
    }
    if (c === '"') return str();
    if (s.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (s.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (s.startsWith('null', i)) {
      i += 4;
      return null;
    }
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(s.slice(i, i + 64));
    if (!m) throw new Error(`JSON: unexpected ${JSON.stringify(s.slice(i, i + 10))} at ${i}`);
    i += m[0].length;
    return new Num(m[0]);
  };
  const str = () => {
    if (s[i] !== '"') throw new Error(`JSON: string expected at ${i}`);
    let j = i + 1;
    let escaped = false;
    for (; j < s.length; j++) {
      if (s[j] === '\\') {
        escaped = true;
        j++;
      } else if (s[j] === '"') break;
    }
    const raw = s.slice(i, j + 1);
    i = j + 1;
    return escaped ? JSON.parse(raw) : raw.slice(1, -1);
  };
  const v = value();
  ws();
  if (i !== s.length) throw new Error(`JSON: trailing text at ${i}`);
  return v;
}

// stoke's JSON lines: JSON.parse where no number can lose digits, else the exact parser.
export function parseJsonLines(text) {
  const lines = text.split('\n').filter((l) => l.length > 0);
  const exact = /\d{16,}/.test(text);
  return lines.map((l) => (exact ? parseJsonExact(l) : JSON.parse(l)));
}

// ---------------------------------------------------------------------------
// Canonical cell values (see the table at the top of the file)

export const INTEGER_TYPES = new Set(['byte', 'short', 'integer', 'long']);
export const SIMPLE_TYPES = new Set([...INTEGER_TYPES, 'float', 'double', 'boolean', 'string', 'binary', 'date', 'timestamp', 'timestamp_ntz']);
export const isLeafType = (type) => typeof type === 'string' && (SIMPLE_TYPES.has(type) || /^decimal\(\d+,\s*\d+\)$/.test(type));
export const isNested = (type) => type !== null && typeof type === 'object';
// A type is compared where it is a leaf type above, or a struct, array or map of compared types.
export function isCompared(type) {
  if (isLeafType(type)) return true;
  if (!isNested(type)) return false;
  if (type.type === 'struct') return Array.isArray(type.fields) && type.fields.length > 0 && type.fields.every((f) => isCompared(f.type));
  if (type.type === 'array') return isCompared(type.elementType);
  if (type.type === 'map') return isCompared(type.keyType) && isCompared(type.valueType);
  return false;
}
export const typeText = (type) => (typeof type === 'string' ? type : JSON.stringify(type));
export const decimalScale = (type) => Number(/^decimal\(\d+,\s*(\d+)\)$/.exec(type)[1]);

export function canonNumber(x, float32) {
  if (typeof x !== 'number') return `?${String(x)}`;
  const v = float32 ? Math.fround(x) : x;
  if (Object.is(v, -0)) return '-0';
  return String(v);
}

export function canonDecimal(text, scale) {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?$/.exec(String(text).trim());
  if (!m || (m[2] === '' && !m[3])) {
    // Exponent notation (a JSON number): go through BigInt arithmetic on the exact text.
    const e = /^([+-]?)(\d+)(?:\.(\d+))?[eE]([+-]?\d+)$/.exec(String(text).trim());
    if (!e) return `?${text}`;
    const digits = e[2] + (e[3] || '');
    const exp = Number(e[4]) - (e[3] || '').length; // value = digits * 10^exp
    const shift = exp + scale;
    if (shift < 0) return `?${text}`;
    const unscaled = BigInt(digits) * 10n ** BigInt(shift);
    return canonDecimalUnscaled((e[1] === '-' ? -1n : 1n) * unscaled, scale);
  }
  const sign = m[1] === '-' ? '-' : '';
  const int = m[2].replace(/^0+(?=\d)/, '') || '0';
  let frac = m[3] || '';
  if (frac.length > scale) {
    if (/^0*$/.test(frac.slice(scale))) frac = frac.slice(0, scale);
    else return `?${text}`; // more digits than the scale holds: a value of another type
  }
  frac = frac.padEnd(scale, '0');
  const zero = /^0*$/.test(int + frac);
  return `${zero ? '' : sign}${int}${scale > 0 ? `.${frac}` : ''}`;
}

export function canonDecimalUnscaled(unscaled, scale) {
  const neg = unscaled < 0n;
  let digits = (neg ? -unscaled : unscaled).toString().padStart(scale + 1, '0');
  const int = digits.slice(0, digits.length - scale);
  const frac = digits.slice(digits.length - scale);
  return `${neg ? '-' : ''}${int}${scale > 0 ? `.${frac}` : ''}`;
}

// Days since 1970-01-01 <-> civil date (proleptic Gregorian; H. Hinnant's algorithms).
export function daysFromCivil(y, m, d) {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

export function civilFromDays(z) {
  z += 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp + (mp < 10 ? 3 : -9);
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}

export function isoDate(days) {
  const [y, m, d] = civilFromDays(days);
  const ys = y < 0 ? `-${String(-y).padStart(4, '0')}` : String(y).padStart(4, '0');
  return `${ys}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
}

export const DATE_RE = /^([+-]?\d{4,})-(\d{1,2})-(\d{1,2})/;

export function canonDateText(text) {
  const m = DATE_RE.exec(String(text).trim());
  if (!m) return `?${text}`;
  return isoDate(daysFromCivil(Number(m[1]), Number(m[2]), Number(m[3])));
}

// Microseconds since the epoch (as decimal text) of an ISO-8601-like timestamp; no zone = UTC.
export function timestampTextToMicros(text) {
  const m =
    /^([+-]?\d{4,})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?\s*(Z|UTC|[+-]\d{2}(?::?\d{2})?)?$/i.exec(
      String(text).trim(),
    );
  if (!m) return `?${text}`;
  const days = BigInt(daysFromCivil(Number(m[1]), Number(m[2]), Number(m[3])));
  const secs = BigInt(Number(m[4] || 0) * 3600 + Number(m[5] || 0) * 60 + Number(m[6] || 0));
  const micros = BigInt((m[7] || '').padEnd(6, '0').slice(0, 6) || '0');
  let offset = 0n;
  if (m[8] && !/^(Z|UTC)$/i.test(m[8])) {
    const z = /^([+-])(\d{2}):?(\d{2})?$/.exec(m[8]);
    offset = BigInt((Number(z[2]) * 60 + Number(z[3] || 0)) * 60) * (z[1] === '-' ? -1n : 1n);
  }
  return ((days * 86400n + secs - offset) * 1_000_000n + micros).toString();
}

// A number's text; -0 keeps its sign (String(-0) is "0").
export const numText = (v) => (v instanceof Num ? v.text : Object.is(v, -0) ? '-0' : String(v));

// A cell as stoke printed it -> canonical.
export function canonStoke(type, v) {
  if (v === null || v === undefined) return null;
  if (isNested(type)) return canonStokeNested(type, v);
  if (INTEGER_TYPES.has(type)) {
    const t = numText(v);
    return /^-?\d+$/.test(t) ? BigInt(t).toString() : `?${t}`;
  }
  if (type === 'float' || type === 'double') {
    let x;
    if (typeof v === 'string') {
      const special = { nan: NaN, inf: Infinity, '-inf': -Infinity, '+inf': Infinity };
      x = v.toLowerCase() in special ? special[v.toLowerCase()] : Number(v);
    } else x = Number(numText(v));
    return canonNumber(x, type === 'float');
  }
  if (type === 'boolean') {
    if (typeof v === 'boolean') return String(v);
    return `?${numText(v)}`;
  }
  if (type === 'string' || type === 'binary') return typeof v === 'string' ? v : `?${JSON.stringify(v)}`;
  if (type === 'date') {
    if (typeof v === 'string') return canonDateText(v);
    const t = numText(v);
    return /^-?\d+$/.test(t) ? isoDate(Number(t)) : `?${t}`;
  }
  if (type === 'timestamp' || type === 'timestamp_ntz') {
    if (typeof v === 'string') return timestampTextToMicros(v);
    const t = numText(v);
    return /^-?\d+$/.test(t) ? BigInt(t).toString() : `?${t}`;
  }
  if (type.startsWith('decimal')) return canonDecimal(numText(v), decimalScale(type));
  return `?${String(v)}`;
}

// Nested values, canonical: a struct is an object of its fields (keys inserted sorted, so that the
// field order does not matter and a missing or extra field does), an array an array, a map an
// object keyed by the canonical text of each key (sorted); leaves canonical as above.
export function sortedObject(entries) {
  const o = {};
  for (const [k, v] of [...entries].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) {
    Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true }); // "__proto__" too
  }
  return o;
}

export const mapKeyText = (canon) => (typeof canon === 'string' ? canon : JSON.stringify(canon));
export const isJsonObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Num);
export const badValue = (v) => `?${JSON.stringify(v, (k, x) => (x instanceof Num ? x.text : x))}`;

export function canonStokeNested(type, v) {
  if (v === null || v === undefined) return null;
  if (!isNested(type)) return canonStoke(type, v);
  if (type.type === 'struct') {
    if (!isJsonObject(v)) return badValue(v);
    const fields = new Map(type.fields.map((f) => [f.name, f.type]));
    return sortedObject(Object.keys(v).map((k) => [k, fields.has(k) ? canonStokeNested(fields.get(k), v[k]) : `?field not in the schema: ${badValue(v[k])}`]));
  }
  if (type.type === 'array') return Array.isArray(v) ? v.map((e) => canonStokeNested(type.elementType, e)) : badValue(v);
  if (type.type === 'map') {
    if (!isJsonObject(v)) return badValue(v);
    return sortedObject(Object.keys(v).map((k) => [mapKeyText(canonStokeNested(type.keyType, stokeMapKey(type.keyType, k))), canonStokeNested(type.valueType, v[k])]));
  }
  return badValue(v);
}

// stoke keys a map by the key's text: a string key as itself, any other as its JSON text (a date or
// timestamp key may come as the bare text or as the JSON string).
export function stokeMapKey(keyType, text) {
  if (keyType === 'string') return text;
  try {
    return parseJsonExact(text);
  } catch {
    return text;
  }
}


// DuckDB: SQL for a data file column of the given Delta type (duckType: what DuckDB reads), and
// its JS value -> canonical.
export function duckExpr(type, col, duckType) {
  const blob = duckType === 'BLOB';
  // Integers as DuckDB read them (fetching numbers is much faster than fetching text).
  if (INTEGER_TYPES.has(type)) return /^U?(TINYINT|SMALLINT|INTEGER|BIGINT)$/.test(duckType) ? col : `CAST(${col} AS VARCHAR)`;
  if (type === 'float') return `CAST(${col} AS FLOAT)`;
  if (type === 'double') return `CAST(${col} AS DOUBLE)`;
  if (type === 'boolean') return `CAST(${col} AS BOOLEAN)`;
  if (type === 'string') return blob ? `decode(${col})` : `CAST(${col} AS VARCHAR)`;
  if (type === 'binary') {
    const b = blob ? col : `encode(CAST(${col} AS VARCHAR))`;
    return `'md5:' || md5(${b}) || ' len:' || octet_length(${b})`;
  }
  if (type === 'date') return `CAST(CAST(${col} AS DATE) - DATE '1970-01-01' AS INTEGER)`;
  if (type === 'timestamp' || type === 'timestamp_ntz') return `epoch_us(${col})`;
  if (type.startsWith('decimal')) return `CAST(CAST(${col} AS ${type.toUpperCase()}) AS VARCHAR)`;
  throw new Error(`no DuckDB expression for ${type}`);
}

export function canonDuck(type, v) {
  if (v === null || v === undefined) return null;
  if (isNested(type)) return canonDuckNested(type, v);
  if (type === 'float' || type === 'double') return canonNumber(v, type === 'float');
  if (type === 'boolean') return String(v);
  if (type === 'date') return isoDate(num(v));
  if (type.startsWith('decimal')) return canonDecimal(v, decimalScale(type));
  return String(v);
}

// Nested columns: DuckDB's value is rebuilt with every leaf converted by duckExpr (so that no
// decimal or timestamp goes through a double): a struct as struct_pack(f0 := ..., f1 := ...) by the
// Delta schema's field order (a field the file lacks is null), an array by list_transform, a map as
// a list of {k, v} structs. duck: DuckDB's type of the value (a columnTypesJson entry).
export const DUCK = { STRUCT: 25, LIST: 24, MAP: 26, ARRAY: 33 };
export const DUCK_LEAF_NAMES = {
  1: 'BOOLEAN', 2: 'TINYINT', 3: 'SMALLINT', 4: 'INTEGER', 5: 'BIGINT', 6: 'UTINYINT', 7: 'USMALLINT', 8: 'UINTEGER', 9: 'UBIGINT',
  17: 'VARCHAR', 18: 'BLOB',
};

export function duckNestedExpr(type, col, duck, depth = 0) {
  if (!isNested(type)) return duckExpr(type, col, DUCK_LEAF_NAMES[duck.typeId] ?? `typeId ${duck.typeId}`);
  const v = `__stoke_e${depth}`;
  if (type.type === 'struct') {
    if (duck.typeId !== DUCK.STRUCT) throw new Error(`a struct read by DuckDB as ${JSON.stringify(duck)}`);
    const names = duck.entryNames;
    const parts = type.fields.map((f, i) => {
      let j = names.indexOf(f.name);
      if (j < 0) j = names.findIndex((n) => n.toLowerCase() === f.name.toLowerCase());
      return `f${i} := ${j < 0 ? 'NULL' : duckNestedExpr(f.type, `struct_extract_at(${col}, ${j + 1})`, duck.entryTypes[j], depth)}`;
    });
    return `CASE WHEN ${col} IS NULL THEN NULL ELSE struct_pack(${parts.join(', ')}) END`;
  }
  if (type.type === 'array') {
    if (duck.typeId !== DUCK.LIST && duck.typeId !== DUCK.ARRAY) throw new Error(`an array read by DuckDB as ${JSON.stringify(duck)}`);
    return `list_transform(${col}, lambda ${v}: ${duckNestedExpr(type.elementType, v, duck.valueType, depth + 1)})`;
  }
  if (type.type === 'map') {
    let entries;
    let kv;
    if (duck.typeId === DUCK.MAP) {
      entries = `map_entries(${col})`;
      kv = [duck.keyType, duck.valueType];
    } else if (duck.typeId === DUCK.LIST && duck.valueType.typeId === DUCK.STRUCT && duck.valueType.entryNames.length === 2) {
      entries = col; // a map without its annotation: a list of key/value structs
      kv = duck.valueType.entryTypes;
    } else throw new Error(`a map read by DuckDB as ${JSON.stringify(duck)}`);
    const k = duckNestedExpr(type.keyType, `struct_extract_at(${v}, 1)`, kv[0], depth + 1);
    const val = duckNestedExpr(type.valueType, `struct_extract_at(${v}, 2)`, kv[1], depth + 1);
    return `list_transform(${entries}, lambda ${v}: struct_pack(k := ${k}, v := ${val}))`;
  }
  throw new Error(`no DuckDB expression for ${typeText(type)}`);
}

export function canonDuckNested(type, v) {
  if (v === null || v === undefined) return null;
  if (!isNested(type)) return canonDuck(type, v);
  if (type.type === 'struct') return sortedObject(type.fields.map((f, i) => [f.name, canonDuckNested(f.type, v[`f${i}`])]));
  if (type.type === 'array') return v.map((e) => canonDuckNested(type.elementType, e));
  if (type.type === 'map') return sortedObject(v.map((e) => [mapKeyText(canonDuckNested(type.keyType, e.k)), canonDuckNested(type.valueType, e.v)]));
  throw new Error(`no canonical value for ${typeText(type)}`);
}


// Rows (canonical JSON texts) expected but not printed, and printed but not expected.
export function multisetDiff(expected, actual) {
  const counts = new Map();
  for (const r of expected) counts.set(r, (counts.get(r) || 0) + 1);
  for (const r of actual) counts.set(r, (counts.get(r) || 0) - 1);
  const missing = [];
  const extra = [];
  for (const [r, n] of counts) {
    if (n > 0) missing.push(r);
    if (n < 0) extra.push(r);
  }
  return { missing, extra };
}
