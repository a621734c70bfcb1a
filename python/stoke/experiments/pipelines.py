"""Input pipelines the experiments compare. Each yields (inputs [B, ...], labels [B] float32) batches.

- stoke: stoke.Loader over the table (with device="cuda" it copies batches to the GPU itself,
  asynchronously from pinned buffers).
- the published naive pipeline (DeepIQ): a Python generator that reads one file (or one blob, with
  one GET) per sample and decodes it, run the way Keras's `fit` runs a generator by default: one
  background thread filling a queue of at most 10 batches (workers=1, max_queue_size=10), one
  endless stream over the epochs, `steps` batches taken per epoch.
- the naive DataLoader (UND study): torch.utils.data.DataLoader over a map-style dataset of one
  file per sample, worker processes, a DistributedSampler under torchrun.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Iterator, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.utils.data

import stoke

from .data import LABEL_COLUMN, SampleFiles, Workload

Batch = Tuple[torch.Tensor, torch.Tensor]


# ---------------------------------------------------------------------------
# stoke

def stoke_loader(workload: Workload, table: str, split: str, batch_size: int, seed: int, device: str,
                 shuffle: str = "global", **options: Any) -> stoke.Loader:
    """A Loader over one split of the table; training splits drop the last short batch. The memory
    budget is the default 512 MiB or 6 batches, whichever is more (the trainer holds a batch or two
    while the loader fills the next)."""
    options.setdefault("prefetch_bytes", max(512 << 20, 6 * batch_size * workload.sample_bytes))
    return stoke.Loader(stoke.open_table(table, where=f"split = '{split}'"), batch_size=batch_size, shuffle=shuffle,
                        seed=seed, columns=[workload.column, LABEL_COLUMN], transforms=workload.transforms(split == "train"),
                        drop_last=split == "train", device=device, **options)


def stoke_batches(loader: stoke.Loader, column: str, epoch: Optional[int] = None) -> Iterator[Batch]:
    """One epoch of a Loader as (inputs, labels) batches."""
    if epoch is not None:
        loader.set_epoch(epoch)
    for b in loader:
        yield b[column], b[LABEL_COLUMN]


# ---------------------------------------------------------------------------
# the published naive pipeline: a Python generator of per-sample reads

def sample_batches(files: SampleFiles, workload: Workload, names: Sequence[str], labels: np.ndarray,
                   batch_size: int, order: Sequence[int], drop_last: bool = True, train: bool = True) -> Iterator[Batch]:
    """Batches of the samples at `order` (indices into names), read one file after the other
    (decoded with the training augmentations when `train`)."""
    end = len(order) - batch_size + 1 if drop_last else len(order)
    for i in range(0, max(0, end), batch_size):
        idx = order[i:i + batch_size]
        x = np.stack([workload.decode(files.read(names[j]), train=train) for j in idx])
        yield torch.from_numpy(x), torch.from_numpy(labels[np.asarray(idx)])


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """A seeded permutation of n samples for one epoch."""
    return np.random.default_rng([seed, epoch]).permutation(n)


class GeneratorPipeline:
    """The published naive pipeline: an endless generator over epochs (a new seeded permutation of
    the training files each time it runs out), filled by one background thread into a queue of at
    most `max_queue` batches, as Keras's `fit(generator, steps_per_epoch=...)` does by default.
    `epoch(steps)` takes the next `steps` batches of the stream. close() stops the thread."""

    def __init__(self, files: SampleFiles, workload: Workload, names: Sequence[str], labels: np.ndarray,
                 batch_size: int, seed: int, max_queue: int = 10) -> None:
        if len(names) < batch_size:
            raise ValueError(f"{files.location}: {len(names)} training samples, fewer than a batch of {batch_size}")
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=max_queue)
        self._stop = threading.Event()
        self._args = (files, workload, list(names), labels, batch_size, seed)
        self._thread = threading.Thread(target=self._fill, name="generator-enqueuer", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        files, workload, names, labels, batch_size, seed = self._args
        epoch = 0
        try:
            while not self._stop.is_set():
                for batch in sample_batches(files, workload, names, labels, batch_size,
                                            epoch_order(len(names), seed, epoch)):
                    while not self._stop.is_set():
                        try:
                            self._queue.put(batch, timeout=0.1)
                            break
                        except queue.Full:
                            pass
                    if self._stop.is_set():
                        return
                epoch += 1
        except BaseException as e:  # handed to the consumer
            self._queue.put(e)

    def epoch(self, steps: int) -> Iterator[Batch]:
        for _ in range(steps):
            item = self._queue.get()
            if isinstance(item, BaseException):
                raise RuntimeError(f"the sample generator failed: {item}") from item
            yield item

    def close(self) -> None:
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=0.1)
            except queue.Empty:
                pass
        self._thread.join()


# ---------------------------------------------------------------------------
# the naive DataLoader

class FileDataset(torch.utils.data.Dataset):
    """One file per sample, read and decoded (augmented when `train`) in __getitem__ (in DataLoader
    worker processes)."""

    def __init__(self, files: SampleFiles, workload: Workload, names: Sequence[str], labels: np.ndarray,
                 train: bool = True) -> None:
        self.files, self.workload, self.names, self.labels = files, workload, list(names), labels
        self.train = train

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i: int) -> Tuple[torch.Tensor, float]:
        x = self.workload.decode(self.files.read(self.names[i]), train=self.train)
        return torch.from_numpy(x), float(self.labels[i])


def torch_dataloader(dataset: FileDataset, batch_size: int, seed: int, workers: int, train: bool,
                     rank: int = 0, world_size: int = 1, pin_memory: bool = False) -> Tuple[torch.utils.data.DataLoader, Any]:
    """(DataLoader, sampler or None): shuffled by a seeded generator for training, a
    DistributedSampler (seeded, set_epoch per epoch) when world_size > 1."""
    sampler = None
    if world_size > 1:
        sampler = torch.utils.data.DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=train,
                                                      seed=seed, drop_last=train)
    gen = torch.Generator()
    gen.manual_seed(seed)
    dl = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=train and sampler is None, sampler=sampler,
                                     drop_last=train, num_workers=workers, persistent_workers=workers > 0,
                                     pin_memory=pin_memory, generator=gen)
    return dl, sampler


def dataloader_batches(dl: torch.utils.data.DataLoader) -> Iterator[Batch]:
    for x, y in dl:
        yield x, y.to(torch.float32)

