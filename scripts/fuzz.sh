#!/usr/bin/env bash
# Builds stoke's libFuzzer targets with clang (ASan + UBSan) and runs each for a short smoke run.
# Usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
seconds=${2:-20}
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; skipping the fuzz smoke runs" >&2
  exit 0
fi
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DSTOKE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)"
corpus_root=$(mktemp -d)
trap 'rm -rf "$corpus_root"' EXIT
status=0
for target in "$build"/*_fuzz; do
  name=$(basename "$target")
  mkdir -p "$corpus_root/$name"
  # Seeds: small valid inputs from tests/data when present.
  if [ -d "tests/data/fuzz/$name" ]; then cp tests/data/fuzz/"$name"/* "$corpus_root/$name"/ 2>/dev/null || true; fi
  echo "fuzz: $name for ${seconds}s"
  if ! "$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$corpus_root/" "$corpus_root/$name" >"$corpus_root/$name.log" 2>&1; then
    echo "fuzz: $name FAILED; last lines:" >&2
    tail -40 "$corpus_root/$name.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units" "$corpus_root/$name.log" | sed "s/^/fuzz: $name /"
  fi
done
exit $status
