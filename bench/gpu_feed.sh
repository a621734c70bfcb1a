#!/usr/bin/env bash
# Feeding a GPU: the seed volumes (30x30x10 voxels, 10 float32 channels, 360 KB) from a table made
# with `stoke ingest`'s default options into CUDA tensors with stoke.Loader(device="cuda") (pinned
# batch buffers, asynchronous copies), against PyTorch's DataLoader over the same .npy files with
# pin_memory=True and .to(device, non_blocking=True) at several worker counts, as PyTorch's guides
# advise. Warm page cache (both the files and the table are read once first), batches of 32, global
# shuffle; the runs alternate (stoke, then each DataLoader) BENCH_REPS times and each row reports
# its median. Every run ends with torch.cuda.synchronize(), so samples/s counts data on the GPU.
# Also stoke into host memory (device="cpu") for reference. Where torch sees no CUDA device the
# script says so and exits 0 (make bench runs it everywhere).
#   bench/gpu_feed.sh [STOKE_BIN]   env: BENCH_SAMPLES (default 8000), BENCH_DIR (default
#   build/bench-gpu), BENCH_WORKERS (DataLoader worker counts, default 2, N/2 and N for N cores, each once),
#   BENCH_BATCHES (measured batches per run, default 600, after 40 warm-up batches), BENCH_REPS
#   (default 3), BENCH_PYTHON (default /usr/bin/python3), STOKE_PYTHONPATH (default: the python
#   directory next to STOKE_BIN), BENCH_KEEP=1 keeps the data.
# Raw JSON lines go to BENCH_DIR/results.jsonl; the table goes to stdout.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
source bench/common.sh
stoke=${1:-build/stoke}
samples=${BENCH_SAMPLES:-8000}
work=${BENCH_DIR:-build/bench-gpu}
batches=${BENCH_BATCHES:-600}
reps=${BENCH_REPS:-3}
py=${BENCH_PYTHON:-/usr/bin/python3}
pypath=${STOKE_PYTHONPATH:-$(dirname "$stoke")/python}
cores=$(nproc)
workers=${BENCH_WORKERS:-$(printf '%s\n' 2 $((cores / 2)) "$cores" | sort -nu | paste -sd' ')}
warmup=40

die() { echo "gpu_feed: $*" >&2; exit 1; }
[ -x "$stoke" ] || die "no stoke binary at '$stoke'"
compgen -G "$pypath/stoke/_stoke*.so" >/dev/null || die "no stoke Python module in $pypath (build the _stoke target)"
if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu_feed: skipped: torch ($py) sees no CUDA device"
  exit 0
fi
gpu=$("$py" -c 'import torch; print(torch.cuda.get_device_name(0))')
built=$(PYTHONPATH=$pypath "$py" -c 'import stoke; print(stoke.built_with_cuda())')

vol=$work/volumes
table=$work/table
mkdir -p "$work"
volumes_and_table "$stoke" "$vol" "$table" "$samples" auto
if [ "${BENCH_KEEP:-0}" != 1 ]; then trap 'rm -rf "$vol" "$table"' EXIT; fi
find "$vol" "$table" \( -name '*.npy' -o -name '*.parquet' \) -print0 | xargs -0 cat >/dev/null  # warm: both cached

results=$work/results.jsonl
: >"$results"
last_json() { grep -E '^\{' | tail -1; }
run_stoke() {
  PYTHONPATH=$pypath "$py" bench/python_loader.py "$table" --batches "$batches" --warmup-batches "$warmup" \
    --device "$1" --json | last_json >>"$results"
}
run_torch() {
  "$py" bench/torch_dataloader.py "$vol" --num-workers "$1" --batches "$batches" --warmup-batches "$warmup" \
    --device cuda --json | last_json >>"$results"
}
for ((r = 1; r <= reps; r++)); do
  echo "gpu_feed: round $r of $reps" >&2
  run_stoke cuda
  for w in $workers; do run_torch "$w"; done
  run_stoke cpu
done

"$py" - "$results" "$gpu" "$built" "$samples" "$batches" "$reps" "$cores" <<'EOF'
import json, statistics, sys
path, gpu, built, samples, batches, reps, cores = sys.argv[1:]
by = {}
for line in open(path):
    r = json.loads(line)
    by.setdefault(r["tool"], []).append(r)
med = {t: statistics.median(x["samples_per_s"] for x in rs) for t, rs in by.items()}
mbs = {t: statistics.median(x["mb_per_s"] for x in rs) for t, rs in by.items()}
torch_rows = [t for t in med if t.startswith("torch-dataloader")]
best = max(torch_rows, key=lambda t: med[t])
print(f"Seed volumes ({samples} samples, 360 KB each, warm) onto {gpu}, {cores} cores; stoke built with CUDA: {built}")
print(f"{batches} batches of 32 per run, median of {reps} alternated runs")
print(f"{'pipeline':44} {'samples/s':>10} {'GB/s':>7} {'vs best DataLoader':>19}")
names = {"stoke-python-torch-cuda": "stoke.Loader(device='cuda')",
         "stoke-python-torch": "stoke.Loader (host memory, for reference)"}
order = ["stoke-python-torch-cuda"] + sorted(torch_rows, key=lambda t: int(t.split("-w")[1].split("-")[0])) + ["stoke-python-torch"]
for t in order:
    name = names.get(t) or f"DataLoader, {t.split('-w')[1].split('-')[0]} workers, pin_memory -> cuda"
    print(f"{name:44} {med[t]:10.0f} {mbs[t] / 1e3:7.2f} {med[t] / med[best]:18.2f}x")
EOF
