"""PyTorch glue: stoke.torch.IterableDataset.

    from torch.utils.data import DataLoader
    ds = stoke.torch.IterableDataset(stoke.Loader(table, batch_size=64))
    for batch in DataLoader(ds, batch_size=None):   # stoke already made the batches
        ...

Use num_workers=0: stoke's loader runs its own I/O and worker threads, and a
Loader cannot be copied into DataLoader worker processes.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator

import torch.utils.data

from . import Loader

__all__ = ["IterableDataset"]


class IterableDataset(torch.utils.data.IterableDataset):
    """A stoke Loader as a torch IterableDataset of ready batches (dicts of tensors).

    Each iteration is one epoch (see Loader.__iter__: a new iteration moves to the
    next epoch unless set_epoch or load_state_dict was called in between)."""

    def __init__(self, loader: Loader) -> None:
        super().__init__()
        self.loader = loader

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        if torch.utils.data.get_worker_info() is not None:
            raise RuntimeError("stoke.torch.IterableDataset: use DataLoader(..., num_workers=0); "
                               "stoke's loader has its own threads")
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        self.loader.set_epoch(epoch)

    def state_dict(self) -> Dict[str, int]:
        return self.loader.state_dict()

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.loader.load_state_dict(state)
