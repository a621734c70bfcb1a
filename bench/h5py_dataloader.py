#!/usr/bin/python3
"""The HDF5 baseline: h5py random reads through a map-style Dataset and torch's DataLoader, and the
generator of its data.

    /usr/bin/python3 bench/h5py_dataloader.py write DIR --samples N [--per-file K] [--shape 16,32,32]
    /usr/bin/python3 bench/h5py_dataloader.py read DIR [--num-workers W] [--batch-size B]
        [--batches N | --epochs E] [--warmup-batches K] [--seed S] [--json]

write: N samples in files of K (default 100) along axis 0: dataset `volume` float32 [K, *shape],
chunked one sample per chunk with gzip (level 4) and shuffle, and `label` int64 [K]; values are
small integers (a smooth field plus noise) so that gzip has something to do. Deterministic.

read: a Dataset over every (file, index) of DIR's sorted .h5 files; __getitem__ reads
volume[index] and label[index] with h5py (one handle per file, opened lazily in each process, as
usual with h5py and worker processes). DataLoader(batch_size=B, shuffle=True, num_workers=W) with a
seeded generator: a global shuffle. Measured after --warmup-batches: images/s as samples/s,
MB/s of tensor payload, wait share. With --json one line: {"tool":"h5py-wW","samples":...,
"samples_per_s":...,"mb_per_s":...,"wait_share":...,"max_rss_mb":...,"workers_max_rss_mb":...}.
"""

import argparse
import json
import multiprocessing
import os
import resource
import sys
import time

import h5py
import numpy as np


def write(a):
    shape = tuple(int(x) for x in a.shape.split(","))
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(0)
    grid = np.indices(shape).sum(axis=0).astype(np.float32)
    written = 0
    f_index = 0
    while written < a.samples:
        k = min(a.per_file, a.samples - written)
        vol = np.empty((k, *shape), np.float32)
        for i in range(k):
            vol[i] = np.floor((grid * (1 + (written + i) % 7)) % 16) + rng.integers(0, 4, shape)
        labels = (np.arange(written, written + k) % 10).astype(np.int64)
        with h5py.File(os.path.join(a.dir, f"part-{f_index:05d}.h5"), "w") as f:
            f.create_dataset("volume", data=vol, chunks=(1, *shape), compression="gzip", compression_opts=4,
                             shuffle=True)
            f.create_dataset("label", data=labels)
        written += k
        f_index += 1


class H5Samples:
    """Every (file, index) of the directory's sorted .h5 files; handles opened lazily per process."""

    def __init__(self, directory):
        self.paths = sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".h5"))
        if not self.paths:
            raise SystemExit(f"h5py_dataloader: no .h5 files in {directory}")
        self.index = []
        for fi, p in enumerate(self.paths):
            with h5py.File(p, "r") as f:
                self.index.extend((fi, j) for j in range(f["volume"].shape[0]))
        self.files = {}

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        import torch
        fi, j = self.index[i]
        f = self.files.get(fi)
        if f is None:
            f = self.files[fi] = h5py.File(self.paths[fi], "r")
        return torch.from_numpy(f["volume"][j]), int(f["label"][j])


def hwm_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def read(a):
    import torch
    from torch.utils.data import DataLoader
    ds = H5Samples(a.dir)
    g = torch.Generator()
    g.manual_seed(a.seed)
    loader = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.num_workers, generator=g,
                        persistent_workers=a.num_workers > 0)
    measured = a.batches if a.batches > 0 else a.epochs * len(loader)

    def endless():
        while True:
            yield from loader

    it = endless()
    for _ in range(a.warmup_batches):
        next(it)
    samples = nbytes = 0
    wait = 0.0
    start = time.perf_counter()
    for _ in range(measured):
        t0 = time.perf_counter()
        x, _ = next(it)
        wait += time.perf_counter() - t0
        samples += x.shape[0]
        nbytes += x.numel() * x.element_size()
    wall = time.perf_counter() - start
    workers_hwm = sum(hwm_mb(p.pid) for p in multiprocessing.active_children())
    r = {"tool": f"h5py-w{a.num_workers}", "samples": samples, "batches": measured, "wall_s": round(wall, 6),
         "samples_per_s": samples / wall if wall > 0 else 0.0, "mb_per_s": nbytes / wall / 1e6 if wall > 0 else 0.0,
         "wait_share": wait / wall if wall > 0 else 0.0,
         "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
         "workers_max_rss_mb": round(workers_hwm, 1), "num_workers": a.num_workers, "batch_size": a.batch_size}
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{r['tool']}: {samples} samples in {wall:.2f} s: {r['samples_per_s']:.1f} samples/s, "
              f"{r['mb_per_s']:.1f} MB/s, wait share {r['wait_share']:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("--samples", type=int, required=True)
    w.add_argument("--per-file", type=int, default=100)
    w.add_argument("--shape", default="16,32,32")
    r = sub.add_parser("read")
    r.add_argument("dir")
    r.add_argument("--num-workers", type=int, default=0)
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--epochs", type=int, default=1)
    r.add_argument("--batches", type=int, default=0)
    r.add_argument("--warmup-batches", type=int, default=0)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.cmd == "write":
        write(a)
    else:
        read(a)


if __name__ == "__main__":
    sys.exit(main())
