"""HDF5 and image sources from Python and the CLI: table values equal what h5py reads (single-sample
files, multi-sample files, chunked + gzip + shuffle, several datasets, attributes), image cells are
the source files' bytes with the header's width, height and channels as PIL reads them, and corrupt
files are errors naming the file.

    STOKE_BIN=build/stoke /usr/bin/python3 -m pytest python/tests/test_hdf5_images.py
"""

import hashlib
import subprocess

import numpy as np
import pytest

from stoke_env import STOKE_BIN, import_stoke, run_stoke

stoke = import_stoke()
h5py = pytest.importorskip("h5py", reason="python3-h5py (Debian) writes the HDF5 fixtures")
Image = pytest.importorskip("PIL.Image", reason="python3-pil (Debian) reads and writes the image fixtures")


def md5(b):
    return hashlib.md5(bytes(b)).hexdigest()


def rows_by(q, *keys):
    """The query result as {key tuple: row index}."""
    return {tuple(q[k][i] for k in keys): i for i in range(len(q["id"]))}


# ---- HDF5 ---------------------------------------------------------------------------------------

def write_multi(path, n, seed, chunked):
    rng = np.random.default_rng(seed)
    data = {
        "images": rng.standard_normal((n, 6, 5)).astype(np.float32),
        "masks": rng.integers(0, 255, (n, 6, 5), dtype=np.uint8),
        "label": rng.integers(-3, 3, n).astype(np.int16),
        "weight": rng.random(n).astype(np.float64),
    }
    with h5py.File(path, "w") as f:
        for name, arr in data.items():
            if chunked and arr.ndim > 1:
                f.create_dataset(name, data=arr, chunks=(3,) + arr.shape[1:], compression="gzip", shuffle=True)
            else:
                f.create_dataset(name, data=arr)
        f["calibration"] = np.float32(0.25 * seed)  # rank 0: repeated for every sample of the file
        f.attrs["site"] = f"well-{seed}"
        f.attrs["depth_m"] = 1000 + seed
        f.attrs["ok"] = bool(seed % 2)
    return data


def test_multi_sample_files_equal_h5py(tmp_path):
    src = tmp_path / "h5"
    src.mkdir()
    sizes = {"a.h5": 10, "b.hdf5": 1, "c.h5": 17}
    for k, (name, n) in enumerate(sizes.items()):
        write_multi(src / name, n, seed=k, chunked=k != 1)
    table = tmp_path / "table"
    r = stoke.ingest(src, table, row_group_bytes=4 * 256, threads=2, progress=False)
    assert r["rows"] == sum(sizes.values()) and r["source_files"] == 3
    q = stoke.open_table(table).query()
    assert set(q) >= {"id", "file", "index", "images", "masks", "label", "weight", "calibration", "site", "depth_m", "ok"}
    assert q["images"].dtype == np.float32 and q["images"].shape[1:] == (6, 5)
    assert q["masks"].dtype == np.uint8
    at = rows_by(q, "file", "index")
    assert len(at) == sum(sizes.values())
    for k, name in enumerate(sizes):
        with h5py.File(src / name, "r") as f:
            for i in range(sizes[name]):
                row = at[(name, i)]
                np.testing.assert_array_equal(q["images"][row], f["images"][i])
                np.testing.assert_array_equal(q["masks"][row], f["masks"][i])
                assert q["label"][row] == f["label"][i]
                assert q["weight"][row] == f["weight"][i]
                assert q["calibration"][row] == np.float32(f["calibration"][()])
                assert q["site"][row] == f.attrs["site"]
                assert q["depth_m"][row] == f.attrs["depth_m"]
                assert q["ok"][row] == f.attrs["ok"]
    # Re-running adds nothing; a new file is appended whole.
    assert stoke.ingest(src, table, progress=False)["files_added"] == 0
    write_multi(src / "d.h5", 4, seed=9, chunked=True)
    r = stoke.ingest(src, table, progress=False)
    assert r["rows"] == 4 and r["skipped"] == 3


