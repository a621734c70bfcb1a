"""Tests of examples/train_volumes.py and of stoke's sharding under torchrun: the example
trains with either loader and reports sane numbers, alone and as two gloo processes, and two
ranks of a torchrun job read every table row exactly once per epoch.

Run with Debian's interpreter (numpy, torch and pytest come from Debian):

    STOKE_BIN=build/stoke /usr/bin/python3 -m pytest python/tests/test_train_volumes.py

The package is imported from $STOKE_PYTHONPATH (default <repo>/build/python, where
the `_stoke` CMake target puts it); the tests skip when it is not built there.
torchrun runs as `python -m torch.distributed.run` of this interpreter.
"""

import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from stoke_env import PYTHONPATH, REPO, import_stoke, synth_table
EXAMPLE = REPO / "examples" / "train_volumes.py"
WORKER = Path(__file__).resolve().parent / "dist_epoch_worker.py"

stoke = import_stoke()

N = 200          # samples; two ranks with batch size 10 split them without padding
BATCH = 16       # for the example runs
MAX_BATCHES = 3  # training batches per epoch in the single-process example runs


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = PYTHONPATH + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(script, *args, timeout=120):
    """`torchrun --nproc_per_node 2 script args` on this interpreter, on a free local port.

    --redirects 2 --tee 2: torch 1.13's launcher cannot parse its own default ("0") under
    Python 3.11; with these, workers' stderr still reaches us and stdout stays unprefixed.
    --monitor_interval: notice the workers' exit in 0.2 s instead of 5 s."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "--monitor_interval", "0.2",
           "--redirects", "2", "--tee", "2", str(script), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=timeout, cwd=REPO)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """N small volumes (8x8x4 voxels, 2 channels) as .npy files and as a table of 4 data files."""
    src, table = synth_table(tmp_path_factory.mktemp("train_volumes"), N, (8, 8, 4), 2, seed=5, rows_per_file=N // 4)
    return dict(src=src, table=table)


def loader_args(data, loader):
    if loader == "stoke":
        return ["--loader", "stoke", "--table", data["table"]]
    return ["--loader", "torch", "--npy-dir", data["src"], "--num-workers", 1]


def json_lines(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def check_epoch(rec, loader, world_size):
    assert rec["event"] == "epoch" and rec["loader"] == loader and rec["world_size"] == world_size
    assert math.isfinite(rec["train_loss"]) and rec["train_loss"] > 0
    assert rec["epoch_seconds"] > 0 and 0 <= rec["wait_seconds"] <= rec["epoch_seconds"]
    assert 0 <= rec["wait_share"] <= 1
    assert rec["samples_per_second"] > 0
    assert 0 <= rec["val_accuracy"] <= 1 and rec["val_samples"] > 0
    assert rec["gpu_busy_share"] is None  # CPU run


# --------------------------------------------------------------------------
# the example, one process

@pytest.mark.parametrize("loader", ["stoke", "torch"])
def test_example_trains_one_epoch(data, loader):
    args = [*loader_args(data, loader), "--epochs", 1, "--batch-size", BATCH, "--max-batches", MAX_BATCHES,
            "--threads", 1, "--json"]
    r = subprocess.run([sys.executable, str(EXAMPLE), *map(str, args)], capture_output=True, text=True,
                       env=env(), timeout=120)
    assert r.returncode == 0, r.stderr
    epoch, summary = json_lines(r.stdout)
    check_epoch(epoch, loader, 1)
    assert epoch["epoch"] == 0 and epoch["samples"] == MAX_BATCHES * BATCH
    # Validation is never capped: every split = 'val' sample of labels.csv is counted once.
    with open(data["src"] / "labels.csv") as f:
        n_val = sum(1 for line in f if line.rstrip().endswith(",val"))
    assert epoch["val_samples"] == n_val
    assert summary["event"] == "summary" and summary["epochs"] == 1
    assert summary["final_val_accuracy"] == epoch["val_accuracy"]
    assert 0 <= summary["wait_share"] <= 1
    if loader == "stoke":
        assert summary["loader_stats"]["samples_per_second"] > 0


def test_example_rejects_a_missing_data_option():
    r = subprocess.run([sys.executable, str(EXAMPLE), "--loader", "stoke"], capture_output=True,
                       text=True, env=env(), timeout=60)
    assert r.returncode == 2 and "--table" in r.stderr


# --------------------------------------------------------------------------
# torchrun

def test_two_ranks_read_every_row_exactly_once_per_epoch(data, tmp_path):
    out = tmp_path / "order.json"
    r = torchrun(WORKER, "--table", data["table"], "--out", out, "--epochs", 2, "--batch-size", 10,
                 "--seed", 3)
    assert r.returncode == 0, r.stderr
    rec = json.loads(out.read_text())
    assert rec["world_size"] == 2 and rec["num_rows"] == N
    # The Loader was given no rank or world size and the workers' RANK / WORLD_SIZE were removed:
    # half the rows each means it took the shard from torch.distributed.
    assert [x["rank"] for x in rec["ranks"]] == [0, 1]
    for x in rec["ranks"]:
        assert x["samples_per_epoch"] == N // 2 and x["batches_per_epoch"] == N // 20
    orders = []
    for epoch, (ids0, ids1) in enumerate(rec["epochs"]):
        assert len(ids0) == len(ids1) == N // 2, f"epoch {epoch}: no padding expected"
        assert not set(ids0) & set(ids1), f"epoch {epoch}: ranks overlap"
        assert sorted(ids0 + ids1) == list(range(N)), f"epoch {epoch}: not every row exactly once"
        # Rank r holds positions r, r + 2, ... of the epoch's global order.
        orders.append([i for pair in zip(ids0, ids1) for i in pair])
    assert orders[0] != orders[1], "the two epochs have the same order"
    assert orders[0] != list(range(N)), "the order is not shuffled"


@pytest.mark.parametrize("loader", ["stoke", "torch"])
def test_example_under_torchrun(data, loader):
    r = torchrun(EXAMPLE, *loader_args(data, loader), "--epochs", 1, "--batch-size", BATCH, "--json")
    assert r.returncode == 0, r.stderr
    lines = json_lines(r.stdout)
    assert len(lines) == 2, f"only rank 0 prints: {r.stdout}"
    epoch, summary = lines
    check_epoch(epoch, loader, 2)
    # Each rank trains on a disjoint half of the training rows, short batches dropped.
    with open(data["src"] / "labels.csv") as f:
        n_train = sum(1 for line in f if line.rstrip().endswith(",train"))
    # stoke (drop_last): floor(n / 2) per rank; DistributedSampler (drop_last): ceil((n - 2) / 2).
    per_rank = n_train // 2 if loader == "stoke" else math.ceil((n_train - 2) / 2)
    assert epoch["samples"] == 2 * (per_rank // BATCH) * BATCH
    assert summary["world_size"] == 2 and summary["epochs"] == 1


# --------------------------------------------------------------------------
# --verify's checks

def load_example():
    spec = importlib.util.spec_from_file_location("train_volumes_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_verify_fails_on_a_row_read_twice_or_missing():
    ex = load_example()
    one = SimpleNamespace(world_size=1, rank=0, enabled=False, gather=lambda obj: [obj])
    args = SimpleNamespace(drop_last=False, batch_size=2)
    model = ex.nn.Linear(3, 1)

    class Data:  # what verify_epoch reads of StokeData, with its real_rows
        real_rows = ex.StokeData.real_rows

        def __init__(self, rows, before=(), resumed_at=0):
            self.train_rows, self.rows_read, self.drop_last = 6, rows, args.drop_last
            self.rows_before, self.resumed_at = list(before), resumed_at

    def check(rows, **resume):
        return ex.verify_epoch(one, Data(rows, **resume), model, args)

    ok = check([5, 0, 3, 1, 4, 2])
    assert ok["exactly_once"] and ok["params_identical"] and ok["rows_expected"] == 6
    twice = check([5, 0, 3, 3, 4, 2])
    assert not twice["exactly_once"] and twice["rows_distinct"] == 5
    assert not check([5, 0, 3, 1, 4])["exactly_once"]
    # Resumed after 2 rows: those come from the checkpoint; one read again is caught.
    assert check([3, 1, 4, 2], before=[5, 0], resumed_at=2)["exactly_once"]
    assert not check([3, 1, 4, 0], before=[5, 0], resumed_at=2)["exactly_once"]
    # drop_last: as many as the rank's full batches hold (3 batches of 2), none twice.
    args.drop_last = True
    assert check([5, 0, 3, 1, 4, 2])["exactly_once"]
    assert not check([5, 0, 3, 1])["exactly_once"]
    assert check([3, 1, 4, 2], before=[5, 0], resumed_at=2)["exactly_once"]


def test_parameters_digest_changes_with_any_parameter():
    ex = load_example()
    model = ex.nn.Linear(3, 1)
    before = ex.parameters_digest(model)
    assert ex.parameters_digest(model) == before
    with ex.torch.no_grad():
        model.bias.add_(1e-6)
    assert ex.parameters_digest(model) != before


def test_a_run_resumed_from_its_checkpoint_trains_as_one_that_went_on(data, tmp_path):
    """--checkpoint: 1 epoch, then a second run of 2 epochs that finds the checkpoint and trains only
    epoch 1, with the same loss as epoch 1 of an uninterrupted run (same rows, same parameters)."""
    def run(*extra):
        args = [*loader_args(data, "stoke"), "--batch-size", BATCH, "--threads", 1, "--verify", "--json", *extra]
        r = subprocess.run([sys.executable, str(EXAMPLE), *map(str, args)], capture_output=True, text=True,
                           env=env(), timeout=120)
        assert r.returncode == 0, r.stderr
        return json_lines(r.stdout)

    straight = [x for x in run("--epochs", 2) if x["event"] == "epoch"]
    ckpt = tmp_path / "ckpt.pt"
    first = [x for x in run("--epochs", 1, "--checkpoint", ckpt) if x["event"] == "epoch"]
    assert [x["epoch"] for x in first] == [0] and ckpt.exists()
    resumed = run("--epochs", 2, "--checkpoint", ckpt)
    assert resumed[0] == {"event": "resume", "epoch": 1, "consumed": 0, "world_size": 1}
    epochs = [x for x in resumed if x["event"] == "epoch"]
    assert [x["epoch"] for x in epochs] == [1] and epochs[0]["verify"]["exactly_once"]
    assert epochs[0]["train_loss"] == pytest.approx(straight[1]["train_loss"], rel=1e-6)
    assert first[0]["train_loss"] == pytest.approx(straight[0]["train_loss"], rel=1e-6)


def test_checkpoint_options_need_the_stoke_loader_and_a_file(data):
    for bad in (["--loader", "torch", "--npy-dir", data["src"], "--checkpoint", "x.pt"],
                [*loader_args(data, "stoke"), "--checkpoint-every", 5]):
        r = subprocess.run([sys.executable, str(EXAMPLE), *map(str, bad)], capture_output=True, text=True,
                           env=env(), timeout=60)
        assert r.returncode == 2 and "--checkpoint" in r.stderr


def test_slurm_step_variables_become_torchs(monkeypatch):
    ex = load_example()
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.setenv(name, "")  # restored (to absent, where it was) after the test: env_from_slurm sets them
        monkeypatch.delenv(name)
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2),1")
    for node, tasks in ((0, 2), (1, 2), (2, 1)):
        monkeypatch.setenv("SLURM_NODEID", str(node))
        assert ex.tasks_on_this_node() == tasks
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "5")
    monkeypatch.setenv("SLURM_PROCID", "4")
    monkeypatch.setenv("SLURM_LOCALID", "0")
    monkeypatch.setenv("MASTER_ADDR", "")
    monkeypatch.delenv("MASTER_ADDR")
    with pytest.raises(SystemExit, match="MASTER_ADDR"):
        ex.env_from_slurm()
    monkeypatch.setenv("MASTER_ADDR", "node1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    ex.env_from_slurm()
    assert [os.environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")] == ["4", "5", "0", "1"]
