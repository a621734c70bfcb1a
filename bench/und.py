#!/usr/bin/python3
"""The UND experiment: how fast an image pipeline feeds a GPU that trains a CNN.

The study being reproduced trained VGG16 on an ImageFolder of JPEGs and measured 804 images/s
with DALI against 203 images/s with a plain PyTorch pipeline. This script trains a torchvision
model (resnet50 by default, vgg16, or "tiny", a small CNN for a CPU smoke test) from random
weights (num_classes = the classes of the data) with SGD (momentum 0.9), channels_last, batch B,
and AMP (autocast bfloat16 without a scaler, or float16 with a GradScaler, or none), fed by:

  torchvision  ImageFolder (PIL) + DataLoader(shuffle=True, num_workers=W, pin_memory=True,
               persistent_workers=W > 0, drop_last=True), .to(device, non_blocking=True).
               RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor() (float32), Normalize.
  stoke-cpu    stoke.Loader(TABLE, shuffle="global", columns=["image", "label"], the same four
               transforms (ToTensor in the AMP dtype), device=DEVICE, drop_last=True, threads=T).
  stoke-gpu    the same with transforms_on="cuda": decode on the CPU, crop, resize, flip and
               normalize on the GPU. A Loader that refuses the keyword is recorded as an error.

Each run builds the pipeline and a fresh model, takes --warmup-steps steps untimed, then
--steps timed steps (new epochs start when the data runs out; --time-limit ends the timed loop
early). Measured: wall time of the timed loop (ended by a device synchronize), "wait_s" (the
time blocked taking the next batch, host-to-device copy included), images/s = steps * B / wall,
and "gpu_busy_share": the sum over timed steps of the GPU time between a CUDA event recorded
before the forward and one after optimizer.step(), divided by the wall time (the gaps are the
GPU waiting for data; null on the CPU).

    PYTHONPATH=build/python /usr/bin/python3 bench/und.py --images DIR --table TABLE
        [--pipelines torchvision,stoke-cpu,stoke-gpu] [--model resnet50|vgg16|tiny|NAME]
        [--batch-size 128] [--steps 60] [--warmup-steps 10] [--workers 16 | --workers 4,8,16]
        [--threads 0] [--amp bfloat16|float16|none] [--device cuda] [--cores N]
        [--time-limit SECONDS] [--num-classes K] [--lr 0.01] [--seed 0] [--json OUT.jsonl]

--workers is a list: the torchvision pipeline runs once per value, each stoke pipeline once.
--threads 0 leaves stoke's thread count at its default. --cores N restricts this process (so
the DataLoader workers and stoke's threads) to the first N CPUs it may use. Each run appends
one JSON line to --json and prints it: pipeline, model, batch_size, steps, images_per_s,
wall_s, wait_s, gpu_busy_share, workers, threads, cores, amp, device, torch, gpu (and "error"
for a run that failed). A table of the runs ends the output. Exit status 0 when at least one
run succeeded.
"""

import argparse
import contextlib
import gc
import json
import os
import random
import sys
import time
import traceback

