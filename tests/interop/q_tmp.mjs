import { DuckDBInstance } from '@duckdb/node-api';
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
for (const f of process.argv.slice(2)) {
  const r = await con.runAndReadAll(`SELECT add.path, to_json(add.stats_parsed) s FROM read_parquet('${f}') WHERE add IS NOT NULL ORDER BY 1`);
  for (const row of r.getRows()) console.log(f.slice(-20), row.map(String).join(' | '));
}
