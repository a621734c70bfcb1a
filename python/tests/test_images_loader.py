"""Images in the loader: decoded pixels against PIL's decode, every image transform against a numpy
reference and against torchvision on PIL images (given the random choices the loader made, which
stoke.image_transform_choices exposes), whole batches against torchvision's pipeline, corrupt images
named by file and row (or skipped and counted).

    STOKE_BIN=build/stoke /usr/bin/python3 -m pytest python/tests/test_images_loader.py
"""

import io
import json
import subprocess

import numpy as np
import pytest

from stoke_env import STOKE_BIN, import_stoke, run_stoke

stoke = import_stoke()
Image = pytest.importorskip("PIL.Image", reason="python3-pil (Debian) is the decoding reference")
F = pytest.importorskip("torchvision.transforms.functional",
                        reason="python3-torchvision (Debian) is the augmentation reference")

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
# The resize against an exact float reference: the horizontal pass and the result are each rounded to
# 8 bits (0.5 each, the vertical weights are >= 0 and sum to 1), plus PIL's 22-bit fixed point.
TOLERANCE = 1.0 + 1e-3


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """An ImageFolder of 40 generated JPEGs and PNGs (3 classes) and its table."""
    base = tmp_path_factory.mktemp("images")
    stoke.synth_images(base / "src", images=40, classes=3, min_size=60, max_size=140, png_fraction=0.25, seed=3,
                       progress=False)
    stoke.ingest(base / "src", base / "table", progress=False)
    table = stoke.open_table(base / "table")
    q = table.query(columns=["id", "file", "image", "width", "height"])
    by_row = {int(r): bytes(b) for r, b in zip(q["id"], q["image"])}
    return {"base": base, "table": table, "by_row": by_row, "files": dict(zip(q["id"], q["file"]))}


def pil(b, mode="RGB"):
    return Image.open(io.BytesIO(b)).convert(mode)


def encode(arr, fmt, **kw):
    out = io.BytesIO()
    Image.fromarray(arr).save(out, format=fmt, **kw)
    return out.getvalue()


# ---- decoding -------------------------------------------------------------------------------------

def test_decoded_pixels_equal_pils_decode(images):
    """libjpeg-turbo on both sides: JPEGs exactly or within 1, PNGs exactly; gray and RGBA too."""
    worst = 0
    for row, b in images["by_row"].items():
        for channels, mode in ((3, "RGB"), (1, "L"), (4, "RGBA")):
            got = stoke.transform_image(b, channels=channels)
            want = np.asarray(pil(b, mode))
            if channels == 1:
                want = want[:, :, None]
            assert got.shape == want.shape, (row, mode)
            diff = np.abs(got.astype(int) - want.astype(int)).max()
            worst = max(worst, diff)
            if images["files"][row].endswith(".png"):
                assert diff == 0, (row, mode)
    assert worst <= 1


@pytest.mark.parametrize("kind", ["progressive", "gray_jpeg", "palette", "palette_trns", "rgba", "la", "gray1"])
def test_decoding_of_other_layouts_equals_pil(kind):
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    if kind == "progressive":
        b = encode(rgb, "JPEG", quality=85, progressive=True)
    elif kind == "gray_jpeg":
        b = encode(rgb[:, :, 0], "JPEG", quality=90)
    elif kind == "palette":
        b = encode(np.asarray(Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=16)), "PNG")
        img = Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=16)
        out = io.BytesIO()
        img.save(out, format="PNG")
        b = out.getvalue()
    elif kind == "palette_trns":
        img = Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=8)
        out = io.BytesIO()
        img.save(out, format="PNG", transparency=2)
        b = out.getvalue()
    elif kind == "rgba":
        b = encode(np.dstack([rgb, rgb[:, :, :1]]), "PNG")
    elif kind == "la":
        b = encode(np.dstack([rgb[:, :, 0], rgb[:, :, 1]]), "PNG")
    else:
        img = Image.fromarray(rgb[:, :, 0] > 128).convert("1")
        out = io.BytesIO()
        img.save(out, format="PNG")
        b = out.getvalue()
    for channels, mode in ((3, "RGB"), (1, "L")):
        got = stoke.transform_image(b, channels=channels)
        want = np.asarray(pil(b, mode))
        want = want[:, :, None] if channels == 1 else want
        assert np.abs(got.astype(int) - want.astype(int)).max() <= (1 if b[:2] == b"\xff\xd8" else 0), (kind, mode)


