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
import time
from collections import Counter

import pytest

from cluster import REPO, STOKE_BIN, Cluster, available

why_not = available()
if why_not:
    pytest.skip(why_not, allow_module_level=True)

EXAMPLE = REPO / "examples" / "train_volumes.py"
TABLE = "s3://cluster/volumes"
SAMPLES = 96
BIG_TABLE = "s3://cluster/big"  # 48 samples of 64 KiB
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
        big = n1.dir / "big"
        n1.run([STOKE_BIN, "--no-progress", "synth", "volumes", "--samples", 48, "--shape", "16,16,16",
                "--channels", 4, "--seed", 12, "--out", big], env=env)
        n1.run([STOKE_BIN, "--no-progress", "ingest", big, "--labels", big / "labels.csv", "--table", BIG_TABLE,
                "--tensor-column", "volume"], env=env)
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


def wait_for_mid_epoch_checkpoint(path, procs, timeout=120):
    """Waits until `path` holds a checkpoint taken inside an epoch (the job still running)."""
    import torch
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise AssertionError(f"the job ended before a mid-epoch checkpoint: {finish(procs)}")
        if path.exists():
            state = torch.load(path, map_location="cpu")
            if not state["done"]:
                return state
        time.sleep(0.05)
    raise AssertionError(f"no mid-epoch checkpoint in {timeout} s")


@pytest.mark.parametrize("failure", ["kill", "cut"])
def test_elastic_restart_on_the_surviving_node_resumes_the_epoch(cluster, failure):
    """Node 2 dies mid-epoch (its processes SIGKILLed, or its link cut): torchrun restarts the job on
    node 1 alone (world 4 -> 2), which resumes from the last checkpoint and finishes the epoch and the
    next with every training row exactly once, none repeated."""
    shared = cluster.root / "shared"  # storage every node mounts (here: the same filesystem)
    shared.mkdir(exist_ok=True)
    ckpt = shared / f"ckpt-{failure}.pt"
    for m in cluster.nodes:  # slow links for the data, so that the first epoch still runs when node 2 goes
        cluster.proxy(m, "set?methods=GET&paths=.parquet&bytes_per_s=300000")
    args = [EXAMPLE, "--table", BIG_TABLE, "--epochs", 2, "--batch-size", 4, "--no-drop-last", "--verify", "--json",
            "--threads", 1, "--loader-threads", 1, "--checkpoint", ckpt, "--checkpoint-every", 1,
            "--dist-timeout", 10]
    procs = cluster.torchrun(cluster.nodes, lambda m: args, nproc=NPROC, run_id=f"elastic-{failure}",
                             nnodes="1:2", extra=["--max_restarts", "3", "--rdzv_conf", "last_call_timeout=1"])
    state = wait_for_mid_epoch_checkpoint(ckpt, procs)
    assert state["epoch"] == 0
    node2 = cluster.node(2)
    if failure == "kill":
        node2.kill_all()
    else:
        node2.link(up=False)
    cluster.proxy(cluster.node(1), "set?methods=GET")  # full speed for the survivor
    rc, out, err = finish(procs[:1], timeout=240)[0]
    assert rc == 0, err[-6000:]
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    resumes = [x for x in lines if x["event"] == "resume"]
    assert resumes and resumes[-1]["world_size"] == 2 and resumes[-1]["epoch"] == 0, lines
    assert resumes[-1]["consumed"] > 0
    after = lines[lines.index(resumes[-1]) + 1:]
    epochs = [x for x in after if x["event"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [0, 1] and all(e["world_size"] == 2 for e in epochs)
    assert epochs[0]["resumed_at"] == resumes[-1]["consumed"]
    for e in epochs:
        assert e["verify"]["exactly_once"], e["verify"]
        assert e["verify"]["params_identical"]
    assert after[-1]["event"] == "summary" and after[-1]["verified"]
