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

import json
import os
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _stoke
from ._stoke import NotFoundError

__all__ = [
    "Table", "open_table", "ingest", "synth_volumes", "synth_images", "Loader", "NotFoundError",
    "Transform", "Cast", "Normalize", "RandomFlip", "RandomRot90", "RandomCrop", "CenterCrop",
    "ChannelsFirst", "ChannelsLast", "RandomResizedCrop", "Resize", "RandomHorizontalFlip", "ColorJitter",
    "ToTensor", "transform_image", "image_transform_choices", "built_with_cuda",
]

PathLike = Union[str, "os.PathLike[str]"]


def built_with_cuda() -> bool:
    """True when this stoke was built with the CUDA runtime. Its batch buffers are then page-locked
    (pinned) host memory whenever a CUDA device is present, so Loader(device="cuda") copies them to
    the GPU asynchronously; otherwise they are ordinary memory and torch copies synchronously."""
    return _stoke.built_with_cuda()


# ---------------------------------------------------------------------------
# tables

@dataclass(frozen=True)
class Table:
    """A table: its directory, an optional version (time travel; None = latest)
    and an optional `where` predicate over scalar columns (the syntax of
    `stoke query --where`, e.g. "label = 1 AND split = 'train'"). Cheap: nothing
    is read until a Loader opens it or a method is called.

    query and count see `version` and `where`, info sees `version`, history
    lists every version; the maintenance methods (optimize, vacuum, checkpoint)
    act on the latest version of the table directory and commit new versions."""
    path: str
    version: Optional[int] = None
    where: str = ""

    # -- views

    def at(self, version: Optional[int]) -> "Table":
        """The same table at another version (None: the latest)."""
        return replace(self, version=version)

    def filter(self, where: str) -> "Table":
        """The rows of this table that also match `where`."""
        return replace(self, where=self._where(where))

    def _where(self, where: str) -> str:
        if self.where and where:
            return f"({self.where}) AND ({where})"
        return where or self.where

    # -- reading

    def query(self, where: str = "", columns: Optional[Sequence[str]] = None, limit: Optional[int] = None,
              to: str = "numpy") -> Any:
        """Rows matching `where` (and the table's own `where`), in table order.

        Files and row groups whose statistics exclude the predicate are skipped.
        Returns, with to="numpy", a dict {column: array}: scalar columns as typed
        [rows] arrays, tensor columns as [rows, *shape] arrays (one positioned read
        per cell: select them only for modest row counts; the Loader is the fast
        path for training), string and binary columns as object arrays with None
        for nulls. Dates are datetime64[D] and timestamps datetime64[us] arrays
        (UTC for Delta's timestamp; NaT for nulls), decimals object arrays of
        decimal.Decimal, structs, arrays and maps object arrays of dicts and lists
        (their dates, timestamps and decimals as ISO-8601 and exact text). A scalar column with nulls also has "<column>.valid" (uint8,
        1 = present; null cells hold 0). With to="pandas", a pandas.DataFrame
        (nullable dtypes for columns with nulls, tensor cells as arrays)."""
        if to not in ("numpy", "pandas"):
            raise ValueError(f"to: expected 'numpy' or 'pandas', got {to!r}")
        if isinstance(columns, str):
            columns = [columns]
        r = _stoke.query(self.path, where=self._where(where), columns=None if columns is None else list(columns),
                         limit=-1 if limit is None else int(limit), version=self.version)
        import numpy as np
        out: Dict[str, Any] = {}
        for name, values in r["columns"].items():
            if isinstance(values, list):
                arr = np.empty(len(values), dtype=object)
                arr[:] = values
                values = arr
            out[name] = values
            valid = r["valid"].get(name)
            if valid is not None and values.dtype.kind == "M":
                values[valid == 0] = np.datetime64("NaT")  # null dates and timestamps
            if valid is not None and values.dtype != object:
                out[name + ".valid"] = valid
        if to == "numpy":
            return out
        return _to_pandas(out, r["valid"])

    def count(self, where: str = "") -> int:
        """The number of rows matching `where` (and the table's own `where`)."""
        return int(_stoke.query(self.path, where=self._where(where), version=self.version, count_only=True)["rows"])

    def info(self, data_files: bool = False) -> Dict[str, Any]:
        """Version, timestamp, schema (with tensor dtypes and shapes), files, rows and bytes of the
        table version, as `stoke inspect DIR --json`. data_files=True adds "data_files", the list of
        every data file (path, size, modificationTime, stats) that the command prints: at 650,000
        files that list is 270 MB of JSON and takes Python ~20 s to build."""
        return json.loads(_stoke.inspect(self.path, version=self.version, data_files=data_files))

    def history(self, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The table's versions, newest first: version, timestamp (ms), operation, files_added,
        files_removed, bytes_added, bytes_removed, commitInfo."""
        text = _stoke.history(self.path, limit=0 if limit is None else int(limit))
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    # -- maintenance

    def optimize(self, target_file_bytes: int = 1 << 30, where: str = "", sort_by: str = "",
                 codec: str = "", row_group_bytes: int = 128 << 20, threads: int = 0,
                 progress: bool = True) -> Dict[str, Any]:
        """Compact small files into files of about `target_file_bytes` (one commit, dataChange=false;
        readers of older versions are unaffected). `where` limits it to files whose statistics may
        match; `sort_by` orders rows by a scalar column within the new files (and rewrites every
        matching file); `codec` "" keeps the codec the table was ingested with (see ingest). Returns the report: version (-1: nothing to do), files_before, files_after,
        files_removed, files_added, rows_rewritten, bytes_rewritten, seconds."""
        return _stoke.optimize(self.path, target_file_bytes=target_file_bytes, row_group_bytes=row_group_bytes,
                               where=where, sort_by=sort_by, codec=codec, threads=threads, progress=progress)

    def vacuum(self, retain_hours: float = 168.0, dry_run: bool = False) -> Dict[str, Any]:
        """Delete data files that no version inside the retention window references and that are
        older than it (7 days by default, as Delta Lake). Returns files (relative paths deleted, or
        to delete with dry_run), bytes and referenced_kept."""
        return _stoke.vacuum(self.path, retain_hours=retain_hours, dry_run=dry_run)

    def checkpoint(self) -> None:
        """Write a Delta checkpoint of the latest version (commits write one every 10 versions)."""
        _stoke.checkpoint(self.path)


def open_table(path: PathLike, version: Optional[int] = None, where: str = "") -> Table:
    """The table at `path`: a directory holding a Delta log, or an object-store URI
    (az://container/path, abfss://..., https://<account>.blob.core.windows.net/..., s3://bucket/path;
    credentials from the environment, see docs/object_storage.md).

    Raises stoke.NotFoundError when `path` holds no table."""
    p = os.fspath(path)
    if not _stoke.is_table(p):
        raise NotFoundError(f"{p}: no Delta table (no _delta_log directory)")
    return Table(p, version, where)


def ingest(source: PathLike, table: PathLike, labels: Optional[PathLike] = None, mode: str = "append",
           tensor_column: str = "data", codec: str = "auto", compression_level: int = 0,
           target_file_bytes: int = 1 << 30, row_group_bytes: int = 128 << 20, rows_per_file: int = 0,
           partition_by: str = "", threads: int = 0, progress: bool = True,
           shard: Optional[Tuple[int, int]] = None, format: str = "", datasets: Sequence[str] = (),
           hdf5_samples: str = "auto", decode: Union[None, int, Sequence[int]] = None) -> Dict[str, Any]:
    """Ingest the source files at `source` (a directory or one file) into the table at `table`
    (created when missing), as `stoke ingest`.

    Sources, by file name (or `format`: "npy", "npz", "hdf5", "images"; kinds cannot be mixed):
    .npy/.npz files (one sample each; a .npy array becomes column `tensor_column`, .npz members
    their own columns), HDF5 files .h5/.hdf5 (local only: datasets become columns, root attributes
    scalar columns; `datasets` selects datasets; `hdf5_samples`: "axis0" reads N samples along axis 0
    of every dataset, "file" one sample per file, "auto" axis0 when the first file's datasets share
    their first extent), or JPEG/PNG images in the ImageFolder layout ROOT/<class>/<image> (a `label`
    column from the class directories, class names in the table metadata) or anywhere under ROOT with
    `labels`; images are stored as their encoded bytes in an `image` column with `width`, `height`
    and `channels` columns. See docs/format.md.

    decode: images only: None keeps the encoded bytes; a size (one int for a square, or (height,
      width)) decodes each image to RGB and stores it resized to exactly that size (PIL's
      antialiased bilinear, as torchvision's Resize((h, w))) as a [h, w, 3] uint8 `image` tensor,
      as `stoke ingest --decode`: more disk, no decoding when loading. The loader's image
      transforms take such a column as pixels.

    labels: a CSV with a `file` column (the file's path relative to `source`) whose other columns
      become scalar columns.
    mode: "append" adds the files not yet in the table (all samples of a file at once; re-running
      resumes an interrupted ingest); "overwrite" replaces the table's contents in one new version.
    codec: "auto" (per column chunk: zstd where it saves at least 10 % of the bytes, else
      uncompressed, so noisy float tensors and encoded images stay uncompressed and fast to load), or
      one of "zstd", "lz4_raw", "snappy", "gzip", "uncompressed" for every chunk.
    rows_per_file: exactly this many rows per data file (0: files of about target_file_bytes).
    partition_by: a labels column to partition by (Hive-style directories).
    shard: (index, count) to ingest only shard `index` of `count`, a contiguous part of the sorted
      source listing, as `stoke ingest --shard index/count`: `count` processes (on any machines)
      ingest into one table concurrently with no coordinator, each resumable on its own; ids are
      the samples' places in the sorted listing after the table's existing ids; each shard's data
      files go in the table's directory `shard-<index>-of-<count>`. Needs mode "append".

    Returns the report: version (the version committed; when every source file is already in the
    table, the current one with files_added 0), source_files, skipped, rows, files_added,
    files_removed, bytes_in, bytes_out, seconds. Open the result with open_table(table)."""
    return _stoke.ingest(os.fspath(source), os.fspath(table), labels="" if labels is None else os.fspath(labels),
                         mode=mode, tensor_column=tensor_column, codec=codec, compression_level=compression_level,
                         target_file_bytes=target_file_bytes, row_group_bytes=row_group_bytes,
                         rows_per_file=rows_per_file, partition_by=partition_by, threads=threads, progress=progress,
                         shard=shard, format=format, datasets=[str(d) for d in datasets], hdf5_samples=hdf5_samples,
                         decode=_decode_size(decode))


def _decode_size(decode: Union[None, int, Sequence[int]]) -> List[int]:
    if decode is None:
        return []
    if isinstance(decode, int):
        return [int(decode), int(decode)]
    size = [int(d) for d in decode]
    if len(size) != 2:
        raise ValueError(f"decode: expected a size or (height, width), got {decode!r}")
    return size


def synth_volumes(out: PathLike, samples: int = 2000, shape: Sequence[int] = (30, 30, 10), channels: int = 10,
                  seed: int = 0, label_noise: float = 0.05, threads: int = 0, progress: bool = True) -> Dict[str, Any]:
    """Write `samples` synthetic volumes (float32 [*shape, channels], one .npy file each) and
    labels.csv (file, label, x, y, split) into `out`, as `stoke synth volumes`. The label says
    whether a buried body is present; `label_noise` of the labels are flipped. Same seed, same
    bytes. Returns files, bytes, positives, seconds."""
    return _stoke.synth_volumes(os.fspath(out), samples=samples, shape=[int(d) for d in shape], channels=channels,
                                seed=seed, label_noise=label_noise, threads=threads, progress=progress)


def synth_images(out: PathLike, images: int = 1000, classes: int = 10, min_size: int = 200, max_size: int = 500,
                 quality: int = 92, png_fraction: float = 0.0, seed: int = 0, threads: int = 0,
                 progress: bool = True) -> Dict[str, Any]:
    """Write `images` generated images into an ImageFolder tree `out`/class_<k>/<n>.jpg (`classes`
    class directories; a `png_fraction` of them as .png), as `stoke synth images`: sides drawn in
    [min_size, max_size] pixels, textured so that a ~350 px JPEG at the default quality is about
    110 KB. Same seed, same bytes. Returns files, bytes, seconds."""
    return _stoke.synth_images(os.fspath(out), images=images, classes=classes, min_size=min_size, max_size=max_size,
                               quality=quality, png_fraction=png_fraction, seed=seed, threads=threads,
                               progress=progress)


def _to_pandas(columns: Dict[str, Any], valid: Mapping[str, Any]) -> Any:
    try:
        import pandas as pd
    except ImportError as e:
        raise ImportError("Table.query(to='pandas') needs pandas (Debian: apt-get install python3-pandas)") from e
    data: Dict[str, Any] = {}
    for name, values in columns.items():
        if name.endswith(".valid") and name[:-len(".valid")] in valid:
            continue
        if values.ndim > 1:
            data[name] = list(values)  # one array per cell
        elif name in valid and values.dtype != object:
            mask = valid[name] == 0  # pandas' masked arrays: True = missing
            if values.dtype.kind == "M":
                data[name] = values  # NaT marks the nulls
            elif values.dtype.kind == "b":
                data[name] = pd.arrays.BooleanArray(values, mask)
            elif values.dtype.kind == "f":
                data[name] = pd.arrays.FloatingArray(values, mask)
            else:
                data[name] = pd.arrays.IntegerArray(values, mask)
        else:
            data[name] = values
    return pd.DataFrame(data)


# ---------------------------------------------------------------------------
# transforms (applied per sample in C++, on the loader's worker threads)

class Transform:
    """Base of the per-sample transforms. Axes count over a sample's dimensions
    (not the batch dimension); negative axes count from the end. Random
    transforms are seeded by (seed, epoch, row, column): reproducible across
    runs, ranks and thread counts."""

    def to_dict(self) -> Dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True)
class Cast(Transform):
    """Convert elements to `dtype`: "float32", "float16" or "bfloat16"."""
    dtype: str = "float32"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "cast", "dtype": _dtype_name(self.dtype)}


@dataclass(frozen=True)
class Normalize(Transform):
    """(x - mean[c]) / std[c] per channel c along `axis` (one value: all channels).
    `axis` None: the channel axis, the last one, or the first after ToTensor or
    ChannelsFirst (so torchvision's ToTensor(), Normalize(mean, std) works as is)."""
    mean: Union[float, Sequence[float]]
    std: Union[float, Sequence[float]]
    axis: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"kind": "normalize", "mean": _floats(self.mean), "std": _floats(self.std)}
        if self.axis is not None:
            d["axis"] = int(self.axis)
        return d


@dataclass(frozen=True)
class RandomFlip(Transform):
    """Reverse each axis in `axes` independently with probability `p`."""
    axes: Sequence[int]
    p: float = 0.5

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "random_flip", "axes": [int(a) for a in self.axes], "p": float(self.p)}


@dataclass(frozen=True)
class RandomRot90(Transform):
    """Rotate by k * 90 degrees (k uniform in 0..3) in the plane of two axes of equal extent."""
    axes: Tuple[int, int] = (0, 1)

    def to_dict(self) -> Dict[str, Any]:
        if len(self.axes) != 2:
            raise ValueError(f"RandomRot90: axes must name two axes, got {self.axes!r}")
        return {"kind": "random_rot90", "axes": [int(a) for a in self.axes]}


@dataclass(frozen=True)
class RandomCrop(Transform):
    """A window of `size` (one entry per axis in `axes`) at a uniform random offset;
    an axis shorter than its size is zero-padded."""
    axes: Sequence[int]
    size: Sequence[int]

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "random_crop", "axes": [int(a) for a in self.axes], "size": [int(s) for s in self.size]}


@dataclass(frozen=True)
class CenterCrop(Transform):
    """Without `axes`, torchvision's CenterCrop(size) of an image: `size` is
    (height, width) or one int for both; the window's offset is
    round((extent - size) / 2), and an image smaller than the crop is zero-padded.
    With `axes`: as RandomCrop, the window (or the padding) centred at
    floor((extent - size) / 2)."""
    size: Union[int, Sequence[int]]
    axes: Optional[Sequence[int]] = None

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"kind": "center_crop", "size": _sizes(self.size)}
        if self.axes is not None:
            d["axes"] = [int(a) for a in self.axes]
        return d