def test_bad_images_are_errors_naming_the_file():
    good = encode(np.zeros((20, 20, 3), np.uint8), "JPEG")
    for bad in (good[: len(good) // 2], b"GIF89a" + bytes(40), good[:30]):
        with pytest.raises((OSError, ValueError)) as e:
            stoke._stoke.transform_image(bad, [], path="cats/0001.jpg")
        assert "cats/0001.jpg" in str(e.value)


# ---- each augmentation against numpy --------------------------------------------------------------

def pil_bilinear_weights(in_size, out_size, box0, box1):
    """PIL's BILINEAR resampling matrix (out_size x in_size) in float64, without its fixed point."""
    scale = (box1 - box0) / out_size
    support = max(scale, 1.0)
    m = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = box0 + (i + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        x = np.arange(lo, hi)
        w = np.clip(1.0 - np.abs((x - center + 0.5) / support), 0, None)
        m[i, lo:hi] = w / w.sum()
    return m


def numpy_resized_crop(a, top, left, h, w, out_h, out_w):
    crop = a[top:top + h, left:left + w].astype(np.float64)
    wy = pil_bilinear_weights(h, out_h, 0, h)
    wx = pil_bilinear_weights(w, out_w, 0, w)
    return np.einsum("yh,hwc,xw->yxc", wy, crop, wx, optimize=True)


def numpy_blend(a, x, f):
    """PIL's Image.blend(a, x, f) in float32, truncated, clipped when extrapolating."""
    t = np.float32(a) + np.float32(f) * (x.astype(np.float32) - np.float32(a))
    return np.clip(t, 0, 255).astype(np.uint8)


def numpy_gray(x):
    x = x.astype(np.uint32)
    return (x[..., 0] * 19595 + x[..., 1] * 38470 + x[..., 2] * 7471 + 0x8000) >> 16


def test_random_resized_crop_and_resize_against_numpy_and_pil(images):
    t = [stoke.RandomResizedCrop(48)]
    for row, b in list(images["by_row"].items())[:12]:
        a = np.asarray(pil(b))
        c = stoke.image_transform_choices(t, a.shape[1], a.shape[0], seed=4, row=row)[0]
        assert 0 <= c["top"] and c["top"] + c["height"] <= a.shape[0]
        assert 0 <= c["left"] and c["left"] + c["width"] <= a.shape[1]
        got = stoke.transform_image(b, t, jpeg_dct_scaling=False, seed=4, row=row)
        ref = numpy_resized_crop(a, c["top"], c["left"], c["height"], c["width"], 48, 48)
        assert np.abs(got - ref).max() <= TOLERANCE, row  # PIL's fixed point and 8-bit intermediate
        pil_ref = np.asarray(F.resized_crop(pil(b), c["top"], c["left"], c["height"], c["width"], [48, 48]))
        assert np.array_equal(got, pil_ref), row  # bit-exact with PIL's resize
    # Resize: shorter side (torchvision's int(s * long / short)) and exact (h, w).
    for row, b in list(images["by_row"].items())[:6]:
        img = pil(b)
        for size in (32, (17, 45), 200):
            got = stoke.transform_image(b, [stoke.Resize(size)], jpeg_dct_scaling=False)
            want = np.asarray(F.resize(img, size if isinstance(size, tuple) else [size]))
            assert got.shape == want.shape and np.array_equal(got, want), (row, size)
            a = np.asarray(img)
            ref = numpy_resized_crop(a, 0, 0, a.shape[0], a.shape[1], want.shape[0], want.shape[1])
            assert np.abs(got - ref).max() <= TOLERANCE, (row, size)


def test_center_crop_and_flip_against_numpy(images):
    for row, b in list(images["by_row"].items())[:8]:
        a = np.asarray(pil(b))
        h, w = a.shape[:2]
        got = stoke.transform_image(b, [stoke.CenterCrop((31, 40)), stoke.RandomHorizontalFlip(p=1.0)])
        top, left = int(round((h - 31) / 2.0)), int(round((w - 40) / 2.0))
        assert np.array_equal(got, a[top:top + 31, left:left + 40][:, ::-1]), row
        assert np.array_equal(got, np.asarray(F.hflip(F.center_crop(pil(b), [31, 40]))))
        # Larger than the image: zero padding, as torchvision's center_crop.
        big = stoke.transform_image(b, [stoke.CenterCrop(max(h, w) + 3)])
        assert np.array_equal(big, np.asarray(F.center_crop(pil(b), [max(h, w) + 3] * 2)))
        never = stoke.transform_image(b, [stoke.CenterCrop(20), stoke.RandomHorizontalFlip(p=0.0)])
        assert np.array_equal(never, a[int(round((h - 20) / 2.0)):][:20, int(round((w - 20) / 2.0)):][:, :20])


def test_color_jitter_against_numpy_and_pil(images):
    t = [stoke.CenterCrop(40), stoke.ColorJitter(brightness=0.6, contrast=0.6)]
    orders = set()
    for row, b in list(images["by_row"].items())[:16]:
        choices = stoke.image_transform_choices(t, 100, 100, seed=2, row=row)
        j = choices[1]
        assert 0.4 <= j["brightness"] <= 1.6 and 0.4 <= j["contrast"] <= 1.6
        orders.add(j["brightness_first"])
        got = stoke.transform_image(b, t, seed=2, row=row)
        crop = np.asarray(F.center_crop(pil(b), [40, 40]))
        x = crop
        steps = ["b", "c"] if j["brightness_first"] else ["c", "b"]
        for s in steps:
            if s == "b":
                x = numpy_blend(0, x, j["brightness"])
            else:
                mean = int(numpy_gray(x).mean() + 0.5)
                x = numpy_blend(mean, x, j["contrast"])
        assert np.array_equal(got, x), row
        ref = F.center_crop(pil(b), [40, 40])
        for s in steps:
            ref = F.adjust_brightness(ref, j["brightness"]) if s == "b" else F.adjust_contrast(ref, j["contrast"])
        assert np.array_equal(got, np.asarray(ref)), row
    assert orders == {True, False}


def test_to_tensor_and_normalize_against_numpy(images):
    b = next(iter(images["by_row"].values()))
    a = np.asarray(pil(b))
    for dtype, tol in (("float32", 1e-6), ("float16", 2e-3)):
        got = stoke.transform_image(b, [stoke.ToTensor(), stoke.Normalize(MEAN, STD), stoke.Cast(dtype)])
        ref = (a.astype(np.float32) / 255 - np.float32(MEAN)) / np.float32(STD)
        ref = ref.transpose(2, 0, 1)
        assert got.dtype == np.dtype(dtype) and got.shape == ref.shape
        assert np.allclose(got.astype(np.float64), ref, atol=tol, rtol=0)
    plain = stoke.transform_image(b, [stoke.ToTensor()])
    assert np.array_equal(plain, (a.astype(np.float32) / np.float32(255)).transpose(2, 0, 1))


def test_choices_are_deterministic_and_vary_with_row_and_epoch():
    t = [stoke.RandomResizedCrop(32), stoke.RandomHorizontalFlip(), stoke.ColorJitter(0.4, 0.4)]
    a = stoke.image_transform_choices(t, 300, 200, seed=1, epoch=0, row=5)
    assert a == stoke.image_transform_choices(t, 300, 200, seed=1, epoch=0, row=5)
    assert a != stoke.image_transform_choices(t, 300, 200, seed=1, epoch=1, row=5)
    assert a != stoke.image_transform_choices(t, 300, 200, seed=1, epoch=0, row=6)
    assert a != stoke.image_transform_choices(t, 300, 200, seed=2, epoch=0, row=5)


# ---- the loader -----------------------------------------------------------------------------------

def torchvision_sample(b, choices, out=224):
    """torchvision's RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize on a PIL image,
    replaying stoke's choices."""
    c, flip = choices[0], choices[1]["flip"]
    img = F.resized_crop(pil(b), c["top"], c["left"], c["height"], c["width"], [out, out])
    if flip:
        img = F.hflip(img)
    return F.normalize(F.to_tensor(img), MEAN, STD).numpy()


def test_loader_batches_equal_torchvision_given_the_same_choices(images):
    t = [stoke.RandomResizedCrop(64), stoke.RandomHorizontalFlip(), stoke.ToTensor(), stoke.Normalize(MEAN, STD)]
    loader = stoke.Loader(images["table"], batch_size=8, transforms=t, seed=9, to="numpy", columns=["image", "label"],
                          jpeg_dct_scaling=False)
    seen = 0
    for epoch in range(2):
        loader.set_epoch(epoch)
        for batch in loader:
            x = batch["image"]
            assert x.shape[1:] == (3, 64, 64) and x.dtype == np.float32
            for i, row in enumerate(batch["__row_ids__"]):
                b = images["by_row"][int(row)]
                w, h = Image.open(io.BytesIO(b)).size
                ch = stoke.image_transform_choices(t, w, h, seed=9, epoch=epoch, row=int(row), column=0)
                ref = torchvision_sample(b, ch, 64)
                assert np.abs(x[i] - ref).max() < 1e-5, (epoch, row)
                seen += 1
    assert seen == 80
    st = loader.stats()
    assert st["stage_seconds"]["decode"] > 0 and st["stage_seconds"]["transform"] > 0


def test_loader_uint8_output_and_same_seed_same_batches(images):
    t = [stoke.RandomResizedCrop((24, 32)), stoke.RandomHorizontalFlip()]
    runs = []
    for _ in range(2):
        loader = stoke.Loader(images["table"], batch_size=10, transforms=t, seed=1, to="numpy", threads=2)
        runs.append([(b["__row_ids__"].copy(), b["image"].copy()) for b in loader])
    assert len(runs[0]) == 4
    for (ra, xa), (rb, xb) in zip(*runs):
        assert np.array_equal(ra, rb) and np.array_equal(xa, xb)
        assert xa.dtype == np.uint8 and xa.shape[1:] == (24, 32, 3)


def test_dct_scaling_stays_close_to_the_full_decode(tmp_path):
    """Large photos cropped small take the DCT-scaled path; the pixels stay within a few levels."""
    yy, xx = np.mgrid[0:900, 0:1200]
    smooth = np.dstack([128 + 100 * np.sin(xx / 50), 128 + 100 * np.cos(yy / 40), (xx + yy) / 9]).astype(np.uint8)
    b = encode(smooth, "JPEG", quality=92)
    t = [stoke.Resize((96, 128))]
    full = stoke.transform_image(b, t, jpeg_dct_scaling=False).astype(int)
    scaled = stoke.transform_image(b, t, jpeg_dct_scaling=True).astype(int)
    assert not np.array_equal(full, scaled)
    assert np.abs(full - scaled).mean() < 2.0


def test_corrupt_image_names_file_and_row_or_is_skipped(tmp_path):
    src = tmp_path / "src"
    stoke.synth_images(src, images=12, classes=2, min_size=40, max_size=60, seed=5, progress=False)
    victim = sorted(src.glob("*/*.jpg"))[4]
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])  # the header survives: ingest keeps it, the loader cannot decode it
    stoke.ingest(src, tmp_path / "table", progress=False)
    t = [stoke.CenterCrop(32), stoke.ToTensor()]
    loader = stoke.Loader(stoke.open_table(tmp_path / "table"), batch_size=4, transforms=t, shuffle="none")
    with pytest.raises(OSError) as e:
        list(loader)
    msg = str(e.value)
    assert ".parquet row 4 " in msg and "column 'image'" in msg and "JPEG" in msg, msg
    skip = stoke.Loader(stoke.open_table(tmp_path / "table"), batch_size=4, transforms=t, shuffle="none",
                        on_error="skip", to="numpy")
    rows = np.concatenate([b["__row_ids__"] for b in skip])
    assert 4 not in rows and len(rows) == 11
    assert skip.stats()["samples_skipped"] == 1


def test_images_of_different_sizes_need_a_size_fixing_transform(images):
    loader = stoke.Loader(images["table"], batch_size=40, transforms=[stoke.ToTensor()])
    with pytest.raises(ValueError) as e:
        list(loader)
    assert "random_resized_crop" in str(e.value) and "row" in str(e.value)


def test_bad_transform_options_raise_value_errors(images):
    for bad in ([stoke.Resize(8), stoke.RandomResizedCrop(8)], [stoke.ToTensor(), stoke.Resize(8)],
                [stoke.RandomResizedCrop(8, scale=(0.9, 0.1))], [{"kind": "rotate"}],
                [{"kind": "resize", "size": 8, "bogus": 1}]):
        with pytest.raises(ValueError):
            stoke.Loader(images["table"], transforms=bad)
    with pytest.raises(ValueError):
        stoke.ColorJitter(brightness=-1).to_dict()


def test_bench_load_takes_transforms_as_text(images):
    table = images["base"] / "table"
    r = run_stoke("bench", "load", table, "--batch-size", 8, "--json", "--transform", "random_resized_crop:32x24",
                  "--transform", "hflip", "--transform", "to_tensor:float16",
                  "--transform", "normalize:mean=0.485/0.456/0.406,std=0.229/0.224/0.225")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["samples"] == 40 and out["transforms"] == 4
    assert out["stage_seconds"]["decode"] > 0 and out["stage_seconds"]["transform"] > 0
    bad = subprocess.run([STOKE_BIN, "bench", "load", str(table), "--transform", "resize:abc"], capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "transform 'resize:abc'" in bad.stderr, bad.stderr
    mixed = subprocess.run([STOKE_BIN, "bench", "load", str(table), "--transform", "to_tensor"], capture_output=True,
                           text=True)
    assert mixed.returncode != 0 and "random_resized_crop" in mixed.stderr and "row" in mixed.stderr, mixed.stderr
