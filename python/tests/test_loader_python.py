"""Tests of the Python binding (python/stoke, python/src/module.cc): values,
sharding, resume, errors, zero copy, transforms, Ctrl-C.

Run with Debian's interpreter (numpy, torch and pytest come from Debian):

    STOKE_BIN=build/stoke /usr/bin/python3 -m pytest python/tests/test_loader_python.py

The package is imported from $STOKE_PYTHONPATH (default <repo>/build/python, where
the `_stoke` CMake target puts it); the tests skip when it is not built there.
"""

import csv
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from stoke_env import PYTHONPATH, import_stoke, synth_table

stoke = import_stoke()


N = 100  # samples; even, so that two ranks with batch size 10 split it exactly
SAMPLE_SHAPE = (4, 4, 2, 2)  # --shape 4,4,2 --channels 2


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    # Two data files, so that block shuffle and multi-file reads are exercised too.
    src, table = synth_table(tmp_path_factory.mktemp("loader_py"), N, (4, 4, 2), 2, seed=11, rows_per_file=N // 2)
    with open(src / "labels.csv", newline="") as f:
        labels = {r["file"]: r for r in csv.DictReader(f)}
    return dict(src=src, table=table, labels=labels)


def npy(data, name):
    return np.load(data["src"] / name)


def row_ids(loader):
    return [int(i) for b in loader for i in b["__row_ids__"]]


# --------------------------------------------------------------------------
# values

@pytest.mark.parametrize("to", ["numpy", "torch"])
def test_values_equal_source_npy(data, to):
    loader = stoke.Loader(stoke.open_table(data["table"]), batch_size=16, seed=3, to=to, threads=1)
    assert loader.num_rows == N and len(loader) == (N + 15) // 16
    seen = []
    for b in loader:
        vol = b["volume"] if to == "numpy" else b["volume"].numpy()
        assert vol.shape[1:] == SAMPLE_SHAPE and vol.dtype == np.float32
        assert len(b["file"]) == vol.shape[0] == len(b["__row_ids__"])
        for i, name in enumerate(b["file"]):
            np.testing.assert_array_equal(vol[i], npy(data, name), err_msg=name)
            assert int(b["label"][i]) == int(data["labels"][name]["label"])
            assert float(b["x"][i]) == pytest.approx(float(data["labels"][name]["x"]))
        seen += b["file"]
    assert sorted(seen) == sorted(data["labels"]), "every sample exactly once"


def test_columns_and_where(data):
    t = stoke.open_table(data["table"], where="label = 1")
    loader = stoke.Loader(t, batch_size=7, columns=["file", "volume"], to="numpy", threads=1)
    expect = sorted(f for f, r in data["labels"].items() if r["label"] == "1")
    files = []
    for b in loader:
        assert set(b) == {"file", "volume", "__row_ids__", "__epoch__", "__index__"}
        files += b["file"]
    assert sorted(files) == expect and loader.num_rows == len(expect)


def test_table_version_and_open_table_errors(data, tmp_path):
    loader = stoke.Loader(str(data["table"]), to="numpy")
    assert loader.table_version == 0
    with pytest.raises(FileNotFoundError, match="no Delta table"):
        stoke.open_table(tmp_path / "missing")


# --------------------------------------------------------------------------
# order: shards, epochs, resume

@pytest.mark.parametrize("shuffle", ["global", "block", "none"])
def test_two_ranks_see_every_sample_once(data, shuffle):
    for epoch in (0, 1):
        ranks = []
        for rank in (0, 1):
            loader = stoke.Loader(data["table"], batch_size=10, shuffle=shuffle, seed=7, rank=rank,
                                  world_size=2, drop_last=True, to="numpy", threads=1)
            loader.set_epoch(epoch)
            assert len(loader) == N // 20
            ranks.append(row_ids(loader))
        assert len(ranks[0]) == len(ranks[1]) == N // 2
        assert not set(ranks[0]) & set(ranks[1])
        assert sorted(ranks[0] + ranks[1]) == list(range(N))


def test_rank_defaults_from_environment(data, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    loader = stoke.Loader(data["table"], batch_size=5, to="numpy", drop_last=True)
    assert loader.samples_per_epoch == N // 4


def test_rank_defaults_from_a_slurm_step(data, monkeypatch):
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    # A batch script outside a step (SLURM_PROCID, no SLURM_STEP_NUM_TASKS) is one process.
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert stoke.Loader(data["table"], batch_size=5, to="numpy").samples_per_epoch == N
    # A task of an srun step takes its shard.
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "4")
    assert stoke.Loader(data["table"], batch_size=5, to="numpy", drop_last=True).samples_per_epoch == N // 4
    # torchrun's variables win over Slurm's (torchrun started by srun).
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert stoke.Loader(data["table"], batch_size=5, to="numpy", drop_last=True).samples_per_epoch == N // 2


def test_iterating_again_moves_to_the_next_epoch(data):
    loader = stoke.Loader(data["table"], batch_size=10, seed=1, to="numpy", threads=1)
    e0 = row_ids(loader)
    e1 = row_ids(loader)
    assert loader.epoch == 1 and e0 != e1 and sorted(e0) == sorted(e1) == list(range(N))
    loader.set_epoch(0)
    assert row_ids(loader) == e0, "set_epoch repeats an epoch's order exactly"


def test_resume_from_state_dict_gives_the_remaining_order(data):
    kw = dict(batch_size=8, seed=5, to="numpy", threads=1)
    a = stoke.Loader(data["table"], **kw)
    a.set_epoch(2)
    it = iter(a)
    head = [int(i) for _ in range(3) for i in next(it)["__row_ids__"]]
    state = a.state_dict()
    assert state == {"epoch": 2, "consumed": 24}
    rest = [int(i) for b in it for i in b["__row_ids__"]]
    assert sorted(head + rest) == list(range(N))

    b = stoke.Loader(data["table"], **kw)
    b.load_state_dict(state)
    assert b.samples_per_epoch == N - 24
    assert row_ids(b) == rest


# --------------------------------------------------------------------------
# errors

def test_unknown_column_names_the_column(data):
    with pytest.raises(KeyError) as e:
        stoke.Loader(data["table"], columns=["volume", "no_such_column"], to="numpy")
    assert "no_such_column" in str(e.value)
    assert isinstance(e.value, stoke.NotFoundError) and isinstance(e.value, FileNotFoundError)


def test_bad_options_raise_value_error(data):
    with pytest.raises(ValueError, match="shuffle: unknown value 'sideways'"):
        stoke.Loader(data["table"], shuffle="sideways", to="numpy")
    with pytest.raises(ValueError, match="unknown transform 'twirl'"):
        stoke.Loader(data["table"], transforms=[{"kind": "twirl"}], to="numpy")
    with pytest.raises(ValueError, match="batch_size"):  # the C++ message, passed through
        stoke.Loader(data["table"], batch_size=0, to="numpy")
    with pytest.raises(ValueError):  # C++ InvalidArgument: trace was not enabled
        stoke.Loader(data["table"], to="numpy").trace(data["table"] / "t.json")
    with pytest.raises(TypeError, match=r"open_table\(path, where=...\)"):
        stoke.Loader(data["table"], where="label = 1", to="numpy")
    with pytest.raises(TypeError, match=r"table.at\(...\)"):
        stoke.Loader(data["table"], version=0, to="numpy")
    with pytest.raises(ValueError, match="device"):  # at construction, not at the first batch
        stoke.Loader(data["table"], device="banana")
    with pytest.raises(ValueError, match="threads must be in"):
        stoke.Loader(data["table"], threads=100000, to="numpy")
    with pytest.raises(ValueError, match="shuffle_buffer must be >= 1"):  # also where the shuffle is global
        stoke.Loader(data["table"], shuffle_buffer=-5, to="numpy")
    # The refused argument is named, not pybind11's list of the 30 parameters.
    with pytest.raises(TypeError, match="unknown option 'shufle'"):
        stoke.Loader(data["table"], shufle="none", to="numpy")
    with pytest.raises(TypeError, match=r"wrong type: batch_size='32' \(expected int\)"):
        stoke.Loader(data["table"], batch_size="32", to="numpy")
    with pytest.raises(TypeError, match="out of range for its parameter: seed=-1"):
        stoke.Loader(data["table"], seed=-1, to="numpy")


def test_a_loader_cannot_be_pickled_or_copied(data):
    import copy
    import pickle
    loader = stoke.Loader(data["table"], to="numpy")
    for send in (pickle.dumps, copy.copy):
        with pytest.raises(TypeError, match="cannot be pickled, copied or sent to another process"):
            send(loader)
    loader.close()


def test_allocation_failure_is_an_exception_not_an_abort(data):
    # An allocation the loader's pipeline makes fails (injected: the first one it checks, a batch
    # buffer): the C++ loader reports it from next(), and the binding raises it (OSError, the
    # message intact) instead of the process aborting.
    loader = stoke.Loader(data["table"], batch_size=16, to="numpy")
    stoke._stoke._fail_nth_allocation(1)
    try:
        with pytest.raises(OSError, match="out of memory"):
            next(iter(loader))
    finally:
        stoke._stoke._fail_nth_allocation(0)
    loader.close()
    # A batch_size far beyond the table (2^60) asks for no more than the table holds: one batch.
    loader = stoke.Loader(data["table"], batch_size=1 << 60, to="numpy")
    assert [len(b["__row_ids__"]) for b in loader] == [N]


_FORK_SCRIPT = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import stoke
loader = stoke.Loader(sys.argv[2], batch_size=16, to="numpy")
it = iter(loader)
batch = next(it)
pid = os.fork()
if pid == 0:
    signal.alarm(20)  # a hang ends the child by SIGALRM: the parent sees a signal, not an exit
    try:
        loader.next_batch()
        sys.exit("the child used the parent's loader")
    except RuntimeError as e:
        if "before this process forked" not in str(e):
            raise
    assert batch["volume"].shape[0] == 16  # the child's copy of the batch is readable
    del batch
    sys.exit(0)  # a normal interpreter exit: finalizers run, the loader's among them
_, status = os.waitpid(pid, 0)
if not os.WIFEXITED(status):
    sys.exit(f"the child ended by signal {os.WTERMSIG(status)} (it hung)")
if os.WEXITSTATUS(status) != 0:
    sys.exit(f"the child exited {os.WEXITSTATUS(status)}")
rows = 16 + sum(len(b["__row_ids__"]) for b in it)  # the parent's loader carries on
print("rows", rows)
"""


def test_a_forked_child_neither_hangs_nor_uses_the_parents_loader(data):
    # The loader's threads stay in the parent. A child forked while the parent holds a loader and
    # one of its batches: using the loader raises, dropping the batch and exiting normally return
    # at once (before, the child's exit waited forever for the threads it does not have).
    r = subprocess.run([sys.executable, "-c", _FORK_SCRIPT, PYTHONPATH, str(data["table"])],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["rows", str(N)]


def test_missing_table_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        stoke.Loader(tmp_path / "nothing_here", to="numpy")


# --------------------------------------------------------------------------
# zero copy

def test_batches_are_zero_copy_views_that_keep_their_buffer(data):
    """Contract: every array of a batch is a writeable view (owndata False) whose
    `base` is one capsule owning the C++ Batch; the buffer goes back to the
    loader's pool only when the last array/tensor of the batch is gone, so a
    kept batch is never overwritten by later batches."""
    import torch
    loader = stoke.Loader(data["table"], batch_size=4, seed=2, to="numpy", threads=1,
                          prefetch_bytes=64 << 10)  # a small pool: buffers get reused
    it = iter(loader)
    first = next(it)
    vol, ids = first["volume"], first["__row_ids__"]
    assert not vol.flags.owndata and vol.flags.writeable and vol.flags.c_contiguous
    assert type(vol.base).__name__ == "PyCapsule"
    assert vol.base is ids.base is first["label"].base, "one owner per batch"
    assert torch.from_numpy(vol).data_ptr() == vol.ctypes.data
    kept, kept_ptr = vol.copy(), vol.ctypes.data
    del first, ids
    ptrs = set()
    for b in it:
        ptrs.add(b["volume"].ctypes.data)
    assert kept_ptr not in ptrs, "a buffer still referenced was handed out again"
    np.testing.assert_array_equal(vol, kept)
    loader.close()  # batches outlive their loader
    assert loader._loader.closed
    np.testing.assert_array_equal(vol, kept)
    del vol  # returns the buffer to the (orphaned) pool
    with pytest.raises(ValueError, match="closed"):
        loader.next_batch()


def test_torch_tensors_share_the_batch_buffer(data):
    import torch
    loader = stoke.Loader(data["table"], batch_size=8, to="torch", threads=1)
    b = next(iter(loader))
    assert isinstance(b["volume"], torch.Tensor) and b["volume"].dtype == torch.float32
    assert b["__row_ids__"].dtype == torch.int64 and isinstance(b["file"], list)
    assert b["volume"].shape == (8, *SAMPLE_SHAPE)


# --------------------------------------------------------------------------
# transforms

def test_transforms(data):
    import torch
    t = [stoke.RandomFlip(axes=(0, 1), p=1.0), stoke.CenterCrop(axes=(0, 1), size=(2, 4)),
         stoke.ChannelsFirst(), stoke.Cast("bfloat16")]
    loader = stoke.Loader(data["table"], batch_size=10, transforms=t, threads=1)
    b = next(iter(loader))
    assert b["volume"].dtype == torch.bfloat16 and b["volume"].shape == (10, 2, 2, 4, 2)
    for i, name in enumerate(b["file"]):
        x = np.flip(npy(data, name), axis=(0, 1))[1:3, :]
        x = np.moveaxis(x, -1, 0)
        got = b["volume"][i].float().numpy()
        np.testing.assert_allclose(got, x, rtol=2 ** -8, atol=0, err_msg=name)

    n = stoke.Loader(data["table"], batch_size=10, transforms=[stoke.Normalize(mean=1.0, std=2.0)],
                     to="numpy", threads=1)
    b = next(iter(n))
    for i, name in enumerate(b["file"]):
        np.testing.assert_allclose(b["volume"][i], (npy(data, name) - 1.0) / 2.0, rtol=1e-6)

    raw = stoke.Loader(data["table"], batch_size=10, transforms=[{"kind": "cast", "dtype": "bfloat16"}],
                       to="numpy", threads=1)
    b = next(iter(raw))
    assert b["__bfloat16__"] == ["volume"] and b["volume"].dtype == np.uint16


# --------------------------------------------------------------------------
# torch glue, stats, trace

def test_torch_dataloader_and_stats(data, tmp_path):
    from torch.utils.data import DataLoader
    loader = stoke.Loader(data["table"], batch_size=16, trace=True, threads=1)
    ds = stoke.torch.IterableDataset(loader)
    n = sum(b["volume"].shape[0] for b in DataLoader(ds, batch_size=None))
    assert n == N and len(ds) == 7
    s = loader.stats()
    assert s["samples"] == N and s["batches"] == 7 and s["samples_per_second"] > 0
    assert {"fetch", "decode", "collate"} <= set(s["stage_seconds"]) and "wait_share" in s
    assert s["workers"] == 1 and s["read_threads"] >= 0
    loader.trace(tmp_path / "trace.json")
    assert json.loads((tmp_path / "trace.json").read_text())


# --------------------------------------------------------------------------
# Ctrl-C

def test_sigint_stops_a_loading_loop_with_keyboard_interrupt(data):
    script = f"""
import sys
sys.path.insert(0, {PYTHONPATH!r})
import stoke
loader = stoke.Loader({str(data['table'])!r}, batch_size=4, to="numpy", threads=1)
print("ready", flush=True)
try:
    while True:
        for b in loader:
            pass
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
"""
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3 and "interrupted" in out, err


# --------------------------------------------------------------------------
# the GIL

def test_next_releases_the_gil(data):
    """With a huge switch interval, another Python thread runs only when this one
    releases the GIL by itself: next() must do so while it waits for a batch."""
    import threading
    loader = stoke.Loader(data["table"], batch_size=10, to="numpy", threads=1)
    go, ran = threading.Event(), []
    t = threading.Thread(target=lambda: (go.wait(), ran.append(True)))
    t.start()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        time.sleep(0.05)  # the thread is now blocked in go.wait() (without the GIL)
        go.set()          # runnable from here on, but needs the GIL
        while not ran and loader.next_batch() is not None:
            pass
        got_in = bool(ran)
    finally:
        sys.setswitchinterval(old)
        t.join()
    assert got_in, "no other thread ran during a whole epoch of next() calls"


# --------------------------------------------------------------------------
# memory

def _rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


@pytest.mark.parametrize("to", ["numpy", "torch"])
def test_ten_thousand_batches_keep_rss_flat(tmp_path, to):
    """10,000 batches of 256 KiB (3 x 2.5 GB delivered), over many epochs, in this process: RSS may
    not grow by more than 50 MB after the first 1,000. A batch dict, array or tensor that kept its
    batch buffer alive would grow it by ~2.3 GB; a per-epoch leak of the pipeline shows as well."""
    _, table = synth_table(tmp_path, 64, (16, 16, 8), 4, seed=2, rows_per_file=16)
    loader = stoke.Loader(table, batch_size=8, columns=["volume", "label", "file"], to=to,
                          prefetch_bytes=8 << 20, threads=1)
    batches, total = 0, 0.0
    rss_after_warmup = None
    while batches < 10_000:
        for b in loader:  # each pass is a new epoch (the pipeline restarts)
            total += float(b["volume"][0, 0, 0, 0, 0])  # touch the data
            batches += 1
            if batches == 1_000:
                rss_after_warmup = _rss_bytes()
            if batches == 10_000:
                break
    growth = _rss_bytes() - rss_after_warmup
    assert loader.epoch >= 1_000 // 8
    assert growth < 50 << 20, f"RSS grew by {growth / 2**20:.1f} MB over 9,000 batches"
