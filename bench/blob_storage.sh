#!/usr/bin/env bash
# The published case on emulated cloud storage, in one run on the same store: seed volumes uploaded
# to Azurite (Microsoft's Azure Blob emulator) behind a proxy that adds BENCH_DELAY_MS (default 20)
# to every read request, read
#   - the naive way: one .npy blob per sample, one GET each (`stoke bench files az://...`; the sizes
#     come from the listing, as an SDK's download does one GET), with 1 and 16 threads;
#   - by stoke's loader on the table ingested from those blobs and OPTIMIZEd, on the same store
#     (`stoke bench load az://...`, default options: queue depth 64, global shuffle);
#   - the link's limit: one GET per sample as above, 64 in flight (stoke's queue depth), i.e. what
#     raw parallel requests of one sample each deliver through this emulated link;
#   - stoke again with 1 % of the read requests answered 503 and 1 % reset mid-body by the proxy.
# The emulator and the proxy are Node.js processes on the same 2 cores as stoke: they cap the link
# (about 100-160 MB/s here), which the "link limit" row measures.
#   bench/blob_storage.sh [STOKE_BIN]   env: BENCH_SAMPLES (default 20000), BENCH_DELAY_MS (20)
set -euo pipefail
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
samples=${BENCH_SAMPLES:-20000}
delay_ms=${BENCH_DELAY_MS:-20}
py=/usr/bin/python3
[ -x "$stoke" ] || { echo "blob_storage: no stoke binary at '$stoke'" >&2; exit 1; }
source tests/servers/servers.sh
start_test_server azurite azurite
start_test_server proxy proxy "$port"
proxy_port=$port
AZURE_STORAGE_CONNECTION_STRING=$(azurite_connection_string "$proxy_port")
export AZURE_STORAGE_CONNECTION_STRING
jget() { "$py" -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
last_json() { grep -E '^\{' | tail -1; }

echo "blob_storage: uploading $samples volumes and ingesting them (no delay while writing)" >&2
"$stoke" --no-progress synth volumes --samples "$samples" --out az://bench/volumes --seed 0 >/dev/null
"$stoke" --no-progress ingest az://bench/volumes --labels az://bench/volumes/labels.csv --table az://bench/table \
  --rows-per-file 1 >/dev/null
"$stoke" --no-progress optimize az://bench/table >/dev/null
curl -fsS "http://127.0.0.1:$proxy_port/__fault/set?delay_ms=$delay_ms&methods=GET,HEAD" >/dev/null

# Each run about the same number of samples, at least one batch per reader.
run_files() {  # THREADS BATCHES
  "$stoke" bench files az://bench/volumes --threads "$1" --batches "$2" --json | last_json
}
f1=$(run_files 1 $((samples / 32 / 50 + 2)))
f16=$(run_files 16 $((samples / 32 / 4 + 16)))
f64=$(run_files 64 $((samples / 32 + 64)))
load=$("$stoke" bench load az://bench/table --epochs 1 --json | last_json)
# The same with 1 % of the reads answered 503 and 1 % reset mid-body (the client retries them).
curl -fsS "http://127.0.0.1:$proxy_port/__fault/set?delay_ms=$delay_ms&p503=0.01&preset=0.01&methods=GET,HEAD" >/dev/null
faulty=$("$stoke" bench load az://bench/table --epochs 1 --json | last_json)
stats=$(curl -fsS "http://127.0.0.1:$proxy_port/__fault/stats")

echo
echo "the published case on emulated blob storage: $samples seed volumes (360 KB), Azurite + proxy adding $delay_ms ms per read request; $(nproc) cores"
"$py" - "$f1" "$f16" "$f64" "$load" "$faulty" <<'PY'
import json, sys
f1, f16, f64, load, faulty = (json.loads(a) for a in sys.argv[1:])
best = max(f1["samples_per_s"], f16["samples_per_s"])
rows = [("naive: one GET per .npy blob, 1 thread", f1), ("naive: one GET per .npy blob, 16 threads", f16),
        ("link limit: one GET per sample, 64 in flight", f64), ("stoke: loader on the optimized table", load),
        ("stoke, 1 % 503s and 1 % resets injected", faulty)]
print(f"{'run':<48} {'samples/s':>10} {'MB/s':>8} {'requests/s':>11}")
for name, r in rows:
    # one GET per sample in every row (the loader's reads are one ranged GET per sample)
    print(f"{name:<48} {r['samples_per_s']:>10,.0f} {r['mb_per_s']:>8,.1f} {r['samples_per_s']:>11,.0f}")
s = load["samples_per_s"]
print(f"stoke / best naive loop: {s / best:.1f}x (1 thread: {s / f1['samples_per_s']:.1f}x); "
      f"stoke / link limit: {100 * s / f64['samples_per_s']:.0f} %; with faults: "
      f"{100 * faulty['samples_per_s'] / s:.0f} % of the fault-free run, {faulty['samples']} samples delivered "
      f"of {load['samples']}")
PY
echo "proxy, faulty run: $stats"