@dataclass(frozen=True)
class ChannelsFirst(Transform):
    """Move the channel axis `axis` (default last) to the front."""
    axis: int = -1

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "channels_first", "axis": int(self.axis)}


@dataclass(frozen=True)
class ChannelsLast(Transform):
    """Move axis `axis` (default first) to the end."""
    axis: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "channels_last", "axis": int(self.axis)}


# Image transforms: they run on an image column's decoded pixels (HWC uint8; or a uint8 [H, W, C]
# tensor column) and come first in the list, before ToTensor, Normalize and the other transforms.
# Semantics are torchvision's on PIL images (docs/python.md, "Images").

@dataclass(frozen=True)
class RandomResizedCrop(Transform):
    """torchvision's RandomResizedCrop: a box of `scale` of the image's area and
    aspect ratio in `ratio` (log-uniform; 10 attempts, then a centred box),
    resized to `size` ((height, width) or one int) with PIL's antialiased bilinear."""
    size: Union[int, Sequence[int]]
    scale: Tuple[float, float] = (0.08, 1.0)
    ratio: Tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0)

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "random_resized_crop", "size": _sizes(self.size), "scale": _floats(self.scale),
                "ratio": _floats(self.ratio)}


@dataclass(frozen=True)
class Resize(Transform):
    """torchvision's Resize: one int scales the shorter side to it (the longer to
    int(size * long / short)); (height, width) resizes to exactly that. PIL's
    antialiased bilinear."""
    size: Union[int, Sequence[int]]

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "resize", "size": _sizes(self.size)}