def test_single_sample_files_and_dataset_selection(tmp_path):
    src = tmp_path / "h5"
    src.mkdir()
    rng = np.random.default_rng(3)
    want = {}
    for i in range(4):
        vol = rng.standard_normal((8, 7, 3)).astype(np.float32)
        aux = rng.integers(0, 9, (5,)).astype(np.int64)  # first extent differs from vol's: one sample per file
        with h5py.File(src / f"s{i}.h5", "w") as f:
            f.create_dataset("vol", data=vol, chunks=(2, 7, 3), compression="gzip", shuffle=True)
            f["aux"] = aux
            f["skip"] = np.zeros((2, 2))
            f.attrs["subject"] = f"sub-{i}"
        want[f"s{i}.h5"] = (vol, aux)
    table = tmp_path / "table"
    run_stoke("ingest", src, "--table", table, "--dataset", "vol", "--dataset", "aux")
    q = stoke.open_table(table).query()
    assert "index" not in q and "skip" not in q
    assert q["vol"].shape == (4, 8, 7, 3)
    for i, name in enumerate(q["file"]):
        np.testing.assert_array_equal(q["vol"][i], want[name][0])
        np.testing.assert_array_equal(q["aux"][i], want[name][1])
        assert q["subject"][i] == f"sub-{name[1]}"
    # The same files read along axis 0 must agree on their first extents: a clear error.
    r = subprocess.run([STOKE_BIN, "--no-progress", "ingest", src, "--table", tmp_path / "t2", "--dataset", "vol",
                        "--dataset", "aux", "--hdf5-samples", "axis0"], capture_output=True, text=True)
    assert r.returncode != 0 and "s0.h5" in r.stderr and "'vol' 8" in r.stderr, r.stderr


def test_corrupt_and_unsupported_hdf5_are_errors_naming_file_and_dataset(tmp_path):
    src = tmp_path / "h5"
    src.mkdir()
    write_multi(src / "good.h5", 5, seed=1, chunked=True)
    whole = (src / "good.h5").read_bytes()
    (src / "trunc.h5").write_bytes(whole[: len(whole) // 3])
    with pytest.raises(Exception) as e:
        stoke.ingest(src, tmp_path / "t", progress=False)
    assert "trunc.h5" in str(e.value)
    # libhdf5's own error stack is not printed: the one line is stoke's, naming the file.
    r = subprocess.run([STOKE_BIN, "--no-progress", "ingest", src, "--table", tmp_path / "t"], capture_output=True, text=True)
    assert r.returncode != 0 and "HDF5-DIAG" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("stoke: error:") and "trunc.h5" in r.stderr, r.stderr
    (src / "trunc.h5").unlink()
    (src / "text.h5").write_text("this is not HDF5")
    with pytest.raises(Exception) as e:
        stoke.ingest(src, tmp_path / "t", progress=False)
    assert "text.h5" in str(e.value) and "HDF5" in str(e.value)
    (src / "text.h5").unlink()
    with h5py.File(src / "strings.h5", "w") as f:
        f["names"] = np.array(["a", "bb"], dtype=h5py.string_dtype())
    with pytest.raises(NotImplementedError) as e:
        stoke.ingest(src / "strings.h5", tmp_path / "t", progress=False)
    assert "strings.h5" in str(e.value) and "'names'" in str(e.value) and "variable-length strings" in str(e.value)
    assert not (tmp_path / "t" / "_delta_log").exists()


# ---- images -------------------------------------------------------------------------------------

def make_image_folder(root, seed):
    """An ImageFolder of JPEG (RGB, grayscale, CMYK) and PNG (RGB, RGBA, palette, palette with
    transparency) images; returns {relative path: (width, height, channels)}."""
    rng = np.random.default_rng(seed)
    made = {}

    def noise(w, h, c):
        return rng.integers(0, 255, (h, w, c) if c > 1 else (h, w), dtype=np.uint8)

    def save(rel, im, **kw):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        im.save(path, **kw)
        made[rel] = im.size

    save("cat/rgb.jpg", Image.fromarray(noise(31, 17, 3)), quality=90)
    save("cat/gray.jpeg", Image.fromarray(noise(12, 40, 1)), quality=80)
    save("dog/cmyk.jpg", Image.fromarray(noise(20, 20, 3)).convert("CMYK"), quality=90)
    save("dog/rgba.png", Image.fromarray(noise(9, 11, 4)))
    save("dog/deep/pal.png", Image.fromarray(noise(16, 16, 3)).convert("P"))
    pal = Image.fromarray(noise(8, 8, 3)).convert("P")
    save("emu/paltrans.png", pal, transparency=0)
    channels = {"cat/rgb.jpg": 3, "cat/gray.jpeg": 1, "dog/cmyk.jpg": 4, "dog/rgba.png": 4, "dog/deep/pal.png": 3,
                "emu/paltrans.png": 4}
    return {rel: (w, h, channels[rel]) for rel, (w, h) in made.items()}


def test_image_folder_bytes_and_headers(tmp_path):
    src = tmp_path / "imgs"
    made = make_image_folder(src, seed=1)
    table = tmp_path / "table"
    r = stoke.ingest(src, table, progress=False)
    assert r["rows"] == len(made)
    t = stoke.open_table(table)
    q = t.query()
    classes = ["cat", "dog", "emu"]
    assert len(q["file"]) == len(made)
    for i, rel in enumerate(q["file"]):
        w, h, c = made[rel]
        assert (q["width"][i], q["height"][i], q["channels"][i]) == (w, h, c), rel
        assert q["label"][i] == classes.index(rel.split("/")[0])
        assert md5(q["image"][i]) == md5((src / rel).read_bytes()), rel
    info = run_stoke("inspect", table, "--json").stdout
    assert '"stoke.classes"' in info and '"cat"' in info and '"formats"' in info
    # The loader decodes them to RGB (as torchvision's ImageFolder: .convert("RGB")), a center crop
    # giving them one size, except the CMYK JPEG, refused with its file, row and column (or skipped).
    # test_images_loader.py checks pixels and transforms in depth.
    opts = dict(columns=["file", "image"], shuffle="none", to="numpy", transforms=[stoke.CenterCrop(8)])
    with pytest.raises(NotImplementedError, match=r"\.parquet row \d+ .*column 'image'.*CMYK"):
        list(stoke.Loader(t, batch_size=len(made), **opts))
    loader = stoke.Loader(t, batch_size=len(made), on_error="skip", **opts)
    batch = next(iter(loader))
    assert loader.stats()["samples_skipped"] == 1 and "dog/cmyk.jpg" not in list(batch["file"])
    assert batch["image"].shape == (len(made) - 1, 8, 8, 3) and batch["image"].dtype == np.uint8
    for i, rel in enumerate(batch["file"]):
        if rel.endswith(".png"):
            with Image.open(src / rel) as im:
                ref = np.asarray(im.convert("RGB"))
            top, left = round((ref.shape[0] - 8) / 2), round((ref.shape[1] - 8) / 2)
            assert np.array_equal(batch["image"][i], ref[top:top + 8, left:left + 8]), rel
    # Other columns load.
    loader = stoke.Loader(t, batch_size=2, columns=["label", "width"], shuffle="none")
    assert sum(len(b["label"]) for b in loader) == len(made)


def test_images_with_labels_csv_and_cat_prints_md5(tmp_path):
    src = tmp_path / "flat"
    src.mkdir()
    rng = np.random.default_rng(2)
    names = []
    for i in range(5):
        rel = f"{'sub/' if i % 2 else ''}img{i}.png"
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (10, 10 + i, 3), dtype=np.uint8)).save(src / rel)
        names.append(rel)
    labels = tmp_path / "labels.csv"
    labels.write_text("file,target\n" + "".join(f"{n},{k % 3}\n" for k, n in enumerate(names)))
    table = tmp_path / "table"
    run_stoke("ingest", src, "--table", table, "--labels", labels, "--rows-per-file", 2)
    q = stoke.open_table(table).query(columns=["file", "target", "image"])
    for i, rel in enumerate(q["file"]):
        assert q["target"][i] == names.index(rel) % 3
        assert bytes(q["image"][i]) == (src / rel).read_bytes()
    out = run_stoke("query", table, "--select", "file,image", "--format", "json").stdout
    for rel in names:
        assert f"md5:{md5((src / rel).read_bytes())}" in out
    # Optimize compacts the three files into one and keeps every byte.
    stoke.open_table(table).optimize(progress=False)
    q2 = stoke.open_table(table).query(columns=["file", "image"])
    assert sorted(map(md5, q2["image"])) == sorted(md5((src / n).read_bytes()) for n in names)


