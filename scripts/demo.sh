#!/usr/bin/env bash
# The main job end to end on a small generated dataset: synth 2,000 seed volumes (one .npy file per
# sample, ~360 KB each), convert them to Parquet with one sample per page, inspect the result, and
# print the before/after table.
set -euo pipefail
cd "$(dirname "$0")/.."
stoke=${1:-build/stoke}
samples=${DEMO_SAMPLES:-2000}
work=${DEMO_DIR:-build/demo}
rm -rf "$work"
mkdir -p "$work"

echo "== 1. synth: $samples seed volumes (30x30x10 voxels x 10 channels, float32), one .npy per sample"
"$stoke" synth volumes --samples "$samples" --out "$work/volumes" --seed 0
echo
echo "== 2. convert: .npy files + labels.csv -> Parquet, one sample per page (zstd)"
"$stoke" convert npy "$work/volumes" --labels "$work/volumes/labels.csv" --out "$work/table" --tensor-column volume
echo
parquet=$(ls "$work"/table/*.parquet | head -1)
echo "== 3. inspect: $(basename "$parquet")"
"$stoke" inspect "$parquet" | head -22
echo
echo "== 4. cat: the first rows (tensor cells as md5 and length)"
"$stoke" cat "$parquet" --limit 5
echo

npy_files=$(find "$work/volumes" -name '*.npy' | wc -l)
npy_bytes=$(find "$work/volumes" -name '*.npy' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
pq_files=$(find "$work/table" -name '*.parquet' | wc -l)
pq_bytes=$(find "$work/table" -name '*.parquet' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
# The md5 of one sample, from the source file's payload and from the Parquet file, must agree.
src_md5=$(tail -c 360000 "$work/volumes/volume_000007.npy" | md5sum | cut -d' ' -f1)
pq_md5=$("$stoke" cat "$parquet" --columns volume --offset 7 --limit 1 --format csv | tail -1 | sed 's/md5:\([0-9a-f]*\).*/\1/')

echo "== result"
printf '%-34s %12s %14s\n' "" "files" "bytes"
printf '%-34s %12d %14d\n' "before: one .npy file per sample" "$npy_files" "$npy_bytes"
printf '%-34s %12d %14d\n' "after: Parquet, one page per sample" "$pq_files" "$pq_bytes"
awk -v a="$npy_files" -v b="$pq_files" -v c="$npy_bytes" -v d="$pq_bytes" \
  'BEGIN { printf "%-34s %11.0fx %13.3fx\n", "ratio (before / after)", a / b, c / d }'
echo "sample 7 md5: source .npy payload $src_md5, Parquet cell $pq_md5 $([ "$src_md5" = "$pq_md5" ] && echo '(equal)' || echo '(DIFFERENT)')"
[ "$src_md5" = "$pq_md5" ]
