#!/usr/bin/python3
"""Train a small 3D CNN on geoscience volumes, fed by stoke or by a plain torch DataLoader.

The task: binary classification of [X, Y, Z, C] float32 volumes (30x30x10 voxels with 10
channels from `stoke synth volumes`): does the volume hold a buried body? The same model, loss,
optimiser and augmentation (random flips along X and Y) run with either input pipeline, and every
epoch reports how long the training loop was blocked waiting for data, so the two loaders can be
compared on equal terms.

Data (one .npy file per sample plus labels.csv, then the same samples as a table):

    stoke --no-progress synth volumes --samples 20000 --out data/npy
    stoke --no-progress ingest data/npy --labels data/npy/labels.csv --table data/volumes \\
        --tensor-column volume --codec uncompressed

Training (stoke must be importable, e.g. PYTHONPATH=build/python):

    examples/train_volumes.py --loader stoke --table data/volumes --epochs 5
    examples/train_volumes.py --loader torch --npy-dir data/npy --epochs 5 --num-workers 2
    torchrun --standalone --nproc_per_node 2 --redirects 2 --tee 2 \\
        examples/train_volumes.py --loader stoke --table data/volumes
    examples/train_volumes.py --loader stoke --table data/volumes --device cuda --json

(`--redirects 2 --tee 2` only keeps the torchrun of torch 1.13 working under Python 3.11, where its
default `--redirects 0` fails with "'NoneType' object has no attribute 'get'"; stderr still reaches
the console.)

stoke trains on the rows with split = 'train' and validates on split = 'val'; the torch loader
takes the same split from the `split` column of <npy-dir>/labels.csv.

Per epoch it prints the training loss, the epoch time (wall time of the training loop), the data
wait (time spent in next() on the batch iterator, including the move to the device, and its share
of the epoch time), samples per second and the validation accuracy; with --device cuda also the GPU
busy share (the GPU time of the training steps, from CUDA events, over the epoch time). --json
prints one JSON object per epoch and a final summary instead.

Under torchrun (WORLD_SIZE > 1) every process joins a process group (gloo on the CPU, NCCL with
CUDA), the model is wrapped in DistributedDataParallel and each rank reads a disjoint shard of
every epoch: stoke's Loader takes rank and world size from torch.distributed, the torch loader
uses a DistributedSampler. Sample counts, data wait (averaged) and validation results are
combined over ranks, the epoch time is the slowest rank's; only rank 0 prints.

Under Slurm's srun (a step of several tasks, no torchrun), the process group is set up from Slurm's
variables (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID), with MASTER_ADDR and MASTER_PORT from
the batch script: examples/slurm/train.sbatch.

Across nodes (docs/cluster.md), each node runs torchrun with --nnodes N --rdzv_backend c10d
--rdzv_endpoint HOST:PORT; for a table on an object store, --cache-dir on a node's local disk is
shared by that node's ranks. --verify checks after each epoch, across ranks, that no training row
was read twice, that the epoch read as many rows as it holds (every one with --no-drop-last), and
that every rank holds the same parameters; it exits 1 if a check fails.

torch's threads default to cores / processes per node (--threads), and OMP_WAIT_POLICY defaults to
PASSIVE: the loader's threads or worker processes need the same cores as the training step.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

# The loader's threads (stoke) or worker processes (torch) share the cores with torch's OpenMP
# threads; idle OpenMP threads that spin take CPU time from them (and from anything else running on
# a busy machine). Let them sleep unless the environment says otherwise; read when torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.utils.data  # noqa: E402

# The model: two 3D convolutions, global max pooling and a linear head giving one logit (shared with
# the experiments of `python3 -m stoke.experiments`).
from stoke.experiments.models import VolumeNet  # noqa: E402

Batch = Tuple[torch.Tensor, torch.Tensor]  # volumes [B, C, X, Y, Z] float32, labels [B] float32


# ---------------------------------------------------------------------------
# distributed setup

def tasks_on_this_node() -> int:
    """The tasks of this Slurm step on this node: $SLURM_STEP_TASKS_PER_NODE (e.g. "2(x3),1") at
    this node's index, $SLURM_NODEID."""
    counts: List[int] = []
    for part in os.environ.get("SLURM_STEP_TASKS_PER_NODE", "1").split(","):
        n, _, times = part.partition("(x")
        counts += [int(n)] * (int(times.rstrip(")")) if times else 1)
    return counts[min(int(os.environ.get("SLURM_NODEID", "0")), len(counts) - 1)]


