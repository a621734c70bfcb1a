"""stoke: deep-learning samples from Parquet/Delta tables at storage speed.

    import stoke

    loader = stoke.Loader(stoke.open_table("/data/volumes"), batch_size=32,
                          transforms=[stoke.RandomFlip(axes=(0, 1, 2))])
    for epoch in range(10):
        loader.set_epoch(epoch)
        for batch in loader:          # dict: column name -> torch.Tensor (or list of str)
            train_step(batch["volume"], batch["label"])

Batches are made by the C++ loader on its own threads (reads, CRC checks,
decompression, transforms, collation) and handed to Python without a copy: the
arrays and tensors of a batch are views of the loader's batch buffer, which goes
back to the loader's pool when the last of them is garbage collected. Keeping
many batches alive therefore holds pool memory (bounded by `prefetch_bytes`) and
can stall the loader; copy (`.clone()`) what you keep beyond a step.

Keys of a batch besides the columns:
  "<column>.valid"  uint8 [rows], 1 = present, for nullable scalar columns with nulls
  "__row_ids__"     int64 [rows], the table row (snapshot order) of each sample
  "__epoch__", "__index__"  ints: the epoch and the batch number within it
  "__bfloat16__"    (to="numpy" only) names of bfloat16 columns, delivered as uint16 bits

With to="torch", uint16/uint32/uint64 columns stay numpy arrays where the
installed torch has no such dtype (before torch 2.3).

Errors from the engine keep their message and map to: ValueError (bad options),
stoke.NotFoundError (a FileNotFoundError and KeyError: missing table, file or
column), OSError (I/O errors, corrupt data), NotImplementedError (unsupported
features), RuntimeError (anything else).
"""

from __future__ import annotations

from typing import Any

from . import _stoke
from ._stoke import NotFoundError
from .loader import Batch, Loader
from .table import PathLike, Table, ingest, open_table, synth_images, synth_volumes
from .transforms import (CenterCrop, ChannelsFirst, ChannelsLast, ColorJitter, Normalize, RandomCrop, RandomFlip,
                         RandomHorizontalFlip, RandomResizedCrop, RandomRot90, Resize, ToTensor, Transform, Cast,
                         image_transform_choices, transform_image)

__all__ = [
    "Table", "open_table", "ingest", "synth_volumes", "synth_images", "Loader", "NotFoundError",
    "Transform", "Cast", "Normalize", "RandomFlip", "RandomRot90", "RandomCrop", "CenterCrop",
    "ChannelsFirst", "ChannelsLast", "RandomResizedCrop", "Resize", "RandomHorizontalFlip", "ColorJitter",
    "ToTensor", "transform_image", "image_transform_choices", "built_with_cuda",
]


def built_with_cuda() -> bool:
    """True when this stoke was built with the CUDA runtime. Its batch buffers are then page-locked
    (pinned) host memory whenever a CUDA device is present, so Loader(device="cuda") copies them to
    the GPU asynchronously; otherwise they are ordinary memory and torch copies synchronously."""
    return _stoke.built_with_cuda()


def __getattr__(name: str) -> Any:
    # `stoke.torch` on first use, so that `import stoke` does not import torch.
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'stoke' has no attribute {name!r}")
