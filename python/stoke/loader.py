"""The Loader: batches of a table as numpy arrays or torch tensors, made by the C++ loader on its
own threads. Re-exported by the `stoke` package."""

from __future__ import annotations

import numbers
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _stoke
from .table import PathLike, Table
from .transforms import Transform, _transform_dicts


def _default_rank_world() -> Tuple[int, int]:
    """torch.distributed's rank and world size when it is initialised, else $RANK / $WORLD_SIZE
    (torchrun sets them), else $SLURM_PROCID / $SLURM_STEP_NUM_TASKS (a task of an `srun` step;
    a batch script outside a step is one process), else 0 and 1."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    env = os.environ
    if "RANK" in env or "WORLD_SIZE" in env:
        return int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1"))
    if "SLURM_STEP_NUM_TASKS" in env and "SLURM_PROCID" in env:
        return int(env["SLURM_PROCID"]), int(env["SLURM_STEP_NUM_TASKS"])
    return 0, 1


Batch = Dict[str, Any]

# The engine's defaults (LoaderOptions in C++), the one definition the keywords below take theirs from.
_DEFAULTS: Dict[str, Any] = _stoke.loader_defaults()


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


def _pad_shape(column: str, value: Any) -> List[int]:
    """A `pad` entry as the binding takes it: a length alone, or one length per nesting level."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return [int(value)]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError(f"pad[{column!r}]: expected a length or a tuple of lengths (one per nesting level), got {value!r}")


class Loader:
    """Batches of a table version, in a seeded shuffled order, sharded over ranks.

    Args:
      table: a Table (open_table) or a table directory.
      batch_size: samples per batch.
      shuffle: "global" (a new uniform permutation each epoch), "block" (shuffle
        files, then rows within a buffer of `shuffle_buffer`; for other writers'
        array and binary columns, their pages and row groups, each decoded once),
        or "none".
      seed: with the epoch, fixes the order and the random augmentations.
      columns: columns to load (None: all). Tensor columns become [batch, ...]
        arrays, scalar columns [batch] arrays, string columns lists of str,
        array columns (lists of numbers, nested to any depth) [batch, n1, ...].
      transforms: per-sample transforms (Transform objects or their dicts).
      prefetch_bytes: the one memory budget of the pipeline (reads in flight,
        batch buffers being filled or held by you).
      drop_last: drop the last short batch and the padding that evens out shards.
      device: "cpu", or "cuda"/"cuda:N" to copy tensors there (asynchronously
        from pinned batch buffers when stoke is built with CUDA).
      to: "torch" (torch.Tensor, zero copy on the CPU) or "numpy" (np.ndarray).
      transforms_on: "cpu" (default): image columns are resampled and
        normalized on the loader's threads. "cuda" (with device="cuda"): the
        threads only decode and crop; the resize, flip, to_tensor and
        normalize run on the GPU after the copy, with the same result (see
        docs/python.md, "Images on the GPU"). The copy then carries the
        crops (up to 4x the output's pixels, as uint8) instead of the
        finished images.
      rank, world_size: this process's shard; None: see _default_rank_world.
      **options: the rest of the C++ LoaderOptions: shuffle_buffer, threads,
        queue_depth (0: 64 on local files, 256 on object stores), direct,
        backend ("auto", "io_uring", "pread"), coalesce_bytes, verify_crc,
        on_error ("raise", "skip"), pin_memory, trace; and for tables on object
        stores remote_coalesce_bytes (the largest GET that merges a batch's
        pages of one object, default 8 MiB) and remote_coalesce_gap_bytes
        (pages at most this far apart are merged, default 256 KiB);
        image_channels (3 RGB, 1 gray, 4 RGBA), jpeg_dct_scaling (True);
        shapes ({"volume": (30, 30, 10, 10)}: an array column's rows
        reshaped to that shape, e.g. a flat Spark array<float>);
        pad ({"tokens": 512} or {"grid": (8, 8)}: an array column's ragged,
        empty and null rows padded to that shape, one length per nesting
        level; without it they are errors naming the row) and fill
        ({"tokens": -1}: the value of null elements and of padding, 0 by
        default; without it a null element is an error).
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

    def __init__(self, table: Union[Table, PathLike], batch_size: int = _DEFAULTS["batch_size"],
                 shuffle: str = _DEFAULTS["shuffle"], seed: int = _DEFAULTS["seed"],
                 columns: Optional[Sequence[str]] = None,
                 transforms: Optional[Sequence[Union[Transform, Mapping[str, Any]]]] = None,
                 prefetch_bytes: int = _DEFAULTS["prefetch_bytes"], drop_last: bool = _DEFAULTS["drop_last"],
                 device: str = "cpu", to: str = "torch", rank: Optional[int] = None,
                 world_size: Optional[int] = None, cache_dir: Optional[PathLike] = None,
                 cache_bytes: int = _DEFAULTS["cache_bytes"], transforms_on: str = "cpu", **options: Any) -> None:
        if to not in ("torch", "numpy"):
            raise ValueError(f"to: expected 'torch' or 'numpy', got {to!r}")
        if transforms_on not in ("cpu", "cuda"):
            raise ValueError(f"transforms_on: expected 'cpu' or 'cuda', got {transforms_on!r}")
        if transforms_on == "cuda" and (to != "torch" or not str(device).startswith("cuda")):
            raise ValueError("transforms_on='cuda' finishes the images on the GPU: it needs to='torch' and "
                             f"device='cuda' (got to={to!r}, device={device!r})")
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
        if isinstance(options.get("pad"), Mapping):  # a flat list's length alone: {"tokens": 512}
            options["pad"] = {k: _pad_shape(k, v) for k, v in options["pad"].items()}
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
                      cache_bytes=cache_bytes, transforms_on=transforms_on, **options)
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
        gpu_images = batch.pop("__gpu_images__", ())
        try:
            out = {k: (v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v)
                   for k, v in batch.items()}
            for k in gpu_images:
                out[k] = self._finish_gpu_images(batch[k], out[k], device)
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

    def _finish_gpu_images(self, host: Any, records: Any, device: Any) -> Any:
        """The images of a transforms_on="cuda" column: its records (`host` in pinned memory, `records`
        their copy on `device`) finished by stoke's kernel on the device's current stream."""
        torch = self._torch
        dtype, shape = _stoke.gpu_images_shape(host.numpy())
        out = torch.empty(shape, dtype=getattr(torch, dtype), device=device)
        stream = torch.cuda.current_stream(device)
        _stoke.finish_gpu_images(records.data_ptr(), int(records.shape[1]), dtype, list(shape), out.data_ptr(),
                                 stream.cuda_stream, out.device.index)
        return out

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
