"""The training loop the experiments share, timed per step with the fields of the NERSC poster's
TimeLogger: data wait, host-to-device, forward/backward, optimizer and total.

  data wait         host time inside next() of the batch iterator (the loader's wait; with stoke's
                    device="cuda" also the issue of its asynchronous copies)
  host-to-device    CPU: host time of moving the batch to the device (nothing to move: ~0);
                    CUDA: GPU time of the stream between just before next() and after the batch is
                    on the device (the copies, whoever issued them), from CUDA events
  forward/backward  zero_grad, forward, loss and backward (CPU: host time; CUDA: GPU time)
  optimizer         optimizer.step() (CPU: host time; CUDA: GPU time)
  total             host time of the whole step, from entering next() to the end of the step
                    (CUDA: the epoch's wall time is taken after a final synchronize)

Each step is also logged with its start on the host clock (time.perf_counter); stoke.report puts
the steps on the loader trace's clock by matching the trainer's data waits with the loader's waits.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

PHASES = ("data_wait", "h2d", "forward_backward", "optimizer", "total")
PHASE_TITLES = {"data_wait": "data wait", "h2d": "host-to-device", "forward_backward": "forward/backward",
                "optimizer": "optimizer", "total": "total"}
PHASE_HEADERS = [f"{PHASE_TITLES[k]} (s/step)" for k in PHASES]  # report columns of phase_cells

Batch = Tuple[torch.Tensor, torch.Tensor]


def seed_everything(seed: int) -> None:
    """Same seed, same model initialisation and the same arithmetic (deterministic kernels)."""
    torch.manual_seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.use_deterministic_algorithms(True, warn_only=True)


def train_epoch(model: nn.Module, opt: torch.optim.Optimizer, batches: Iterable[Batch], device: torch.device,
                max_steps: int = 0, step_log: Optional[List[Dict[str, float]]] = None,
                epoch: int = 0) -> Dict[str, Any]:
    """One pass over `batches` (at most max_steps, 0 = all). Returns samples, steps, loss_sum (the
    sum of per-sample losses: deterministic), seconds (wall time of the loop) and phases
    ({field: seconds summed over the steps}); appends one record per step to step_log."""
    model.train()
    loss_fn = nn.BCEWithLogitsLoss()
    cuda = device.type == "cuda"
    it: Iterator[Batch] = iter(batches)
    phases = {p: 0.0 for p in PHASES}
    events: List[Tuple[Any, ...]] = []
    steps_here: List[Dict[str, float]] = []
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    samples = steps = 0
    if cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    while max_steps <= 0 or steps < max_steps:
        t0 = time.perf_counter()
        if cuda:
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            ev[0].record()
        try:
            x, y = next(it)
        except StopIteration:
            break
        t1 = time.perf_counter()
        x = x.to(device, non_blocking=True)
        y = y.to(device, torch.float32, non_blocking=True)
        t2 = time.perf_counter()
        if cuda:
            ev[1].record()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        t3 = time.perf_counter()
        if cuda:
            ev[2].record()
        opt.step()
        if cuda:
            ev[3].record()
            events.append(tuple(ev))
        loss_sum += loss.detach().double() * y.shape[0]  # no host sync per step
        t4 = time.perf_counter()
        rec = {"epoch": epoch, "step": steps, "start": t0, "data_wait": t1 - t0, "h2d": t2 - t1,
               "forward_backward": t3 - t2, "optimizer": t4 - t3, "total": t4 - t0}
        steps_here.append(rec)
        samples += int(y.shape[0])
        steps += 1
    if cuda:
        torch.cuda.synchronize(device)
        for rec, ev in zip(steps_here, events):  # GPU times replace the host's (async) ones
            rec["h2d"] = ev[0].elapsed_time(ev[1]) / 1e3
            rec["forward_backward"] = ev[1].elapsed_time(ev[2]) / 1e3
            rec["optimizer"] = ev[2].elapsed_time(ev[3]) / 1e3
    seconds = time.perf_counter() - start
    close = getattr(it, "close", None)
    if close is not None:
        close()  # a generator left early (max_steps) stops cleanly
    for rec in steps_here:
        for p in PHASES:
            phases[p] += rec[p]
    if step_log is not None:
        step_log.extend(steps_here)
    return {"samples": samples, "steps": steps, "loss_sum": float(loss_sum), "seconds": seconds, "phases": phases}


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable[Batch], device: torch.device, limit: int = 0) -> Tuple[int, int]:
    """(correct, counted) over the first `limit` samples of `batches` (0 = all)."""
    model.eval()
    correct = counted = 0
    for x, y in batches:
        take = y.shape[0] if limit <= 0 else min(int(y.shape[0]), limit - counted)
        if take <= 0:
            break
        x = x[:take].to(device, non_blocking=True)
        y = y[:take].to(device, torch.float32, non_blocking=True)
        correct += int(((model(x) > 0).to(y.dtype) == y).sum())
        counted += take
    return correct, counted


def phase_means(phases: Dict[str, float], steps: int) -> Dict[str, float]:
    """Per-step means of phase sums."""
    return {p: (v / steps if steps else 0.0) for p, v in phases.items()}


def epoch_record(epoch: int, r: Dict[str, Any]) -> Dict[str, Any]:
    """The JSON record of one train_epoch result: counts and loss, and its times under "measured"."""
    return {"epoch": epoch, "steps": r["steps"], "samples": r["samples"],
            "train_loss": r["loss_sum"] / max(1, r["samples"]),
            "measured": {"seconds": r["seconds"], "phases_per_step": phase_means(r["phases"], r["steps"]),
                         "wait_share": r["phases"]["data_wait"] / r["seconds"] if r["seconds"] else 0.0}}


def phase_cells(epoch: Dict[str, Any], *path: Any) -> List[Any]:
    """Report cells of an epoch record's per-step phase means; `path` leads to the record in the JSON."""
    from . import html as H
    ph = epoch["measured"]["phases_per_step"]
    return [H.Num(ph[k], H.pointer(*path, "measured", "phases_per_step", k), ".4f") for k in PHASES]
