#!/usr/bin/env bash
# The published scale: N samples (default 650,000) as N small .npy files, and every step of a table's
# life at that file count, with wall time and peak RSS per step:
#   ingest (defaults), ingest --rows-per-file 1 (N data files), inspect (warm), query --count on a
#   label, the loader's open (with the sample index ingest wrote, then built from the footers) and a
#   short load under `ulimit -n 1024`, optimize
#   of the N-file table, vacuum of the N removed files, and sharded ingest (4 processes against 1,
#   run 1, 4, 4, 1).
# Long-running (about 20-30 minutes at the default N on a 2-core machine; disk: ~8 GB): part of
# `make bench`, never of `make test`.
#   bench/scale.sh [STOKE_BIN]    env: BENCH_SCALE_SAMPLES (default 650000), BENCH_DIR (default
#   build/bench-scale), BENCH_KEEP=1 keeps the source files between runs
set -euo pipefail
cd "$(dirname "$0")/.."
stoke=$(realpath "${1:-build/stoke}")
n=${BENCH_SCALE_SAMPLES:-650000}
work=${BENCH_DIR:-build/bench-scale}
mkdir -p "$work"
src="$work/src"
if [ ! -d "$src" ] || [ "$(find "$src" -maxdepth 1 -name '*.npy' | wc -l)" -ne "$n" ]; then
  rm -rf "$src"
  echo "scale: writing $n volumes of 4 KB to $src" >&2
  "$stoke" --no-progress synth volumes --samples "$n" --shape 16,16,4 --channels 1 --out "$src" >/dev/null
fi
# settle: after deleting many files, waits until ext4 may reuse their inodes. Without a journal, ext4
# does not reuse an inode within 60 s of its deletion (360 s while its inode table block is not yet
# written back), and to find a free one it looks each skipped inode up in turn: creating files in
# the minutes after 100,000s were deleted took 2-3x as long, whatever wrote them. `sync` writes the
# blocks back; the wait covers the 60 s. BENCH_SETTLE_S=0 skips it (a journaled file system).
settle() {
  sync
  sleep "${BENCH_SETTLE_S:-65}"
}

rm -rf "$work"/t_* "$work"/shard_*
settle

rows=()
# step NAME CMD...: runs CMD under /usr/bin/time, records wall seconds and peak RSS (MB).
step() {
  local name=$1
  shift
  local secs kb
  /usr/bin/time -f "TIME %e %M" "$@" >"$work/last.out" 2>"$work/last.err" || true
  if ! grep -q '^TIME' "$work/last.err" || grep -q "Command exited with non-zero status" "$work/last.err"; then
    echo "scale: $name failed:" >&2
    cat "$work/last.err" "$work/last.out" >&2
    exit 1
  fi
  read -r _ secs kb < <(grep '^TIME' "$work/last.err" | tail -1)
  rows+=("$(printf '| %-52s | %9.2f | %8.0f |' "$name" "$secs" "$((kb / 1024))")")
  printf 'scale: %-52s %8.2f s %6d MB\n' "$name" "$secs" "$((kb / 1024))" >&2
}

labels="$src/labels.csv"
step "ingest (defaults)" "$stoke" --no-progress ingest "$src" --labels "$labels" --table "$work/t_default"
step "ingest --rows-per-file 1 ($n data files)" "$stoke" --no-progress ingest "$src" --labels "$labels" \
  --table "$work/t_files" --rows-per-file 1
"$stoke" inspect "$work/t_files" >/dev/null  # warm the page cache
step "inspect (warm)" "$stoke" inspect "$work/t_files"
step "query --where 'label = 1' --count" "$stoke" query "$work/t_files" --where "label = 1" --count
count=$(cat "$work/last.out")
step "query --where 'id < 1000' --count" "$stoke" query "$work/t_files" --where "id < 1000" --count
# The sample index: as ingest wrote it, then built from the data files' footers (cache removed).
step "bench load: open (index written by ingest) + 200 batches, ulimit -n 1024" \
  bash -c "ulimit -n 1024 && exec \"$stoke\" --no-progress bench load \"$work/t_files\" --batches 200 --json"