def test_decode_stores_pixels_resized_as_pil_does(tmp_path):
    """`ingest --decode`: each image decoded to RGB and resized to exactly (height, width) as PIL's
    resize(BILINEAR) does (torchvision's Resize((h, w))), stored as a [h, w, 3] uint8 tensor that the
    loader's image transforms take as pixels; a CMYK JPEG is an error naming the file; --decode on
    other sources is refused."""
    src = tmp_path / "imgs"
    made = make_image_folder(src, seed=4)
    (src / "dog/cmyk.jpg").rename(tmp_path / "cmyk.jpg")
    del made["dog/cmyk.jpg"]
    table = tmp_path / "table"
    r = stoke.ingest(src, table, decode=(12, 10), progress=False)
    assert r["rows"] == len(made)
    t = stoke.open_table(table)
    q = t.query(columns=["file", "width", "height", "image"])
    assert q["image"].shape == (len(made), 12, 10, 3) and q["image"].dtype == np.uint8
    for i, rel in enumerate(q["file"]):
        with Image.open(src / rel) as im:
            assert (q["width"][i], q["height"][i]) == im.size  # the source's size, as without --decode
            ref = np.asarray(im.convert("RGB").resize((10, 12), Image.BILINEAR)).astype(int)
        diff = np.abs(q["image"][i].astype(int) - ref).max()
        assert diff <= (1 if rel.endswith((".jpg", ".jpeg")) else 0), rel  # libjpeg-turbo on both sides
    schema = run_stoke("inspect", table).stdout
    assert "tensor uint8[12,10,3]" in schema
    opts = dict(columns=["file", "image"], shuffle="none", to="numpy")
    batch = next(iter(stoke.Loader(t, batch_size=len(made), **opts)))
    assert np.array_equal(batch["image"], q["image"][[list(q["file"]).index(f) for f in batch["file"]]])
    flipped = next(iter(stoke.Loader(t, batch_size=len(made), transforms=[stoke.RandomHorizontalFlip(p=1.0),
                                                                          stoke.ToTensor()], **opts)))
    assert flipped["image"].shape == (len(made), 3, 12, 10)
    assert np.array_equal(flipped["image"], (batch["image"][:, :, ::-1].astype(np.float32) / np.float32(255)).transpose(0, 3, 1, 2))
    # one size for both sides; a CMYK JPEG is refused naming it; bad sizes and other sources
    (src / "dog/cmyk.jpg").write_bytes((tmp_path / "cmyk.jpg").read_bytes())
    r = subprocess.run([STOKE_BIN, "--no-progress", "ingest", src, "--table", tmp_path / "t2", "--decode", "8"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "dog/cmyk.jpg" in r.stderr and "CMYK" in r.stderr, r.stderr
    (src / "dog/cmyk.jpg").unlink()
    run_stoke("ingest", src, "--table", tmp_path / "t2", "--decode", "8")
    assert stoke.open_table(tmp_path / "t2").query(columns=["image"])["image"].shape == (len(made), 8, 8, 3)
    for bad in ("0", "8x9x3", "big"):
        r = subprocess.run([STOKE_BIN, "ingest", src, "--table", tmp_path / "t3", "--decode", bad], capture_output=True,
                           text=True)
        assert r.returncode != 0 and "--decode" in r.stderr and not (tmp_path / "t3").exists(), (bad, r.stderr)
    with pytest.raises(ValueError, match="decode"):
        stoke.ingest(src, tmp_path / "t3", decode=(1, 2, 3), progress=False)
    with pytest.raises(ValueError, match="`decode` needs HEIGHTxWIDTH .* got '0x5'"):
        stoke.ingest(src, tmp_path / "t3", decode=(0, 5), progress=False)
    assert not (tmp_path / "t3").exists()
    npy = tmp_path / "npy"
    npy.mkdir()
    np.save(npy / "a.npy", np.zeros(3, np.float32))
    r = subprocess.run([STOKE_BIN, "ingest", npy, "--table", tmp_path / "t4", "--decode", "8"], capture_output=True,
                       text=True)
    assert r.returncode != 0 and "--decode applies to image sources" in r.stderr, r.stderr


def test_corrupt_images_are_errors_naming_the_file(tmp_path):
    src = tmp_path / "imgs"
    make_image_folder(src, seed=3)
    good = (src / "cat/rgb.jpg").read_bytes()
    (src / "cat/bad.jpg").write_bytes(good[:40])
    r = subprocess.run([STOKE_BIN, "--no-progress", "ingest", src, "--table", tmp_path / "t"], capture_output=True, text=True)
    assert r.returncode != 0 and "cat/bad.jpg" in r.stderr, r.stderr
    (src / "cat/bad.jpg").unlink()
    (src / "dog/bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 30)
    with pytest.raises(Exception, match="dog/bad.png"):
        stoke.ingest(src, tmp_path / "t", progress=False)
    assert not (tmp_path / "t" / "_delta_log").exists()


def test_synth_images_is_deterministic_and_jpeg_sized_like_photos(tmp_path):
    a = stoke.synth_images(tmp_path / "a", images=12, classes=3, min_size=350, max_size=350, seed=4, progress=False)
    b = stoke.synth_images(tmp_path / "b", images=12, classes=3, min_size=350, max_size=350, seed=4, progress=False)
    assert a["files"] == 12 and a["bytes"] == b["bytes"]
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.jpg"))
    assert len(files) == 12 and {f.parts[0] for f in files} == {"class_000", "class_001", "class_002"}
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
        with Image.open(tmp_path / "a" / f) as im:
            assert im.size == (350, 350) and im.mode == "RGB"
    assert 80_000 < a["bytes"] / 12 < 140_000  # about 110 KB each at the default quality
    c = stoke.synth_images(tmp_path / "c", images=40, classes=2, png_fraction=0.5, seed=1, progress=False)
    pngs = list((tmp_path / "c").rglob("*.png"))
    assert c["files"] == 40 and 5 < len(pngs) < 35
