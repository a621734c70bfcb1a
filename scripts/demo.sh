#!/usr/bin/env bash
# The main job end to end on a small generated dataset, as in the published case: 2,000 seed volumes
# (one .npy file per sample, ~360 KB each) become a Delta table of one Parquet file per sample, which
# OPTIMIZE compacts into one file; a query and the history show the table; `convert` writes the same
# samples as plain Parquet; the result table compares files and bytes, and one sample's md5 is
# checked against its source file. Last, the loader reads the table (3 shuffled epochs, batches of
# 32) next to the naive per-file loop over the same .npy files, from the page cache and with O_DIRECT
# (the disk itself), samples/s and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
samples=${DEMO_SAMPLES:-2000}
work=${DEMO_DIR:-build/demo}
rm -rf "$work"
mkdir -p "$work"
src=("$work/volumes" --labels "$work/volumes/labels.csv" --tensor-column volume)

echo "== 1. synth: $samples seed volumes (30x30x10 voxels x 10 channels, float32), one .npy per sample"
"$stoke" synth volumes --samples "$samples" --out "$work/volumes" --seed 0
echo
echo "== 2. ingest into a Delta table, one Parquet file per sample (the published case's first step)"
# Default options: the codec is chosen per column chunk (the float32 noise of the volumes is stored
# uncompressed, since zstd would save ~8 % at a CPU cost above the read's; labels are compressed).
"$stoke" ingest "${src[@]}" --table "$work/table" --rows-per-file 1
files_ingested=$(find "$work/table" -maxdepth 1 -name '*.parquet' | wc -l)
echo
echo "== 3. optimize: compact the table's small files in one commit"
"$stoke" optimize "$work/table"
echo
echo "== 4. the table: inspect, a query with file skipping, history"
"$stoke" inspect "$work/table" | sed -n 1,16p
"$stoke" query "$work/table" --where "label = 1 AND split = 'val'" --select id,file,label,x,y --limit 5
"$stoke" history "$work/table"
echo
echo "== 5. convert: the same files as plain Parquet, one sample per page (zstd)"
"$stoke" convert npy "${src[@]}" --out "$work/parquet"
parquet=$(ls "$work"/parquet/*.parquet | sed -n 1p)
"$stoke" inspect "$parquet" | sed -n 1,12p
echo

bytes_of() { find "$@" -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}'; }
npy_files=$(find "$work/volumes" -name '*.npy' | wc -l)
npy_bytes=$(bytes_of "$work/volumes" -name '*.npy')
live=$("$stoke" inspect "$work/table" --json | awk -F': ' '/"(files|bytes)"/ && !seen[$1]++ {gsub(/,/, "", $2); print $2}')
table_files=$(echo "$live" | sed -n 1p)
table_bytes=$(echo "$live" | sed -n 2p)
pq_files=$(find "$work/parquet" -name '*.parquet' | wc -l)
pq_bytes=$(bytes_of "$work/parquet" -name '*.parquet')
# The md5 of one sample, from the source file's payload and from the table, must agree.
src_md5=$(tail -c 360000 "$work/volumes/volume_000007.npy" | md5sum | cut -d' ' -f1)
table_md5=$("$stoke" query "$work/table" --where "id = 7" --select volume --format csv | tail -1 | sed 's/md5:\([0-9a-f]*\).*/\1/')

echo "== 6. load: the table with stoke's loader, and the same .npy files one by one"
find "$work/volumes" -name '*.npy' -print0 | xargs -0 cat >/dev/null
find "$work/table" -name '*.parquet' -print0 | xargs -0 cat >/dev/null
"$stoke" bench load "$work/table" --epochs 3
jget() { /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# Warm: both from the page cache. Cold: both with O_DIRECT (the disk itself; no cache to drop).
load_warm=$(jget "$("$stoke" bench load "$work/table" --epochs 3 --json)" samples_per_s)
files_warm=$(jget "$("$stoke" bench files "$work/volumes" --epochs 3 --json)" samples_per_s)
cold_ok=1
load_cold=$("$stoke" bench load "$work/table" --cold --json 2>/dev/null) || cold_ok=0
files_cold=$("$stoke" bench files "$work/volumes" --cold --json 2>/dev/null) || cold_ok=0
echo

echo "== result"
printf '%-46s %10s %14s\n' "" "files" "bytes"
printf '%-46s %10d %14d\n' "before: one .npy file per sample" "$npy_files" "$npy_bytes"
printf '%-46s %10d %14s\n' "table after ingest --rows-per-file 1" "$files_ingested" "-"
printf '%-46s %10d %14d\n' "table after optimize (live files)" "$table_files" "$table_bytes"
printf '%-46s %10d %14d\n' "convert: plain Parquet, one page per sample" "$pq_files" "$pq_bytes"
awk -v a="$npy_files" -v b="$table_files" 'BEGIN { printf "%-46s %9.0fx\n", "files, before / after optimize", a / b }'
printf '%-46s %10.0f samples/s\n' "load, warm: stoke bench load (table)" "$load_warm"
printf '%-46s %10.0f samples/s\n' "load, warm: per-file loop over the .npy files" "$files_warm"
awk -v a="$load_warm" -v b="$files_warm" 'BEGIN { printf "%-46s %9.1fx\n", "load, warm: stoke / per-file", a / b }'
if [ "$cold_ok" = 1 ]; then
  load_cold=$(jget "$load_cold" samples_per_s)
  files_cold=$(jget "$files_cold" samples_per_s)
  printf '%-46s %10.0f samples/s\n' "load, cold (O_DIRECT): stoke bench load" "$load_cold"
  printf '%-46s %10.0f samples/s\n' "load, cold (O_DIRECT): per-file loop" "$files_cold"
  awk -v a="$load_cold" -v b="$files_cold" 'BEGIN { printf "%-46s %9.1fx\n", "load, cold: stoke / per-file", a / b }'
else
  echo "load, cold: skipped (this file system refuses O_DIRECT)"
fi
echo "sample 7 md5: source .npy payload $src_md5, table cell $table_md5 $([ "$src_md5" = "$table_md5" ] && echo '(equal)' || echo '(DIFFERENT)')"
[ "$src_md5" = "$table_md5" ]
