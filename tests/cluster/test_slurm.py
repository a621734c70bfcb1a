"""Slurm on the namespace test cluster (cluster.py, slurm.py): slurmctld on the head, slurmd on two
nodes, munge; tables on Azurite (which honours conditional writes, so tasks on several nodes may
commit at once), each member reaching it through its own fault proxy.

- examples/slurm/ingest_array.sbatch as a job array of 4 tasks, one task cancelled mid-way and
  submitted again alone: the table holds every source file exactly once.
- examples/slurm/train.sbatch: `srun` of train_volumes.py on 2 nodes x 2 tasks, DDP set up from
  Slurm's variables; every training row read exactly once per epoch, parameters equal.
- a Loader in each task of an `srun` step, with no torch.distributed: it takes its shard from
  $SLURM_PROCID / $SLURM_STEP_NUM_TASKS.

    sudo STOKE_BIN=build/stoke /usr/bin/python3 -m pytest -rs tests/cluster/test_slurm.py
"""

import csv
import io
import json
import time

import pytest

import slurm
from cluster import REPO, STOKE_BIN, STOKE_PYTHONPATH, Cluster, available

why_not = available() or slurm.available()
if why_not:
    pytest.skip(why_not, allow_module_level=True)

SOURCE = "az://src/vols"
SAMPLES = 40
INGEST = REPO / "examples" / "slurm" / "ingest_array.sbatch"
TRAIN = REPO / "examples" / "slurm" / "train.sbatch"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("slurm"), nodes=2, head=True) as c:
        c.start_storage(azurite=True)
        c.slurm = slurm.Slurm(c)
        c.head.run([STOKE_BIN, "--no-progress", "synth", "volumes", "--samples", SAMPLES, "--shape", "16,16,8",
                    "--channels", 2, "--seed", 21, "--out", SOURCE], env=c.az_env(c.head))
        yield c


def job_env(cluster):
    """What a job submitted from the head runs with: the store through the head's proxy, stoke's
    binary and Python package."""
    return {**cluster.az_env(cluster.head), "STOKE": STOKE_BIN, "PYTHONPATH": STOKE_PYTHONPATH}


def stoke_out(cluster, *args):
    return cluster.head.run([STOKE_BIN, "--no-progress", *args], env=cluster.az_env(cluster.head)).stdout


def wait_running(cluster, task, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = cluster.slurm.run(["squeue", "-h", "-j", task, "-o", "%T"], check=False)
        if r.stdout.strip() == "RUNNING":
            return
        time.sleep(0.05)
    raise AssertionError(f"{task} did not start in {timeout} s")


def test_job_array_ingest_is_whole_after_a_task_is_cancelled_and_resubmitted(cluster):
    s, table, out = cluster.slurm, "az://tables/array", cluster.root / "ingest-%A_%a.out"
    # A slow link for the source files, so that task 3 is cancelled while it reads them.
    cluster.proxy(cluster.head, "set?methods=GET&paths=.npy&bytes_per_s=200000", backend="az")
    args = ["-o", out, INGEST, 4, SOURCE, table, "--tensor-column", "volume"]
    job = s.sbatch("--array=0-3", *args, env=job_env(cluster))
    wait_running(cluster, f"{job}_3")
    time.sleep(0.3)
    s.run(["scancel", f"{job}_3"])
    cluster.proxy(cluster.head, "set?methods=GET", backend="az")
    s.wait(job)
    states = s.states(job)
    assert states[f"{job}_3"] == "CANCELLED", states
    assert all(states[f"{job}_{i}"] == "COMPLETED" for i in range(3)), states
    again = s.sbatch("--array=3", *args, env=job_env(cluster))
    s.wait(again)
    assert s.states(again) == {f"{again}_3": "COMPLETED"}

    rows = list(csv.DictReader(io.StringIO(stoke_out(cluster, "query", table, "--format", "csv"))))
    sources = sorted(r["source_location"] for r in rows)
    assert len(rows) == SAMPLES and len(set(sources)) == SAMPLES, "every source file exactly once"
    assert sorted(int(r["id"]) for r in rows) == list(range(SAMPLES))
    shards = [json.loads(line)["commitInfo"]["operationParameters"].get("shard")
              for line in stoke_out(cluster, "history", table, "--json").splitlines() if line.strip()]
    assert sorted(x for x in shards if x) == ["0/4", "1/4", "2/4", "3/4"], shards


@pytest.fixture(scope="module")
def table(cluster):
    """A table of the source with its labels and splits (one ingest from the head)."""
    t = "az://tables/train"
    stoke_out(cluster, "ingest", SOURCE, "--labels", f"{SOURCE}/labels.csv", "--table", t,
              "--tensor-column", "volume")
    return t


def test_srun_training_job_sets_up_ddp_from_slurm(cluster, table):
    out = cluster.root / "train-%j.out"
    job = cluster.slurm.sbatch("--nodes=2", "--ntasks-per-node=2", "-o", out, TRAIN, "--table", table,
                               "--epochs", 2, "--batch-size", 4, "--no-drop-last", "--verify", "--json",
                               "--threads", 1, "--loader-threads", 1,
                               env={**job_env(cluster), "GLOO_SOCKET_IFNAME": "eth0"})
    cluster.slurm.wait(job)
    text = (cluster.root / f"train-{job}.out").read_text()
    assert cluster.slurm.states(job)[job] == "COMPLETED", text[-4000:]
    lines = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
    epochs = [x for x in lines if x["event"] == "epoch"]
    assert len(epochs) == 2 and all(e["world_size"] == 4 for e in epochs), text[-4000:]
    assert all(e["verify"]["exactly_once"] and e["verify"]["params_identical"] for e in epochs)
    assert lines[-1]["event"] == "summary" and lines[-1]["verified"]


READER = """
import json, os, sys
import stoke
loader = stoke.Loader(sys.argv[1], batch_size=4, columns=["id"], drop_last=False, to="numpy", threads=1)
rows = [int(i) for b in loader for i in b["__row_ids__"]]
rec = {"procid": int(os.environ["SLURM_PROCID"]), "samples": loader.samples_per_epoch, "rows": rows,
       "host": os.uname().nodename}
with open(os.path.join(sys.argv[2], f"rank-{rec['procid']}.json"), "w") as f:
    json.dump(rec, f)
"""


def test_loaders_in_an_srun_step_take_their_shards_from_slurm(cluster, table):
    out = cluster.root / "srun-shards"
    out.mkdir()
    cluster.slurm.run(["srun", "--nodes=2", "--ntasks=4", "/usr/bin/python3", "-c", READER, table, out],
                      env=job_env(cluster), timeout=120)
    recs = sorted((json.loads(p.read_text()) for p in out.glob("rank-*.json")), key=lambda r: r["procid"])
    assert [r["procid"] for r in recs] == [0, 1, 2, 3]
    assert {r["host"] for r in recs} == {"node1", "node2"}
    assert all(r["samples"] == SAMPLES // 4 for r in recs)
    rows = [i for r in recs for i in r["rows"]]
    assert sorted(rows) == list(range(SAMPLES)), "every row exactly once across the step's tasks"
