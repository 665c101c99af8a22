// DuckDB's side of BenchmarkVsDuckDB (feed/duckdb_bench_test.go).
//
//   node duckdb-bench.mjs <node-prefix> write <dir> <rows> <kind>...
//     writes <dir>/<kind>.parquet for each kind and prints one JSON line
//     per file: {"kind", "path", "rows", "rowGroups", "bytes"}.
//   node duckdb-bench.mjs <node-prefix> scan <file> <threads> <reps>
//     scans the file with SET threads=<threads>, summing every column
//     (string columns: their lengths) so each value is decoded, once to
//     warm up and then <reps> times; prints {"rows", "seconds": [...]}.
//
// <node-prefix> is the npm prefix @duckdb/node-api was installed into.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { statSync } from 'node:fs';

const [prefix, op, ...args] = process.argv.slice(2);
const require = createRequire(join(prefix, 'package.json'));
const { DuckDBInstance } = require('@duckdb/node-api');

const features = 16;

function featureCols(nulls) {
  const cols = [];
  for (let j = 0; j < features; j++) {
    const v = `random()::FLOAT`;
    cols.push(nulls ? `CASE WHEN random() < 0.1 THEN NULL ELSE ${v} END AS f${j}` : `${v} AS f${j}`);
  }
  return cols;
}

// kinds: how each test file is written.
const kinds = {
  snappy: { codec: 'snappy' },
  zstd: { codec: 'zstd' },
  gzip: { codec: 'gzip' },
  uncompressed: { codec: 'uncompressed' },
  nullable: { codec: 'snappy', nulls: true },
  dictstring: { codec: 'snappy', dict: true },
  smallgroups: { codec: 'snappy', rowGroup: 8192 },
  hugegroup: { codec: 'snappy', rowGroup: 1 << 30, oneThread: true },
};

async function write(dir, rows, names) {
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  for (const name of names) {
    const k = kinds[name];
    if (!k) throw new Error(`unknown file kind ${name} (have ${Object.keys(kinds).join(', ')})`);
    const cols = featureCols(k.nulls);
    if (k.dict) cols.push(`'category-' || (hash(range) % 1000)::VARCHAR AS cat`);
    cols.push(`(random() * 2)::BIGINT AS label`);
    const path = join(dir, `${name}.parquet`);
    const opts = [`FORMAT parquet`, `COMPRESSION ${k.codec}`];
    if (k.rowGroup) opts.push(`ROW_GROUP_SIZE ${k.rowGroup}`);
    // One writer thread keeps the whole file in one row group.
    await con.run(`SET threads = ${k.oneThread ? 1 : 2}`);
    await con.run(`COPY (SELECT ${cols.join(', ')} FROM range(${rows})) TO '${path}' (${opts.join(', ')})`);
    const md = await con.runAndReadAll(`SELECT count(*) FROM parquet_metadata('${path}') WHERE column_id = 0`);
    const rowGroups = Number(md.getRows()[0][0]);
    console.log(JSON.stringify({ kind: name, path, rows, rowGroups, bytes: statSync(path).size }));
  }
}

async function scan(file, threads, reps) {
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  await con.run(`SET threads = ${threads}`);
  const desc = await con.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${file}')`);
  const sums = [`count(*)`];
  for (const [name, type] of desc.getRows()) {
    sums.push(type === 'VARCHAR' ? `sum(length("${name}"))` : `sum("${name}")`);
  }
  const sql = `SELECT ${sums.join(', ')} FROM read_parquet('${file}')`;
  let rows = 0;
  const seconds = [];
  const cpuSeconds = [];
  for (let i = 0; i <= reps; i++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    const r = await con.runAndReadAll(sql);
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    const c = process.cpuUsage(c0);
    rows = Number(r.getRows()[0][0]);
    if (i > 0) {
      seconds.push(dt);
      cpuSeconds.push((c.user + c.system) / 1e6);
    }
  }
  console.log(JSON.stringify({ rows, seconds, cpuSeconds }));
}

if (op === 'write') {
  await write(args[0], Number(args[1]), args.slice(2));
} else if (op === 'scan') {
  await scan(args[0], Number(args[1]), Number(args[2]));
} else {
  throw new Error(`usage: duckdb-bench.mjs <node-prefix> write|scan ...`);
}
