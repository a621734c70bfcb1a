"""numpy <-> stoke: .npy/.npz files written by numpy convert to the right bytes.

Run with Debian's interpreter (it has numpy and pytest):

    /usr/bin/python3 -m pytest python/tests/test_npy_numpy.py

The stoke binary comes from $STOKE_BIN (default: <repo>/build/stoke).
"""

import csv
import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
STOKE = os.environ.get("STOKE_BIN") or str(REPO / "build" / "stoke")

ALL_DTYPES = [
    "bool", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
]
MULTIBYTE = [d for d in ALL_DTYPES if np.dtype(d).itemsize > 1]
SHAPE = (4, 5, 3)
FILES_PER_CASE = 3


# --------------------------------------------------------------------------
# helpers

def stoke(*args, check=True):
    r = subprocess.run([STOKE, "--no-progress", *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(
            f"stoke {' '.join(map(str, args))} exited {r.returncode}\n"
            f"stderr: {r.stderr}\nstdout: {r.stdout[:2000]}")
    return r


def cat_json(parquet, columns=None):
    args = ["cat", parquet, "--format", "json"]
    if columns:
        args += ["--columns", ",".join(columns)]
    out = stoke(*args).stdout
    assert out.endswith("\n")
    return [json.loads(line) for line in out.splitlines()]


def inspect_json(parquet):
    return json.loads(stoke("inspect", parquet, "--json").stdout)


def tensors_of(info):
    return json.loads(info["metadata"]["stoke.tensors"])


def schema_type(info, name):
    [t] = [c["type"] for c in info["schema"] if c["name"] == name]
    return t


def expected_cell(a):
    """What stoke must print for array `a`: little-endian, C order."""
    le = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"))
    return f"md5:{hashlib.md5(le.tobytes()).hexdigest()} len:{a.nbytes}"


def make_array(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        flat = rng.integers(0, 2, size=n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dt.newbyteorder("="))
        if n >= 2:
            flat[0], flat[1] = info.min, info.max
    else:
        flat = (rng.standard_normal(n) * 1000).astype(dt.newbyteorder("="))
        specials = [np.nan, np.inf, -np.inf, -0.0, np.finfo(dt).tiny, np.finfo(dt).max]
        flat[: min(n, len(specials))] = specials[: min(n, len(specials))]
    return flat.reshape(shape).astype(dt)


def write_npy(path, a, version=None):
    if version is None:
        np.save(path, a)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, a, version=version)


def header_version(path):
    with open(path, "rb") as f:
        head = f.read(8)
    assert head[:6] == b"\x93NUMPY"
    return head[6], head[7]


# --------------------------------------------------------------------------
# every dtype, both byte orders, C and Fortran order, format versions 1, 2, 3

CASES = []
for d in ALL_DTYPES:
    CASES.append(pytest.param(d, "<", "C", None, id=f"{d}-le-C"))
    CASES.append(pytest.param(d, "<", "F", None, id=f"{d}-le-F"))
for d in MULTIBYTE:
    CASES.append(pytest.param(d, ">", "C", None, id=f"{d}-be-C"))
for d in ["int16", "uint32", "float64", "float16"]:
    CASES.append(pytest.param(d, ">", "F", None, id=f"{d}-be-F"))
for d in ["bool", "int32", "float32", "uint64"]:
    for v in [(1, 0), (2, 0), (3, 0)]:
        CASES.append(pytest.param(d, "<", "C", v, id=f"{d}-le-C-v{v[0]}"))
for d in ["int64", "float16"]:
    for v in [(2, 0), (3, 0)]:
        CASES.append(pytest.param(d, ">", "F", v, id=f"{d}-be-F-v{v[0]}"))


@pytest.mark.parametrize("dtype,order,layout,version", CASES)
def test_npy_dtype_order_layout_version(tmp_path, dtype, order, layout, version):
    src = tmp_path / "src"
    src.mkdir()
    dt = np.dtype(dtype).newbyteorder(order) if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
    arrays = {}
    for k in range(FILES_PER_CASE):
        a = make_array(dt, SHAPE, seed=1000 * k + 7)
        if layout == "F":
            a = np.asfortranarray(a)
            assert a.flags.f_contiguous and not a.flags.c_contiguous
        assert a.dtype == dt
        name = f"sample_{k:02d}.npy"
        write_npy(src / name, a, version)
        if version is not None:
            assert header_version(src / name) == version
        # what numpy wrote is what we meant
        back = np.load(src / name)
        assert back.dtype == dt and np.array_equal(back, a, equal_nan=dt.kind == "f")
        assert back.flags.f_contiguous == (layout == "F")
        arrays[name] = a

    out = tmp_path / "x.parquet"
    stoke("convert", "npy", src, "--out", out)

    rows = cat_json(out, ["file", "data"])
    assert [r["file"] for r in rows] == sorted(arrays)
    for r in rows:
        assert r["data"] == expected_cell(arrays[r["file"]]), r["file"]

    only = cat_json(out, ["data"])
    assert [list(r) for r in only] == [["data"]] * FILES_PER_CASE
    assert [r["data"] for r in only] == [r["data"] for r in rows]

    info = inspect_json(out)
    assert info["rows"] == FILES_PER_CASE
    assert tensors_of(info) == {"data": {"dtype": dtype, "shape": list(SHAPE)}}
    assert schema_type(info, "data") == f"BYTE_ARRAY REQUIRED tensor {dtype}[{','.join(map(str, SHAPE))}]"


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (7,), (1, 1, 1, 1, 2)], ids=str)
def test_npy_unusual_shapes(tmp_path, shape):
    src = tmp_path / "src"
    src.mkdir()
    arrays = {}
    for k in range(2):
        a = make_array(">f8", shape, seed=k)
        np.save(src / f"s{k}.npy", a)
        arrays[f"s{k}.npy"] = a
    out = tmp_path / "x.parquet"
    stoke("convert", "npy", src, "--out", out)
    rows = cat_json(out, ["file", "data"])
    assert {r["file"]: r["data"] for r in rows} == {f: expected_cell(a) for f, a in arrays.items()}
    assert tensors_of(inspect_json(out)) == {"data": {"dtype": "float64", "shape": list(shape)}}


