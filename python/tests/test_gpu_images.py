"""Images finished on the GPU: Loader(transforms_on="cuda") hands the resize, flip, to_tensor and
normalize to the device. The records the loader's threads write are checked here against the CPU
path with stoke's host reference of the kernel (byte for byte); where torch sees a CUDA device, the
kernel's batches are checked against the CPU path's too.

    STOKE_BIN=build/stoke /usr/bin/python3 -m pytest python/tests/test_gpu_images.py
"""

import json
import subprocess

import numpy as np
import pytest

from stoke_env import STOKE_BIN, import_stoke

stoke = import_stoke()
from stoke import _stoke  # noqa: E402  (the host reference of the kernel is private)

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """60 generated JPEGs and PNGs of 60 to 300 pixels a side, ingested."""
    base = tmp_path_factory.mktemp("gpu_images")
    stoke.synth_images(base / "src", images=60, classes=3, min_size=60, max_size=300, png_fraction=0.2, seed=11,
                       progress=False)
    stoke.ingest(base / "src", base / "table", progress=False)
    return base / "table"


def chains():
    return {
        "float16": [stoke.RandomResizedCrop(64), stoke.RandomHorizontalFlip(), stoke.ToTensor("float16"),
                    stoke.Normalize(MEAN, STD)],
        "uint8": [stoke.RandomResizedCrop((48, 40)), stoke.RandomHorizontalFlip()],
        "float32": [stoke.Resize(72), stoke.CenterCrop(64), stoke.ToTensor()],
    }


def raw_batches(table, transforms, transforms_on):
    loader = _stoke.Loader(str(table), columns=["image", "label"], batch_size=16, seed=4, threads=2,
                           transforms=[t.to_dict() for t in transforms], transforms_on=transforms_on)
    out = []
    while (b := loader.next()) is not None:
        out.append(b)
    return out


@pytest.mark.parametrize("chain", sorted(chains()))
def test_records_finish_to_the_cpu_paths_bytes(table, chain):
    transforms = chains()[chain]
    cpu = raw_batches(table, transforms, "cpu")
    gpu = raw_batches(table, transforms, "cuda")
    assert len(cpu) == len(gpu) == 4
    for c, g in zip(cpu, gpu):
        assert g["__gpu_images__"] == ["image"] and "__gpu_images__" not in c
        assert g["image"].dtype == np.uint8 and g["image"].ndim == 2
        finished = _stoke.finish_gpu_images_on_host(g["image"])
        assert finished.shape == c["image"].shape and finished.dtype == c["image"].dtype
        assert np.array_equal(finished, c["image"])
        dtype, shape = _stoke.gpu_images_shape(g["image"])
        assert tuple(shape) == c["image"].shape
        assert np.array_equal(g["label"], c["label"])


def test_chains_the_device_cannot_run_are_refused(table):
    with pytest.raises(ValueError, match="color_jitter runs on the CPU only"):
        _stoke.Loader(str(table), columns=["image"], transforms_on="cuda",
                      transforms=[stoke.RandomResizedCrop(32).to_dict(), stoke.ColorJitter(0.4).to_dict()])
    with pytest.raises(ValueError, match="no selected column is an image column"):
        _stoke.Loader(str(table), columns=["label"], transforms_on="cuda")
    with pytest.raises(ValueError, match="transforms_on: unknown value 'gpu'"):
        _stoke.Loader(str(table), columns=["image"], transforms_on="gpu")


def test_the_loader_needs_a_cuda_device_for_it(table):
    with pytest.raises(ValueError, match="needs to='torch' and device='cuda'"):
        stoke.Loader(table, transforms=[stoke.RandomResizedCrop(32)], transforms_on="cuda")
    with pytest.raises(ValueError, match="expected 'cpu' or 'cuda'"):
        stoke.Loader(table, transforms_on="gpu")


def test_records_that_are_not_are_refused():
    with pytest.raises(ValueError, match="row 0: not a GPU image record"):
        _stoke.gpu_images_shape(np.zeros((2, 4096), np.uint8))


try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:
    torch, HAVE_CUDA = None, False
cuda = pytest.mark.skipif(not HAVE_CUDA, reason="torch sees no CUDA device")


def test_bench_load_finishes_on_the_device_or_says_why_not(table):
    r = subprocess.run([STOKE_BIN, "--no-progress", "bench", "load", table, "--transform", "random_resized_crop:64",
                        "--transform", "to_tensor:float16", "--transforms-on", "cuda", "--batches", "3", "--json"],
                       capture_output=True, text=True)
    if not stoke.built_with_cuda() or not HAVE_CUDA:
        assert r.returncode != 0
        assert "finishing images on" in r.stderr and ("no CUDA device" in r.stderr or "without" in r.stderr)
        return
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["transforms_on"] == "cuda" and report["samples"] > 0


@cuda
@pytest.mark.parametrize("chain", sorted(chains()))
def test_the_device_finishes_as_the_cpu(table, chain):
    transforms = chains()[chain]
    kw = dict(columns=["image", "label"], batch_size=16, seed=4, threads=2, transforms=transforms, device="cuda")
    on_cpu = list(stoke.Loader(table, **kw))
    on_gpu = list(stoke.Loader(table, transforms_on="cuda", **kw))
    assert len(on_cpu) == len(on_gpu) == 4
    for c, g in zip(on_cpu, on_gpu):
        assert g["image"].is_cuda and g["image"].dtype == c["image"].dtype and g["image"].shape == c["image"].shape
        assert torch.equal(g["image"], c["image"])