@dataclass(frozen=True)
class RandomHorizontalFlip(Transform):
    """Mirror the image (its width axis) with probability `p`."""
    p: float = 0.5

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "random_horizontal_flip", "p": float(self.p)}


@dataclass(frozen=True)
class ColorJitter(Transform):
    """torchvision's ColorJitter(brightness, contrast): each a float b (factors
    uniform in [max(0, 1 - b), 1 + b]; 0 turns it off) or a (min, max) range;
    applied in a random order; brightness blends with black, contrast with the
    image's mean gray level."""
    brightness: Union[float, Tuple[float, float]] = 0.0
    contrast: Union[float, Tuple[float, float]] = 0.0

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "color_jitter", "brightness": _factor_range(self.brightness),
                "contrast": _factor_range(self.contrast)}


@dataclass(frozen=True)
class ToTensor(Transform):
    """torchvision's ToTensor: an [H, W, C] uint8 image to [C, H, W] `dtype`
    ("float32", "float16" or "bfloat16") in [0, 1]."""
    dtype: str = "float32"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "to_tensor", "dtype": _dtype_name(self.dtype)}


def _sizes(v: Union[int, Sequence[int]]) -> List[int]:
    if isinstance(v, int):
        return [int(v)]
    return [int(x) for x in v]


def _factor_range(v: Union[float, Tuple[float, float]]) -> Optional[List[float]]:
    if isinstance(v, (int, float)):
        if v < 0:
            raise ValueError(f"ColorJitter: a factor spread must be >= 0, got {v}")
        return None if v == 0 else [max(0.0, 1.0 - float(v)), 1.0 + float(v)]
    lo, hi = v
    return [float(lo), float(hi)]


