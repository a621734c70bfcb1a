"""Tables: open one (a version, a filter), query it to numpy or pandas, ingest sources into one,
and write synthetic sources. Re-exported by the `stoke` package."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _stoke

PathLike = Union[str, "os.PathLike[str]"]


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

    def at(self, version: Optional[int] = None, *, timestamp: Any = None) -> "Table":
        """The same table at another version (None: the latest), or at the newest
        version committed at or before `timestamp` (time travel by time): a
        datetime (naive ones are UTC), ISO-8601 text ("2026-11-30T08:00:00Z"; UTC
        unless a zone follows) or an int of milliseconds since the epoch. Commit
        times are those history() lists: a table's in-commit timestamps where it
        has them. A time before the table's earliest readable version raises."""
        if timestamp is None:
            return replace(self, version=version)
        if version is not None:
            raise ValueError("Table.at: give a version or a timestamp, not both")
        return replace(self, version=int(_stoke.version_at(self.path, _timestamp_text(timestamp))))

    def filter(self, where: str) -> "Table":
        """The rows of this table that also match `where`."""
        return replace(self, where=self._where(where))

    def _where(self, where: str) -> str:
        if self.where and where:
            return f"({self.where}) AND ({where})"
        return where or self.where

    # -- reading

    def query(self, where: str = "", columns: Optional[Sequence[str]] = None, limit: Optional[int] = None,
              to: str = "numpy", decimals: str = "decimal") -> Any:
        """Rows matching `where` (and the table's own `where`), in table order.

        Files and row groups whose statistics exclude the predicate are skipped.
        Returns, with to="numpy", a dict {column: array}: scalar columns as typed
        [rows] arrays, tensor columns as [rows, *shape] arrays (one positioned read
        per cell: select them only for modest row counts; the Loader is the fast
        path for training), string and binary columns as object arrays with None
        for nulls. Dates are datetime64[D] and timestamps datetime64[us] arrays
        (UTC for Delta's timestamp; NaT for nulls), decimals object arrays of
        decimal.Decimal (exact; decimals="float64" gives float64 arrays instead, each
        value the nearest double, nulls NaN with a ".valid" column), structs, arrays and maps object arrays of dicts and lists
        (their dates, timestamps and decimals as ISO-8601 and exact text). A scalar column with nulls also has "<column>.valid" (uint8,
        1 = present; null cells hold 0). With to="pandas", a pandas.DataFrame
        (nullable dtypes for columns with nulls, tensor cells as arrays)."""
        if to not in ("numpy", "pandas"):
            raise ValueError(f"to: expected 'numpy' or 'pandas', got {to!r}")
        if decimals not in ("decimal", "float64"):
            raise ValueError(f"decimals: expected 'decimal' or 'float64', got {decimals!r}")
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
            if decimals == "float64" and name in r["decimal_columns"]:
                values = out[name] = _decimals_as_float64(values)
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
        """The table's versions, newest first (all of them, or the newest `limit`): version,
        timestamp (ms), operation, files_added, files_removed, bytes_added, bytes_removed,
        commitInfo."""
        return _stoke.history(self.path, limit=-1 if limit is None else int(limit))

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
    credentials from the environment, see docs/object_storage.md); without a log, a plain Parquet
    dataset: the *.parquet files under a directory (key=value directories are partition columns), a
    glob ("data/train-*.parquet") or one file, as an unversioned table.

    Raises stoke.NotFoundError when `path` holds neither."""
    p = os.fspath(path)
    _stoke.check_table(p, version)
    return Table(p, version, where)


# The engine's defaults for ingest (IngestOptions in C++), which the keywords below take.
_INGEST_DEFAULTS: Dict[str, Any] = _stoke.ingest_defaults()


def ingest(source: PathLike, table: PathLike, labels: Optional[PathLike] = None,
           mode: str = _INGEST_DEFAULTS["mode"], tensor_column: str = _INGEST_DEFAULTS["tensor_column"],
           codec: str = _INGEST_DEFAULTS["codec"], compression_level: int = _INGEST_DEFAULTS["compression_level"],
           target_file_bytes: int = _INGEST_DEFAULTS["target_file_bytes"],
           row_group_bytes: int = _INGEST_DEFAULTS["row_group_bytes"],
           rows_per_file: int = _INGEST_DEFAULTS["rows_per_file"], partition_by: str = _INGEST_DEFAULTS["partition_by"],
           threads: int = _INGEST_DEFAULTS["threads"], progress: bool = _INGEST_DEFAULTS["progress"],
           shard: Optional[Tuple[int, int]] = None, format: str = _INGEST_DEFAULTS["format"],
           datasets: Sequence[str] = (), hdf5_samples: str = _INGEST_DEFAULTS["hdf5_samples"],
           decode: Union[None, int, Sequence[int]] = None,
           on_changed: str = _INGEST_DEFAULTS["on_changed"], client: Any = None,
           shards: Optional[int] = None) -> Dict[str, Any]:
    """Ingest the source files at `source` (a directory or one file) into the table at `table`
    (created when missing), as `stoke ingest`.

    Sources, by file name (or `format`: "auto", the default, or "npy", "npz", "hdf5", "images", "parquet"; kinds cannot
    be mixed):
    .npy/.npz files (one sample each; a .npy array becomes column `tensor_column`, .npz members
    their own columns), HDF5 files .h5/.hdf5 (local only: datasets become columns, root attributes
    scalar columns; `datasets` selects datasets; `hdf5_samples`: "axis0" reads N samples along axis 0
    of every dataset, "file" one sample per file, "auto" axis0 when the first file's datasets share
    their first extent), or JPEG/PNG images in the ImageFolder layout ROOT/<class>/<image> (a `label`
    column from the class directories, class names in the table metadata) or anywhere under ROOT with
    `labels`; images are stored as their encoded bytes in an `image` column with `width`, `height`
    and `channels` columns. A Delta table, a glob ("data/train-*.parquet") or Parquet files are a
    Parquet source: re-laid out one sample per page, every column kept (arrays of numbers and .npy
    cells as tensors, JPEG/PNG cells and Hugging Face {bytes, path} images as image columns). See
    docs/format.md.

    decode: images only: None keeps the encoded bytes; a size (one int for a square, or (height,
      width)) decodes each image to RGB and stores it resized to exactly that size (PIL's
      antialiased bilinear, as torchvision's Resize((h, w))) as a [h, w, 3] uint8 `image` tensor,
      as `stoke ingest --decode`: more disk, no decoding when loading. The loader's image
      transforms take such a column as pixels.

    labels: a CSV with a `file` column (the file's path relative to `source`) whose other columns
      become scalar columns.
    mode: "append" adds the files not yet in the table (all samples of a file at once; re-running
      resumes an interrupted ingest); "overwrite" replaces the table's contents in one new version.
      A file is in the table when a row records its location (absolute path or URI, in the column
      `source_location`) and version (`source_version`: size and modification time, or the ETag on
      object stores): another directory's files with the same names are new rows. Rows of tables
      written before stoke recorded locations match by name.
    on_changed: appending, a file whose location is in the table with another version (it changed
      after it was ingested): "skip" reports it in changed_files and leaves it out, "append" adds
      the new version as new rows, "error" raises before anything is written.
    codec: "auto" (per column chunk: zstd where it saves at least 10 % of the bytes, else
      uncompressed; tensor and blob columns keep zstd only where their pages average 64 KiB or more
      and it saves at least 90 %, so that samples load fast), or one of "zstd", "lz4_raw", "snappy",
      "gzip", "uncompressed" for every chunk.
    rows_per_file: exactly this many rows per data file (0: files of about target_file_bytes).
    partition_by: a labels column to partition by (Hive-style directories).
    shard: (index, count) to ingest only shard `index` of `count`, a contiguous part of the sorted
      source listing, as `stoke ingest --shard index/count`: `count` processes (on any machines)
      ingest into one table concurrently with no coordinator, each resumable on its own; ids are
      the samples' places in the sorted listing after the table's existing ids; each shard's data
      files go in the table's directory `shard-<index>-of-<count>`. Needs mode "append".

    client: a dask.distributed Client: the ingest runs as `shards` tasks on its cluster (default: one
      per worker thread), each ingesting and committing shard (i, shards) on its own, re-run by Dask
      where a worker dies (stoke/distributed.py, docs/cluster.md). Needs mode "append"; the workers
      need stoke and the store's credentials, the source and the table storage they all reach.
      Returns the shards' reports summed, with "shards", the list of them.

    Returns the report: version (the version committed; when every source file is already in the
    table, the current one with files_added 0), source_files, new_files, skipped (already in the
    table), changed (files whose version changed), changed_files (the first 1,000 of them: dicts
    of location, table_version, source_version), rows, files_added, files_removed, bytes_in,
    bytes_out, seconds. Open the result with open_table(table)."""
    if client is not None:
        from .distributed import ingest_on
        return ingest_on(client, dict(source=os.fspath(source), table=os.fspath(table),
                                      labels=None if labels is None else os.fspath(labels), mode=mode,
                                      tensor_column=tensor_column, codec=codec, compression_level=compression_level,
                                      target_file_bytes=target_file_bytes, row_group_bytes=row_group_bytes,
                                      rows_per_file=rows_per_file, partition_by=partition_by, threads=threads,
                                      shard=shard, format=format, datasets=list(datasets), hdf5_samples=hdf5_samples,
                                      decode=decode, on_changed=on_changed), shards=shards)
    if shards is not None:
        raise ValueError("ingest: shards goes with a Dask client (client=...); one process takes shard=(i, n)")
    return _stoke.ingest(os.fspath(source), os.fspath(table), labels="" if labels is None else os.fspath(labels),
                         mode=mode, tensor_column=tensor_column, codec=codec, compression_level=compression_level,
                         target_file_bytes=target_file_bytes, row_group_bytes=row_group_bytes,
                         rows_per_file=rows_per_file, partition_by=partition_by, threads=threads, progress=progress,
                         shard=shard, format=format, datasets=[str(d) for d in datasets], hdf5_samples=hdf5_samples,
                         decode=_decode_size(decode), on_changed=on_changed)


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


def _decimals_as_float64(values: Any) -> Any:
    """An object array of decimal.Decimal (None for nulls) as float64, each the nearest double; NaN
    for nulls."""
    import numpy as np
    return np.array([float("nan") if v is None else float(v) for v in values], dtype=np.float64)


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


def _timestamp_text(timestamp: Any) -> str:
    """A time for Table.at as text TableVersionAt reads: datetimes as ISO-8601
    (naive ones UTC), ints as milliseconds since the epoch, text as it is."""
    import datetime
    if isinstance(timestamp, datetime.datetime):
        if timestamp.tzinfo is not None:
            timestamp = timestamp.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return timestamp.isoformat(sep=" ") + "Z"
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, str)):
        raise TypeError(f"Table.at: timestamp must be a datetime, an ISO-8601 str or int milliseconds, "
                        f"not {type(timestamp).__name__}")
    return str(timestamp)
