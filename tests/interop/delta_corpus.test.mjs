// Conformance of `stoke query` on real Delta tables that Spark, Databricks and delta-rs wrote: the
// corpus in <repo>/../shared/corpus/delta-rs (see its README; $STOKE_DELTA_CORPUS overrides the
// folder). A user's fresh clone has no ../shared: the test then skips, saying so.
//
//   node --test tests/interop/delta_corpus.test.mjs
//
// Every directory with a _delta_log, up to two levels below the corpus root, is a table. For each,
// the expected snapshot is computed here, independently of stoke, by the Delta protocol:
//
//   - the log is listed; the checkpoint is the newest complete one (classic, multi-part with all
//     its parts, or UUID-named v2 in JSON or Parquet with its sidecars in _delta_log/_sidecars).
//     _last_checkpoint is only a hint that points near the end of the log: the protocol has readers
//     list for newer checkpoints and commits after it, so a stale or missing _last_checkpoint (a
//     failed update) changes nothing. A checkpoint that cannot be read falls back to an older one.
//     Checkpoints (and sidecars) are read with DuckDB's read_parquet;
//   - the JSON commits after the checkpoint are replayed in order; logical files are keyed by
//     (URI-decoded path, deletion vector unique id): add sets, remove deletes. The last protocol
//     and metaData win. Where commit 0 is still there, a replay from commit 0 without checkpoints
//     is made as well, and any difference in the live files is printed (a check of the replay);
//   - a protocol with minReaderVersion > 3 or a reader feature the protocol does not define makes
//     the table one a reader must refuse: stoke must then fail on it;
//   - the expected rows are DuckDB's rows of the live files (read_parquet([...], union_by_name,
//     no hive partitioning)), partition columns from each add's partitionValues (an empty string or
//     null is a null value; timestamps without a zone are read as UTC), columns resolved by
//     `delta.columnMapping.physicalName` when column mapping is on (`id` mode resolved by the
//     physical name as well). Deletion vectors (inline, or in a file beside the data) are decoded
//     here (Z85, RoaringBitmapArray, as PROTOCOL.md describes them) and checked against their
//     cardinality; where one cannot be decoded, only the count (physical rows minus cardinality) is
//     checked and the table's values are reported as not independently checked.
//   - some tables of the corpus are logs only (their data files were not kept): for them stoke's
//     count must equal the sum of the live files' numRecords (minus DV cardinalities) where every
//     live file has it (and must be an error where not), and reading the rows must fail.
//
// stoke is run as `stoke query <table> --count` and `stoke query <table> --format json`. Compared:
// the count, and the multiset of rows over the top-level columns of these types and of the nested
// types built of them (both sides normalised to one canonical value per cell, null stays null; rows
// compared as sorted canonical JSON). A leaf (a top-level cell, or a value at any depth inside a
// nested one) is normalised by its Delta type to one canonical string:
//   byte/short/integer/long  decimal integer text (exact: stoke's JSON is parsed without doubles)
//   float                    the float's value (Math.fround of both sides), as JS prints it;
//                            NaN / Infinity / -Infinity / -0 spelled like that ("nan", "inf" and
//                            "-inf" strings from stoke are read as those)
//   double                   the double's value, as JS prints it, same special values
//   decimal(p,s)             exact text with s fraction digits ("-1.50000"); a JSON number from
//                            stoke is taken as the value itself, not as an unscaled integer
//   boolean                  "true" / "false"
//   string                   the string
//   binary                   "md5:<hex> len:<bytes>" (how stoke prints binary cells)
//   date                     "YYYY-MM-DD" (proleptic Gregorian); a JSON integer from stoke is days
//                            since 1970-01-01, a string is parsed as a date
//   timestamp, timestamp_ntz microseconds since the epoch; a JSON integer from stoke is taken as
//                            microseconds, a string is parsed (ISO 8601, ' ' or 'T', optional
//                            fraction and zone; no zone = UTC)
// Nested columns are normalised recursively by the Delta schema's type (metaData.schemaString):
//   struct                   an object of its fields, each normalised by the field's type; the
//                            fields are compared as a set of keys (their order does not matter, a
//                            missing or extra field does); a null struct is null
//   array                    an array of its elements, each normalised by the element type
//   map                      an object keyed by the canonical text of each key (normalised by the
//                            key type; a nested key as its canonical JSON), values by the value
//                            type; entry order does not matter. stoke keys its JSON objects by the
//                            key's text, a non-string key as its JSON text ("1"), which is parsed
//                            back before normalising (bare text where it is not JSON: a date key)
// The expected nested values come from DuckDB, rebuilt in SQL with every leaf converted as above
// (struct_pack by the schema's field order, a field the file lacks being null; list_transform;
// a map as a list of key/value structs), so that no decimal, int64 or timestamp goes through a
// double. Nested fields of column-mapped tables keep physical names that are not resolved here:
// there nested columns are not compared. Variant columns (and nested types holding them) are not
// compared.
//
// tests/interop/delta_corpus_known_failures.json maps table -> why stoke does not read it yet. A
// table that fails and is not listed fails the test; so does a listed table that now passes.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { useStokeAndDuckDB } from './support.mjs';
import { checkTable, findTables } from './delta_reader.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const STOKE_SRC = process.env.STOKE_BIN || path.join(REPO, 'build', 'stoke');
const CORPUS = process.env.STOKE_DELTA_CORPUS || path.resolve(REPO, '..', 'shared', 'corpus', 'delta-rs');
const KNOWN_FAILURES_FILE = path.join(HERE, 'delta_corpus_known_failures.json');

