#!/usr/bin/python3
"""Host-to-device copy bandwidth of stoke's batches, against the hardware's pinned-memory copy.

    PYTHONPATH=build/python python3 bench/h2d.py [--volumes-table T1] [--images-table T2]
        [--batches 200] [--warmup 20] [--json OUT.jsonl] [--column NAME] [--consumer-reps K]
        [--prefetch-mib M] [--dry-run]

For each kind of batch it measures three things, all at exactly that kind's batch size in bytes:

  pinned memcpy   A pinned host buffer (torch.empty(n, dtype=uint8, pin_memory=True)) copied into a
                  device buffer of the same size with a plain synchronous copy, dst.copy_(src) and
                  then torch.cuda.synchronize(), --batches times after --warmup copies. GB/s is
                  bytes * copies / seconds. This is what the hardware gives; the reference. The
                  same copies timed with CUDA events (no launch or synchronize overhead) are
                  reported too, as pinned_memcpy_event_GBps.
  pinned async    The same copies with non_blocking=True on a side stream, one synchronize at the
                  end.
  stoke           Batches of a stoke.Loader(device="cpu"): with a stoke built with CUDA, on a
                  machine with a GPU, their tensors are views of the loader's pinned batch buffers
                  (the JSON reports stoke.built_with_cuda() and tensor.is_pinned()). Each batch's
                  tensor is copied the way Loader(device="cuda") does it (stoke/loader.py,
                  _to_device): .to("cuda", non_blocking=True), here on a dedicated copy stream with
                  CUDA events recorded there before and after the copy. Meanwhile a consumer
                  kernel, (x.float() * 1.0001).sum() repeated so that it takes about as long as a
                  copy, runs on the compute stream for the previous batch, which waits for its
                  copy's end event: the copy of batch k+1 overlaps the consumer of batch k. A batch
                  (and so its pinned host buffer) is kept until its copy's end event was
                  synchronized. stoke_copy_GBps is the bytes copied over the sum of the event-timed
                  copy durations; stoke_end_to_end_GBps is the bytes over the wall time of the
                  measured batches (loading included), ending with a synchronize; ratio is
                  stoke_copy_GBps / pinned_memcpy_GBps (the target is at least 0.8).

Only the one tensor column measured is copied (--column, or the table's first tensor column; the
small __row_ids__ tensor is left out). Batches are full (drop_last=True); when a loader runs out of
batches it is iterated again, which starts its next epoch. The kinds:

  volumes       --volumes-table: a table made by `stoke synth volumes` and `stoke ingest`; batches
                of 32 samples (float32 [30,30,10,10], 360,000 bytes each).
  images        --images-table: a table of JPEGs (`stoke synth images`, `stoke ingest`); batches
                of 128 of its "image" column after RandomResizedCrop(224), ToTensor(), Normalize
                (ImageNet mean and std): float32 [128,3,224,224].
  images-uint8  The same table with RandomResizedCrop(224) only: uint8 [128,224,224,3].

A kind whose table is not given is skipped. One JSON object per kind is printed and appended to
--json (kind, batch_bytes, pinned_memcpy_GBps, pinned_async_GBps, stoke_copy_GBps,
stoke_end_to_end_GBps, ratio, pinned, built_with_cuda, gpu, batches and a few more), then a short
table. Where torch sees no CUDA device the script prints "h2d: skipped: no CUDA device" and exits 0.
--dry-run needs no GPU: it opens each kind's loader on the CPU, iterates --warmup + --batches
batches and prints each kind's column, shape, dtype and batch_bytes.
"""

import argparse
import json
import sys
import time

import torch

import stoke

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def log(msg):
    print(f"h2d: {msg}", flush=True)


# -- the kinds and their loaders (no CUDA needed)

