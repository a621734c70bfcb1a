#!/usr/bin/env bash
# The published case on emulated cloud storage, in one run on the same store: seed volumes uploaded
# to Azurite (Microsoft's Azure Blob emulator) behind a proxy that adds BENCH_DELAY_MS (default 20)
# to every read request, read
#   - the naive way: one .npy blob per sample, one GET each (`stoke bench files az://...`; the sizes
#     come from the listing, as an SDK's download does one GET), with 1 and 16 threads;
#   - the link's limit: one GET per sample as above, 64 in flight (64 threads), i.e. what raw
#     parallel requests of one sample each deliver through this emulated link (more threads hold more
#     batch buffers, not more throughput: the emulator's CPU is the limit);
#   - by stoke's loader on the table ingested from those blobs and OPTIMIZEd, on the same store
#     (`stoke bench load az://...`): default options (global shuffle, 256 GETs in flight, one GET
#     per sample as a batch rarely holds neighbours); block shuffle with a small shuffle buffer, so
#     that a batch's samples are near neighbours whose GETs merge within a gap of BENCH_GAP (the
#     bytes between are read too: MB/s counts them), and the same with one GET per sample; a first
#     epoch through the read cache (--cache-dir), then a later epoch (another process, another
#     order) on the same cache;
#   - stoke again with 1 % of the read requests answered 503 and 1 % reset mid-body by the proxy.
# Each row also gives the requests the proxy saw (the table's open included).
# The emulator and the proxy are Node.js processes on the same cores as stoke: they cap the link,
# which the "link limit" row measures (docs/object_storage.md, "The emulated link").
#   bench/blob_storage.sh [STOKE_BIN]   env: BENCH_SAMPLES (default 20000), BENCH_DELAY_MS (20),
#                                       BENCH_MBPS (cap the proxy's bodies at N MB/s; default 0 = none),
#                                       BENCH_SHUFFLE_BUFFER (block shuffle's buffer, default 32),
#                                       BENCH_GAP (the block shuffle row's merge gap, default 1MiB)
set -euo pipefail
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
samples=${BENCH_SAMPLES:-20000}
delay_ms=${BENCH_DELAY_MS:-20}
mbps=${BENCH_MBPS:-0}
shuffle_buffer=${BENCH_SHUFFLE_BUFFER:-32}
gap=${BENCH_GAP:-1MiB}
py=/usr/bin/python3
[ -x "$stoke" ] || { echo "blob_storage: no stoke binary at '$stoke'" >&2; exit 1; }
source bench/common.sh
start_blob_storage_behind_proxy
cache_dir=$(mktemp -d)
trap 'rm -rf "$cache_dir"; stop_test_servers' EXIT
last_json() { grep -E '^\{' | tail -1; }

echo "blob_storage: uploading $samples volumes and ingesting them (no delay while writing)" >&2
"$stoke" --no-progress synth volumes --samples "$samples" --out az://bench/volumes --seed 0 >/dev/null
"$stoke" --no-progress ingest az://bench/volumes --labels az://bench/volumes/labels.csv --table az://bench/table \
  --rows-per-file 1 >/dev/null
"$stoke" --no-progress optimize az://bench/table >/dev/null