const HAVE_CORPUS = fs.existsSync(CORPUS);
const SKIP_MESSAGE = `no Delta corpus at ${CORPUS} (a fresh clone has no ../shared; CI has it): delta corpus conformance skipped`;
if (!HAVE_CORPUS) console.log(SKIP_MESSAGE);

// ---------------------------------------------------------------------------

describe('stoke reads the Delta tables of the shared corpus', { skip: !HAVE_CORPUS && SKIP_MESSAGE }, () => {
  let TMP;
  let STOKE;
  let duck;
  let con;
  const tables = HAVE_CORPUS ? findTables(CORPUS) : [];
  const known = fs.existsSync(KNOWN_FAILURES_FILE) ? JSON.parse(fs.readFileSync(KNOWN_FAILURES_FILE, 'utf8')) : {};
  const summary = { tables: tables.length, correct: 0, knownFailures: 0, unexpected: [] };

  useStokeAndDuckDB('stoke-delta-corpus-', STOKE_SRC, (env) => ({ tmp: TMP, stoke: STOKE, duck, con } = env));

  after(() => {
    const line = `delta corpus: ${summary.tables} tables, ${summary.correct} read correctly, ${summary.knownFailures} known failures` +
      (summary.unexpected.length ? `, ${summary.unexpected.length} unexpected: ${summary.unexpected.join(', ')}` : '');
    console.log(line);
  });

  test('the known-failures list names only tables of the corpus, each with a reason', () => {
    for (const [name, reason] of Object.entries(known)) {
      assert.ok(tables.includes(name), `${name} is listed in delta_corpus_known_failures.json but is not a table of the corpus`);
      assert.ok(typeof reason === 'string' && reason.trim().length > 0, `${name}: give a reason`);
    }
  });

  for (const name of tables) {
    test(name, async (t) => {
      const r = await checkTable(con, STOKE, path.join(CORPUS, name));
      for (const n of r.notes) t.diagnostic(n);
      if (r.valuesUnchecked) t.diagnostic('values not independently checked (deletion vectors not decoded): count only');
      if (name in known) {
        if (r.ok) {
          summary.unexpected.push(name);
          assert.fail(`${name} now passes: remove it from delta_corpus_known_failures.json`);
        }
        summary.knownFailures++;
        t.diagnostic(`known failure (${known[name]}): ${r.reason}`);
        return;
      }
      if (!r.ok) {
        summary.unexpected.push(name);
        assert.fail(`${name}: ${r.reason}`);
      }
      summary.correct++;
    });
  }
});
