"""Sanity checks of bench/images.sh's baselines on tiny data: bench/torchvision_images.py
(torchvision's ImageFolder + DataLoader) and bench/h5py_dataloader.py (writing the HDF5 files, and h5py
random reads through a DataLoader). Each runs, prints one JSON line with the agreed keys and delivers
the samples asked for; the numbers themselves are for bench/images.sh.

    STOKE_BIN=build/stoke /usr/bin/python3 -m pytest -q python/tests/test_bench_images.py
"""

import json
import subprocess
from pathlib import Path

import pytest

from stoke_env import run_stoke

pytest.importorskip("torchvision", reason="python3-torchvision (Debian) is the image baseline")
h5py = pytest.importorskip("h5py", reason="python3-h5py (Debian) is the HDF5 baseline")

REPO = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"


def json_line(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{cmd} failed: {p.stderr}"
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected one JSON line from {cmd}, got: {p.stdout!r}"
    r = json.loads(lines[0])
    for k in ("tool", "samples", "batches", "wall_s", "samples_per_s", "wait_share", "max_rss_mb",
              "workers_max_rss_mb", "num_workers", "batch_size"):
        assert k in r, f"{k} missing in {r}"
    assert r["wall_s"] > 0 and r["samples_per_s"] > 0 and 0 <= r["wait_share"] <= 1.0001
    return r


def test_torchvision_baseline_delivers_the_batches_asked_for(tmp_path):
    run_stoke("synth", "images", "--out", tmp_path / "imgs", "--images", 24, "--classes", 3, "--min-size", 40,
              "--max-size", 80)
    r = json_line([PYTHON, REPO / "bench/torchvision_images.py", tmp_path / "imgs", "--batch-size", 4, "--size", 32,
                   "--batches", 3, "--warmup-batches", 1, "--json"])
    assert r["tool"] == "torchvision-w0" and r["samples"] == 12 and r["batches"] == 3
    assert r["stage_seconds"]["decode"] > 0 and r["stage_seconds"]["transform"] > 0


def test_h5py_baseline_writes_files_stoke_ingests_and_reads_them(tmp_path):
    h5 = tmp_path / "h5"
    subprocess.run([str(c) for c in (PYTHON, REPO / "bench/h5py_dataloader.py", "write", h5, "--samples", 30,
                                     "--per-file", 8, "--shape", "4,5,6")], check=True, timeout=120)
    files = sorted(h5.glob("*.h5"))
    assert len(files) == 4
    with h5py.File(files[-1], "r") as f:
        assert f["volume"].shape == (6, 4, 5, 6) and f["volume"].compression == "gzip"
        assert f["volume"].chunks == (1, 4, 5, 6) and f["label"].shape == (6,)
    run_stoke("ingest", h5, "--table", tmp_path / "table", "--hdf5-samples", "axis0")
    assert run_stoke("query", tmp_path / "table", "--count").stdout.strip() == "30"
    r = json_line([PYTHON, REPO / "bench/h5py_dataloader.py", "read", h5, "--batch-size", 4, "--epochs", 1,
                   "--json"])
    assert r["tool"] == "h5py-w0" and r["samples"] == 30 and r["batches"] == 8
    assert r["mb_per_s"] > 0
