#!/usr/bin/python3
"""Two nodes against one, reading one table on emulated blob storage over links with latency.

On the namespace test cluster (tests/cluster/cluster.py: needs root), the table lives in Azurite in
the storage namespace; each node reaches it through its own fault proxy, which adds BENCH_DELAY_MS
(default 20) to every read request and, with BENCH_NODE_MBPS, caps that node's link at so many MB/s
(a machine's own network bandwidth). Measured with default options, `stoke bench load` of one epoch:

  - the emulator's limit: both nodes at once (world size 2), their proxies adding nothing: what
    Azurite and its proxies serve on this machine's cores;
  - one node (world size 1) through its link;
  - two nodes at once (world size 2, one rank each) through their links: the aggregate is both
    ranks' samples over the slower rank's time.

Each row is the median of BENCH_REPS (default 3) runs, the three kinds alternating. Prints a table and,
with --json, one JSON line.

    sudo bench/cluster_scaling.py [--stoke build/stoke] [--json]
        env: BENCH_SAMPLES (default 3000), BENCH_SHAPE (default 16,16,16), BENCH_CHANNELS (4: 64 KiB
        float32 samples), BENCH_DELAY_MS (20), BENCH_NODE_MBPS (0: no cap), BENCH_REPS (3)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from cluster import Cluster, available  # noqa: E402

TABLE = "az://bench/table"


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def bench_load(c: Cluster, stoke: str, nodes: List, world: int) -> Dict[str, float]:
    """`stoke bench load` of one epoch on each of `nodes` at once (ranks 0.. of `world`): the
    aggregate samples/s (all samples over the slowest rank's time) and MB/s."""
    procs = [m.start([stoke, "--no-progress", "bench", "load", TABLE, "--epochs", 1, "--rank", rank,
                      "--world-size", world, "--json"], env=c.az_env(m)) for rank, m in enumerate(nodes)]
    runs = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise SystemExit(f"cluster_scaling: bench load failed: {err[-2000:]}")
        runs.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(r["wall_s"] for r in runs)
    return {"samples_per_s": sum(r["samples"] for r in runs) / wall,
            "mb_per_s": sum(r["mb_per_s"] * r["wall_s"] for r in runs) / wall}


def set_links(c: Cluster, delay_ms: int, bytes_per_s: int) -> None:
    for m in c.nodes:
        c.proxy(m, f"set?methods=GET,HEAD&delay_ms={delay_ms}&bytes_per_s={bytes_per_s}", backend="az")


def measure(c: Cluster, stoke: str, reps: int, delay_ms: int, node_bytes_per_s: int) -> Dict[str, Dict[str, float]]:
    runs: Dict[str, List[Dict[str, float]]] = {"limit": [], "one": [], "two": []}
    for rep in range(reps):
        print(f"cluster_scaling: round {rep + 1} of {reps}", file=sys.stderr)
        set_links(c, 0, 0)
        runs["limit"].append(bench_load(c, stoke, c.nodes, 2))
        set_links(c, delay_ms, node_bytes_per_s)
        runs["one"].append(bench_load(c, stoke, c.nodes[:1], 1))
        runs["two"].append(bench_load(c, stoke, c.nodes, 2))
    return {k: {m: statistics.median(r[m] for r in v) for m in ("samples_per_s", "mb_per_s")} for k, v in runs.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stoke", default=str(REPO / "build" / "stoke"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    why_not = available()
    if why_not:
        print(f"cluster_scaling: skipped: {why_not}", file=sys.stderr)
        return 0
    samples, reps = env_int("BENCH_SAMPLES", 3000), env_int("BENCH_REPS", 3)
    shape, channels = os.environ.get("BENCH_SHAPE", "16,16,16"), env_int("BENCH_CHANNELS", 4)
    delay_ms, mbps = env_int("BENCH_DELAY_MS", 20), float(os.environ.get("BENCH_NODE_MBPS", "0"))
    with tempfile.TemporaryDirectory(prefix="stoke-cluster-bench-") as tmp, Cluster(Path(tmp), nodes=2) as c:
        c.start_storage(azurite=True)
        n1 = c.node(1)
        print(f"cluster_scaling: writing {samples} samples and ingesting them", file=sys.stderr)
        for args in (["synth", "volumes", "--samples", samples, "--shape", shape, "--channels", channels,
                      "--out", "az://bench/src"],
                     ["ingest", "az://bench/src", "--table", TABLE, "--tensor-column", "volume"]):
            n1.run([a.stoke, "--no-progress", *args], env=c.az_env(n1), timeout=1800)
        r = measure(c, a.stoke, reps, delay_ms, int(mbps * 1e6))
    r["two_over_one"] = r["two"]["samples_per_s"] / r["one"]["samples_per_s"]
    r.update(samples=samples, shape=shape, channels=channels, delay_ms=delay_ms, node_mbps=mbps, reps=reps,
             cores=os.cpu_count())
    if a.json:
        print(json.dumps(r))
        return 0
    cap = f", each node's link capped at {mbps:g} MB/s" if mbps else ""
    print(f"two nodes against one: {samples} samples of {shape}x{channels} float32 on Azurite, "
          f"{delay_ms} ms per read request{cap}; {os.cpu_count()} cores; median of {reps}")
    for key, label in (("limit", "emulator limit (2 nodes, no delay)"), ("one", "one node"), ("two", "two nodes")):
        print(f"  {label:36s} {r[key]['samples_per_s']:10.0f} samples/s {r[key]['mb_per_s']:8.1f} MB/s")
    print(f"  two nodes / one node: {r['two_over_one']:.2f}x; one node / emulator limit: "
          f"{r['one']['samples_per_s'] / r['limit']['samples_per_s']:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
