#!/usr/bin/env bash
# Write throughput of stoke's converters against the disk's sequential write bandwidth, measured
# side by side in one run on the same disk: `dd` writes as many bytes as the sources hold, with
# fdatasync; `stoke convert` and `stoke ingest` turn N seed volumes into Parquet / a Delta table; then
# the published case: one Parquet file per source file (`ingest --rows-per-file 1`), compacted by
# `stoke optimize`, with file counts before and after. Sources are read from the page cache (they
# were just written), as a converter on a fast source would see them.
#   bench/write_vs_dd.sh [STOKE_BIN]    env: BENCH_SAMPLES (default 20000), BENCH_DIR (default build/bench)
set -euo pipefail
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
samples=${BENCH_SAMPLES:-20000}
work=${BENCH_DIR:-build/bench}
rm -rf "$work"
mkdir -p "$work"

"$stoke" --no-progress synth volumes --samples "$samples" --out "$work/volumes" --seed 1 >/dev/null
bytes=$(find "$work/volumes" -name '*.npy' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
mib=$(( (bytes + 1048575) / 1048576 ))
sync

results=()
run_dd() {
  local t0 t1
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$work/dd.out" bs=1M count="$mib" conv=fdatasync status=none
  t1=$(date +%s.%N)
  rm -f "$work/dd.out"
  echo "$t0 $t1" | awk -v b=$((mib * 1048576)) '{printf "%.1f", b / ($2 - $1) / 1e6}'
}
# Runs a command writing into $out, then syncs $out; prints the source MB/s.
timed() {
  local out=$1 t0 t1
  shift
  rm -rf "$out"
  t0=$(date +%s.%N)
  "$@" >/dev/null
  sync -f "$out" 2>/dev/null || sync
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk -v b="$bytes" '{printf "%.1f", b / ($2 - $1) / 1e6}'
}
src=("$work/volumes" --labels "$work/volumes/labels.csv" --tensor-column volume)

dd1=$(run_dd)
conv_auto=$(timed "$work/out" "$stoke" --no-progress convert npy "${src[@]}" --out "$work/out")
conv_zstd=$(timed "$work/out" "$stoke" --no-progress convert npy "${src[@]}" --out "$work/out" --codec zstd)
ingest=$(timed "$work/table" "$stoke" --no-progress ingest "${src[@]}" --table "$work/table")
ingest_small=$(timed "$work/small" "$stoke" --no-progress ingest "${src[@]}" --table "$work/small" --rows-per-file 1)
files_before=$(find "$work/small" -maxdepth 1 -name '*.parquet' | wc -l)
t0=$(date +%s.%N)
"$stoke" --no-progress optimize "$work/small" >/dev/null
sync -f "$work/small" 2>/dev/null || sync
t1=$(date +%s.%N)
optimize=$(echo "$t0 $t1" | awk -v b="$bytes" '{printf "%.1f", b / ($2 - $1) / 1e6}')
files_after=$("$stoke" inspect "$work/small" --json | awk -F': ' '/"files"/ && !done {gsub(/,/, "", $2); print $2; done = 1}')
dd2=$(run_dd)
dd_best=$(awk -v a="$dd1" -v b="$dd2" 'BEGIN {print (a > b ? a : b)}')

echo "write vs dd: $samples volumes, $((bytes / 1000000)) MB of .npy, $(nproc) cores, same disk ($(df --output=source "$work" | tail -1))"
printf '%-52s %10s %8s\n' "workload" "MB/s" "vs dd"
printf '%-52s %10s %8s\n' "dd bs=1M conv=fdatasync (best of 2)" "$dd_best" "1.00"
for row in "stoke convert (defaults, codec auto):$conv_auto" "stoke convert --codec zstd:$conv_zstd" \
           "stoke ingest (new table, 1 GiB files):$ingest" "stoke ingest --rows-per-file 1:$ingest_small" \
           "stoke optimize of that table:$optimize"; do
  name=${row%%:*}
  v=${row##*:}
  printf '%-52s %10s %8s\n' "$name" "$v" "$(awk -v a="$v" -v b="$dd_best" 'BEGIN {printf "%.2f", a / b}')"
done
echo "(MB/s of source .npy bytes per second of wall time, including the final sync of the output)"
echo "optimize: $files_before data files before, $files_after after"
rm -rf "$work"
