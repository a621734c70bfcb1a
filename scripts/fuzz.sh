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
# -O1 with line tables only, as the sanitizers advise: stacks keep file:line, and the build takes half
# the time of -O2 -g.
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DSTOKE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" >/dev/null
cmake --build "$build" -j "$(nproc)"
corpus_root=$(mktemp -d)
trap 'rm -rf "$corpus_root"' EXIT

# Targets whose inputs go through a library with known memory-safety bugs on crafted files:
# libhdf5 1.10.8 overflows buffers within a minute of fuzzing (docs/format.md, "HDF5 sources";
# inputs in tests/data/hdf5_libhdf5_crashes/). Such a target runs in libFuzzer's fork mode, which
# goes on after a crash; every crash is then replayed, and one whose first frame outside the
# sanitizers (and libc) is in the library is reported as the library's (its input kept under
# $build/fuzz-artifacts/), as is one that does not crash when replayed alone (the fork's process
# crashed on the library's global state, left by earlier inputs), while any other fails the run.
declare -A library_of=([hdf5_fuzz]=libhdf5)
# A crash is replayed under these limits to find its frames. An input that allocates more than
# 2 GiB at once stops at that malloc, whose stack libFuzzer prints; the RSS limit is higher than for
# the run itself so that the RSS watchdog does not end the process (with no stack: the input would
# then count as a crash outside the library) while that stack is still being symbolised.
replay_limits=(-rss_limit_mb=8192 -malloc_limit_mb=2048 -timeout=10)
# libc's own frames: by its path, by the public name, or by the name and source of the variant it
# picked at run time (" in __memcpy_avx512_unaligned_erms string/../sysdeps/...", when libc's debug
# symbols are installed).
sanitizer_frame='__interceptor_|__asan|__lsan|__sanitizer|fuzzer::|RunMallocHooks|\(/[^ ]*/libc\.so| in (malloc|calloc|realloc|free|strdup|strndup|memcpy|memmove|memset|strlen|strcmp|operator new|operator delete)| in __(mem|str|stp|wmem)[a-z]*_[a-z0-9_]* [^ ]*sysdeps/'

# One target's smoke run; its report goes to stdout and its failures to stderr, and it returns 1 on
# a failure.
fuzz_one() {
  local target=$1 name status=0 lib artifact frame
  name=$(basename "$target")
  mkdir -p "$corpus_root/$name"
  # Seeds: small valid inputs from tests/data when present.
  if [ -d "tests/data/fuzz/$name" ]; then cp tests/data/fuzz/"$name"/* "$corpus_root/$name"/ 2>/dev/null || true; fi
  lib=${library_of[$name]:-}
  if [ -n "$lib" ]; then
    # Hangs are ignored too (libhdf5 also loops forever on some crafted files): a random run must not
    # fail CI on a library bug; they are listed below with the crashes.
    "$target" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 -max_total_time="$seconds" -rss_limit_mb=2048 \
      -timeout=10 -print_final_stats=1 -artifact_prefix="$corpus_root/$name-" "$corpus_root/$name" \
      >"$corpus_root/$name.log" 2>&1 || true
    for artifact in "$corpus_root/$name"-*; do
      [ -f "$artifact" ] || continue
      if [[ "$(basename "$artifact")" == "$name-timeout-"* ]]; then
        mkdir -p "$build/fuzz-artifacts"
        cp "$artifact" "$build/fuzz-artifacts/"
        echo "fuzz: $name: an input ran past the time limit (kept: $build/fuzz-artifacts/$(basename "$artifact")); check whether the hang is in $lib"
        continue
      fi
      local replay replay_status=0
      replay=$("$target" "${replay_limits[@]}" "$artifact" 2>&1) || replay_status=$?
      if [ "$replay_status" = 0 ]; then
        # The input alone runs clean: the fork's process crashed on state an earlier input left behind
        # (libhdf5 keeps global state, which its overflows corrupt); nothing of stoke's is stateful
        # between inputs. Kept for a look, not a failure.
        mkdir -p "$build/fuzz-artifacts"
        cp "$artifact" "$build/fuzz-artifacts/"
        echo "fuzz: $name: a crash that does not recur when its input runs alone (state $lib kept from earlier inputs; kept: $build/fuzz-artifacts/$(basename "$artifact"))"
        continue
      fi
      frame=$(echo "$replay" | grep -E '^ +#[0-9]+ ' | grep -vE "$sanitizer_frame" | head -1 || true)
      if [[ "$frame" == *"$lib"* ]]; then
        mkdir -p "$build/fuzz-artifacts"
        cp "$artifact" "$build/fuzz-artifacts/"
        echo "fuzz: $name: crash inside $lib, a library bug on crafted input (kept: $build/fuzz-artifacts/$(basename "$artifact")): $(echo "$frame" | sed -E 's/^ +#[0-9]+ 0x[0-9a-f]+ (in )?//')"
      else
        echo "fuzz: $name FAILED: $(basename "$artifact") crashes outside $lib:" >&2
        echo "$replay" | tail -40 >&2
        status=1
      fi
    done
    if grep -qE "^#[0-9]+: cov" "$corpus_root/$name.log"; then
      grep -E "^#[0-9]+: cov" "$corpus_root/$name.log" | tail -1 | sed "s/^/fuzz: $name /"
    else
      echo "fuzz: $name FAILED: the fork-mode run reported no progress; last lines:" >&2
      tail -40 "$corpus_root/$name.log" >&2
      status=1
    fi
    return $status
  fi
  if ! "$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$corpus_root/$name-" "$corpus_root/$name" >"$corpus_root/$name.log" 2>&1; then
    echo "fuzz: $name FAILED; last lines:" >&2
    tail -40 "$corpus_root/$name.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units" "$corpus_root/$name.log" | sed "s/^/fuzz: $name /"
  fi
  return $status
}

# The targets run side by side, one per core (each is single-threaded); each one's report is printed
# when all have ended, in name order.
jobs=$(nproc)
targets=("$build"/*_fuzz)
echo "fuzz: ${#targets[@]} targets for ${seconds}s each, $jobs at a time"
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  name=$(basename "$target")
  ( if fuzz_one "$target" >"$corpus_root/$name.out" 2>"$corpus_root/$name.err"; then echo 0; else echo 1; fi \
    >"$corpus_root/$name.rc" ) &
done
wait
status=0
for target in "${targets[@]}"; do
  name=$(basename "$target")
  cat "$corpus_root/$name.out"
  cat "$corpus_root/$name.err" >&2
  [ "$(cat "$corpus_root/$name.rc")" = 0 ] || status=1
done
exit $status