open2_s=$(sed -n 's/.*"open_s":\([0-9.]*\).*/\1/p' "$work/last.out")
sps=$(sed -n 's/.*"samples_per_s":\([0-9.]*\).*/\1/p' "$work/last.out")
rm -rf "$work/t_files/_stoke"
step "bench load: open (index built from footers) + 200 batches, ulimit -n 1024" \
  bash -c "ulimit -n 1024 && exec \"$stoke\" --no-progress bench load \"$work/t_files\" --batches 200 --json"
open_s=$(sed -n 's/.*"open_s":\([0-9.]*\).*/\1/p' "$work/last.out")
step "optimize ($n files -> target 64 MiB files)" "$stoke" --no-progress optimize "$work/t_files" --target-file-size 64MiB
files_after=$("$stoke" inspect "$work/t_files" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["files"])')
step "vacuum --retain 0 ($n removed files)" "$stoke" --no-progress vacuum "$work/t_files" --retain 0

# Sharded ingest: 1 process against 4 processes (--shard i/4), same source, same options, run in
# the order 1, 4, 4, 1, each into a new table after the deleted files settle (see settle), so that
# neither pays for the deletions before it more than the other. The ratio is of the sums.
one_process() {
  rm -rf "$work/shard_1"
  settle
  step "ingest --rows-per-file 1, 1 process (run $1 of 1,4,4,1)" "$stoke" --no-progress ingest "$src" \
    --labels "$labels" --table "$work/shard_1" --rows-per-file 1
}
four_processes() {
  rm -rf "$work/shard_4"
  settle
  local t0 t1 pids=() i
  t0=$(date +%s.%N)
  for i in 0 1 2 3; do
    "$stoke" --no-progress ingest "$src" --labels "$labels" --table "$work/shard_4" --rows-per-file 1 --shard "$i/4" \
      >"$work/shard_$i.out" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2 3; do
    if ! wait "${pids[$i]}"; then
      echo "scale: shard $i/4 failed:" >&2
      cat "$work/shard_$i.out" >&2
      exit 1
    fi
  done
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
# one_process runs in this shell (step appends to rows); its time is read back from last.err.
one_process 1
one_a=$(grep '^TIME' "$work/last.err" | tail -1 | awk '{print $2}')
four_a=$(four_processes)
rows+=("$(printf '| %-52s | %9.2f | %8s |' "ingest --rows-per-file 1, 4 processes (run 2 of 1,4,4,1)" "$four_a" "-")")
four_b=$(four_processes)
rows+=("$(printf '| %-52s | %9.2f | %8s |' "ingest --rows-per-file 1, 4 processes (run 3 of 1,4,4,1)" "$four_b" "-")")
one_process 4
one_b=$(grep '^TIME' "$work/last.err" | tail -1 | awk '{print $2}')
one=$(echo "$one_a + $one_b" | bc -l)
four=$(echo "$four_a + $four_b" | bc -l)
sharded_count=$("$stoke" query "$work/shard_4" --count)

echo
echo "## Scale: $n samples ($(du -sh "$src" | cut -f1) of .npy files), $(nproc) cores"
echo
echo "| step | seconds | peak RSS MB |"
echo "|---|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "label = 1: $count rows; loader open with the index ingest wrote ${open2_s} s (${sps} samples/s), building it from the footers ${open_s} s;"
echo "optimize left ${files_after} files; sharded ingest: $sharded_count rows, 4 processes $(echo "$one / $four" | bc -l | cut -c1-4)x one process (sums of runs 1+4 and 2+3)."
[ -n "${BENCH_KEEP:-}" ] || rm -rf "$work"/t_* "$work"/shard_*
