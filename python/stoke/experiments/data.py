"""Data sets of the experiments: the workload (what a sample is and which model learns it), the
per-file layout that naive pipelines read (one file or blob per sample plus labels.csv), and the
table that stoke reads.

A workload is a parameter of every experiment: the seed volumes of `stoke synth volumes`
(VolumeWorkload), or generated JPEG photographs in class folders (ImageWorkload, `stoke synth
images`). Both provide the same members: describe, config, sample_bytes, input_shape,
write_sources, ingest_options, decode, transforms and small_model (and, for the volumes, the
published ResNet).
"""

from __future__ import annotations

import csv
import io
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

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

    def config(self) -> Dict[str, Any]:
        """What workload_from_config() needs to make this workload again (in another process)."""
        return {"name": self.name, "shape": list(self.shape), "channels": self.channels}

    @property
    def file_kind(self) -> str:
        return ".npy file"

    @property
    def model_description(self) -> str:
        return "VolumeNet (two 3D convolutions, max pooling, a linear head)"

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

    def ingest_options(self) -> Dict[str, Any]:
        """stoke.ingest's options for this workload's files (uncompressed pages: the volumes are
        float noise that zstd barely shrinks)."""
        return {"tensor_column": self.column, "codec": "uncompressed"}

    def decode(self, data: bytes, train: bool = True) -> np.ndarray:
        """A sample file's bytes as the model's input, channels first (the same for training and
        validation: the volumes are not augmented)."""
        a = np.load(io.BytesIO(data), allow_pickle=False)
        return np.ascontiguousarray(np.moveaxis(a, -1, 0), dtype=np.float32)

    def transforms(self, train: bool = True) -> List[stoke.Transform]:
        """What stoke's loader applies to give the same input as decode()."""
        return [stoke.ChannelsFirst()]

    def resnet(self, width: int) -> "models.ResNet3D":
        """The published model (DeepIQ's 3D ResNet-18), `width` channels in its first stage."""
        return models.ResNet3D(self.channels, width)

    def small_model(self) -> "models.VolumeNet":
        """A small 3D CNN that learns the task in a few epochs (the shuffle and batch studies)."""
        return models.VolumeNet(self.channels, self.shape)


# ImageNet's channel means and standard deviations, as torchvision's examples normalise with them.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class ImageWorkload:
    """Photographs in class folders, as the UND study's skin-cancer images (`stoke synth images`:
    JPEGs of `classes` classes, sides drawn in [min_side, max_side] px, a class-coloured background
    with random shapes and noise; about 110 KB at 350 px). Stored one JPEG per sample in the
    ImageFolder layout (ROOT/class_<k>/<n>.jpg) plus labels.csv (file, label, split); the table
    holds the encoded bytes. Training input: torchvision's RandomResizedCrop(size),
    RandomHorizontalFlip, ToTensor and Normalize (ImageNet's mean and std); validation input:
    Resize(size), CenterCrop(size), ToTensor, Normalize. The naive pipeline decodes with PIL and
    applies torchvision's transforms; stoke decodes with libjpeg-turbo and applies its own, which
    follow torchvision's definitions (docs/python.md, "Images")."""
    size: int = 224
    min_side: int = 200
    max_side: int = 500
    classes: int = 2
    name: str = "images"
    column: str = "image"

    def describe(self) -> str:
        return (f"generated JPEG photographs (stoke synth images): {self.classes} classes, sides {self.min_side}-"
                f"{self.max_side} px, one .jpg per sample in class folders; RandomResizedCrop to {self.size} px, "
                f"horizontal flip, ToTensor and Normalize ([3, {self.size}, {self.size}] float32)")

    def config(self) -> Dict[str, Any]:
        return {"name": self.name, "size": self.size, "min_side": self.min_side, "max_side": self.max_side,
                "classes": self.classes}

    @property
    def file_kind(self) -> str:
        return "JPEG file"

    @property
    def model_description(self) -> str:
        return "ImageCNN (two 2D convolutions, max pooling, a linear head)"

    @property
    def sample_bytes(self) -> int:
        return 3 * self.size * self.size * 4

    @property
    def input_shape(self) -> Tuple[int, ...]:
        return (3, self.size, self.size)

    def write_sources(self, dest: str, samples: int, seed: int) -> None:
        """`samples` JPEGs in class folders and labels.csv (file, label, split: a seeded tenth of
        the images is "val") at `dest` (a path or az:// URI)."""
        if self.classes != 2:
            raise ValueError(f"the experiments' models are binary classifiers: the image workload needs 2 classes, "
                             f"got {self.classes}")
        stoke.synth_images(dest, images=samples, classes=self.classes, min_size=self.min_side, max_size=self.max_side,
                           seed=seed, progress=False)
        files = SampleFiles(dest)
        names = sorted(n for n in files.list() if n.lower().endswith((".jpg", ".jpeg", ".png")))
        if len(names) != samples:
            raise RuntimeError(f"{dest}: synth images wrote {len(names)} images, expected {samples}")
        classes = sorted({n.split("/", 1)[0] for n in names})
        rng = np.random.default_rng([seed, 0x1ABE1])
        val = rng.random(len(names)) < 0.1
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["file", LABEL_COLUMN, "split"])
        for n, v in zip(names, val):
            w.writerow([n, classes.index(n.split("/", 1)[0]), "val" if v else "train"])
        files.write("labels.csv", out.getvalue().encode("utf-8"))

    def ingest_options(self) -> Dict[str, Any]:
        """stoke.ingest's options: the encoded images with the default codec choice (JPEG bytes do not
        compress, so they stay uncompressed), labels and splits from labels.csv."""
        return {}

    def _torchvision(self, train: bool) -> Any:
        import torchvision.transforms as T
        if train:
            steps = [T.RandomResizedCrop(self.size), T.RandomHorizontalFlip()]
        else:
            steps = [T.Resize(self.size), T.CenterCrop(self.size)]
        return T.Compose([*steps, T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])

    def decode(self, data: bytes, train: bool = True) -> np.ndarray:
        """A JPEG's bytes as the model's input, the way a torchvision user writes it: PIL decodes, the
        torchvision transforms augment (torch's random generator: seeded per DataLoader worker)."""
        from PIL import Image
        with Image.open(io.BytesIO(data)) as im:
            x = self._torchvision(train)(im.convert("RGB"))
        return x.numpy()

    def transforms(self, train: bool = True) -> List[stoke.Transform]:
        """stoke's transforms that give decode()'s input (the same definitions, other random draws)."""
        if train:
            steps: List[stoke.Transform] = [stoke.RandomResizedCrop(self.size), stoke.RandomHorizontalFlip()]
        else:
            steps = [stoke.Resize(self.size), stoke.CenterCrop(self.size)]
        return [*steps, stoke.ToTensor(), stoke.Normalize(list(IMAGENET_MEAN), list(IMAGENET_STD))]

    def small_model(self) -> "models.ImageCNN":
        """A small 2D CNN that learns the classes in a few epochs (instead of the published study's
        VGG16, which on 2 CPU cores would take the whole run's time and hide the input pipelines)."""
        return models.ImageCNN(3)