import torch
from torch import nn

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
PIPELINES = ("torchvision", "stoke-cpu", "stoke-gpu")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", help="ImageFolder directory (torchvision pipeline)")
    ap.add_argument("--table", help="stoke table of the same images (stoke pipelines)")
    ap.add_argument("--pipelines", default=",".join(PIPELINES))
    ap.add_argument("--model", default="resnet50", help="resnet50, vgg16, tiny or a torchvision model name")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=60, help="timed steps per run")
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--workers", default="16", help="DataLoader workers, a comma list: one run each")
    ap.add_argument("--threads", type=int, default=0, help="stoke threads (0: stoke's default)")
    ap.add_argument("--amp", default="bfloat16", choices=["bfloat16", "float16", "none"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cores", type=int, default=0, help="use only the first N CPUs (0: all)")
    ap.add_argument("--time-limit", type=float, default=0.0, help="seconds a run's timed loop may take (0: none)")
    ap.add_argument("--num-classes", type=int, default=0, help="0: from the table's metadata or --images")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="append one JSON line per run to this file")
    a = ap.parse_args(argv)
    a.pipelines = [p.strip() for p in a.pipelines.split(",") if p.strip()]
    bad = [p for p in a.pipelines if p not in PIPELINES]
    if bad:
        ap.error(f"--pipelines: unknown {bad} (choose from {', '.join(PIPELINES)})")
    a.workers = [int(w) for w in a.workers.split(",") if w.strip()]
    if "torchvision" in a.pipelines and not a.images:
        ap.error("--images is needed for the torchvision pipeline")
    if any(p.startswith("stoke") for p in a.pipelines) and not a.table:
        ap.error("--table is needed for the stoke pipelines")
    return a


def restrict_cores(n):
    """Keep this process (and the processes and threads it starts) on the first n allowed CPUs."""
    if n > 0:
        allowed = sorted(os.sched_getaffinity(0))
        if n > len(allowed):
            sys.exit(f"und: --cores {n}, but only {len(allowed)} CPUs are allowed")
        os.sched_setaffinity(0, allowed[:n])
        torch.set_num_threads(min(torch.get_num_threads(), n))
    return len(os.sched_getaffinity(0))


def seed_all(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:
        pass


def count_classes(a):
    if a.num_classes > 0:
        return a.num_classes
    if a.table:
        try:
            import stoke
            classes = stoke.open_table(a.table).info().get("stoke.classes", {}).get("label")
            if classes:
                return len(classes)
        except Exception as e:  # noqa: BLE001 - fall back to the image folder
            log(f"could not read the classes of {a.table}: {e}")
    if a.images:
        return len([d for d in os.scandir(a.images) if d.is_dir()])
    return 1000


class TinyNet(nn.Module):
    """A few convolutions, pooling and a linear layer: enough to exercise the loop on a CPU."""

    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def build_model(name, num_classes, device):
    if name == "tiny":
        model = TinyNet(num_classes)
    else:
        import torchvision
        model = getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
    return model.to(device).to(memory_format=torch.channels_last)


def amp_setup(amp, device):
    """(autocast context factory, GradScaler or None, the dtype stoke's ToTensor should give)."""
    in_dtype = {"bfloat16": "bfloat16", "float16": "float16", "none": "float32"}[amp]
    if amp == "none" or (device.type == "cpu" and amp == "float16"):
        if amp != "none":
            log("autocast float16 is not available on the CPU: AMP off")
        return contextlib.nullcontext, None, in_dtype
    dtype = torch.bfloat16 if amp == "bfloat16" else torch.float16
    scaler = None
    if dtype == torch.float16:
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
    return (lambda: torch.autocast(device.type, dtype=dtype)), scaler, in_dtype


class Trainer:
    """One training step of a model: forward, loss, backward, optimizer step."""

    def __init__(self, a, num_classes, device):
        self.device = device
        self.model = build_model(a.model, num_classes, device)
        self.model.train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)
        self.loss_fn = nn.CrossEntropyLoss()
        self.autocast, self.scaler, self.in_dtype = amp_setup(a.amp, device)
        self.autocast_on = self.autocast is not contextlib.nullcontext
        self.loss = None

    def step(self, x, y):
        if not self.autocast_on and x.dtype != torch.float32:
            x = x.float()
        x = x.contiguous(memory_format=torch.channels_last)
        with self.autocast():
            loss = self.loss_fn(self.model(x), y)
        self.opt.zero_grad(set_to_none=True)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        self.loss = loss


def epochs_of(iterable):
    """Batches of `iterable`, iterated again (a new epoch) each time it runs out."""
    while True:
        n = 0
        for batch in iterable:
            n += 1
            yield batch
        if n == 0:
            raise RuntimeError("the pipeline delivered no batch in an epoch (fewer samples than a batch?)")


def torchvision_pipeline(a, workers, device):
    """(batches as (x, y) on the device, a function that releases the pipeline)."""
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(a.images, tf)
    g = torch.Generator()
    g.manual_seed(a.seed)
    loader = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=workers,
                        pin_memory=device.type == "cuda", persistent_workers=workers > 0, drop_last=True,
                        generator=g)
    batches = epochs_of(loader)

    def fetch():
        x, y = next(batches)
        return x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    return fetch, batches.close


def stoke_pipeline(a, device, on_gpu, in_dtype):
    """As torchvision_pipeline, for stoke's Loader (kept in this process: it cannot be forked)."""
    import stoke
    tfs = [stoke.RandomResizedCrop(224), stoke.RandomHorizontalFlip(), stoke.ToTensor(in_dtype),
           stoke.Normalize(MEAN, STD)]
    kw = {"threads": a.threads} if a.threads > 0 else {}
    if on_gpu:
        kw["transforms_on"] = "cuda"
    loader = stoke.Loader(a.table, batch_size=a.batch_size, shuffle="global", seed=a.seed,
                          columns=["image", "label"], transforms=tfs, device=str(device), drop_last=True, **kw)
    batches = epochs_of(loader)

    def fetch():
        b = next(batches)
        return b["image"], b["label"].to(device).long()

    def release():
        batches.close()
        loader.close()

    return fetch, release


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(a, fetch, trainer, device):
    """Warm-up steps, then the timed steps: {"steps", "warmup_steps", "wall_s", "wait_s", "gpu_s"}."""
    cuda = device.type == "cuda"
    t0 = time.perf_counter()
    warm = 0
    while warm < a.warmup_steps and not (a.time_limit > 0 and time.perf_counter() - t0 > a.time_limit):
        trainer.step(*fetch())
        warm += 1
    sync(device)
    events = []
    wait = 0.0
    steps = 0
    start = time.perf_counter()
    while steps < a.steps:
        t = time.perf_counter()
        x, y = fetch()
        wait += time.perf_counter() - t
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
        trainer.step(x, y)
        if cuda:
            end.record()
            events.append((begin, end))
        steps += 1
        if a.time_limit > 0 and time.perf_counter() - start > a.time_limit:
            break
    sync(device)
    wall = time.perf_counter() - start
    gpu_s = sum(b.elapsed_time(e) for b, e in events) / 1000 if cuda else None
    return {"steps": steps, "warmup_steps": warm, "wall_s": wall, "wait_s": wait, "gpu_s": gpu_s}


