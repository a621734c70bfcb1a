#!/usr/bin/python3
"""The PyTorch baseline: torch.utils.data.DataLoader over a directory of .npy files.

A map-style Dataset over the sorted .npy files of DIR: __getitem__ does np.load(path) and returns
(torch.from_numpy(array), label), the label joined from DIR/labels.csv (columns `file`, `label`).
DataLoader(batch_size=B, shuffle=True, num_workers=W, drop_last=False) with a seeded generator
(persistent workers when W > 0, as training scripts set). The consumer sleeps --compute-ms per batch
to stand in for an accelerator. With --device cuda the DataLoader pins its batches (pin_memory=True)
and each batch is copied to the GPU with .to(device, non_blocking=True), as PyTorch's guides advise;
the clock stops after a final torch.cuda.synchronize().

Measured after --warmup-batches batches: wall time, the time blocked in next() (wait), samples/s,
MB/s of payload (tensor bytes; the .npy headers are not counted), utilisation = compute / wall.

    /usr/bin/python3 bench/torch_dataloader.py DIR [--num-workers W] [--batch-size B]
        [--batches N | --epochs E] [--compute-ms X] [--warmup-batches K] [--seed S]
        [--device cpu|cuda] [--json]

With --json prints one line: {"tool":"torch-dataloader-wW","samples":...,"batches":...,"wall_s":...,
"samples_per_s":...,"mb_per_s":...,"wait_share":...,"utilisation":...,"compute_ms":...,
"num_workers":W,"batch_size":B}. Run with Debian's interpreter (it has numpy and torch).
"""

import argparse
import csv
import json
import os
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class NpyFiles(Dataset):
    """The sorted .npy files of a directory, each loaded with np.load, with its label."""

    def __init__(self, directory, labels_csv):
        self.paths = sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".npy"))
        if not self.paths:
            raise SystemExit(f"torch_dataloader: no .npy files in {directory}")
        labels = {}
        with open(labels_csv, newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None or "file" not in reader.fieldnames or "label" not in reader.fieldnames:
                raise SystemExit(f"torch_dataloader: {labels_csv} needs the columns 'file' and 'label'")
            for row in reader:
                labels[row["file"]] = int(row["label"])
        try:
            self.labels = [labels[os.path.basename(p)] for p in self.paths]
        except KeyError as e:
            raise SystemExit(f"torch_dataloader: {e.args[0]} has no row in {labels_csv}")

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return torch.from_numpy(np.load(self.paths[i])), self.labels[i]


def endless(loader):
    """The loader's batches, epoch after epoch (each epoch a new shuffle from the seeded generator)."""
    while True:
        yield from loader


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="directory of .npy files (e.g. from `stoke synth volumes`)")
    ap.add_argument("--labels", help="labels CSV (default: DIR/labels.csv)")
    ap.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes (default 0)")
    ap.add_argument("--batch-size", type=int, default=32, help="samples per batch (default 32)")
    count = ap.add_mutually_exclusive_group()
    count.add_argument("--batches", type=int, default=0, help="measure N batches, crossing epochs as needed")
    count.add_argument("--epochs", type=int, default=1, help="measure E whole epochs (default 1)")
    ap.add_argument("--compute-ms", type=float, default=0.0, help="emulated compute: sleep per batch (default 0)")
    ap.add_argument("--warmup-batches", type=int, default=0, help="batches taken before timing starts (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    ap.add_argument("--device", default="cpu", help="cpu (default), or cuda / cuda:N: pinned batches copied there")
    ap.add_argument("--json", action="store_true", help="print one line of JSON")
    a = ap.parse_args()
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if a.num_workers < 0 or a.batch_size < 1 or a.batches < 0 or a.epochs < 1 or a.compute_ms < 0 or a.warmup_batches < 0:
        ap.error("counts must be positive (--num-workers, --batches, --warmup-batches and --compute-ms may be 0)")

    ds = NpyFiles(a.dir, a.labels or os.path.join(a.dir, "labels.csv"))
    g = torch.Generator()
    g.manual_seed(a.seed)
    loader = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.num_workers, drop_last=False,
                        generator=g, persistent_workers=a.num_workers > 0, pin_memory=cuda)
    measured = a.batches if a.batches > 0 else a.epochs * len(loader)

    it = endless(loader)
    for _ in range(a.warmup_batches):
        volumes, labels = next(it)
        if cuda:  # the device's allocations happen here, outside the clock, as stoke's do
            volumes.to(device, non_blocking=True), labels.to(device, non_blocking=True)
    if cuda:
        torch.cuda.synchronize(device)
    samples = batches = payload_bytes = 0
    wait_s = compute_s = 0.0
    start = time.perf_counter()
    for _ in range(measured):
        t0 = time.perf_counter()
        volumes, labels = next(it)
        if cuda:
            volumes = volumes.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
        t1 = time.perf_counter()
        wait_s += t1 - t0
        if a.compute_ms > 0:
            time.sleep(a.compute_ms / 1000)
            compute_s += time.perf_counter() - t1
        samples += len(labels)
        batches += 1
        payload_bytes += volumes.element_size() * volumes.nelement()
    if cuda:
        torch.cuda.synchronize(device)
    wall_s = time.perf_counter() - start
    del it  # shuts the workers down before the interpreter exits

    r = {
        "tool": f"torch-dataloader-w{a.num_workers}" + ("-cuda" if cuda else ""),
        "samples": samples,
        "batches": batches,
        "wall_s": round(wall_s, 6),
        "samples_per_s": round(samples / wall_s, 1),
        # 6 places: small samples read slowly are kilobytes a second, which one place rounds to 0.
        "mb_per_s": round(payload_bytes / wall_s / 1e6, 6),
        "wait_share": round(wait_s / wall_s, 4),
        "utilisation": round(compute_s / wall_s, 4),
        "compute_ms": a.compute_ms,
        "num_workers": a.num_workers,
        "batch_size": a.batch_size,
    }
    if a.json:
        print(json.dumps(r, separators=(",", ":")))
        return
    print(f"torch DataLoader, {a.num_workers} workers: {samples} samples in {batches} batches of up to "
          f"{a.batch_size}, {wall_s:.2f} s (after {a.warmup_batches} warm-up batches)")
    print(f"{'samples/s':>12} {'MB/s':>10} {'wait share':>12} {'utilisation':>12} {'compute ms':>12}")
    print(f"{r['samples_per_s']:12.1f} {r['mb_per_s']:10.1f} {r['wait_share']:12.3f} {r['utilisation']:12.3f} "
          f"{a.compute_ms:12g}")


if __name__ == "__main__":
    sys.exit(main())
