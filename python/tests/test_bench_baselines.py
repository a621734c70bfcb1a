"""Sanity checks of the loader benchmark's baselines on tiny volumes: `stoke bench files` (the naive
per-file reader in C++), bench/torch_dataloader.py (PyTorch's DataLoader) and bench/fio_limit.sh
(fio's random reads). They check that each runs, prints one JSON line with the agreed keys and
delivers the samples asked for; the numbers themselves are for bench/load_vs_baselines.sh.

    STOKE_BIN=build/stoke /usr/bin/python3 -m pytest -q python/tests/test_bench_baselines.py
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STOKE_SRC = os.environ.get("STOKE_BIN") or str(REPO / "build" / "stoke")
PYTHON = "/usr/bin/python3"  # Debian's: it has numpy and torch
N = 40
KEYS = ["tool", "samples", "batches", "wall_s", "samples_per_s", "mb_per_s", "wait_share", "utilisation",
        "compute_ms"]


@pytest.fixture(scope="module")
def stoke_bin(tmp_path_factory):
    # A copy, so that a concurrent rebuild of build/stoke does not disturb the run.
    dst = tmp_path_factory.mktemp("bin") / "stoke"
    for _ in range(50):
        try:
            shutil.copy2(STOKE_SRC, dst)
            break
        except OSError:
            time.sleep(0.2)
    else:
        pytest.fail(f"cannot copy {STOKE_SRC}")
    os.chmod(dst, 0o755)
    return str(dst)


@pytest.fixture(scope="module")
def volumes(stoke_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("bench") / "volumes"
    subprocess.run([stoke_bin, "--no-progress", "synth", "volumes", "--samples", str(N), "--shape", "4,4,2",
                    "--channels", "2", "--out", str(d)], check=True, capture_output=True)
    return d


def json_line(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{cmd} failed: {p.stderr}"
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected one JSON line from {cmd}, got: {p.stdout!r}"
    r = json.loads(lines[0])
    for k in KEYS:
        assert k in r, f"{k} missing in {r}"
    assert r["wall_s"] > 0 and r["samples_per_s"] > 0 and r["mb_per_s"] > 0
    assert 0 <= r["wait_share"] <= 1.0001 and 0 <= r["utilisation"] <= 1.0001
    return r


@pytest.mark.parametrize("threads", [1, 3])
def test_files_baseline_reads_every_sample(stoke_bin, volumes, threads):
    r = json_line([stoke_bin, "bench", "files", str(volumes), "--batch-size", "8", "--epochs", "2", "--threads",
                   str(threads), "--json"])
    assert r["tool"] == "files"
    assert r["samples"] == 2 * N and r["batches"] == 10
    # Each file is a 128-byte header and 4*4*2*2 float32 values.
    assert r["mb_per_s"] == pytest.approx(2 * N * (128 + 256) / r["wall_s"] / 1e6, rel=0.02, abs=0.06)


def test_files_baseline_batches_compute_and_cold(stoke_bin, volumes):
    r = json_line([stoke_bin, "bench", "files", str(volumes), "--batch-size", "8", "--batches", "7", "--compute-ms",
                   "2", "--json"])
    assert r["samples"] == N + 2 * 8 and r["batches"] == 7
    assert r["compute_ms"] == 2 and r["utilisation"] > 0
    p = subprocess.run([stoke_bin, "bench", "files", str(volumes), "--cold", "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        assert "O_DIRECT" in p.stderr, p.stderr  # only a file system without direct I/O may refuse
    else:
        assert json.loads(p.stdout)["samples"] == N


def test_files_baseline_names_a_bad_file(stoke_bin, volumes, tmp_path):
    d = tmp_path / "bad"
    shutil.copytree(volumes, d)
    (d / "volume_000007.npy").write_bytes(b"not a numpy file")
    p = subprocess.run([stoke_bin, "bench", "files", str(d), "--json"], capture_output=True, text=True)
    assert p.returncode != 0 and "volume_000007.npy" in p.stderr, p.stderr


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_dataloader_baseline(volumes, workers):
    script = str(REPO / "bench" / "torch_dataloader.py")
    r = json_line([PYTHON, script, str(volumes), "--num-workers", str(workers), "--batch-size", "8", "--epochs", "2",
                   "--json"])
    assert r["tool"] == f"torch-dataloader-w{workers}"
    assert r["samples"] == 2 * N and r["batches"] == 10
    r = json_line([PYTHON, script, str(volumes), "--num-workers", str(workers), "--batch-size", "8", "--batches", "7",
                   "--warmup-batches", "2", "--compute-ms", "2", "--json"])
    assert r["samples"] == 7 * 8  # 40 samples make 5 full batches of 8 per epoch
    assert r["batches"] == 7 and r["utilisation"] > 0


def test_fio_limit_prints_one_json_line(stoke_bin, volumes, tmp_path):
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    table = tmp_path / "table"
    subprocess.run([stoke_bin, "--no-progress", "ingest", str(volumes), "--labels", str(volumes / "labels.csv"),
                    "--table", str(table)], check=True, capture_output=True)
    p = subprocess.run(["bash", str(REPO / "bench" / "fio_limit.sh"), str(table), "4096", "4", "0", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["tool"] == "fio" and r["bs"] == 4096 and r["iodepth"] == 4 and r["direct"] == 0
    assert r["iops"] > 0 and r["samples_per_s"] == r["iops"] and r["mb_per_s"] > 0
