"""Per-sample transforms, applied in C++ on the loader's worker threads, and the functions that
apply one image's chain here for previews and tests. Re-exported by the `stoke` package."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _stoke


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