def test_tensor_column_name_and_labels(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    arrays = {f"v{k}.npy": make_array("<i2", (3, 2), seed=k) for k in range(4)}
    for f, a in arrays.items():
        np.save(src / f, a)
    labels = tmp_path / "labels.csv"
    labels.write_text("file,label,w\n" + "".join(f"{f},{k % 2},{k / 4}\n" for k, f in enumerate(arrays)))
    out = tmp_path / "x.parquet"
    stoke("convert", "npy", src, "--labels", labels, "--out", out, "--tensor-column", "img")
    rows = cat_json(out)
    assert [list(r) for r in rows] == [["id", "file", "label", "w", "img"]] * 4
    for k, r in enumerate(sorted(rows, key=lambda r: r["file"])):
        f = sorted(arrays)[k]
        assert r["file"] == f
        assert r["img"] == expected_cell(arrays[f])
        assert r["label"] == list(arrays).index(f) % 2
        assert r["w"] == list(arrays).index(f) / 4
    assert tensors_of(inspect_json(out)) == {"img": {"dtype": "int16", "shape": [3, 2]}}


# --------------------------------------------------------------------------
# synth

def _synth(out, *extra):
    stoke("synth", "volumes", "--samples", 20, "--seed", 7, "--out", out, *extra)
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_synth_is_deterministic_and_numpy_readable(tmp_path):
    a = _synth(tmp_path / "a")
    b = _synth(tmp_path / "b")
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name] == b[name], f"{name} differs between two runs with --seed 7"

    npys = sorted(n for n in a if n.endswith(".npy"))
    assert len(npys) == 20
    for n in npys:
        v = np.load(tmp_path / "a" / n)
        assert v.dtype == np.dtype("<f4")
        assert v.shape == (30, 30, 10, 10)
        assert np.isfinite(v).all()

    with open(tmp_path / "a" / "labels.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 20
    assert list(rows[0]) == ["file", "label", "x", "y", "split"]
    assert sorted(r["file"] for r in rows) == npys
    assert {r["label"] for r in rows} <= {"0", "1"}
    for r in rows:
        float(r["x"]), float(r["y"])


def test_synth_bytes_do_not_depend_on_threads(tmp_path):
    one = _synth(tmp_path / "one", "--threads", 1)
    two = _synth(tmp_path / "two", "--threads", 2)
    assert sorted(one) == sorted(two)
    assert [n for n in one if one[n] != two[n]] == []


def test_synth_seed_changes_bytes(tmp_path):
    a = _synth(tmp_path / "a")
    stoke("synth", "volumes", "--samples", 20, "--seed", 8, "--out", tmp_path / "c")
    assert (tmp_path / "c" / "volume_000000.npy").read_bytes() != a["volume_000000.npy"]


# --------------------------------------------------------------------------
# errors

def test_structured_dtype_is_rejected(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    np.save(src / "ok.npy", np.zeros(3, dtype="<i4"))
    np.save(src / "rec.npy", np.zeros(3, dtype=[("a", "<i4")]))
    r = stoke("convert", "npy", src, "--out", tmp_path / "x.parquet", check=False)
    assert r.returncode == 1, r.stderr
    assert "unsupported" in r.stderr
    assert "rec.npy" in r.stderr


@pytest.mark.parametrize("second", [
    pytest.param(np.zeros((3, 2), dtype="<f4"), id="other-shape"),
    pytest.param(np.zeros((2, 3), dtype="<f8"), id="other-dtype"),
])
def test_mismatched_arrays_are_rejected(tmp_path, second):
    src = tmp_path / "src"
    src.mkdir()
    np.save(src / "a.npy", np.zeros((2, 3), dtype="<f4"))
    np.save(src / "b.npy", second)
    r = stoke("convert", "npy", src, "--out", tmp_path / "x.parquet", check=False)
    assert r.returncode == 1, r.stderr
    assert "b.npy" in r.stderr


# --------------------------------------------------------------------------
# npz

def _npz_members(k):
    return {
        "image": make_array("<f4", (8, 6), seed=k),
        "mask": make_array("u1", (8, 6), seed=100 + k),
        "flags": make_array("bool", (5,), seed=200 + k),
        "meta": make_array(">i8", (3,), seed=300 + k),
        "grid": np.asfortranarray(make_array(">f8", (2, 3, 4), seed=400 + k)),
    }


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["savez", "savez_compressed"])
def test_npz_one_column_per_member(tmp_path, save):
    src = tmp_path / "src"
    src.mkdir()
    files = {}
    for k in range(3):
        members = _npz_members(k)
        save(src / f"s{k}.npz", **members)
        files[f"s{k}.npz"] = members
    out = tmp_path / "x.parquet"
    stoke("convert", "npy", src, "--out", out)

    rows = cat_json(out)
    assert len(rows) == 3
    names = list(_npz_members(0))
    for r in rows:
        assert set(r) == {"id", "file", *names}
        assert list(r)[:2] == ["id", "file"]
        for m in names:
            assert r[m] == expected_cell(files[r["file"]][m]), (r["file"], m)

    want = {
        m: {"dtype": a.dtype.newbyteorder("=").name, "shape": list(a.shape)}
        for m, a in _npz_members(0).items()
    }
    assert tensors_of(inspect_json(out)) == want