def transform_image(encoded: bytes, transforms: Optional[Sequence[Union[Transform, Mapping[str, Any]]]] = None,
                    channels: int = 3, jpeg_dct_scaling: bool = True, seed: int = 0, epoch: int = 0, row: int = 0,
                    column: int = 0) -> Any:
    """One encoded JPEG/PNG (`encoded`: the file's bytes) decoded and run through
    `transforms` as the Loader does for the sample (seed, epoch, row, column):
    a numpy array, [H, W, C] uint8 or, after ToTensor, [C, H, W]. For previews
    and tests; the Loader never goes through this."""
    return _stoke.transform_image(bytes(encoded), _transform_dicts(transforms), channels=channels,
                                  jpeg_dct_scaling=jpeg_dct_scaling, seed=seed, epoch=epoch, row=row, column=column)


def image_transform_choices(transforms: Sequence[Union[Transform, Mapping[str, Any]]], width: int, height: int,
                            seed: int = 0, epoch: int = 0, row: int = 0, column: int = 0) -> List[Dict[str, Any]]:
    """The random choices the image transforms of `transforms` make for an image of
    width x height pixels and the sample (seed, epoch, row, column), one dict per
    image transform: random_resized_crop and center_crop give the box ("top",
    "left", "height", "width") and "out_height"/"out_width"; resize its output
    size; random_horizontal_flip "flip"; color_jitter "brightness", "contrast"
    and "brightness_first". To replay an augmentation with another library."""
    return _stoke.plan_image_transforms(_transform_dicts(transforms), width, height, seed=seed, epoch=epoch, row=row,
                                        column=column)


