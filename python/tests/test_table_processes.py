"""Process-level tests of stoke's Delta tables: SIGKILL during ingest, four
processes appending concurrently (versions dense, timestamps growing with
them), corrupt or missing inputs, and the row bytes across optimize and vacuum.

Run with Debian's interpreter (it has numpy and pytest):

    /usr/bin/python3 -m pytest python/tests/test_table_processes.py

The stoke binary comes from $STOKE_BIN (default: <repo>/build/stoke). It is
copied to a temporary directory first, so a concurrent rebuild of build/stoke
(EACCES / ETXTBSY while the linker rewrites it) does not disturb the run.
"""

import csv
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
STOKE_SRC = os.environ.get("STOKE_BIN") or str(REPO / "build" / "stoke")

# Small volumes: each file is a few hundred bytes, so everything here is about
# process behaviour, not throughput.
SHAPE = "4,4,2"
CHANNELS = "2"
N = 200
ROW_COLUMNS = "id,file,label,x,y,split,volume"


# --------------------------------------------------------------------------
# helpers

@pytest.fixture(scope="session")
def stoke_bin(tmp_path_factory):
    d = tmp_path_factory.mktemp("bin")
    dst = d / "stoke"
    for attempt in range(50):
        try:
            shutil.copy2(STOKE_SRC, dst)
            break
        except OSError:  # being rewritten by a rebuild right now
            time.sleep(0.2)
    else:
        pytest.fail(f"cannot copy {STOKE_SRC}")
    os.chmod(dst, 0o755)
    return str(dst)


