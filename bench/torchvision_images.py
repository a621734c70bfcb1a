#!/usr/bin/python3
"""The image baseline: torchvision's ImageFolder + torch.utils.data.DataLoader.

ImageFolder(DIR) (PIL decode, .convert("RGB")) with Compose([RandomResizedCrop(SIZE),
RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet mean, std)]), DataLoader(batch_size=B,
shuffle=True, num_workers=W, drop_last=False) with a seeded generator (persistent workers when
W > 0, as training scripts set). The consumer sleeps --compute-ms per batch to stand in for an
accelerator.

Measured after --warmup-batches batches: wall time, the time blocked in next() (wait), images/s.
With W = 0 the dataset also sums its busy seconds per stage ("decode": open + decode + convert,
"transform": the Compose); with W > 0 those run in the workers and are not reported. Peak memory:
"max_rss_mb" is this process's peak RSS and "workers_max_rss_mb" the sum of the workers' peaks
(read from /proc before they exit; pages shared after fork are counted in each).

    /usr/bin/python3 bench/torchvision_images.py DIR [--num-workers W] [--batch-size B] [--size S]
        [--batches N | --epochs E] [--compute-ms X] [--warmup-batches K] [--seed S] [--json]

With --json prints one line: {"tool":"torchvision-wW","samples":...,"batches":...,"wall_s":...,
"samples_per_s":...,"wait_share":...,"utilisation":...,"stage_seconds":{...} or null,
"max_rss_mb":...,"workers_max_rss_mb":...,"num_workers":W,"batch_size":B}.
"""

import argparse
import json
import multiprocessing
import resource
import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


class TimedImageFolder(datasets.ImageFolder):
    """ImageFolder that sums the seconds spent decoding and transforming (in this process)."""

    def __init__(self, root, transform):
        super().__init__(root)
        self.timed_transform = transform
        self.decode_s = 0.0
        self.transform_s = 0.0

    def __getitem__(self, i):
        path, target = self.samples[i]
        t0 = time.perf_counter()
        img = self.loader(path)  # PIL open + convert("RGB")
        t1 = time.perf_counter()
        x = self.timed_transform(img)
        t2 = time.perf_counter()
        self.decode_s += t1 - t0
        self.transform_s += t2 - t1
        return x, target


def hwm_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batches", type=int, default=0, help="measured batches (0: whole epochs)")
    ap.add_argument("--warmup-batches", type=int, default=0)
    ap.add_argument("--compute-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    tf = transforms.Compose([transforms.RandomResizedCrop(a.size), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    ds = TimedImageFolder(a.dir, tf)
    if len(ds) == 0:
        sys.exit(f"torchvision_images: no images under {a.dir}")
    g = torch.Generator()
    g.manual_seed(a.seed)
    torch.manual_seed(a.seed)
    loader = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.num_workers, drop_last=False,
                        generator=g, persistent_workers=a.num_workers > 0)
    per_epoch = len(loader)
    measured = a.batches if a.batches > 0 else a.epochs * per_epoch

    def endless():
        while True:
            yield from loader

    it = endless()
    for _ in range(a.warmup_batches):
        next(it)
    ds.decode_s = ds.transform_s = 0.0
    samples = 0
    wait = 0.0
    start = time.perf_counter()
    for _ in range(measured):
        t0 = time.perf_counter()
        x, _ = next(it)
        wait += time.perf_counter() - t0
        samples += x.shape[0]
        if a.compute_ms > 0:
            time.sleep(a.compute_ms / 1000)
    wall = time.perf_counter() - start
    workers_hwm = sum(hwm_mb(p.pid) for p in multiprocessing.active_children())
    del it, loader

    r = {
        "tool": f"torchvision-w{a.num_workers}", "samples": samples, "batches": measured, "wall_s": round(wall, 6),
        "samples_per_s": samples / wall if wall > 0 else 0.0, "wait_share": wait / wall if wall > 0 else 0.0,
        "utilisation": (measured * a.compute_ms / 1000) / wall if wall > 0 else 0.0,
        "stage_seconds": ({"decode": round(ds.decode_s, 6), "transform": round(ds.transform_s, 6)}
                          if a.num_workers == 0 else None),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "workers_max_rss_mb": round(workers_hwm, 1), "num_workers": a.num_workers, "batch_size": a.batch_size,
    }
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{r['tool']}: {samples} images in {wall:.2f} s: {r['samples_per_s']:.1f} images/s, "
              f"wait share {r['wait_share']:.3f}, peak RSS {r['max_rss_mb']:.0f} MB "
              f"(+ workers {r['workers_max_rss_mb']:.0f} MB)")


if __name__ == "__main__":
    main()