def _floats(v: Union[float, Sequence[float]]) -> List[float]:
    if isinstance(v, (int, float)):
        return [float(v)]
    return [float(x) for x in v]


def _dtype_name(dtype: Any) -> str:
    """"float32", numpy dtypes and torch dtypes (torch.bfloat16) to stoke's names."""
    if isinstance(dtype, str):
        return dtype
    s = str(dtype)
    if s.startswith("torch."):
        return s[len("torch."):]
    try:
        import numpy as np
        return np.dtype(dtype).name
    except TypeError:
        return s


def _transform_dicts(transforms: Optional[Sequence[Union[Transform, Mapping[str, Any]]]]) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for t in transforms or ():
        if isinstance(t, Transform):
            out.append(t.to_dict())
        elif isinstance(t, Mapping):
            out.append(dict(t))
        else:
            raise TypeError(f"transforms: expected stoke transforms or dicts, got {type(t).__name__}")
    return out


# ---------------------------------------------------------------------------
# the loader

def _default_rank_world() -> Tuple[int, int]:
    """torch.distributed's rank and world size when it is initialised, else
    $RANK / $WORLD_SIZE (torchrun sets them), else 0 and 1."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


Batch = Dict[str, Any]


def _explain_bad_arguments(what: str, function: Any, kwargs: Mapping[str, Any]) -> str:
    """Names the keyword argument a pybind11 function refused: one it does not take, or one whose
    value does not convert to the parameter's type (from the signature in its docstring)."""
    import re
    signature = (function.__doc__ or "").split("\n", 1)[0]
    params = {name: kind.strip() for name, kind in re.findall(r"[(,] (\w+): ([^=,)]+(?:\[[^\]]*\])?)", signature)}
    unknown = [k for k in kwargs if k not in params]
    if unknown:
        return (f"{what}: unknown option {unknown[0]!r} (options: "
                f"{', '.join(p for p in params if p not in ('self', 'table_dir'))})")

    def fits(kind: str, v: Any) -> bool:
        if kind.startswith("Optional["):
            return v is None or fits(kind[len("Optional["):-1], v)
        if kind == "int":
            return isinstance(v, int) and not isinstance(v, bool)
        if kind == "float":
            return isinstance(v, (int, float)) and not isinstance(v, bool)
        if kind == "bool":
            return isinstance(v, bool)
        if kind == "str":
            return isinstance(v, str)
        if kind.startswith("List") or kind == "list":
            return isinstance(v, (list, tuple))
        return True

    wrong = [f"{k}={v!r} (expected {params[k]})" for k, v in kwargs.items() if not fits(params[k], v)]
    if wrong:
        return f"{what}: wrong type: {', '.join(wrong)}"
    ints = [f"{k}={v!r}" for k, v in kwargs.items() if params[k].endswith("int") and isinstance(v, int) and
            (v < 0 or v >= 1 << 63)]
    return f"{what}: a value out of range for its parameter: {', '.join(ints) or kwargs}"


