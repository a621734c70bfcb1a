"""torchrun across two nodes of the namespace test cluster (cluster.py): examples/train_volumes.py
trains with DistributedDataParallel (gloo) on a table in the S3 emulator, each node reaching the
storage through its own fault proxy.

Checked per epoch, for global and block shuffle: across the 4 ranks every training row is read
exactly once and every rank ends with the same parameters (the example's --verify); and the two
ranks of a node share that node's read cache: no byte range of a data file is fetched twice
through one node's proxy over the run.

    sudo STOKE_BIN=build/stoke /usr/bin/python3 -m pytest -rs tests/cluster
"""

import json
import re
from collections import Counter

import pytest

from cluster import REPO, STOKE_BIN, Cluster, available

why_not = available()
if why_not:
    pytest.skip(why_not, allow_module_level=True)

EXAMPLE = REPO / "examples" / "train_volumes.py"
TABLE = "s3://cluster/volumes"
SAMPLES = 96
NPROC = 2  # processes per node


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two nodes and the storage; a table of SAMPLES small volumes, one per data file (so that no
    two samples share a cached block), ingested from node 1."""
    with Cluster(tmp_path_factory.mktemp("cluster"), nodes=2) as c:
        c.start_storage()
        n1 = c.node(1)
        env = c.s3_env(n1)
        src = n1.dir / "src"
        n1.run([STOKE_BIN, "--no-progress", "synth", "volumes", "--samples", SAMPLES, "--shape", "8,8,4",
                "--channels", 2, "--seed", 11, "--out", src], env=env)
        n1.run([STOKE_BIN, "--no-progress", "ingest", src, "--labels", src / "labels.csv", "--table", TABLE,
                "--tensor-column", "volume", "--rows-per-file", 1], env=env)
        yield c


def finish(procs, timeout=180):
    """Waits for every agent; returns their (returncode, stdout, stderr)."""
    results = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        results.append((p.returncode, out, err))
    return results


def data_gets(requests):
    """The ranged GETs of data files in a proxy's request log."""
    return [r for r in requests if r.startswith("GET ") and re.search(r"\.parquet\b", r) and "bytes=" in r]


def info_requests(cluster):
    """The data file GETs of `stoke inspect` (what Table.info() runs) of the table."""
    n1 = cluster.node(1)
    cluster.proxy(n1, "set?methods=GET")
    n1.run([STOKE_BIN, "--no-progress", "inspect", TABLE, "--json"], env=cluster.s3_env(n1))
    return data_gets(cluster.proxy(n1, "requests"))


@pytest.mark.parametrize("shuffle", ["global", "block"])
def test_ddp_across_two_nodes_reads_every_row_once_and_agrees(cluster, shuffle):
    info_gets = info_requests(cluster)
    for m in cluster.nodes:
        cluster.proxy(m, "set?methods=GET")  # clears the logs
    args = [EXAMPLE, "--table", TABLE, "--epochs", 3, "--batch-size", 4, "--shuffle", shuffle,
            "--no-drop-last", "--verify", "--json", "--threads", 1, "--loader-threads", 1]
    procs = cluster.torchrun(cluster.nodes, lambda m: [*args, "--cache-dir", m.dir / f"cache-{shuffle}"],
                             nproc=NPROC, run_id=f"ddp-{shuffle}")
    results = finish(procs)
    for rc, out, err in results:
        assert rc == 0, err[-4000:]
    lines = [json.loads(x) for x in results[0][1].splitlines() if x.startswith("{")]
    epochs = [x for x in lines if x["event"] == "epoch"]
    assert len(epochs) == 3 and all(e["world_size"] == 4 for e in epochs)
    n_train = epochs[0]["verify"]["rows_expected"]
    for e in epochs:
        v = e["verify"]
        assert v["exactly_once"] and v["rows_read"] == n_train, v
        assert v["params_identical"], f"epoch {e['epoch']}: parameters differ between ranks"
    assert lines[-1]["event"] == "summary" and lines[-1]["verified"]
    for m in cluster.nodes:
        gets = data_gets(cluster.proxy(m, "requests"))
        assert gets, f"{m.name} fetched nothing"
        # Less what each rank's `Table.info()` (the example reads the schema there) fetched.
        samples = Counter(gets) - Counter({r: NPROC for r in info_gets})
        twice = [r for r, k in samples.items() if k > 1]
        assert not twice, f"{m.name}'s ranks fetched these twice (no shared cache?): {twice[:5]}"