def kinds_to_run(args):
    """(kind, table, batch_size, transforms, column or None) for each kind whose table was given."""
    kinds = []
    if args.volumes_table:
        kinds.append(("volumes", args.volumes_table, 32, None, args.column))
    if args.images_table:
        float_tf = [stoke.RandomResizedCrop(224), stoke.ToTensor(), stoke.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
        kinds.append(("images", args.images_table, 128, float_tf, "image"))
        kinds.append(("images-uint8", args.images_table, 128, [stoke.RandomResizedCrop(224)], "image"))
    return kinds


def tensor_column_from_schema(table):
    """The first column of the table's schema that is a tensor of rank >= 1 (a batch of rank >= 2),
    or None."""
    for col in table.info().get("schema", []):
        shape = (col.get("tensor") or {}).get("shape")
        if shape is not None and len(shape) >= 1:
            return col["name"]
    return None


def tensor_column_from_batch(batch):
    """The first key of a batch whose value is a torch tensor with ndim >= 2, or None."""
    for k, v in batch.items():
        if isinstance(v, torch.Tensor) and v.ndim >= 2:
            return k
    return None


def discover_column(path, batch_size):
    """The tensor column to measure: from the schema, else from the keys of a first batch."""
    table = stoke.open_table(path)
    name = tensor_column_from_schema(table)
    if name is not None:
        return name
    probe = stoke.Loader(table, batch_size=batch_size, shuffle="none", drop_last=True)
    try:
        batch = next(iter(probe), None)
        name = None if batch is None else tensor_column_from_batch(batch)
    finally:
        probe.close()
    if name is None:
        raise SystemExit(f"h2d: {path}: no tensor column (ndim >= 2 in a batch); pass --column")
    return name


def open_loader(path, batch_size, transforms, column, prefetch_mib):
    """A CPU loader of full batches of one column (its tensors pinned when stoke has CUDA)."""
    options = {}
    if prefetch_mib > 0:
        options["prefetch_bytes"] = prefetch_mib << 20
    return stoke.Loader(path, batch_size=batch_size, columns=[column], transforms=transforms,
                        drop_last=True, device="cpu", **options)


def endless_batches(loader):
    """Batches of the loader forever: iterating it again starts its next epoch."""
    while True:
        n = 0
        for batch in loader:
            n += 1
            yield batch
            batch = None  # not held here while the caller decides when to let it go
        if n == 0:
            raise SystemExit("h2d: the loader delivered no full batch (table smaller than a batch?)")


def is_pinned(t):
    try:
        return bool(t.is_pinned())
    except RuntimeError:  # a torch without CUDA may refuse to say
        return False


def describe_batch(batch, column):
    """(batch_bytes, shape, dtype, pinned) of the measured tensor of a batch."""
    t = batch[column]
    if not isinstance(t, torch.Tensor):
        raise SystemExit(f"h2d: column {column!r} is not a tensor in a batch ({type(t).__name__})")
    return t.numel() * t.element_size(), list(t.shape), str(t.dtype).replace("torch.", ""), is_pinned(t)


def dry_run(args):
    """Opens each kind's loader on the CPU and iterates warmup + batches batches, checking sizes."""
    for kind, path, bs, tf, column in kinds_to_run(args):
        column = column or discover_column(path, bs)
        loader = open_loader(path, bs, tf, column, args.prefetch_mib)
        log(f"{kind}: {path}, column {column!r}, {len(loader)} full batches of {bs} per epoch")
        t0 = time.perf_counter()
        total, first, epochs = 0, None, set()
        it = endless_batches(loader)
        for _ in range(args.warmup + args.batches):
            batch = next(it)
            desc = describe_batch(batch, column)
            first = first or desc
            if desc[:3] != first[:3]:
                raise SystemExit(f"h2d: {kind}: batch {desc[:3]} differs from the first {first[:3]}")
            total += desc[0]
            epochs.add(batch.get("__epoch__"))
            batch = None
        wall = time.perf_counter() - t0
        loader.close()
        print(json.dumps({"kind": kind, "dry_run": True, "column": column, "batch_bytes": first[0],
                          "shape": first[1], "dtype": first[2], "pinned": first[3],
                          "built_with_cuda": stoke.built_with_cuda(), "batches": args.warmup + args.batches,
                          "epochs": len(epochs), "host_GBps": round(total / wall / 1e9, 3)}), flush=True)


# -- the pinned-memory baselines

def time_sync_copies(dst, src, warmup, reps):
    """GB/s of dst.copy_(src) + synchronize, by wall clock and by CUDA events around each copy."""
    for _ in range(warmup):
        dst.copy_(src)
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    t0 = time.perf_counter()
    for start, end in events:
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    event_s = sum(s.elapsed_time(e) for s, e in events) / 1e3
    nbytes = src.numel() * src.element_size() * reps
    return nbytes / wall / 1e9, nbytes / event_s / 1e9


def time_async_copies(dst, src, warmup, reps):
    """GB/s of non_blocking copies queued on a side stream, one synchronize at the end."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for _ in range(warmup):
            dst.copy_(src, non_blocking=True)
        side.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            dst.copy_(src, non_blocking=True)
        side.synchronize()
        wall = time.perf_counter() - t0
    return src.numel() * src.element_size() * reps / wall / 1e9


def pinned_baseline(nbytes, warmup, reps):
    """{pinned_memcpy_GBps, pinned_memcpy_event_GBps, pinned_async_GBps} at nbytes."""
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    src.fill_(1)
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    sync_wall, sync_event = time_sync_copies(dst, src, warmup, reps)
    async_gbps = time_async_copies(dst, src, warmup, reps)
    del src, dst
    torch.cuda.synchronize()
    return {"pinned_memcpy_GBps": sync_wall, "pinned_memcpy_event_GBps": sync_event,
            "pinned_async_GBps": async_gbps}


# -- the consumer kernel

def consume(x, reps, acc):
    """The consumer of a batch on the current stream: (x.float() * 1.0001).sum(), reps times."""
    for _ in range(reps):
        acc += (x.float() * 1.0001).sum()


def calibrate_consumer(shape, dtype, copy_seconds, fixed_reps):
    """(reps, ms of one application): reps makes the consumer take about as long as a copy."""
    x = torch.zeros(shape, dtype=dtype, device="cuda")
    acc = torch.zeros((), dtype=torch.float32, device="cuda")
    consume(x, 3, acc)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 10
    start.record()
    consume(x, n, acc)
    end.record()
    end.synchronize()
    one_ms = start.elapsed_time(end) / n
    if fixed_reps > 0:
        return fixed_reps, one_ms
    return max(1, min(256, round(copy_seconds * 1e3 / max(one_ms, 1e-6)))), one_ms


# -- stoke's copies

class CopyPipeline:
    """Copies batches' tensors on a copy stream while their consumers run on the compute stream."""

    def __init__(self, column, consumer_reps):
        self.column = column
        self.reps = consumer_reps
        self.copy_stream = torch.cuda.Stream()
        self.compute = torch.cuda.current_stream()
        self.acc = torch.zeros((), dtype=torch.float32, device="cuda")
        self.in_flight = []   # (batch, start event, end event, bytes): copies not yet synchronized
        self.consumers = []   # end events of consumers still queued
        self.copy_ms = 0.0
        self.copied = 0

    def submit(self, batch):
        """Queues the copy of batch, then its consumer behind it; retires the previous copy."""
        host = batch[self.column]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.copy_stream):
            start.record(self.copy_stream)
            dev = host.to("cuda", non_blocking=True)
            end.record(self.copy_stream)
        # The batch dict keeps the pinned host buffer alive until this copy has been synchronized.
        self.in_flight.append((batch, start, end, host.numel() * host.element_size()))
        self.compute.wait_event(end)
        dev.record_stream(self.compute)  # allocated on the copy stream, used on the compute stream
        consume(dev, self.reps, self.acc)
        done = torch.cuda.Event()
        done.record(self.compute)
        self.consumers.append(done)
        del dev, host, batch
        while len(self.in_flight) > 1:  # as Loader(device="cuda"): wait for the previous copy only
            self._retire()
        while len(self.consumers) > 2:  # bound the compute queue (and the device memory it holds)
            self.consumers.pop(0).synchronize()

    def _retire(self):
        _batch, start, end, nbytes = self.in_flight.pop(0)
        end.synchronize()
        self.copy_ms += start.elapsed_time(end)
        self.copied += nbytes

    def drain(self):
        while self.in_flight:
            self._retire()
        torch.cuda.synchronize()

    def reset_counts(self):
        self.copy_ms, self.copied = 0.0, 0


