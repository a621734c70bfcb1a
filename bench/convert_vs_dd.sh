#!/usr/bin/env bash
# Convert throughput against the disk's sequential write bandwidth, measured side by side in one run
# on the same disk: `dd` writes as many bytes as the conversion reads, with fdatasync, then
# `stoke convert` turns N seed volumes into Parquet. The source files are read from the page cache
# (they were just written), as a converter on a fast source would see them.
#   bench/convert_vs_dd.sh [STOKE_BIN]    env: BENCH_SAMPLES (default 20000), BENCH_DIR (default build/bench)
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
run_convert() {
  local codec=$1 t0 t1
  rm -rf "$work/table-$codec"
  t0=$(date +%s.%N)
  "$stoke" --no-progress convert npy "$work/volumes" --labels "$work/volumes/labels.csv" --out "$work/table-$codec" \
    --tensor-column volume --codec "$codec" >/dev/null
  sync -f "$work/table-$codec" 2>/dev/null || sync
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk -v b="$bytes" '{printf "%.1f", b / ($2 - $1) / 1e6}'
}

dd1=$(run_dd)
conv_zstd=$(run_convert zstd)
conv_none=$(run_convert uncompressed)
dd2=$(run_dd)
dd_best=$(awk -v a="$dd1" -v b="$dd2" 'BEGIN {print (a > b ? a : b)}')

echo "convert vs dd: $samples volumes, $((bytes / 1000000)) MB of .npy, $(nproc) cores, same disk ($(df --output=source "$work" | tail -1))"
printf '%-44s %10s %8s\n' "workload" "MB/s" "vs dd"
printf '%-44s %10s %8s\n' "dd bs=1M conv=fdatasync (best of 2)" "$dd_best" "1.00"
for row in "stoke convert --codec zstd:$conv_zstd" "stoke convert --codec uncompressed:$conv_none"; do
  name=${row%%:*}
  v=${row##*:}
  printf '%-44s %10s %8s\n' "$name" "$v" "$(awk -v a="$v" -v b="$dd_best" 'BEGIN {printf "%.2f", a / b}')"
done
echo "(MB/s of source .npy bytes per second of wall time, including the final sync of the output)"
rm -rf "$work"