def env_from_slurm() -> None:
    """Under `srun` (a step of several tasks) without torchrun: sets the variables of torch's env://
    rendezvous from Slurm's (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE); MASTER_ADDR and
    MASTER_PORT must come from the batch script (examples/slurm/train.sbatch)."""
    if "WORLD_SIZE" in os.environ or int(os.environ.get("SLURM_STEP_NUM_TASKS", "1")) < 2:
        return
    os.environ.update(RANK=os.environ["SLURM_PROCID"], WORLD_SIZE=os.environ["SLURM_STEP_NUM_TASKS"],
                      LOCAL_RANK=os.environ.get("SLURM_LOCALID", "0"), LOCAL_WORLD_SIZE=str(tasks_on_this_node()))
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise SystemExit(f"train_volumes: under srun, set {name} for torch.distributed "
                             f"(examples/slurm/train.sbatch shows how)")


class Dist:
    """Rank, world size and the reductions the training loop needs (no-ops for one process)."""

    def __init__(self, device_kind: str, timeout_s: float) -> None:
        env_from_slurm()
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", str(self.world_size)))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.enabled = self.world_size > 1
        if self.enabled:
            backend = "nccl" if device_kind == "cuda" and dist.is_nccl_available() else "gloo"
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
            self.world_size = dist.get_world_size()
        self.rank = dist.get_rank() if self.enabled else 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, values: Sequence[float], device: torch.device) -> List[float]:
        return self._reduce(values, device, dist.ReduceOp.SUM)

    def max(self, values: Sequence[float], device: torch.device) -> List[float]:
        return self._reduce(values, device, dist.ReduceOp.MAX)

    def _reduce(self, values: Sequence[float], device: torch.device, op: Any) -> List[float]:
        if not self.enabled:
            return list(values)
        t = torch.tensor(list(values), dtype=torch.float64, device=device)
        dist.all_reduce(t, op=op)
        return t.tolist()

    def gather(self, obj: Any) -> List[Any]:
        """obj of every rank, in rank order."""
        if not self.enabled:
            return [obj]
        out: List[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def close(self) -> None:
        if self.enabled:
            # Every rank's collectives finished (and their tensors released by gloo's threads) before
            # the group goes: torch 1.13's ProcessGroupGloo destructor joins those threads holding the
            # GIL, and one still freeing a Python-owned tensor would wait for the GIL forever.
            dist.barrier()
            dist.destroy_process_group()


def valid_in_shard(n: int, rank: int, world_size: int) -> int:
    """How many of a rank's first samples are real when an epoch of n samples is dealt out
    round-robin (rank r takes positions r, r + W, ...) and padded to equal shards by repeating
    samples at the end: both stoke (drop_last=False) and DistributedSampler shard this way."""
    return len(range(rank, n, world_size))


# ---------------------------------------------------------------------------
# input pipelines: each yields (volumes [B, C, X, Y, Z] on the device, labels [B] float) batches

class StokeData:
    """Batches from a stoke table: split = 'train' for training (global shuffle, random flips,
    last short batch dropped), split = 'val' for validation (table order, no augmentation)."""

    def __init__(self, args: argparse.Namespace, device: torch.device, d: Dist) -> None:
        import stoke
        self.stoke = stoke
        self.device = device
        dev = str(device)
        self.column = args.column
        common = dict(batch_size=args.batch_size, columns=[self.column, "label"], device=dev,
                      prefetch_bytes=args.prefetch_mb << 20, threads=args.loader_threads,
                      cache_dir=args.cache_dir)
        flips = [stoke.RandomFlip(axes=(0, 1))] if args.flip else []
        # rank and world size: from torch.distributed when it is initialised (Loader's default).
        self.train = stoke.Loader(stoke.open_table(args.table, where="split = 'train'"), shuffle=args.shuffle,
                                  seed=args.seed, drop_last=args.drop_last,
                                  transforms=[*flips, stoke.ChannelsFirst()], **common)
        self.val = stoke.Loader(stoke.open_table(args.table, where="split = 'val'"), shuffle="none",
                                drop_last=False, transforms=[stoke.ChannelsFirst()], **common)
        self.val_valid = valid_in_shard(self.val.num_rows, d.rank, d.world_size)
        self.train_rows, self.val_rows = self.train.num_rows, self.val.num_rows
        self.rows_read: List[int] = []  # this epoch's training rows (__row_ids__), with --verify
        self.record_rows = args.verify
        self.drop_last = args.drop_last
        self.rows_before: List[int] = []  # all ranks' rows of the epoch before the checkpoint resumed
        self.resumed_at = 0  # samples of the epoch consumed before the checkpoint resumed

    def sample_shape(self) -> Tuple[int, ...]:
        """[C, X, Y, Z] of one training sample, from the table's schema."""
        schema = self.train.table.info()["schema"]
        tensor = next((c.get("tensor") for c in schema if c["name"] == self.column), None)
        if tensor is None:
            raise SystemExit(f"train_volumes: {self.train.table.path} has no tensor column '{self.column}' "
                             f"(columns: {', '.join(c['name'] for c in schema)}); see --column")
        *spatial, channels = tensor["shape"]
        return (channels, *spatial)

    def train_batches(self, epoch: int, resume: Optional[Dict[str, Any]] = None) -> Iterator[Batch]:
        """The epoch's training batches; with `resume` (a checkpoint of this epoch), the rest of them."""
        if resume is not None:
            self.train.load_state_dict(resume["loader"])
            self.rows_before, self.resumed_at = resume["rows"], resume["loader"]["consumed"]
        else:
            self.train.set_epoch(epoch)
            self.rows_before, self.resumed_at = [], 0
        self.rows_read = []
        for b in self.train:
            if self.record_rows:
                self.rows_read.extend(b["__row_ids__"].tolist())
            yield b[self.column], b["label"].to(self.device, torch.float32)

    def real_rows(self, d: Dist) -> List[int]:
        """This rank's training rows since the epoch (re)started, less the shard padding."""
        if self.drop_last:
            return self.rows_read
        return self.rows_read[:valid_in_shard(self.train_rows - self.resumed_at, d.rank, d.world_size)]

    def val_batches(self) -> Iterator[Batch]:
        self.val.set_epoch(0)
        for b in self.val:
            yield b[self.column], b["label"].to(self.device, torch.float32)

    def stats(self) -> Dict[str, Any]:
        s = self.train.stats()
        return {k: s[k] for k in ("samples_per_second", "mb_per_second", "wait_share", "backend") if k in s}

    def close(self) -> None:
        self.train.close()
        self.val.close()


class NpyVolumes(torch.utils.data.Dataset):
    """Map-style dataset over one .npy file per sample (np.load per item), channels moved first,
    with optional random flips along X and Y (torch's RNG: seeded per DataLoader worker)."""

    def __init__(self, root: Path, rows: List[Dict[str, str]], flip: bool) -> None:
        self.files = [root / r["file"] for r in rows]
        self.labels = [float(r["label"]) for r in rows]
        self.flip = flip

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> Tuple[torch.Tensor, float]:
        a = np.load(self.files[i])  # [X, Y, Z, C]
        if self.flip:
            axes = tuple(ax for ax, f in zip((0, 1), (torch.rand(2) < 0.5).tolist()) if f)
            if axes:
                a = np.flip(a, axes)
        return torch.from_numpy(np.ascontiguousarray(np.moveaxis(a, -1, 0))), self.labels[i]


class TorchData:
    """Batches from .npy files through torch.utils.data.DataLoader (worker processes, shuffled
    by a seeded generator; a DistributedSampler under torchrun)."""

    def __init__(self, args: argparse.Namespace, device: torch.device, d: Dist) -> None:
        root = Path(args.npy_dir)
        with open(root / "labels.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        self.device = device
        self.train_set = NpyVolumes(root, [r for r in rows if r["split"] == "train"], flip=args.flip)
        self.val_set = NpyVolumes(root, [r for r in rows if r["split"] == "val"], flip=False)
        self.train_rows, self.val_rows = len(self.train_set), len(self.val_set)
        self.val_valid = valid_in_shard(self.val_rows, d.rank, d.world_size)
        pin = device.type == "cuda"
        kw = dict(batch_size=args.batch_size, num_workers=args.num_workers, pin_memory=pin,
                  persistent_workers=args.num_workers > 0)
        self.train_sampler: Optional[torch.utils.data.DistributedSampler] = None
        val_sampler = None
        if d.enabled:
            self.train_sampler = torch.utils.data.DistributedSampler(
                self.train_set, num_replicas=d.world_size, rank=d.rank, shuffle=True, seed=args.seed,
                drop_last=args.drop_last)
            val_sampler = torch.utils.data.DistributedSampler(
                self.val_set, num_replicas=d.world_size, rank=d.rank, shuffle=False, drop_last=False)
        gen = torch.Generator()
        gen.manual_seed(args.seed)
        self.train = torch.utils.data.DataLoader(
            self.train_set, shuffle=self.train_sampler is None, sampler=self.train_sampler, drop_last=args.drop_last,
            generator=gen, **kw)
        self.val = torch.utils.data.DataLoader(self.val_set, shuffle=False, sampler=val_sampler, **kw)

    def sample_shape(self) -> Tuple[int, ...]:
        shape = np.load(self.train_set.files[0], mmap_mode="r").shape
        return (shape[-1], *shape[:-1])

    def _to_device(self, loader: torch.utils.data.DataLoader) -> Iterator[Batch]:
        for x, y in loader:
            yield x.to(self.device, non_blocking=True), y.to(self.device, torch.float32, non_blocking=True)

    def train_batches(self, epoch: int, resume: Optional[Dict[str, Any]] = None) -> Iterator[Batch]:
        """The epoch's training batches (`resume` is never given: --checkpoint needs the stoke loader)."""
        if self.train_sampler is not None:
            self.train_sampler.set_epoch(epoch)
        return self._to_device(self.train)

    def val_batches(self) -> Iterator[Batch]:
        return self._to_device(self.val)

    def stats(self) -> Dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------
# training and evaluation

def train_epoch(model: nn.Module, opt: torch.optim.Optimizer, loss_fn: nn.Module, batches: Iterator[Batch],
                device: torch.device, max_batches: int, on_step: Callable[[int], None]) -> Dict[str, float]:
    """One pass over `batches`, calling on_step(steps so far) after each. The data wait is the time
    spent in next() (the batch iterator, including the move to the device); the epoch time is the
    wall time of the whole loop."""
    model.train()
    cuda = device.type == "cuda"
    events: List[Tuple[Any, Any]] = []
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    samples = steps = 0
    wait = 0.0
    if cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    while max_batches <= 0 or steps < max_batches:
        t = time.perf_counter()
        try:
            x, y = next(batches)
        except StopIteration:
            break
        wait += time.perf_counter() - t
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if cuda:
            end.record()
            events.append((begin, end))
        loss_sum += loss.detach() * y.shape[0]  # no host sync per step
        samples += y.shape[0]
        steps += 1
        on_step(steps)
    if cuda:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    close = getattr(batches, "close", None)
    if close is not None:
        close()  # leaves a generator stopped early (max_batches) cleanly
    gpu_seconds = sum(b.elapsed_time(e) for b, e in events) / 1000.0 if cuda else 0.0
    return dict(loss_sum=float(loss_sum), samples=samples, steps=steps, seconds=seconds, wait=wait,
                gpu_seconds=gpu_seconds)


def parameters_digest(model: nn.Module) -> str:
    """SHA-256 of the bytes of the model's parameters, in order (equal on ranks that agree)."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def verify_epoch(d: Dist, data: "StokeData", model: nn.Module, args: argparse.Namespace) -> Dict[str, Any]:
    """--verify, after an epoch: every rank's training rows and parameter digest, gathered. Checks that
    no row was read twice across ranks (shard padding, which repeats rows, left out; a resumed epoch
    counts the rows its checkpoint says were read before), that as many were read as the epoch holds
    (every training row with --no-drop-last), and that every rank holds the same parameters."""
    n, world, b = data.train_rows, d.world_size, args.batch_size
    rest = n - data.resumed_at  # the samples dealt out since the epoch (re)started
    expected = data.resumed_at + world * (rest // world // b * b) if args.drop_last else n
    gathered = d.gather({"rows": data.real_rows(d), "digest": parameters_digest(model)})
    rows = data.rows_before + [r for g in gathered for r in g["rows"]]
    distinct = len(set(rows))
    identical = len({g["digest"] for g in gathered}) == 1
    return {"rows_read": len(rows), "rows_distinct": distinct, "rows_expected": expected,
            "exactly_once": distinct == len(rows) == expected, "params_identical": identical}


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterator[Batch], valid: int) -> Tuple[int, int]:
    """(correct, counted) over this rank's first `valid` samples (the rest is shard padding)."""
    model.eval()
    correct = counted = 0
    for x, y in batches:
        take = min(y.shape[0], valid - counted)
        if take <= 0:
            continue
        pred = (model(x[:take]) > 0).to(y.dtype)
        correct += int((pred == y[:take]).sum())
        counted += take
    return correct, counted


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loader", choices=("stoke", "torch"), default="stoke", help="input pipeline (default stoke)")
    p.add_argument("--table", help="stoke: the table directory (columns label, split and the tensor column)")
    p.add_argument("--column", default="volume", help="stoke: the table's tensor column (default volume)")
    p.add_argument("--npy-dir", help="torch: directory of .npy volumes with labels.csv (file,label,...,split)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32, help="per process (default 32)")
    p.add_argument("--num-workers", type=int, default=2, help="torch: DataLoader worker processes (default 2)")
    p.add_argument("--loader-threads", type=int, default=0,
                   help="stoke: decode/transform threads (default 0: one per core)")
    p.add_argument("--prefetch-mb", type=int, default=512, help="stoke: the loader's memory budget (MiB)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--seed", type=int, default=0, help="model init, shuffle order and augmentation")
    p.add_argument("--threads", type=int, default=0,
                   help="torch.set_num_threads (default 0: cores / processes on this node)")
    p.add_argument("--max-batches", type=int, default=0, help="cap on training batches per epoch (0: none)")
    p.add_argument("--flip", action=argparse.BooleanOptionalAction, default=True,
                   help="random flips along X and Y while training (default on)")
    p.add_argument("--shuffle", choices=("global", "block"), default="global",
                   help="stoke: the training order (default global)")
    p.add_argument("--cache-dir", help="stoke, tables on object stores: a local read cache directory, which "
                                      "the processes of a node may share")
    p.add_argument("--drop-last", action=argparse.BooleanOptionalAction, default=True,
                   help="drop each rank's last short batch (default on); --no-drop-last trains on every row, "
                        "ranks' shards evened out by repeating rows")
    p.add_argument("--verify", action="store_true",
                   help="stoke: after each epoch, check across ranks that no training row was read twice, "
                        "that the epoch read as many as it holds, and that every rank holds the same "
                        "parameters; exits 1 if a check fails")
    p.add_argument("--checkpoint", help="stoke: a file (on storage every node reaches) where rank 0 keeps the model, "
                                        "optimiser and loader position after each epoch; a run that finds it "
                                        "resumes there, at any number of processes")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="also a checkpoint every N training steps (default 0: at epoch ends only)")
    p.add_argument("--dist-timeout", type=float, default=1800,
                   help="seconds a collective waits for the other ranks before failing (default 1800); under "
                        "torchrun's elastic restarts, a short one lets the survivors of a lost node restart sooner")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--json", action="store_true", help="one JSON object per epoch and a final summary")
    args = p.parse_args(argv)
    if args.loader == "stoke" and not args.table:
        p.error("--loader stoke needs --table")
    if args.loader == "torch" and not args.npy_dir:
        p.error("--loader torch needs --npy-dir")
    if args.verify and (args.loader != "stoke" or args.max_batches):
        p.error("--verify checks whole epochs of the stoke loader (no --max-batches)")
    if (args.checkpoint or args.checkpoint_every) and (args.loader != "stoke" or not args.checkpoint):
        p.error("--checkpoint (and --checkpoint-every, which needs it) keeps the stoke loader's position")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device")
    return args


# ---------------------------------------------------------------------------
# checkpoints (--checkpoint)

def save_checkpoint(args: argparse.Namespace, d: Dist, model: nn.Module, opt: torch.optim.Optimizer,
                    data: Any, epoch: int, done: bool) -> None:
    """Every rank, at the same step: rank 0 writes the model, the optimiser, the loader's position
    in the epoch (its state_dict, valid at any world size) and, with --verify, the rows every rank
    read so far in the epoch, to a temporary file renamed over the last checkpoint."""
    rows: List[int] = []
    if args.verify and not done:
        rows = data.rows_before + [r for g in d.gather(data.real_rows(d)) for r in g]
    if not d.is_main:
        return
    net = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    state = {"epoch": epoch, "done": done, "model": net.state_dict(), "opt": opt.state_dict(),
             "loader": data.train.state_dict(), "rows": rows}
    tmp = f"{args.checkpoint}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, args.checkpoint)


def load_checkpoint(args: argparse.Namespace, model: nn.Module) -> Optional[Dict[str, Any]]:
    """The checkpoint at --checkpoint, if there is one, with its parameters loaded into `model` (not
    yet wrapped in DistributedDataParallel: every rank loads the same file)."""
    if not args.checkpoint or not os.path.exists(args.checkpoint):
        return None
    state = torch.load(args.checkpoint, map_location="cpu")
    model.load_state_dict(state["model"])
    return state


def step_checkpoints(args: argparse.Namespace, d: Dist, model: nn.Module, opt: torch.optim.Optimizer,
                     data: Any, epoch: int) -> Callable[[int], None]:
    """train_epoch's on_step: a checkpoint every --checkpoint-every steps of the epoch (counted from
    where it resumed)."""
    def on_step(steps: int) -> None:
        if args.checkpoint and args.checkpoint_every and steps % args.checkpoint_every == 0:
            save_checkpoint(args, d, model, opt, data, epoch, done=False)
    return on_step


def run_epoch(args: argparse.Namespace, d: Dist, device: torch.device, model: nn.Module,
              opt: torch.optim.Optimizer, data: Any, epoch: int, resume: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Trains one epoch (the rest of it after `resume`, a checkpoint taken in it), validates, and
    returns the epoch's record, combined over ranks."""
    r = train_epoch(model, opt, nn.BCEWithLogitsLoss(), data.train_batches(epoch, resume), device, args.max_batches,
                    step_checkpoints(args, d, model, opt, data, epoch))
    eval_start = time.perf_counter()
    correct, counted = evaluate(model, data.val_batches(), data.val_valid)
    eval_seconds = time.perf_counter() - eval_start
    loss_sum, samples, wait, correct, counted = d.sum(
        [r["loss_sum"], r["samples"], r["wait"], correct, counted], device)
    seconds, gpu_seconds, eval_seconds = d.max([r["seconds"], r["gpu_seconds"], eval_seconds], device)
    wait /= d.world_size  # mean over ranks
    samples, correct, counted = int(samples), int(correct), int(counted)
    rec = {
        "event": "epoch", "loader": args.loader, "epoch": epoch, "world_size": d.world_size,
        "train_loss": loss_sum / samples if samples else float("nan"),
        "samples": samples, "epoch_seconds": seconds,
        "wait_seconds": wait, "wait_share": wait / seconds if seconds > 0 else 0.0,
        "samples_per_second": samples / seconds if seconds > 0 else 0.0,
        "val_accuracy": correct / counted if counted else float("nan"), "val_samples": counted,
        "eval_seconds": eval_seconds,
        "gpu_busy_share": gpu_seconds / seconds if device.type == "cuda" and seconds > 0 else None,
        "resumed_at": resume["loader"]["consumed"] if resume else 0,
    }
    if args.verify:
        rec["verify"] = verify_epoch(d, data, model, args)
    return rec


def epoch_line(rec: Dict[str, Any]) -> str:
    gpu = f"  gpu busy {rec['gpu_busy_share']:5.1%}" if rec["gpu_busy_share"] is not None else ""
    line = (f"epoch {rec['epoch']:3d}  loss {rec['train_loss']:.4f}  time {rec['epoch_seconds']:7.2f} s  "
            f"wait {rec['wait_seconds']:6.2f} s ({rec['wait_share']:5.1%})  "
            f"{rec['samples_per_second']:7.1f} samples/s  "
            f"val acc {rec['val_accuracy']:.3f} ({rec['val_samples']}){gpu}")
    v = rec.get("verify")
    if v:
        line += (f"\n  verify: {v['rows_read']} rows read, {v['rows_distinct']} distinct, {v['rows_expected']} expected"
                 f" ({'exactly once' if v['exactly_once'] else 'FAILED'}); parameters "
                 f"{'identical on every rank' if v['params_identical'] else 'DIFFER between ranks'}")
    return line


def summary_record(args: argparse.Namespace, d: Dist, epochs: List[Dict[str, Any]], total: float,
                   data: Any) -> Dict[str, Any]:
    train_seconds = sum(e["epoch_seconds"] for e in epochs)
    summary = {
        "event": "summary", "loader": args.loader, "epochs": len(epochs), "world_size": d.world_size,
        "device": args.device, "batch_size": args.batch_size, "total_seconds": total,
        "train_seconds": train_seconds,
        "wait_seconds": sum(e["wait_seconds"] for e in epochs),
        "samples_per_second": sum(e["samples"] for e in epochs) / train_seconds if train_seconds > 0 else 0.0,
        "final_val_accuracy": epochs[-1]["val_accuracy"] if epochs else None,
        "loader_stats": data.stats(),
    }
    summary["wait_share"] = summary["wait_seconds"] / train_seconds if train_seconds else 0.0
    if args.verify:
        summary["verified"] = all(e["verify"]["exactly_once"] and e["verify"]["params_identical"] for e in epochs)
    return summary


def build_model(args: argparse.Namespace, d: Dist, device: torch.device, shape: Tuple[int, ...]
                ) -> Tuple[nn.Module, torch.optim.Optimizer, Optional[Dict[str, Any]]]:
    """The model (from the checkpoint when --checkpoint names one; DistributedDataParallel under
    torchrun), its optimiser, and the checkpoint (None without one)."""
    channels, *spatial = shape
    model: nn.Module = VolumeNet(channels, spatial).to(device)
    resume = load_checkpoint(args, model)
    if d.enabled:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    if resume is not None:
        opt.load_state_dict(resume["opt"])
    return model, opt, resume


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    d = Dist(args.device, args.dist_timeout)
    device = torch.device(f"cuda:{d.local_rank}" if args.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch.set_num_threads(args.threads or max(1, cores // d.local_world_size))
    torch.manual_seed(args.seed)

    def emit(record: Dict[str, Any], text: str) -> None:
        if d.is_main:
            print(json.dumps(record) if args.json else text, flush=True)

    data = StokeData(args, device, d) if args.loader == "stoke" else TorchData(args, device, d)
    channels, *spatial = data.sample_shape()
    model, opt, resume = build_model(args, d, device, (channels, *spatial))
    if not args.json:
        emit({}, f"{args.loader} loader: {data.train_rows} train / {data.val_rows} val samples of shape "
                 f"{[channels, *spatial]} (C, X, Y, Z), batch {args.batch_size} x {d.world_size} process(es), "
                 f"{torch.get_num_threads()} torch thread(s) each, device {args.device}")

    first = 0
    if resume is not None:
        first = resume["epoch"] + 1 if resume["done"] else resume["epoch"]
        emit({"event": "resume", "epoch": first, "consumed": 0 if resume["done"] else resume["loader"]["consumed"],
              "world_size": d.world_size}, f"resuming from {args.checkpoint} at epoch {first}, sample "
             f"{0 if resume['done'] else resume['loader']['consumed']} of its order, on {d.world_size} process(es)")
        if resume["done"]:
            resume = None
    epochs: List[Dict[str, Any]] = []
    run_start = time.perf_counter()
    for epoch in range(first, args.epochs):
        epochs.append(run_epoch(args, d, device, model, opt, data, epoch, resume))
        resume = None
        emit(epochs[-1], epoch_line(epochs[-1]))
        if args.checkpoint:
            save_checkpoint(args, d, model, opt, data, epoch, done=True)
    summary = summary_record(args, d, epochs, time.perf_counter() - run_start, data)
    emit(summary, f"{len(epochs)} epoch(s) in {summary['total_seconds']:.1f} s: "
                  f"{summary['samples_per_second']:.1f} samples/s, "
                  f"data wait {summary['wait_share']:.1%} of training time, "
                  f"final val acc {summary['final_val_accuracy'] or 0:.3f}")
    data.close()
    del model, opt  # DistributedDataParallel's reducer holds the process group: release it first
    d.close()
    if args.verify and not summary["verified"]:
        print("train_volumes: --verify: a check failed (see the epochs' verify records)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
