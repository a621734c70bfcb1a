#!/usr/bin/env bash
# examples/train_volumes.py with stoke and with a plain PyTorch DataLoader (num_workers 2) over the
# .npy files: the same model, batch size, seed and epochs on the same BENCH_SAMPLES volumes, one
# after the other, each starting with a dropped page cache (root only) as a first epoch on fresh
# data would. Prints the per-epoch lines of both and a summary table (epoch time, data-wait share,
# samples/s, validation accuracy).
#   bench/train_volumes.sh [STOKE_BIN]    env: BENCH_SAMPLES (default 20000), BENCH_DIR (default
#   build/bench-load, shared with load_vs_baselines.sh: its volumes and table are reused when they
#   have BENCH_SAMPLES samples), BENCH_EPOCHS (default 2), BENCH_WORKERS (default 2), BENCH_KEEP=1
#   keeps the volumes and the table.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
source bench/common.sh
stoke=${1:-build/stoke}
samples=${BENCH_SAMPLES:-20000}
work=${BENCH_DIR:-build/bench-load}
epochs=${BENCH_EPOCHS:-2}
workers=${BENCH_WORKERS:-2}
py=/usr/bin/python3
pypath=$(dirname "$stoke")/python

die() { echo "train_volumes: $*" >&2; exit 1; }
[ -x "$stoke" ] || die "no stoke binary at '$stoke'"
compgen -G "$pypath/stoke/_stoke*.so" >/dev/null || die "no stoke Python module in $pypath (build the _stoke target)"

vol=$work/volumes
table=$work/table
mkdir -p "$work"
volumes_and_table "$stoke" "$vol" "$table" "$samples" auto

drop_caches() {
  if [ -w /proc/sys/vm/drop_caches ] && [ "$(id -u)" -eq 0 ]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for loader in stoke torch; do
  drop_caches
  echo "train_volumes: --loader $loader, $epochs epoch(s)" >&2
  if [ "$loader" = stoke ]; then src=(--table "$table" --column data); else src=(--npy-dir "$vol" --num-workers "$workers"); fi
  PYTHONPATH=$pypath "$py" examples/train_volumes.py --loader "$loader" "${src[@]}" --epochs "$epochs" --json |
    tee -a "$results" >&2
done

"$py" - "$results" "$samples" "$workers" <<'PY'
import json, sys
path, samples, workers = sys.argv[1:]
recs = [json.loads(l) for l in open(path) if l.startswith("{")]
print(f"examples/train_volumes.py on {samples} volumes (batch 32, same model and seed); torch: DataLoader, "
      f"num_workers {workers}; page cache dropped before each loader")
print(f"{'loader':<8} {'epoch':>5} {'time s':>8} {'wait s':>8} {'wait':>7} {'samples/s':>10} {'val acc':>8}")
for r in recs:
    if r["event"] == "epoch":
        print(f"{r['loader']:<8} {r['epoch']:>5} {r['epoch_seconds']:>8.1f} {r['wait_seconds']:>8.2f} "
              f"{r['wait_share']:>7.1%} {r['samples_per_second']:>10.1f} {r['val_accuracy']:>8.3f}")
s = {r["loader"]: r for r in recs if r["event"] == "summary"}
if "stoke" in s and "torch" in s:
    a, b = s["stoke"], s["torch"]
    print(f"training time: stoke {a['train_seconds']:.1f} s, torch {b['train_seconds']:.1f} s "
          f"({b['train_seconds'] / a['train_seconds']:.2f}x); data wait {a['wait_share']:.1%} vs {b['wait_share']:.1%}")
PY
if [ -z "${BENCH_KEEP:-}" ]; then rm -rf "$vol" "$table"; fi