def base_record(a, pipeline, workers, device):
    import torchvision
    cuda = device.type == "cuda"
    return {"pipeline": pipeline, "model": a.model, "batch_size": a.batch_size, "steps": a.steps,
            "workers": workers, "threads": a.threads if pipeline.startswith("stoke") else None,
            "cores": len(os.sched_getaffinity(0)), "amp": a.amp, "device": str(device),
            "torch": torch.__version__, "torchvision": torchvision.__version__,
            "gpu": torch.cuda.get_device_name(device) if cuda else None, "seed": a.seed,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}


def run_one(a, pipeline, workers, device, num_classes):
    """One run of one pipeline: its JSON record (with "error" when it failed)."""
    rec = base_record(a, pipeline, workers, device)
    log(f"start {pipeline}" + (f" workers={workers}" if workers is not None else f" threads={a.threads}")
        + f" cores={rec['cores']} model={a.model} batch={a.batch_size} steps={a.steps}")
    seed_all(a.seed)
    release = None
    try:
        trainer = Trainer(a, num_classes, device)
        if pipeline == "torchvision":
            fetch, release = torchvision_pipeline(a, workers, device)
        else:
            try:
                fetch, release = stoke_pipeline(a, device, pipeline == "stoke-gpu", trainer.in_dtype)
            except (TypeError, ValueError, RuntimeError) as e:
                if pipeline != "stoke-gpu":
                    raise
                return {**rec, "error": str(e)}
        m = measure(a, fetch, trainer, device)
        loss = float(trainer.loss) if trainer.loss is not None else None
    except Exception as e:  # noqa: BLE001 - record the failure, go on with the next run
        traceback.print_exc()
        return {**rec, "error": f"{type(e).__name__}: {e}"}
    finally:
        if release is not None:
            release()
        trainer = fetch = release = None
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    wall = m["wall_s"]
    rec.update(steps=m["steps"], warmup_steps=m["warmup_steps"], wall_s=round(wall, 4),
               wait_s=round(m["wait_s"], 4), images_per_s=round(m["steps"] * a.batch_size / wall, 2),
               gpu_busy_share=None if m["gpu_s"] is None else round(m["gpu_s"] / wall, 4),
               time_limited=m["steps"] < a.steps, loss=loss)
    return rec


def runs(a):
    for p in a.pipelines:
        if p == "torchvision":
            for w in a.workers:
                yield p, w
        else:
            yield p, None


def print_table(records):
    print(f"\n{'pipeline':<12} {'workers/threads':>15} {'cores':>5} {'images/s':>9} {'busy':>6} {'wait_s':>7}")
    for r in records:
        wt = r["workers"] if r["pipeline"] == "torchvision" else (r["threads"] or "default")
        if "error" in r:
            print(f"{r['pipeline']:<12} {wt!s:>15} {r['cores']:>5}  error: {r['error'][:80]}")
            continue
        busy = "-" if r["gpu_busy_share"] is None else f"{r['gpu_busy_share']:.3f}"
        print(f"{r['pipeline']:<12} {wt!s:>15} {r['cores']:>5} {r['images_per_s']:>9.1f} {busy:>6} "
              f"{r['wait_s']:>7.2f}")
    sys.stdout.flush()


def main(argv=None):
    a = parse_args(argv)
    cores = restrict_cores(a.cores)
    device = torch.device(a.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit(f"und: --device {a.device}, but torch sees no CUDA device")
        torch.backends.cudnn.benchmark = True
        if device.index is not None:
            torch.cuda.set_device(device)
    num_classes = count_classes(a)
    log(f"und: {num_classes} classes, {cores} cores, device {device}, torch {torch.__version__}")
    records = []
    for pipeline, workers in runs(a):
        rec = run_one(a, pipeline, workers, device, num_classes)
        records.append(rec)
        line = json.dumps(rec)
        print(line, flush=True)
        if a.json:
            with open(a.json, "a") as f:
                f.write(line + "\n")
    print_table(records)
    return 0 if any("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
