// Regenerates the DuckDB-written fixtures read by src/format/parquet_nested_test.cc:
//   cd tests/interop && npm ci && cp ../data/duckdb/generate.mjs . && node generate.mjs ../data/duckdb
// (run from tests/interop so that @duckdb/node-api resolves), then copy the printed rows into
// checkpoint.expected.jsonl and lists.expected.jsonl.
import { DuckDBInstance } from '@duckdb/node-api';
const out = process.argv[2];
const duck = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await duck.connect();
await con.run(`CREATE TABLE cp (
  txn STRUCT(appId VARCHAR, version BIGINT, lastUpdated BIGINT),
  add STRUCT(path VARCHAR, partitionValues MAP(VARCHAR, VARCHAR), size BIGINT, modificationTime BIGINT,
             dataChange BOOLEAN, stats VARCHAR, tags MAP(VARCHAR, VARCHAR)),
  remove STRUCT(path VARCHAR, deletionTimestamp BIGINT, dataChange BOOLEAN, extendedFileMetadata BOOLEAN,
                partitionValues MAP(VARCHAR, VARCHAR), size BIGINT),
  metaData STRUCT(id VARCHAR, name VARCHAR, description VARCHAR,
                  format STRUCT(provider VARCHAR, options MAP(VARCHAR, VARCHAR)),
                  schemaString VARCHAR, partitionColumns VARCHAR[], configuration MAP(VARCHAR, VARCHAR),
                  createdTime BIGINT),
  protocol STRUCT(minReaderVersion INTEGER, minWriterVersion INTEGER, readerFeatures VARCHAR[], writerFeatures VARCHAR[])
)`);
await con.run(`INSERT INTO cp (protocol) VALUES ({'minReaderVersion': 1, 'minWriterVersion': 2, 'readerFeatures': NULL, 'writerFeatures': []})`);
await con.run(`INSERT INTO cp (metaData) VALUES ({'id': 'abc-123', 'name': NULL, 'description': NULL,
  'format': {'provider': 'parquet', 'options': MAP {}},
  'schemaString': '{"type":"struct","fields":[]}', 'partitionColumns': ['split'],
  'configuration': MAP {'stoke.tensors': '{"volume":{"dtype":"float32","shape":[2]}}', 'empty': NULL},
  'createdTime': 1700000000000})`);
await con.run(`INSERT INTO cp (add) VALUES ({'path': 'split=train/part-0.parquet', 'partitionValues': MAP {'split': 'train'},
  'size': 10, 'modificationTime': 1700000000001, 'dataChange': true, 'stats': '{"numRecords":5}', 'tags': MAP {'a': 'b', 'c': NULL}})`);
await con.run(`INSERT INTO cp (add) VALUES ({'path': 'part-1.parquet', 'partitionValues': MAP {},
  'size': 20, 'modificationTime': 1700000000002, 'dataChange': false, 'stats': NULL, 'tags': NULL})`);
await con.run(`INSERT INTO cp (remove) VALUES ({'path': 'old.parquet', 'deletionTimestamp': 1700000000003, 'dataChange': true,
  'extendedFileMetadata': false, 'partitionValues': NULL, 'size': NULL})`);
await con.run(`INSERT INTO cp (txn) VALUES ({'appId': 'app', 'version': 3, 'lastUpdated': NULL})`);
await con.run(`COPY cp TO '${out}/checkpoint.parquet' (FORMAT parquet, COMPRESSION zstd)`);

await con.run(`CREATE TABLE l (id INTEGER, ints INTEGER[], strs VARCHAR[], nested INTEGER[][],
  recs STRUCT(a INTEGER, tags VARCHAR[])[])`);
await con.run(`INSERT INTO l VALUES
  (1, [1, 2, 3], ['x', NULL, 'z'], [[1], [], NULL, [2, 3]], [{'a': 1, 'tags': ['t']}, NULL, {'a': NULL, 'tags': []}]),
  (2, [], [], [], []),
  (3, NULL, NULL, NULL, NULL),
  (4, [NULL], [''], [[NULL]], [{'a': 4, 'tags': NULL}])`);
await con.run(`COPY l TO '${out}/lists.parquet' (FORMAT parquet, COMPRESSION snappy)`);
for (const f of ['checkpoint', 'lists']) {
  const r = await con.runAndReadAll(`SELECT to_json(t) AS j FROM read_parquet('${out}/${f}.parquet') t`);
  for (const row of r.getRows()) console.log(f, row[0]);
}
