#!/usr/bin/env bash
# Clang's thread-safety analysis over stoke's sources (src/core/thread_annotations.h): every non-test
# .cc under src/ and python/src, parsed with -fsyntax-only (the analysis runs in Sema, so no object code
# is made) and the thread-safety warnings as errors. The flags of each file come from
# compile_commands.json of a configure-only clang build directory (nothing in the tree is generated at
# build time, so nothing needs building first). Before the tree, a self-check runs the same command on
# tests/thread_safety/unguarded_access.cc, which must fail: a check that cannot fail proves nothing.
# Usage: scripts/check_threads.sh [BUILD_DIR]               (default build-threads)
#        scripts/check_threads.sh --self-test [BUILD_DIR]   (the self-check alone)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if ! command -v clang++ >/dev/null || ! command -v clang >/dev/null; then
  echo "check-threads: FAILED: clang++ not found (the analysis needs clang; Debian: apt-get install clang)" >&2
  exit 1
fi

self_test_only=0
if [ "${1:-}" = "--self-test" ]; then
  self_test_only=1
  shift
fi
build=${1:-build-threads}

# Configure only (a few seconds); re-run every time so that new sources are listed.
if ! log=$(CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DSTOKE_BUILD_TESTS=OFF 2>&1); then
  echo "check-threads: FAILED: configuring $build with clang:" >&2
  echo "$log" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One job per file: jobs/N.sh runs the build's own command for it with the output and -c replaced by
# -fsyntax-only, and jobs/N.name names the file. Only thread-safety findings fail the check: the
# build's other warnings are the compile's business, so they are switched off here. A file that does
# not include core/thread_annotations.h, even indirectly, declares and uses nothing annotated, so it
# cannot have a finding: the job lists the file's headers first (-M, a tenth of the parse) and skips
# the parse then (about half the files, half the time).
python3 - "$build/compile_commands.json" "$root" "$work/jobs" <<'PY'
import json, os, re, shlex, sys
entries = json.load(open(sys.argv[1]))
root = sys.argv[2].rstrip("/") + "/"
jobs = sys.argv[3]
os.makedirs(jobs)
skip = re.compile(r"_(test|fuzz|benchmark)\.cc$")
n = 0
for e in sorted(entries, key=lambda e: e["file"]):
    rel = e["file"][len(root):] if e["file"].startswith(root) else e["file"]
    if not (rel.startswith("src/") or rel.startswith("python/src/")) or skip.search(rel) or not rel.endswith(".cc"):
        continue
    args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
    out, i = [], 0
    while i < len(args):
        if args[i] == "-o":
            i += 2
            continue
        if args[i] not in ("-c", "-g") and not args[i].startswith("-W"):
            out.append(args[i])
        i += 1
    deps = out[:1] + ["-M"] + out[1:]
    out[1:1] = ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"]
    n += 1
    with open(f"{jobs}/{n}.sh", "w") as f:
        f.write("cd " + shlex.quote(e["directory"]) + "\n")
        # When -M fails, the parse below reports why.
        f.write("if deps=$(" + shlex.join(deps) + " 2>/dev/null); then\n")
        f.write("  case $deps in *core/thread_annotations.h*) ;; *) touch \"$0.skipped\"; exit 0 ;; esac\n")
        f.write("fi\n")
        f.write("exec " + shlex.join(out) + "\n")
    with open(f"{jobs}/{n}.name", "w") as f:
        f.write(rel + "\n")
PY
files=$(ls "$work/jobs" | grep -c '\.sh$' || true)

# Self-check: the fixture's deliberate findings must fail a core file's command line.
fixture=tests/thread_safety/unguarded_access.cc
core_job=$(grep -lx "src/core/thread_pool.cc" "$work"/jobs/*.name | head -1 || true)
if [ -z "$core_job" ]; then
  echo "check-threads: FAILED: src/core/thread_pool.cc is not in $build/compile_commands.json" >&2
  exit 1
fi
fixture_command=$(tail -1 "${core_job%.name}.sh" | sed "s|^exec ||; s|$root/src/core/thread_pool.cc|$root/$fixture|")
fixture_command="cd $(head -1 "${core_job%.name}.sh" | sed 's|^cd ||') && $fixture_command"
if out=$(bash -c "$fixture_command" 2>&1); then
  echo "check-threads: FAILED: the self-check passed $fixture, which holds deliberate unguarded accesses:" >&2
  echo "the analysis is not running (compiler: $(clang++ --version | head -1))" >&2
  exit 1
fi
for expected in "writing variable 'count_' requires holding mutex 'mu_' exclusively" \
                "calling function 'BumpLocked' requires holding mutex 'mu_' exclusively"; do
  if ! grep -qF "$expected" <<<"$out"; then
    echo "check-threads: FAILED: the self-check on $fixture did not report: $expected" >&2
    echo "$out" >&2
    exit 1
  fi
done
echo "check-threads: self-check ok ($fixture is rejected)"
[ "$self_test_only" = 1 ] && exit 0

# The tree, nproc clangs at a time.
seq 1 "$files" | xargs -P "$(nproc)" -I{} sh -c \
  'bash "$0/jobs/$1.sh" >"$0/jobs/$1.log" 2>&1 || echo "$1" >>"$0/failed"' "$work" {}

if [ -s "$work/failed" ]; then
  for job in $(sort -n "$work/failed"); do
    echo "check-threads: $(cat "$work/jobs/$job.name"):" >&2
    cat "$work/jobs/$job.log" >&2
  done
  echo "check-threads: FAILED: $(wc -l <"$work/failed") of $files files have thread-safety findings (above)" >&2
  exit 1
fi
skipped=$(ls "$work/jobs" | grep -c '\.skipped$' || true)
echo "check-threads: ok ($files files, $((files - skipped)) of them using annotations; no thread-safety findings)"