def measure_stoke(loader, column, consumer_reps, warmup, batches):
    """(copy GB/s, end-to-end GB/s, pinned, consumer acc) over `batches` batches after warm-up."""
    pipe = CopyPipeline(column, consumer_reps)
    it = endless_batches(loader)
    pinned = True
    for _ in range(warmup):
        pipe.submit(next(it))
    pipe.drain()
    pipe.reset_counts()
    t0 = time.perf_counter()
    for i in range(batches):
        batch = next(it)
        pinned = pinned and is_pinned(batch[column])
        pipe.submit(batch)
        batch = None
        if (i + 1) % max(1, batches // 4) == 0:
            log(f"  {i + 1}/{batches} batches")
    pipe.drain()
    wall = time.perf_counter() - t0
    copy_gbps = pipe.copied / (pipe.copy_ms / 1e3) / 1e9 if pipe.copy_ms > 0 else 0.0
    return copy_gbps, pipe.copied / wall / 1e9, pinned, float(pipe.acc.item())


def run_kind(kind, path, bs, transforms, column, args):
    """Measures one kind: its baselines at its batch size, then stoke's copies."""
    column = column or discover_column(path, bs)
    loader = open_loader(path, bs, transforms, column, args.prefetch_mib)
    first = next(endless_batches(loader))
    nbytes, shape, dtype, pinned_first = describe_batch(first, column)
    torch_dtype = first[column].dtype
    first = None
    log(f"{kind}: {path}, column {column!r} {dtype} {shape}, {nbytes / 1e6:.2f} MB per batch, "
        f"pinned {pinned_first}")
    base = pinned_baseline(nbytes, args.warmup, args.batches)
    log(f"{kind}: pinned memcpy {base['pinned_memcpy_GBps']:.2f} GB/s, async {base['pinned_async_GBps']:.2f} GB/s")
    reps, one_ms = calibrate_consumer(shape, torch_dtype, nbytes / (base["pinned_async_GBps"] * 1e9),
                                      args.consumer_reps)
    log(f"{kind}: consumer {one_ms:.3f} ms x {reps}; stoke copies of {args.batches} batches")
    copy_gbps, e2e_gbps, pinned, _ = measure_stoke(loader, column, reps, args.warmup, args.batches)
    loader.close()
    return {"kind": kind, "table": str(path), "column": column, "shape": shape, "dtype": dtype,
            "batch_bytes": nbytes, "batches": args.batches, "warmup": args.warmup,
            "pinned_memcpy_GBps": round(base["pinned_memcpy_GBps"], 3),
            "pinned_memcpy_event_GBps": round(base["pinned_memcpy_event_GBps"], 3),
            "pinned_async_GBps": round(base["pinned_async_GBps"], 3),
            "stoke_copy_GBps": round(copy_gbps, 3), "stoke_end_to_end_GBps": round(e2e_gbps, 3),
            "ratio": round(copy_gbps / base["pinned_memcpy_GBps"], 3),
            "ratio_vs_event": round(copy_gbps / base["pinned_memcpy_event_GBps"], 3),
            "pinned": pinned_first and pinned, "built_with_cuda": stoke.built_with_cuda(),
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "consumer_reps": reps, "consumer_ms": round(one_ms, 4)}


def print_table(rows):
    head = f"{'kind':<13} {'MB/batch':>9} {'memcpy':>8} {'async':>8} {'stoke':>8} {'e2e':>8} {'ratio':>6} pinned"
    print("\n" + head + "\n" + "-" * len(head), flush=True)
    for r in rows:
        print(f"{r['kind']:<13} {r['batch_bytes'] / 1e6:>9.2f} {r['pinned_memcpy_GBps']:>8.2f} "
              f"{r['pinned_async_GBps']:>8.2f} {r['stoke_copy_GBps']:>8.2f} {r['stoke_end_to_end_GBps']:>8.2f} "
              f"{r['ratio']:>6.2f} {r['pinned']}", flush=True)
    print("(GB/s; ratio = stoke copy / pinned memcpy, target >= 0.8)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--volumes-table", help="a table of `stoke synth volumes` ingested")
    ap.add_argument("--images-table", help="a table of JPEGs")
    ap.add_argument("--batches", type=int, default=200, help="measured batches (and baseline copies)")
    ap.add_argument("--warmup", type=int, default=20, help="warm-up batches (and baseline copies)")
    ap.add_argument("--json", help="append one JSON line per kind to this file")
    ap.add_argument("--column", help="volumes: the tensor column (default: the first tensor column)")
    ap.add_argument("--consumer-reps", type=int, default=0, help="consumer repetitions (0: sized to a copy)")
    ap.add_argument("--prefetch-mib", type=int, default=0, help="loader prefetch_bytes in MiB (0: default)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: open the loaders, check batch sizes")
    args = ap.parse_args()
    if args.batches < 1 or args.warmup < 0:
        ap.error("--batches must be >= 1 and --warmup >= 0")
    if not args.volumes_table and not args.images_table:
        log("no table given (--volumes-table, --images-table): nothing to measure")
    if args.dry_run:
        dry_run(args)
        return 0
    if not torch.cuda.is_available():
        print("h2d: skipped: no CUDA device", flush=True)
        return 0
    log(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"stoke built with CUDA: {stoke.built_with_cuda()}")
    rows = []
    for kind, path, bs, tf, column in kinds_to_run(args):
        row = run_kind(kind, path, bs, tf, column, args)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
        rows.append(row)
    if rows:
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