class Stoke:
    def __init__(self, exe):
        self.exe = exe

    def argv(self, *args):
        return [self.exe, "--no-progress", *map(str, args)]

    def __call__(self, *args, check=True):
        r = subprocess.run(self.argv(*args), capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(
                f"stoke {' '.join(map(str, args))} exited {r.returncode}\n"
                f"stderr: {r.stderr}\nstdout: {r.stdout[:2000]}")
        return r

    def fails(self, *args):
        r = self(*args, check=False)
        assert r.returncode == 1, (
            f"stoke {' '.join(map(str, args))}: expected exit 1, got {r.returncode}\n"
            f"stderr: {r.stderr}\nstdout: {r.stdout[:2000]}")
        return r

    def count(self, table, *extra):
        return int(self("query", table, "--count", *extra).stdout.strip())

    def rows(self, table, select, *extra):
        out = self("query", table, "--select", select, "--format", "json", *extra).stdout
        return [json.loads(line) for line in out.splitlines() if line]

    def history(self, table):
        out = self("history", table, "--json").stdout
        return [json.loads(line) for line in out.splitlines() if line]

    def inspect(self, table, *extra):
        return json.loads(self("inspect", table, "--json", *extra).stdout)


@pytest.fixture(scope="session")
def stoke(stoke_bin):
    return Stoke(stoke_bin)


def synth(stoke, out, samples=N, seed=0, prefix="", shape=SHAPE):
    """stoke synth volumes, then (optionally) prefix every file name, also in labels.csv."""
    stoke("synth", "volumes", "--samples", samples, "--out", out, "--shape", shape,
          "--channels", CHANNELS, "--seed", seed, "--threads", 1)
    out = Path(out)
    if prefix:
        with open(out / "labels.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            (out / r["file"]).rename(out / (prefix + r["file"]))
            r["file"] = prefix + r["file"]
        with open(out / "labels.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return sorted(p.name for p in out.glob("*.npy"))


def ingest_args(src, table, *extra):
    return ["ingest", src, "--table", table, "--labels", Path(src) / "labels.csv",
            "--tensor-column", "volume", *extra]


def commits(table):
    log = Path(table) / "_delta_log"
    if not log.is_dir():
        return []
    return sorted(p.name for p in log.iterdir() if p.name.endswith(".json"))


def check_complete(stoke, table, names):
    files = [r["file"] for r in stoke.rows(table, "file")]
    rows = stoke.rows(table, "id,file")
    assert len(files) == len(names), f"{len(files)} rows, expected {len(names)}"
    assert sorted(files) == sorted(names), "every source file exactly once"
    by_id = {}
    for r in rows:
        by_id.setdefault(r["id"], []).append(r["file"])
    dups = {i: f for i, f in by_id.items() if len(f) > 1}
    assert not dups, (f"ids are not distinct: {len(by_id)} distinct ids for {len(rows)} rows; "
                      f"e.g. {dict(list(dups.items())[:5])}")
    assert stoke.count(table) == len(names)


# --------------------------------------------------------------------------
# 1. SIGKILL during ingest

@pytest.fixture(scope="module")
def kill_env(stoke, tmp_path_factory):
    """One source of N volumes and the time a full ingest of it takes."""
    base = tmp_path_factory.mktemp("kill")
    src = base / "src"
    names = synth(stoke, src, seed=7)
    src_b = base / "src_b"
    names_b = synth(stoke, src_b, seed=8, prefix="b_")
    timing = {}
    for rpf in ("1", None):
        extra = ["--rows-per-file", rpf] if rpf else []
        t = base / f"timing_{rpf}"
        t0 = time.monotonic()
        stoke(*ingest_args(src, t, *extra))
        timing[rpf] = time.monotonic() - t0
        shutil.rmtree(t)
    return dict(base=base, src=src, names=names, src_b=src_b, names_b=names_b, timing=timing)


def kill_after(stoke, args, delay):
    """Start stoke with args, SIGKILL it after `delay` seconds. Returns True when
    the kill hit a running process (False: it had already exited)."""
    p = subprocess.Popen(stoke.argv(*args), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    _, err = p.communicate()
    if p.returncode != -signal.SIGKILL:
        assert p.returncode == 0, f"ingest failed on its own: {err.decode()}"
        return False
    return True


def assert_readable_or_absent(stoke, table):
    """After a kill: either no commit at all (no table) or a readable table."""
    if not commits(table):
        # `inspect` on a directory without a log falls back to "Parquet file"
        # mode and says "... is a directory, not a file"; any clean exit 1 will do.
        stoke.fails("inspect", table)
        r = stoke.fails("query", table, "--count")
        assert "no Delta table" in r.stderr or "not found" in r.stderr, r.stderr
        return None
    stoke("inspect", table)
    info = stoke.inspect(table)
    n = stoke.count(table)
    assert n == info["rows"]
    # Every listed data file exists and every row is readable.
    for f in info["data_files"]:
        assert (Path(table) / f["path"]).is_file(), f["path"]
    assert len(stoke.rows(table, ROW_COLUMNS)) == n
    return info


@pytest.mark.parametrize("seed", range(6))
def test_kill9_during_ingest_then_rerun(stoke, kill_env, seed):
    rng = random.Random(seed)
    # Seeds 0..4 write one data file per source file (a long ingest);
    # seed 5 uses the defaults (one data file, a very short ingest).
    rpf = "1" if seed < 5 else None
    extra = ["--rows-per-file", rpf] if rpf else []
    table = kill_env["base"] / f"t{seed}"
    args = ingest_args(kill_env["src"], table, *extra)
    delay = rng.uniform(0, kill_env["timing"][rpf])
    killed = kill_after(stoke, args, delay)

    info = assert_readable_or_absent(stoke, table)
    print(f"seed {seed}: kill after {delay:.3f} s of {kill_env['timing'][rpf]:.3f} s: "
          f"{'killed' if killed else 'had finished'}, "
          f"{'no table' if info is None else 'version %d' % info['version']}")
    if info is not None:
        # Ingest is one commit: if it landed, it is complete.
        assert info["version"] == 0
        check_complete(stoke, table, kill_env["names"])

    stoke(*args)  # re-run to completion
    check_complete(stoke, table, kill_env["names"])
    stoke(*args)  # and once more: nothing to do, nothing duplicated
    check_complete(stoke, table, kill_env["names"])


@pytest.mark.parametrize("seed", range(3))
def test_kill9_during_append(stoke, kill_env, seed):
    rng = random.Random(100 + seed)
    table = kill_env["base"] / f"append{seed}"
    stoke(*ingest_args(kill_env["src"], table))
    before = stoke.history(table)
    assert [h["version"] for h in before] == [0]

    args = ingest_args(kill_env["src_b"], table, "--rows-per-file", "1")
    # Kill well before the append could finish (its commit comes last).
    delay = rng.uniform(0, 0.8 * kill_env["timing"]["1"])
    killed = kill_after(stoke, args, delay)

    info = assert_readable_or_absent(stoke, table)
    assert info is not None
    print(f"append seed {seed}: kill after {delay:.3f} s: "
          f"{'killed' if killed else 'had finished'}, version {info['version']}")
    if killed and info["version"] == 0:
        assert stoke.history(table) == before
        check_complete(stoke, table, kill_env["names"])
    else:  # the commit landed before the kill
        assert info["version"] == 1
        check_complete(stoke, table, kill_env["names"] + kill_env["names_b"])

    stoke(*args)
    all_names = kill_env["names"] + kill_env["names_b"]
    check_complete(stoke, table, all_names)
    ids = sorted(r["id"] for r in stoke.rows(table, "id"))
    assert ids == list(range(len(all_names))), "ids continue across appends"


# --------------------------------------------------------------------------
# 2. processes appending concurrently

PROCESSES = "abcd"
# 50 in the suite; STOKE_CONCURRENT_COMMITS=250 runs the writer issue's full check (4 x 250 commits).
COMMITS_PER_PROCESS = int(os.environ.get("STOKE_CONCURRENT_COMMITS", "50"))


def test_concurrent_appends(stoke, tmp_path):
    table = tmp_path / "table"
    init = tmp_path / "init"
    init.mkdir()
    np.save(init / "init.npy", np.zeros((2, 3), np.float32))
    stoke("ingest", init, "--table", table, "--tensor-column", "volume")
    assert [h["version"] for h in stoke.history(table)] == [0]

    errors = []
    names = {"init.npy"}

    def worker(tag, seed):
        src = tmp_path / f"src_{tag}"
        src.mkdir()
        rng = np.random.default_rng(seed)
        try:
            for i in range(COMMITS_PER_PROCESS):
                np.save(src / f"{tag}_{i:03d}.npy", rng.random((2, 3), dtype=np.float32))
                r = stoke("ingest", src, "--table", table, "--tensor-column", "volume",
                          check=False)
                if r.returncode != 0:
                    errors.append(f"{tag} #{i}: exit {r.returncode}: {r.stderr.strip()}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{tag}: {e!r}")

    for tag in PROCESSES:
        names.update(f"{tag}_{i:03d}.npy" for i in range(COMMITS_PER_PROCESS))
    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(tag, s)) for s, tag in enumerate(PROCESSES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    total = len(PROCESSES) * COMMITS_PER_PROCESS
    print(f"concurrent appends: {total} ingests in {elapsed:.1f} s")
    assert not errors, "\n".join(errors[:10])

    hist = stoke.history(table)
    versions = sorted(h["version"] for h in hist)
    assert versions == list(range(total + 1)), f"dense versions 0..{total}"
    assert all(h["files_added"] == 1 for h in hist)
    # Timestamps grow with versions, whichever process won each one.
    stamps = [h["timestamp"] for h in sorted(hist, key=lambda h: h["version"])]
    assert all(a < b for a, b in zip(stamps, stamps[1:])), stamps
    assert commits(table) == [f"{v:020d}.json" for v in versions]
    check_complete(stoke, table, sorted(names))


def test_concurrent_appends_of_the_same_source(stoke, tmp_path):
    """Append is idempotent by source file (its location and version), also
    when two processes ingest the same directory at once: every file lands
    exactly once."""
    src = tmp_path / "src"
    names = synth(stoke, src, samples=60, seed=5)
    table = tmp_path / "table"
    # The table starts with one of the files, ingested on its own.
    stoke("ingest", src / names[0], "--table", table, "--labels", src / "labels.csv", "--tensor-column", "volume")
    for attempt in range(3):
        procs = [subprocess.Popen(stoke.argv(*ingest_args(src, table, "--rows-per-file", "10")),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        results = [(p.wait(), *p.communicate()) for p in procs]
        # One may lose with a conflict error (exit 1); none may crash.
        assert all(rc in (0, 1) for rc, _, _ in results), results
        assert any(rc == 0 for rc, _, _ in results), results
        stoke(*ingest_args(src, table))  # finish whatever a loser left out
        check_complete(stoke, table, names)
        # A loser deletes the data files it wrote: every file on disk is in the table.
        live = sorted(Path(f["path"]).name for f in stoke.inspect(table)["data_files"])
        assert parquet_files(table) == live


def params(history_entry):
    return (history_entry.get("commitInfo") or {}).get("operationParameters", {})


def test_sharded_ingest_four_processes_one_killed_and_rerun(stoke, tmp_path):
    """`--shard i/4`: four processes ingest one source into one table at once,
    no coordinator. One is SIGKILLed before it commits and re-run: the end state
    holds every source file exactly once, with ids 0..n-1 (dense over the run),
    and every commit is a shard's."""
    src = tmp_path / "src"
    names = synth(stoke, src, samples=800, seed=11)
    table = tmp_path / "table"
    args = lambda i: ingest_args(src, table, "--rows-per-file", "1", "--shard", f"{i}/4")  # noqa: E731

    # Shard 1 alone, killed while it writes its data files (one per source file).
    p = subprocess.Popen(stoke.argv(*args(1)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        if len(list(Path(table, "shard-1-of-4").glob("part-*.parquet"))) >= 20:
            break
        time.sleep(0.002)
    assert p.poll() is None, "shard 1 finished before it could be killed"
    p.send_signal(signal.SIGSTOP)
    shard_commits = [h for h in stoke.history(table) if "shard" in params(h)]
    p.send_signal(signal.SIGKILL)
    p.communicate()
    assert shard_commits == [], "killed before its commit"

    procs = [subprocess.Popen(stoke.argv(*args(i)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    results = [(p.wait(), *p.communicate()) for p in procs]
    assert all(rc == 0 for rc, _, _ in results), results
    check_complete(stoke, table, names)
    ids = sorted(r["id"] for r in stoke.rows(table, "id"))
    assert ids == list(range(len(names))), "ids are the files' places in the sorted listing"
    by_file = {r["file"]: r["id"] for r in stoke.rows(table, "id,file")}
    assert all(by_file[n] == i for i, n in enumerate(names))
    hist = stoke.history(table)
    shards = sorted(params(h)["shard"] for h in hist if "shard" in params(h))
    assert shards == ["0/4", "1/4", "2/4", "3/4"], hist
    # Each shard created its files in a directory of its own (no shared directory lock).
    assert sorted(p.name for p in Path(table).iterdir() if p.name.startswith("shard-")) == [
        f"shard-{i}-of-4" for i in range(4)]
    assert list(Path(table).glob("part-*.parquet")) == []

    # Re-running any shard finds nothing to do.
    r = stoke(*args(2))
    assert "nothing to do" in r.stdout, r.stdout
    check_complete(stoke, table, names)


def test_a_table_of_more_files_than_descriptors_loads(stoke, tmp_path):
    """1,500 one-row data files loaded under `ulimit -n 64` (soft and hard): the
    loader keeps an LRU of open files sized from the limit; every sample arrives."""
    src = tmp_path / "src"
    synth(stoke, src, samples=1500, seed=4)
    table = tmp_path / "table"
    stoke(*ingest_args(src, table, "--rows-per-file", "1"))
    cmd = "ulimit -Sn 64 && ulimit -Hn 64 && exec " + shlex.join(stoke.argv("bench", "load", table, "--json"))
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["samples"] == 1500 and out["table_rows"] == 1500, out


def test_bench_load_ranks_read_disjoint_shards(stoke, tmp_path):
    """`stoke bench load --rank R --world-size W`: the W processes of a job read the epoch once
    between them; a rank outside the world is refused."""
    src = tmp_path / "src"
    synth(stoke, src, samples=30, seed=6)
    table = tmp_path / "table"
    stoke(*ingest_args(src, table))
    counts = []
    for rank in range(3):
        r = stoke("bench", "load", table, "--rank", rank, "--world-size", 3, "--batch-size", 4, "--json")
        counts.append(json.loads(r.stdout.strip().splitlines()[-1])["samples"])
    assert counts == [10, 10, 10]
    r = stoke("bench", "load", table, "--rank", 3, "--world-size", 3, check=False)
    assert r.returncode != 0 and "rank 3" in r.stderr, r.stderr


def test_shard_option_is_checked(stoke, tmp_path):
    src = tmp_path / "src"
    synth(stoke, src, samples=4, seed=1)
    for bad in ("4/4", "-1/2", "1", "a/b", "1/0"):
        r = stoke(*ingest_args(src, tmp_path / "t", "--shard", bad), check=False)
        assert r.returncode != 0 and "--shard" in r.stderr, (bad, r.stderr)
    r = stoke.fails(*ingest_args(src, tmp_path / "t", "--shard", "0/2", "--mode", "overwrite"))
    assert "--shard needs --mode append" in r.stderr, r.stderr


# --------------------------------------------------------------------------
# 3. bad input

@pytest.fixture
def small_table(stoke, tmp_path):
    src = tmp_path / "src"
    names = synth(stoke, src, samples=20, seed=3)
    table = tmp_path / "table"
    stoke(*ingest_args(src, table, "--rows-per-file", "5"))
    return table, names


def test_corrupt_last_commit(stoke, small_table):
    table, _ = small_table
    last = table / "_delta_log" / commits(table)[-1]
    nlines = len(last.read_text().splitlines())
    with open(last, "a") as f:
        f.write('{"add":{"path":\n')
    for args in (["inspect", table], ["query", table, "--count"], ["history", table]):
        r = stoke.fails(*args)
        assert last.name in r.stderr, r.stderr
        assert f"line {nlines + 1}" in r.stderr, r.stderr


def test_broken_next_commit(stoke, small_table):
    table, _ = small_table
    nxt = table / "_delta_log" / f"{1:020d}.json"
    nxt.write_text('{"commitInfo":{"operation":"WRITE"}}\n{broken\n')
    for args in (["inspect", table], ["query", table, "--count"]):
        r = stoke.fails(*args)
        assert nxt.name in r.stderr and "line 2" in r.stderr, r.stderr


def test_missing_data_file(stoke, small_table):
    table, _ = small_table
    info = stoke.inspect(table)
    victim = info["data_files"][1]["path"]
    (table / victim).unlink()
    for args in (["query", table, "--select", "id", "--format", "csv"],
                 ["query", table, "--where", "label = 1"],
                 ["query", table, "--where", "label = 1", "--count"]):  # labels vary within a file: read
        r = stoke.fails(*args)
        assert victim in r.stderr, r.stderr
    # A count the log's statistics answer (numRecords of every file) opens no data file, as
    # Delta readers count from metadata: it succeeds without noticing the missing file.
    assert stoke.count(table) == info["rows"]


@pytest.fixture
def mismatched_append(stoke, small_table, tmp_path):
    table, names = small_table
    other = tmp_path / "other"
    synth(stoke, other, samples=3, seed=4, prefix="o_", shape="4,4,3")
    before = stoke("history", table, "--json").stdout
    log_before = commits(table)
    r = stoke.fails(*ingest_args(other, table))
    return table, names, other, before, log_before, r


def test_schema_mismatch_leaves_table_untouched(stoke, mismatched_append):
    table, names, _, before, log_before, r = mismatched_append
    assert "schema mismatch" in r.stderr, r.stderr
    assert stoke("history", table, "--json").stdout == before
    assert commits(table) == log_before
    check_complete(stoke, table, names)


def test_schema_mismatch_names_a_file(stoke, mismatched_append):
    # The brief: the error names a file. The offending source files are o_*.npy.
    _, _, other, _, _, r = mismatched_append
    offending = [p.name for p in other.glob("*.npy")]
    assert any(n in r.stderr for n in offending), (
        f"the error names none of the offending source files {offending}: {r.stderr}")


# --------------------------------------------------------------------------
# 4. optimize + vacuum

@pytest.fixture(scope="module")
def optimized(stoke, tmp_path_factory):
    base = tmp_path_factory.mktemp("opt")
    src = base / "src"
    names = synth(stoke, src, samples=60, seed=11)
    table = base / "table"
    stoke(*ingest_args(src, table, "--rows-per-file", "1"))
    before_info = stoke.inspect(table)
    before_rows = stoke("query", table, "--select", ROW_COLUMNS, "--format", "json").stdout
    stoke("optimize", table)
    return dict(table=table, names=names, before_info=before_info, before_rows=before_rows,
                before_files=sorted(f["path"] for f in before_info["data_files"]))


def sorted_rows(text):
    rows = [json.loads(line) for line in text.splitlines() if line]
    return sorted(rows, key=lambda r: r["id"])


def test_optimize_preserves_rows(stoke, optimized):
    table = optimized["table"]
    info = stoke.inspect(table)
    assert optimized["before_info"]["files"] == 60
    assert info["files"] == 1
    assert info["version"] == optimized["before_info"]["version"] + 1
    assert info["rows"] == 60
    after = stoke("query", table, "--select", ROW_COLUMNS, "--format", "json").stdout
    a, b = sorted_rows(optimized["before_rows"]), sorted_rows(after)
    assert len(a) == 60
    assert all(r["volume"].startswith("md5:") for r in a)
    assert a == b
    # and the old version still reads the same (before any vacuum)
    old = stoke("query", table, "--select", ROW_COLUMNS, "--format", "json",
                "--version", optimized["before_info"]["version"]).stdout
    assert sorted_rows(old) == a


def parquet_files(table):
    return sorted(p.name for p in Path(table).glob("*.parquet"))


def test_vacuum(stoke, optimized):
    table = optimized["table"]
    old_version = optimized["before_info"]["version"]
    on_disk = parquet_files(table)
    live = [f["path"] for f in stoke.inspect(table)["data_files"]]
    assert len(on_disk) == 61

    stoke("vacuum", table, "--retain", "168")
    assert parquet_files(table) == on_disk

    r = stoke("vacuum", table, "--retain", "0", "--dry-run")
    listed = sorted(f for f in optimized["before_files"] if f in r.stdout)
    assert listed == optimized["before_files"], r.stdout
    assert not any(f in r.stdout for f in live)
    assert parquet_files(table) == on_disk

    stoke("vacuum", table, "--retain", "0")
    assert parquet_files(table) == sorted(live)
    after = stoke("query", table, "--select", ROW_COLUMNS, "--format", "json").stdout
    assert sorted_rows(after) == sorted_rows(optimized["before_rows"])

    r = stoke.fails("query", table, "--version", old_version, "--select", "id")
    assert any(f in r.stderr for f in optimized["before_files"]), r.stderr