class Loader:
    """Batches of a table version, in a seeded shuffled order, sharded over ranks.

    Args:
      table: a Table (open_table) or a table directory.
      batch_size: samples per batch.
      shuffle: "global" (a new uniform permutation each epoch), "block" (shuffle
        files, then rows within a buffer of `shuffle_buffer`), or "none".
      seed: with the epoch, fixes the order and the random augmentations.
      columns: columns to load (None: all). Tensor columns become [batch, ...]
        arrays, scalar columns [batch] arrays, string columns lists of str.
      transforms: per-sample transforms (Transform objects or their dicts).
      prefetch_bytes: the one memory budget of the pipeline (reads in flight,
        batch buffers being filled or held by you).
      drop_last: drop the last short batch and the padding that evens out shards.
      device: "cpu", or "cuda"/"cuda:N" to copy tensors there (asynchronously
        from pinned batch buffers when stoke is built with CUDA).
      to: "torch" (torch.Tensor, zero copy on the CPU) or "numpy" (np.ndarray).
      rank, world_size: this process's shard; None: see _default_rank_world.
      **options: the rest of the C++ LoaderOptions: shuffle_buffer, threads,
        queue_depth (0: 64 on local files, 256 on object stores), direct,
        backend ("auto", "io_uring", "pread"), coalesce_bytes, verify_crc,
        on_error ("raise", "skip"), pin_memory, trace; and for tables on object
        stores remote_coalesce_bytes (the largest GET that merges a batch's
        pages of one object, default 8 MiB) and remote_coalesce_gap_bytes
        (pages at most this far apart are merged, default 256 KiB);
        image_channels (3 RGB, 1 gray, 4 RGBA), jpeg_dct_scaling (True).
      cache_dir: tables on object stores: a local directory that keeps the
        bytes fetched (1 MiB blocks, CRC-checked), so that later epochs read
        from local disk; processes may share it. None: no cache.
      cache_bytes: the size the cache directory keeps (least recently used
        blocks go beyond it).

    Image columns (a table ingested from JPEG/PNG files) are decoded on the
    loader's threads; with image transforms (RandomResizedCrop, Resize,
    CenterCrop, RandomHorizontalFlip, ColorJitter, then ToTensor, Normalize)
    they come out as [batch, C, H, W] float tensors, or [batch, H, W, C] uint8
    without ToTensor.

    Iteration yields this rank's batches of the current epoch. Iterating again
    without set_epoch() or load_state_dict() in between moves to the next epoch
    by itself (what remains of an epoch left early is skipped). Not thread-safe:
    one consumer thread. A process forked after the loader was opened cannot use
    it (RuntimeError): open one there.
    """

    def __init__(self, table: Union[Table, PathLike], batch_size: int = 32, shuffle: str = "global",
                 seed: int = 0, columns: Optional[Sequence[str]] = None,
                 transforms: Optional[Sequence[Union[Transform, Mapping[str, Any]]]] = None,
                 prefetch_bytes: int = 512 << 20, drop_last: bool = False, device: str = "cpu",
                 to: str = "torch", rank: Optional[int] = None, world_size: Optional[int] = None,
                 cache_dir: Optional[PathLike] = None, cache_bytes: int = 16 << 30,
                 **options: Any) -> None:
        if to not in ("torch", "numpy"):
            raise ValueError(f"to: expected 'torch' or 'numpy', got {to!r}")
        if to == "numpy" and device != "cpu":
            raise ValueError("to='numpy' delivers host arrays only (device must be 'cpu')")
        for fixed in ("where", "version"):
            if fixed in options:
                raise TypeError(f"Loader: {fixed}= belongs to the table: open_table(path, {fixed}=...), or "
                                f"table.{'filter' if fixed == 'where' else 'at'}(...), then Loader(table, ...)")
        if not isinstance(table, Table):
            table = Table(os.fspath(table))
        if rank is None or world_size is None:
            r, w = _default_rank_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        if isinstance(columns, str):
            columns = [columns]
        self.table = table
        self.to = to
        self.device = device
        self._torch: Any = None
        if to == "torch":
            import torch
            self._torch = torch
            if device != "cpu":
                # Checked here, not at the first batch's copy (which would have used up the batch).
                try:
                    target = torch.device(device)
                except RuntimeError as e:
                    raise ValueError(f"device: {e}") from None
                if target.type == "cuda" and not torch.cuda.is_available():
                    raise RuntimeError(f"device {device!r}: torch sees no CUDA device here")
        kwargs = dict(columns=None if columns is None else list(columns), version=table.version,
                      where=table.where, batch_size=batch_size, shuffle=shuffle, seed=seed, rank=rank,
                      world_size=world_size, drop_last=drop_last, transforms=_transform_dicts(transforms),
                      prefetch_bytes=prefetch_bytes, cache_dir="" if cache_dir is None else os.fspath(cache_dir),
                      cache_bytes=cache_bytes, **options)
        try:
            self._loader = _stoke.Loader(table.path, **kwargs)
        except TypeError as e:
            if "incompatible" not in str(e):
                raise
            raise TypeError(_explain_bad_arguments("Loader", _stoke.Loader.__init__, kwargs)) from None
        # False once an iteration of the current position has begun: the next __iter__ then
        # starts the following epoch.
        self._fresh = True

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Also what copy.copy and DataLoader worker processes (spawn, forkserver) go through.
        raise TypeError("a stoke Loader cannot be pickled, copied or sent to another process: its threads and "
                        "buffers belong to this one (use DataLoader(..., num_workers=0), or open a Loader in "
                        "each process)")

    # -- iteration

    def __iter__(self) -> Iterator[Batch]:
        if not self._fresh:
            self._loader.set_epoch(self._loader.epoch + 1)
        self._fresh = False
        return self._batches()

    def _batches(self) -> Iterator[Batch]:
        cuda = self.to == "torch" and self.device != "cpu"
        # With device="cuda": the raw batch (whose arrays hold its pinned host buffer) of each copy
        # that may still run, with the CUDA event recorded after it. A buffer goes back to the loader
        # only after its copy finished; the wait for the previous batch's copy comes after the next
        # batch was taken, so that copy runs while the loader delivers the next one.
        in_flight: List[Tuple[Dict[str, Any], Any]] = []
        try:
            while True:
                raw = self._loader.next()
                if raw is None:
                    return
                if self.to == "numpy":
                    yield raw
                    continue
                batch = self._to_torch(raw)
                if cuda:
                    batch, done = self._to_device(batch)
                    in_flight.append((raw, done))  # before any wait: an interrupted wait still covers it
                    while len(in_flight) > 1:
                        in_flight[0][1].synchronize()
                        del in_flight[0]
                raw = None
                yield batch
        finally:
            for _, done in in_flight:
                done.synchronize()

    def next_batch(self) -> Optional[Batch]:
        """The next batch of the current position without starting a new epoch, or None at
        the epoch's end (a lower-level alternative to iteration; numpy or torch as `to`)."""
        raw = self._loader.next()
        if raw is None or self.to == "numpy":
            return raw
        batch = self._to_torch(raw)
        if self.device != "cpu":
            batch, done = self._to_device(batch)
            try:
                done.synchronize()
            except BaseException:  # e.g. KeyboardInterrupt: the copies must end before `raw` is freed
                self._torch.cuda.synchronize(self._torch.device(self.device))
                raise
        return batch

    def _to_torch(self, raw: Dict[str, Any]) -> Batch:
        torch = self._torch
        bf16 = set(raw.pop("__bfloat16__", ()))
        out: Batch = {}
        for k, v in raw.items():
            if not hasattr(v, "__array_interface__"):
                out[k] = v  # strings, ints
            elif k in bf16:
                out[k] = torch.from_numpy(v.view("int16")).view(torch.bfloat16)
            else:
                try:
                    # Shares the batch buffer; the tensor keeps the array (and so the batch) alive.
                    out[k] = torch.from_numpy(v)
                except TypeError:
                    out[k] = v  # uint16/32/64 before torch 2.3: no torch dtype, stays a numpy array
        return out

    def _to_device(self, batch: Batch) -> Tuple[Batch, Any]:
        torch = self._torch
        device = torch.device(self.device)
        try:
            out = {k: (v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v)
                   for k, v in batch.items()}
        except BaseException:
            # The copies of this batch queued before the failure read its host buffer: they must end
            # before the caller lets the buffer go back to the loader.
            torch.cuda.synchronize(device)
            raise
        # The copies run on the target device's current stream (not the current device's, when
        # device names another GPU): the event that says they are done is recorded there.
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(device))
        return out, done

    def __len__(self) -> int:
        """Batches of this rank in the current epoch (from its start or the restored position)."""
        return self._loader.batches_per_epoch

    # -- position

    def set_epoch(self, epoch: int) -> None:
        """Position at the start of `epoch`; the next iteration delivers it."""
        self._loader.set_epoch(epoch)
        self._fresh = True

    @property
    def epoch(self) -> int:
        return self._loader.epoch

    def state_dict(self) -> Dict[str, int]:
        """{"epoch", "consumed"}: the samples of the epoch's global order that all ranks together
        have consumed through the batches returned so far (independent of world size)."""
        epoch, consumed = self._loader.state()
        return {"epoch": epoch, "consumed": consumed}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        """Resume at a state_dict() position; the next iteration delivers the rest of that epoch."""
        self._loader.restore(int(state["epoch"]), int(state["consumed"]))
        self._fresh = True

    # -- facts and diagnostics

    @property
    def num_rows(self) -> int:
        """Rows of the table version that pass `where`."""
        return self._loader.num_rows

    @property
    def samples_per_epoch(self) -> int:
        """This rank's samples in the current epoch, counting the short last batch that
        drop_last drops (len(self) batches are delivered)."""
        return self._loader.samples_per_epoch

    @property
    def table_version(self) -> int:
        return self._loader.table_version

    def stats(self) -> Dict[str, Any]:
        """Throughput and where the time went: samples_per_second, mb_per_second, wait_share,
        stage_seconds ({"fetch", "decode", "transform", "collate", "wait"}), backend, counts."""
        return self._loader.stats()

    def shuffle_quality(self) -> Dict[str, float]:
        """mean_jump and distinct_file_fraction of this rank's order in the current epoch."""
        return self._loader.shuffle_quality()

    def trace(self, path: PathLike) -> None:
        """Write the recorded per-stage spans as Chrome trace JSON (needs trace=True)."""
        self._loader.write_trace(os.fspath(path))

    def close(self) -> None:
        """Stop the pipeline and its threads now (batches already delivered stay valid)."""
        self._loader.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def __getattr__(name: str) -> Any:
    # `stoke.torch` on first use, so that `import stoke` does not import torch.
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'stoke' has no attribute {name!r}")
