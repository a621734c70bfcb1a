#!/usr/bin/env bash
# The main job end to end on a small generated dataset, as in the published case: 2,000 seed volumes
# (one .npy file per sample, ~360 KB each) become a Delta table of one Parquet file per sample, which
# OPTIMIZE compacts into one file; a query and the history show the table; `convert` writes the same
# samples as plain Parquet; the result table compares files and bytes, and one sample's md5 is
# checked against its source file. Last, the published case on emulated blob storage: volumes
# uploaded as one .npy blob per sample to Azurite behind a proxy that adds a delay per read request,
# read the naive way (one GET per blob, 1 and 16 threads) and, ingested as a table, by stoke's loader.
set -euo pipefail
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
samples=${DEMO_SAMPLES:-2000}
blob_samples=${DEMO_BLOB_SAMPLES:-1000}  # volumes uploaded to the emulated blob store
delay_ms=${DEMO_DELAY_MS:-20}           # added to every read request (cloud object stores: 10-100 ms)
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

echo "== 6. the published case on emulated blob storage: Azurite behind a proxy adding ${delay_ms} ms per read request"
# Azurite (Microsoft's Azure Blob emulator) and the proxy run on loopback ports; both stop with this script.
source tests/servers/servers.sh
start_test_server azurite azurite
azurite_port=$port
start_test_server proxy proxy "$azurite_port"
proxy_port=$port
# Delay reads only (GET, HEAD): uploading the demo data is not what is measured.
curl -fsS "http://127.0.0.1:$proxy_port/__fault/set?delay_ms=$delay_ms&methods=GET,HEAD" >/dev/null
AZURE_STORAGE_CONNECTION_STRING=$(azurite_connection_string "$proxy_port")
export AZURE_STORAGE_CONNECTION_STRING
"$stoke" --no-progress synth volumes --samples "$blob_samples" --out az://demo/volumes --seed 0
"$stoke" --no-progress ingest az://demo/volumes --labels az://demo/volumes/labels.csv --table az://demo/table \
  --tensor-column volume
jget() { /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
files_1=$(jget "$("$stoke" bench files az://demo/volumes --threads 1 --batches 6 --json)" samples_per_s)
files_16=$(jget "$("$stoke" bench files az://demo/volumes --threads 16 --batches 30 --json)" samples_per_s)
load_blob=$(jget "$("$stoke" bench load az://demo/table --epochs 2 --json)" samples_per_s)
echo

echo "== result"
printf '%-46s %10s %14s\n' "" "files" "bytes"
printf '%-46s %10d %14d\n' "before: one .npy file per sample" "$npy_files" "$npy_bytes"
printf '%-46s %10d %14s\n' "table after ingest --rows-per-file 1" "$files_ingested" "-"
printf '%-46s %10d %14d\n' "table after optimize (live files)" "$table_files" "$table_bytes"
printf '%-46s %10d %14d\n' "convert: plain Parquet, one page per sample" "$pq_files" "$pq_bytes"
awk -v a="$npy_files" -v b="$table_files" 'BEGIN { printf "%-46s %9.0fx\n", "files, before / after optimize", a / b }'
printf '%-46s %10.0f samples/s\n' "blob storage: one .npy blob per sample, 1 thread" "$files_1"
printf '%-46s %10.0f samples/s\n' "blob storage: one .npy blob per sample, 16 threads" "$files_16"
printf '%-46s %10.0f samples/s\n' "blob storage: stoke loader on the table" "$load_blob"
awk -v a="$load_blob" -v b="$files_1" -v c="$files_16" 'BEGIN {
  printf "%-46s %9.1fx (%.1fx the 16-thread loop)\n", "blob storage: stoke / per-blob loop", a / b, a / c }'
echo "sample 7 md5: source .npy payload $src_md5, table cell $table_md5 $([ "$src_md5" = "$table_md5" ] && echo '(equal)' || echo '(DIFFERENT)')"
[ "$src_md5" = "$table_md5" ]
