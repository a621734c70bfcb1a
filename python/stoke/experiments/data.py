"""Data sets of the experiments: the workload (what a sample is and which model learns it), the
per-file layout that naive pipelines read (one file or blob per sample plus labels.csv), and the
table that stoke reads.

A workload is a parameter of every experiment. Today there is one, the seed volumes of
`stoke synth volumes`; an image workload plugs in by providing the same members (write_sources,
decode, transforms, input_shape, models, describe).
"""

from __future__ import annotations

import csv
import io
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import stoke

from . import models

LABEL_COLUMN = "label"


@dataclass(frozen=True)
class VolumeWorkload:
    """Volumes of [X, Y, Z, C] float32 (`stoke synth volumes`): is a buried body present? Stored
    one `.npy` per sample; models take them channels first, [C, X, Y, Z]."""
    shape: Tuple[int, int, int] = (30, 30, 10)
    channels: int = 10
    name: str = "volumes"
    column: str = "volume"

    def describe(self) -> str:
        x, y, z = self.shape
        return (f"seed volumes (stoke synth volumes): {x}x{y}x{z} voxels x {self.channels} float32 channels, "
                f"{self.sample_bytes / 1e3:,.0f} KB a sample, one .npy per sample")

    @property
    def sample_bytes(self) -> int:
        return int(np.prod(self.shape)) * self.channels * 4

    @property
    def input_shape(self) -> Tuple[int, ...]:
        return (self.channels, *self.shape)

    def write_sources(self, dest: str, samples: int, seed: int) -> None:
        """`samples` sample files and labels.csv (file,label,x,y,split) at `dest` (a path or URI)."""
        stoke.synth_volumes(dest, samples=samples, shape=list(self.shape), channels=self.channels, seed=seed,
                            progress=False)

    def decode(self, data: bytes) -> np.ndarray:
        """A sample file's bytes as the model's input, channels first."""
        a = np.load(io.BytesIO(data), allow_pickle=False)
        return np.ascontiguousarray(np.moveaxis(a, -1, 0), dtype=np.float32)

    def transforms(self) -> List[stoke.Transform]:
        """What stoke's loader applies to give the same input as decode()."""
        return [stoke.ChannelsFirst()]

    def resnet(self, width: int) -> "models.ResNet3D":
        """The published model (DeepIQ's 3D ResNet-18), `width` channels in its first stage."""
        return models.ResNet3D(self.channels, width)

    def small_model(self) -> "models.VolumeNet":
        """A small 3D CNN that learns the task in a few epochs (the shuffle and batch studies)."""
        return models.VolumeNet(self.channels, self.shape)


def workload_by_name(name: str, shape: Optional[Sequence[int]] = None, channels: Optional[int] = None) -> VolumeWorkload:
    if name != "volumes":
        raise ValueError(f"unknown workload {name!r} (available: volumes)")
    kw: Dict[str, Any] = {}
    if shape is not None:
        kw["shape"] = tuple(int(d) for d in shape)
    if channels is not None:
        kw["channels"] = int(channels)
    return VolumeWorkload(**kw)


# ---------------------------------------------------------------------------
# the per-file layout

def split_uri(location: str) -> Tuple[str, str]:
    """az://container/prefix -> (container, prefix)."""
    rest = location[len("az://"):]
    container, _, prefix = rest.partition("/")
    return container, prefix.strip("/")


@dataclass
class SampleFiles:
    """One file per sample at `location` (a directory, or az://container/prefix on Azure Blob
    storage, read with Microsoft's Azure SDK, Debian's python3-azure), with its labels.csv.

    read() may be called from several threads; an object copied into another process (a
    DataLoader worker) makes its own connection there."""
    location: str
    _client: Any = field(default=None, repr=False, compare=False)
    _client_pid: int = field(default=0, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def is_blob(self) -> bool:
        return self.location.startswith("az://")

    def __getstate__(self) -> Dict[str, Any]:  # picklable for DataLoader workers: no client, no lock
        return {"location": self.location}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["location"])

    def _container(self) -> Any:
        with self._lock:
            if self._client is None or self._client_pid != os.getpid():
                try:
                    from azure.storage.blob import ContainerClient
                except ImportError as e:
                    raise RuntimeError("reading .npy blobs the naive way needs Microsoft's Azure SDK for Python "
                                       "(Debian: apt install python3-azure; scripts/bootstrap.sh installs it)") from e
                conn = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
                if not conn:
                    raise RuntimeError(f"{self.location}: AZURE_STORAGE_CONNECTION_STRING is not set")
                self._client = ContainerClient.from_connection_string(conn, split_uri(self.location)[0])
                self._client_pid = os.getpid()
            return self._client

    def read(self, name: str) -> bytes:
        """The bytes of one file (one GET for a blob, as the published pipeline read them)."""
        if self.is_blob:
            prefix = split_uri(self.location)[1]
            return self._container().download_blob(f"{prefix}/{name}" if prefix else name).readall()
        with open(os.path.join(self.location, name), "rb") as f:
            return f.read()

    def labels(self) -> List[Dict[str, str]]:
        """labels.csv as rows (file, label, split, ...), in file order."""
        text = self.read("labels.csv").decode("utf-8")
        rows = list(csv.DictReader(io.StringIO(text)))
        for need in ("file", LABEL_COLUMN, "split"):
            if rows and need not in rows[0]:
                raise ValueError(f"{self.location}/labels.csv: no column '{need}'")
        return rows

    def split(self, split: str) -> Tuple[List[str], np.ndarray]:
        """(file names, labels as float32) of one split, in file order."""
        rows = [r for r in self.labels() if r["split"] == split]
        return [r["file"] for r in rows], np.array([float(r[LABEL_COLUMN]) for r in rows], dtype=np.float32)


# ---------------------------------------------------------------------------
# the table

def ingest_table(workload: VolumeWorkload, sources: str, table: str, rows_per_file: int = 0,
                 optimize: bool = False, sort_by: str = "", target_file_bytes: int = 0) -> Dict[str, Any]:
    """Ingests the sample files at `sources` into the table at `table` (uncompressed pages: the
    volumes are float noise that zstd barely shrinks), then optionally OPTIMIZEs it (`sort_by`
    orders rows by a column across the new files; `target_file_bytes` their size, 0 = 1 GiB).
    Returns the files before and after."""
    stoke.ingest(sources, table, labels=f"{sources}/labels.csv", tensor_column=workload.column,
                 codec="uncompressed", rows_per_file=rows_per_file, progress=False)
    t = stoke.open_table(table)
    out: Dict[str, Any] = {"files_ingested": int(t.info()["files"])}
    if optimize or sort_by:
        kw: Dict[str, Any] = {"progress": False}
        if target_file_bytes:
            kw["target_file_bytes"] = int(target_file_bytes)
        if sort_by:
            kw["sort_by"] = sort_by
        t.optimize(**kw)
    info = t.info()
    out.update(files=int(info["files"]), rows=int(info["rows"]), version=int(info["version"]))
    return out