Workload = Union[VolumeWorkload, ImageWorkload]
WORKLOADS = ("volumes", "images")


def workload_by_name(name: str, shape: Optional[Sequence[int]] = None, channels: Optional[int] = None,
                     **image: Any) -> Workload:
    """A workload by its name: "volumes" (shape, channels) or "images" (size, min_side, max_side,
    classes)."""
    if name == "images":
        return ImageWorkload(**{k: int(v) for k, v in image.items() if v is not None})
    if name != "volumes":
        raise ValueError(f"unknown workload {name!r} (available: {', '.join(WORKLOADS)})")
    kw: Dict[str, Any] = {}
    if shape is not None:
        kw["shape"] = tuple(int(d) for d in shape)
    if channels is not None:
        kw["channels"] = int(channels)
    return VolumeWorkload(**kw)


def workload_from_config(config: Dict[str, Any]) -> Workload:
    """The inverse of a workload's config()."""
    c = dict(config)
    return workload_by_name(c.pop("name"), **c)


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

    def list(self) -> List[str]:
        """Every file under the location, as paths relative to it with '/' separators."""
        if self.is_blob:
            prefix = split_uri(self.location)[1]
            start = f"{prefix}/" if prefix else ""
            return [b.name[len(start):] for b in self._container().list_blobs(name_starts_with=start)]
        out = []
        for root, _, names in os.walk(self.location):
            rel = os.path.relpath(root, self.location)
            out += [n if rel == "." else f"{rel.replace(os.sep, '/')}/{n}" for n in names]
        return out

    def write(self, name: str, payload: bytes) -> None:
        """Writes (or replaces) one file."""
        if self.is_blob:
            prefix = split_uri(self.location)[1]
            self._container().upload_blob(f"{prefix}/{name}" if prefix else name, payload, overwrite=True)
            return
        with open(os.path.join(self.location, name), "wb") as f:
            f.write(payload)

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

def ingest_table(workload: Workload, sources: str, table: str, rows_per_file: int = 0,
                 optimize: bool = False, sort_by: str = "", target_file_bytes: int = 0) -> Dict[str, Any]:
    """Ingests the sample files at `sources` into the table at `table` (with the workload's
    ingest_options), then optionally OPTIMIZEs it (`sort_by` orders rows by a column across the new
    files; `target_file_bytes` their size, 0 = 1 GiB). Returns the files before and after."""
    stoke.ingest(sources, table, labels=f"{sources}/labels.csv", rows_per_file=rows_per_file, progress=False,
                 **workload.ingest_options())
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