faults_off="delay_ms=$delay_ms&bytes_per_s=$(awk "BEGIN {printf \"%.0f\", $mbps * 1000000}")&methods=GET,HEAD"
# Runs a command with the proxy's counts reset; prints its JSON with "requests" (seen by the proxy) added.
measure() {  # FAULTS COMMAND...
  local faults=$1 out stats
  shift
  curl -fsS "$proxy/set?$faults" >/dev/null
  out=$("$@" --json | last_json)
  stats=$(curl -fsS "$proxy/stats")
  "$py" -c 'import json, sys; r = json.loads(sys.argv[1]); s = json.loads(sys.argv[2]);
r["requests"] = s["forwarded"] + s["injected"]; r["injected"] = s["injected"]; print(json.dumps(r))' "$out" "$stats"
}
# Each run about the same number of samples, at least one batch per reader.
f1=$(measure "$faults_off" "$stoke" bench files az://bench/volumes --threads 1 --batches $((samples / 32 / 50 + 2)))
f16=$(measure "$faults_off" "$stoke" bench files az://bench/volumes --threads 16 --batches $((samples / 32 / 4 + 16)))
f64=$(measure "$faults_off" "$stoke" bench files az://bench/volumes --threads 64 --batches $((samples / 32 + 64)))
load=$(measure "$faults_off" "$stoke" bench load az://bench/table --epochs 1)
block=$(measure "$faults_off" "$stoke" bench load az://bench/table --epochs 1 --shuffle block \
  --shuffle-buffer "$shuffle_buffer" --remote-coalesce-gap "$gap")
block_single=$(measure "$faults_off" "$stoke" bench load az://bench/table --epochs 1 --shuffle block \
  --shuffle-buffer "$shuffle_buffer" --remote-coalesce-bytes 0)
cached1=$(measure "$faults_off" "$stoke" bench load az://bench/table --epochs 1 --cache-dir "$cache_dir")
cached2=$(measure "$faults_off" "$stoke" bench load az://bench/table --epochs 1 --cache-dir "$cache_dir" --seed 1)
# 1 % of the reads answered 503 and 1 % reset mid-body (the client retries them).
faulty=$(measure "$faults_off&p503=0.01&preset=0.01" "$stoke" bench load az://bench/table --epochs 1)

echo
cap=""
[ "$mbps" != 0 ] && cap=", bodies capped at $mbps MB/s"
echo "the published case on emulated blob storage: $samples seed volumes (360 KB), Azurite + proxy adding $delay_ms ms per read request$cap; $(nproc) cores"
"$py" - "$f1" "$f16" "$f64" "$load" "$block" "$block_single" "$cached1" "$cached2" "$faulty" "$shuffle_buffer" "$gap" <<'PY'
import json, sys
f1, f16, f64, load, block, block_single, cached1, cached2, faulty = (json.loads(a) for a in sys.argv[1:10])
shuffle_buffer, gap = sys.argv[10], sys.argv[11]
best = max(f1["samples_per_s"], f16["samples_per_s"])
rows = [("naive: one GET per .npy blob, 1 thread", f1), ("naive: one GET per .npy blob, 16 threads", f16),
        ("link limit: one GET per sample, 64 in flight", f64),
        ("stoke: loader, global shuffle (defaults)", load),
        (f"stoke: block shuffle (buffer {shuffle_buffer}), merged (gap {gap})", block),
        (f"stoke: block shuffle (buffer {shuffle_buffer}), one GET each", block_single),
        ("stoke: first epoch through the read cache", cached1),
        ("stoke: a later epoch from the read cache", cached2),
        ("stoke, 1 % 503s and 1 % resets injected", faulty)]
print(f"{'run':<54} {'samples/s':>10} {'MB/s':>8} {'requests':>9} {'samples':>8}")
for name, r in rows:
    print(f"{name:<54} {r['samples_per_s']:>10,.0f} {r['mb_per_s']:>8,.1f} {r['requests']:>9,} {r['samples']:>8,}")
s = load["samples_per_s"]
print(f"stoke / best naive loop: {s / best:.1f}x (1 thread: {s / f1['samples_per_s']:.1f}x); "
      f"stoke / link limit: {100 * s / f64['samples_per_s']:.0f} %; block shuffle merged / one GET each: "
      f"{block['samples_per_s'] / block_single['samples_per_s']:.2f}x with {block['requests']} / "
      f"{block_single['requests']} requests; later epoch from the cache: {cached2['samples_per_s'] / s:.1f}x the "
      f"default run with {cached2['requests']} requests; with faults: {100 * faulty['samples_per_s'] / s:.0f} % of "
      f"the fault-free run ({faulty['injected']} faults injected), {faulty['samples']} samples delivered of "
      f"{load['samples']}")
PY
