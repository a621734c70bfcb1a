#!/usr/bin/env bash
# OPTIMIZE on emulated cloud storage: BENCH_SAMPLES (default 1000) seed volumes (360 KB) on Azurite
# behind a proxy that adds BENCH_DELAY_MS (default 20) to every GET and HEAD, ingested as one-row
# blobs and as blobs of 5 rows (1.8 MB, larger than what the sorted path reads whole), then
# `optimize` and `optimize --sort-by label`, each on a fresh table, for each binary given, the
# binaries alternated over BENCH_ROUNDS (default 2) rounds. One line per run: seconds, peak RSS and
# the requests the proxy saw (the log and the writes included), with the most in flight at once.
#   bench/optimize_blob.sh [STOKE_BIN ...]   (default build/stoke; give two binaries for an A/B)
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(build/stoke)
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "optimize_blob: no stoke binary at '$b'" >&2; exit 1; }; done
[ -x /usr/bin/time ] || { echo "optimize_blob: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
samples=${BENCH_SAMPLES:-1000}
delay_ms=${BENCH_DELAY_MS:-20}
rounds=${BENCH_ROUNDS:-2}
source bench/common.sh
start_blob_storage_behind_proxy
work=$(mktemp -d)
trap 'stop_test_servers; rm -rf "$work"' EXIT
container=optbench$$
"${bins[0]}" --no-progress synth volumes --samples "$samples" --out "az://$container/volumes" --seed 0 >/dev/null
echo "optimize on Azurite behind ${delay_ms} ms a GET/HEAD, $samples samples of 360 KB"
for round in $(seq 1 "$rounds"); do
  for k in "${!bins[@]}"; do
    b=${bins[$k]}
    for rows in 1 5; do
      for what in "" "--sort-by label"; do
        t="az://$container/t$round-bin$k-$rows-${what// /_}"
        "$b" --no-progress ingest "az://$container/volumes" --labels "az://$container/volumes/labels.csv" --table "$t" \
          --rows-per-file "$rows" >/dev/null
        curl -fsS "$proxy/set?delay_ms=$delay_ms&methods=GET,HEAD" >/dev/null
        start=$(date +%s.%N)
        # shellcheck disable=SC2086  # $what is empty or two words
        /usr/bin/time -f "%M" -o "$work/rss" "$b" --no-progress optimize "$t" $what >/dev/null
        end=$(date +%s.%N)
        stats=$(curl -fsS "$proxy/stats")
        curl -fsS "$proxy/set?methods=GET,HEAD" >/dev/null
        /usr/bin/python3 - "$round" "$b" "$rows" "${what:-(in order)}" "$start" "$end" "$(cat "$work/rss")" "$stats" <<'PY'
import json, sys
rnd, binary, rows, what, start, end, rss_kb, stats = sys.argv[1:]
s = json.loads(stats)
print(f"round {rnd}  {binary}  rows-per-file {rows}  optimize {what}: {float(end) - float(start):.1f} s, "
      f"{int(rss_kb) / 1024:.0f} MB peak RSS, {s['forwarded']} requests ({s['max_in_flight']} in flight at most)")
PY
      done
    done
  done
done
