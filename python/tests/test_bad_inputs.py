"""Bad input everywhere, on purpose: every command of `stoke` over a corpus of malformed inputs.

Each case corrupts one thing (a source .npy/.npz, a labels CSV, a Parquet data file, a commit, a
checkpoint, `_last_checkpoint`, the sample-index cache) and runs the commands that read it. For each
run the test checks that

- the command exits with stoke's error code (1), not a signal or a sanitizer's code, unless it may
  legitimately succeed (a command that does not read the damaged bytes, or a cache that is rebuilt);
- a failure says `stoke: error:` and names the damaged file (and an offset where the case says so);
- nothing a sanitizer reports appears on stderr (run against the ASan + UBSan build of the command,
  `make test-corpus`: STOKE_BIN=build-fuzz/stoke);
- the table is byte for byte as it was (every file and every name), after every failed command and
  after every read-only command.

Valid inputs at awkward paths (spaces, colons, non-ASCII) go through the whole workflow.
The number of cases run is printed at the end of the module (`-s` shows it).
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from stoke_env import STOKE_BIN

if not Path(STOKE_BIN).is_file():
    pytest.skip(f"no stoke binary at {STOKE_BIN} (set STOKE_BIN)", allow_module_level=True)

SANITIZER_MARKS = ("AddressSanitizer", "UndefinedBehaviorSanitizer", "runtime error:", "LeakSanitizer",
                   "ThreadSanitizer", "terminate called", "Segmentation fault", "Aborted")

# Sanitizer reports exit with codes of their own, never stoke's 1.
ENV = dict(os.environ,
           ASAN_OPTIONS="exitcode=86:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1",
           UBSAN_OPTIONS="halt_on_error=1:exitcode=87:print_stacktrace=1",
           LSAN_OPTIONS="exitcode=88")

RUNS = []  # (case, command, outcome) of every command run, for the summary


def stoke(*args, cwd=None):
    return subprocess.run([STOKE_BIN, "--no-progress", *map(str, args)], capture_output=True, env=ENV,
                          cwd=cwd, timeout=120)


def tree_digest(root):
    """Every file of a table (names and bytes): the log and the data files, so that any change
    shows. `_stoke/` is left out: it holds stoke's caches (the sample index), which any reader may
    write, and which are checked before use (see test_bad_sample_index_cache)."""
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == Path(root) and "_stoke" in dirnames:
            dirnames.remove("_stoke")
        files += [Path(dirpath) / name for name in filenames]
    h = hashlib.sha256()
    for p in sorted(files):
        h.update(str(p.relative_to(root)).encode("utf-8", "surrogateescape"))
        h.update(p.read_bytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Fixtures: a small valid source directory and a table with two versions and a checkpoint.

@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    src = root / "src"
    r = stoke("synth", "volumes", "--samples", 8, "--shape", "4,4,2", "--channels", 1, "--out", src,
              "--seed", 3, "--threads", 1)
    assert r.returncode == 0, r.stderr
    table = root / "table"
    r = stoke("ingest", src, "--labels", src / "labels.csv", "--table", table, "--rows-per-file", 2)
    assert r.returncode == 0, r.stderr
    more = root / "more"
    r = stoke("synth", "volumes", "--samples", 4, "--shape", "4,4,2", "--channels", 1, "--out", more,
              "--seed", 4, "--threads", 1)
    assert r.returncode == 0, r.stderr
    for f in more.glob("volume_*.npy"):
        f.rename(more / ("more_" + f.name))
    labels = (more / "labels.csv").read_text().splitlines()
    (more / "labels.csv").write_text("\n".join([labels[0]] + ["more_" + l for l in labels[1:]]) + "\n")
    r = stoke("ingest", more, "--labels", more / "labels.csv", "--table", table, "--rows-per-file", 2)
    assert r.returncode == 0, r.stderr
    r = stoke("checkpoint", table)
    assert r.returncode == 0, r.stderr
    return root


def fresh_sources(base, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(base / "src", src)
    return src


def fresh_table(base, tmp_path):
    table = tmp_path / "table"
    shutil.copytree(base / "table", table)
    return table


def data_files(table):
    return sorted(table.glob("*.parquet"))


def check_run(case, name, r, must_fail, names, table=None, before=None, writes=False):
    """Checks one command's outcome (see the module docstring)."""
    err = r.stderr.decode("utf-8", "replace")
    out = r.stdout.decode("utf-8", "replace")
    for mark in SANITIZER_MARKS:
        assert mark not in err, f"{case}: `{name}` reported {mark}:\n{err[-4000:]}"
    assert r.returncode in (0, 1), f"{case}: `{name}` exited with {r.returncode}:\n{err[-4000:]}"
    if must_fail:
        assert r.returncode == 1, f"{case}: `{name}` accepted the bad input:\n{out[-2000:]}"
    if r.returncode == 1:
        assert "stoke: error:" in err, f"{case}: `{name}` failed without stoke's error line:\n{err}"
        assert any(n in err for n in names), f"{case}: `{name}` failed without naming any of {names}:\n{err}"
    if table is not None and (r.returncode == 1 or not writes):
        assert tree_digest(table) == before, f"{case}: `{name}` changed the table (exit {r.returncode}):\n{err}"
    RUNS.append((case, name, "error" if r.returncode else "ok"))


# Every command that reads a table, with whether it writes to the table when it succeeds.
TABLE_COMMANDS = [
    ("inspect", lambda t: ["inspect", t], False),
    ("inspect --json", lambda t: ["inspect", t, "--json"], False),
    ("query", lambda t: ["query", t, "--where", "label = 1"], False),
    ("query --count", lambda t: ["query", t, "--count"], False),
    ("query --select data", lambda t: ["query", t, "--select", "id,data"], False),
    ("history", lambda t: ["history", t], False),
    ("optimize", lambda t: ["optimize", t], True),
    ("vacuum --dry-run", lambda t: ["vacuum", t, "--dry-run", "--retain", "0"], False),
    ("vacuum", lambda t: ["vacuum", t, "--retain", "0"], True),
    ("checkpoint", lambda t: ["checkpoint", t], True),
    ("bench load", lambda t: ["bench", "load", t, "--batches", "4", "--batch-size", "2"], True),
]


def run_table_commands(case, table, names, must_fail=(), may_write=()):
    """Runs every table command on a copy of `table` each (so one command's writes cannot hide
    another's), checking each run."""
    for name, argv, writes in TABLE_COMMANDS:
        t = table.parent / f"run-{len(RUNS)}"
        shutil.copytree(table, t)
        before = tree_digest(t)
        r = stoke(*argv(t))
        allowed_names = [n.replace(str(table), str(t)) for n in names]
        check_run(case, name, r, name in must_fail or "*" in must_fail, allowed_names + names, t, before,
                  writes or name in may_write)
        shutil.rmtree(t)


# ---------------------------------------------------------------------------------------------
# Sources: ingest and convert over malformed .npy/.npz files and labels CSVs.

def npy_bytes(header_dict_text, data=b"", magic=b"\x93NUMPY", version=(1, 0)):
    header = header_dict_text.encode("latin1")
    pad = (64 - (len(magic) + 2 + 2 + len(header) + 1) % 64) % 64
    header = header + b" " * pad + b"\n"
    return magic + bytes(version) + struct.pack("<H", len(header)) + header + data


GOOD_HEADER = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4, 2, 1), }"

NPY_CASES = {
    "npy empty file": b"",
    "npy truncated magic": b"\x93NUM",
    "npy wrong magic": npy_bytes(GOOD_HEADER, b"\0" * 128, magic=b"\x93NUMPX"),
    "npy unknown version": npy_bytes(GOOD_HEADER, b"\0" * 128, version=(9, 0)),
    "npy header length beyond file": b"\x93NUMPY\x01\x00" + struct.pack("<H", 60000) + b"{'descr':",
    "npy header not a dict": npy_bytes("[1, 2, 3]", b"\0" * 128),
    "npy header unterminated": npy_bytes("{'descr': '<f4', 'shape': (4, 4", b""),
    "npy header deep nesting": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 20000 + ")" * 20000 + "}"),
    "npy huge declared shape": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }"),
    "npy negative dimension": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-4, 4), }", b"\0" * 64),
    "npy overflowing dimension": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, ), }"),
    "npy object dtype": npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (4, 4, 2, 1), }", b"\0" * 256),
    "npy unknown dtype": npy_bytes("{'descr': '<x9', 'fortran_order': False, 'shape': (4, 4, 2, 1), }", b"\0" * 128),
    "npy data truncated": npy_bytes(GOOD_HEADER, b"\0" * 100),
    "npy non-utf8 header": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4, 2, 1), '\xff': 1}", b"\0" * 128),
    "npy other shape than the first file": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4, 3, 1), }", b"\0" * 192),
}


@pytest.mark.parametrize("case", sorted(NPY_CASES))
def test_bad_npy_source(base, tmp_path, case):
    src = fresh_sources(base, tmp_path)
    bad = src / "volume_000005.npy"  # not the first file: the first sets the schema
    bad.write_bytes(NPY_CASES[case])
    table = tmp_path / "table"
    table.mkdir()
    before = tree_digest(table)
    r = stoke("ingest", src, "--labels", src / "labels.csv", "--table", table)
    check_run(case, "ingest", r, True, [bad.name], table, before)
    out = tmp_path / "out"
    r = stoke("convert", "npy", src, "--labels", src / "labels.csv", "--out", out)
    check_run(case, "convert npy", r, True, [bad.name])
    assert not out.exists() or not list(out.glob("*.parquet")), f"{case}: convert left output behind"


@pytest.mark.parametrize("case", ["first file"])
def test_bad_first_npy_source(base, tmp_path, case):
    src = fresh_sources(base, tmp_path)
    bad = src / "volume_000000.npy"
    bad.write_bytes(NPY_CASES["npy header deep nesting"])
    r = stoke("ingest", src, "--labels", src / "labels.csv", "--table", tmp_path / "table")
    check_run("npy deep nesting in the first file", "ingest", r, True, [bad.name])


def make_npz(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def npz_cases(tmp_path):
    good = np.zeros((4, 4, 2, 1), np.float32)
    import io
    buf = io.BytesIO()
    np.save(buf, good)
    good_npy = buf.getvalue()
    cases = {}
    p = tmp_path / "npz_truncated.npz"
    make_npz(p, {"data.npy": good_npy})
    cases["npz truncated"] = p.read_bytes()[:40]
    cases["npz not a zip"] = b"PK\x03\x04" + b"\xff" * 200
    p = tmp_path / "npz_member.npz"
    make_npz(p, {"data.npy": b"\x93NUMPY garbage"})
    cases["npz member not npy"] = p.read_bytes()
    p = tmp_path / "npz_other.npz"
    make_npz(p, {"other.npy": good_npy})
    cases["npz other member names"] = p.read_bytes()
    # A member whose central directory claims a huge uncompressed size.
    p = tmp_path / "npz_big.npz"
    make_npz(p, {"data.npy": good_npy})
    raw = bytearray(p.read_bytes())
    cd = raw.rfind(b"PK\x01\x02")
    raw[cd + 24:cd + 28] = struct.pack("<I", 0xFFFFFFF0)
    lh = raw.find(b"PK\x03\x04")
    raw[lh + 22:lh + 26] = struct.pack("<I", 0xFFFFFFF0)
    cases["npz huge declared member"] = bytes(raw)
    return cases, good_npy


def test_bad_npz_sources(tmp_path):
    cases, good_npy = npz_cases(tmp_path)
    for case, data in sorted(cases.items()):
        d = tmp_path / case.replace(" ", "_")
        d.mkdir()
        make_npz(d / "a_first.npz", {"data.npy": good_npy})
        make_npz(d / "b_second.npz", {"data.npy": good_npy})
        bad = d / "c_bad.npz"
        bad.write_bytes(data)
        table = d / "table"
        r = stoke("ingest", d, "--table", table)
        check_run(case, "ingest", r, True, [bad.name])
        assert not list(table.glob("*.parquet")) if table.exists() else True, f"{case}: ingest left data files"


CSV_CASES = {
    "csv unterminated quote": 'file,label\nvolume_000000.npy,"1\n',
    "csv no file column": "name,label\nvolume_000000.npy,1\n",
    "csv file listed twice": "file,label\n" + "".join(f"volume_{i:06d}.npy,1\n" for i in range(8)) + "volume_000001.npy,0\n",
    "csv missing a source": "file,label\n" + "".join(f"volume_{i:06d}.npy,1\n" for i in range(7)),
    "csv ragged row": "file,label\n" + "".join(f"volume_{i:06d}.npy,1\n" for i in range(7)) + "volume_000007.npy,1,2,3\n",
    "csv column clashes": "file,id\n" + "".join(f"volume_{i:06d}.npy,1\n" for i in range(8)),
    "csv empty": "",
}


@pytest.mark.parametrize("case", sorted(CSV_CASES) + ["csv non-utf8 string", "csv NUL bytes"])
def test_bad_labels_csv(base, tmp_path, case):
    src = fresh_sources(base, tmp_path)
    csv = src / "labels.csv"
    if case == "csv non-utf8 string":
        csv.write_bytes(b"file,name\n" + b"".join(f"volume_{i:06d}.npy,".encode() + b"caf\xe9\n" for i in range(8)))
    elif case == "csv NUL bytes":
        csv.write_bytes(b"file,label\n" + b"".join(f"volume_{i:06d}.npy,1\x00\n".encode() for i in range(8)))
    else:
        csv.write_text(CSV_CASES[case])
    r = stoke("ingest", src, "--labels", csv, "--table", tmp_path / "table")
    # NUL bytes inside a cell are a string label, which is valid UTF-8: accepted or refused, never a crash.
    check_run(case, "ingest", r, case != "csv NUL bytes", [csv.name])


def test_non_utf8_source_name(base, tmp_path):
    src = fresh_sources(base, tmp_path)
    (src / "labels.csv").unlink()
    name = b"volume_\xff\xfe.npy"
    shutil.copy(src / "volume_000001.npy", os.path.join(os.fsencode(src), name))
    table = tmp_path / "table"
    r = stoke("ingest", src, "--table", table)
    # The `file` column is a Parquet STRING (UTF-8): such a name must be refused, naming it readably.
    check_run("source name not UTF-8", "ingest", r, True, ["volume_"])


# ---------------------------------------------------------------------------------------------
# Parquet files: inspect and cat of a damaged file; a damaged data file inside a table.

def parquet_cases(good):
    n = len(good)
    footer_len = struct.unpack("<I", good[-8:-4])[0]
    footer_at = n - 8 - footer_len
    cases = {
        "parquet empty": b"",
        "parquet truncated to half": good[: n // 2],
        "parquet without tail": good[:-8],
        "parquet wrong head magic": b"PAR0" + good[4:],
        "parquet wrong tail magic": good[:-4] + b"PAR0",
        "parquet footer length huge": good[:-8] + struct.pack("<I", 0x7FFFFFF0) + b"PAR1",
        "parquet footer length zero": good[:-8] + struct.pack("<I", 0) + b"PAR1",
        "parquet footer garbage": good[:footer_at] + bytes((i * 37 + 11) % 256 for i in range(footer_len)) + good[-8:],
        "parquet footer deep nesting": good[:footer_at] + b"\x1c" * footer_len + good[-8:],
        "parquet footer cut": good[:footer_at] + good[footer_at: footer_at + footer_len // 2] + struct.pack("<I", footer_len // 2) + b"PAR1",
    }
    # Page bytes flipped: the first data page's header and, further on, a byte inside a tensor page.
    flipped = bytearray(good)
    flipped[4] ^= 0xFF
    flipped[5] ^= 0xFF
    cases["parquet first page header flipped"] = bytes(flipped)
    return cases


@pytest.fixture(scope="module")
def good_parquet(base):
    return data_files(base / "table")[0].read_bytes()


@pytest.mark.parametrize("case", sorted(parquet_cases(b"PAR1" + b"\0" * 64 + struct.pack("<I", 16) + b"PAR1")))
def test_bad_parquet_file(good_parquet, tmp_path, case):
    data = parquet_cases(good_parquet)[case]
    f = tmp_path / "bad file.parquet"
    f.write_bytes(data)
    for name, argv in [("inspect FILE", ["inspect", f]), ("inspect FILE --pages", ["inspect", f, "--pages"]),
                       ("cat FILE", ["cat", f])]:
        r = stoke(*argv)
        must_fail = not case.startswith("parquet first page") or name == "cat FILE"
        check_run(case, name, r, must_fail, [f.name])


PARQUET_CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "parquet-testing"


def parquet_corpus_files():
    if not PARQUET_CORPUS.is_dir():
        return []
    return sorted(str(p.relative_to(PARQUET_CORPUS)) for top in ("data", "bad_data")
                  for p in (PARQUET_CORPUS / top).rglob("*") if p.name.endswith((".parquet", ".parquet.encrypted")))


# Two rows of a 1 GiB string each: printing them takes 9 GiB of memory (more under ASan); the
# footer and pages are still listed.
HEAVY_PARQUET = {"data/large_string_map.brotli.parquet"}


@pytest.mark.skipif(not PARQUET_CORPUS.is_dir(),
                    reason=f"no Parquet corpus at {PARQUET_CORPUS} (it comes with the project's shared folder)")
@pytest.mark.parametrize("rel", parquet_corpus_files())
def test_parquet_corpus_file(rel):
    """Files other engines wrote (apache/parquet-testing), malformed ones (bad_data/) included:
    inspect and cat read them or fail cleanly, with nothing for a sanitizer to report. Their values
    are checked against DuckDB in tests/interop/parquet_corpus.test.mjs."""
    f = PARQUET_CORPUS / rel
    commands = [("inspect FILE --pages", ["inspect", f, "--pages"])]
    commands.append(("cat FILE --limit 0", ["cat", f, "--limit", 0]) if rel in HEAVY_PARQUET
                    else ("cat FILE --format json", ["cat", f, "--format", "json"]))
    for name, argv in commands:
        # Whether a malformed file must be refused is the interop test's to say: bad_data/ holds a
        # file (ARROW-GH-43605) whose oddity the format allows, which stoke and DuckDB both read.
        check_run(rel, name, stoke(*argv), False, [f.name])


@pytest.mark.parametrize("case", ["data file truncated", "data file wrong magic", "data file footer garbage",
                                  "data file tensor byte flipped", "data file missing", "data file empty"])
def test_bad_data_file_in_table(base, tmp_path, case):
    table = fresh_table(base, tmp_path)
    f = data_files(table)[1]
    data = f.read_bytes()
    must_fail = ("query --select data", "bench load", "optimize")
    if case == "data file truncated":
        f.write_bytes(data[: len(data) // 2])
    elif case == "data file wrong magic":
        f.write_bytes(b"XXXX" + data[4:-4] + b"XXXX")
    elif case == "data file footer garbage":
        footer_len = struct.unpack("<I", data[-8:-4])[0]
        at = len(data) - 8 - footer_len
        f.write_bytes(data[:at] + bytes((i * 91 + 7) % 256 for i in range(footer_len)) + data[-8:])
    elif case == "data file tensor byte flipped":
        r = stoke("inspect", f, "--pages", "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        pages = [p for rg in doc["row_groups"] for c in rg["columns"] if c["name"] == "data" for p in c["page_list"]]
        page = pages[-1]
        # Inside the stored body of the last tensor page: the page CRC must catch it.
        at = page["offset"] + page["header_size"] + page["compressed_size"] - 3
        flipped = bytearray(data)
        flipped[at] ^= 0x5A
        f.write_bytes(bytes(flipped))
        must_fail = ("query --select data", "bench load", "optimize")
    elif case == "data file missing":
        f.unlink()
    elif case == "data file empty":
        f.write_bytes(b"")
    run_table_commands(case, table, [f.name], must_fail=must_fail)


# ---------------------------------------------------------------------------------------------
# The Delta log: damaged commits, checkpoints, _last_checkpoint and the sample-index cache.

def last_commit(table):
    return sorted((table / "_delta_log").glob("*.json"))[-1]


COMMIT_CASES = {
    "commit truncated mid-line": lambda b: b[: len(b) // 2],
    "commit not json": lambda b: b"this is not a delta commit\n",
    "commit empty": lambda b: b"",
    "commit deep nesting": lambda b: b + b"[" * 200000 + b"\n",
    "commit deep object nesting": lambda b: b + b'{"add":' * 100000 + b"\n",
    "commit non-utf8 string": lambda b: b.replace(b'"path":"', b'"path":"\xff\xfe', 1),
    "commit huge number": lambda b: b.replace(b'"size":', b'"size":1e400,"x":', 1),
    "commit negative size": lambda b: b.replace(b'"size":', b'"size":-5,"x":', 1),
    "commit add path escapes the table": lambda b: b.replace(b'"path":"', b'"path":"../../../../etc/', 1),
    "commit add path absolute": lambda b: b.replace(b'"path":"', b'"path":"/etc/', 1),
    "commit add without path": lambda b: b.replace(b'"path":"', b'"nopath":"', 1),
    "commit action of wrong type": lambda b: b + b'{"add": [1, 2, 3]}\n',
    "commit NUL bytes": lambda b: b.replace(b"\n", b"\n\x00\x00\n", 1),
    "commit stats not json": lambda b: b.replace(b'"stats":"{', b'"stats":"{{{{', 1),
}


@pytest.mark.parametrize("case", sorted(COMMIT_CASES))
def test_bad_commit(base, tmp_path, case):
    table = fresh_table(base, tmp_path)
    # Drop the checkpoint, so that readers must parse the damaged commit.
    for p in (table / "_delta_log").glob("*checkpoint*"):
        p.unlink()
    c = last_commit(table)
    c.write_bytes(COMMIT_CASES[case](c.read_bytes()))
    # Statistics are hints (they may be ignored); a commit without actions is a version that
    # changes nothing; a path outside the table is refused when a command opens the file, named.
    lenient = case in ("commit stats not json", "commit huge number", "commit empty")
    must_fail = () if lenient else ("*",)
    if case.startswith("commit add path"):
        # A valid commit naming a file that is not there: commands that open it fail naming it;
        # counts from statistics, history and vacuum need not open it.
        must_fail = ("query --select data", "bench load", "optimize")
    run_table_commands(case, table, [c.name, "/etc/part-"], must_fail=must_fail)


CHECKPOINT_CASES = {
    "checkpoint truncated": lambda b: b[: len(b) // 2],
    "checkpoint garbage": lambda b: bytes((i * 13) % 256 for i in range(len(b))),
    "checkpoint empty": lambda b: b"",
    "checkpoint footer length huge": lambda b: b[:-8] + struct.pack("<I", 0x7FFFFFF0) + b"PAR1",
}


@pytest.mark.parametrize("case", sorted(CHECKPOINT_CASES))
def test_bad_checkpoint(base, tmp_path, case):
    table = fresh_table(base, tmp_path)
    cp = sorted((table / "_delta_log").glob("*.checkpoint.parquet"))[0]
    cp.write_bytes(CHECKPOINT_CASES[case](cp.read_bytes()))
    # Readers may fail naming the checkpoint, or fall back to the commits (all still there); both are
    # fine, as long as nothing crashes and the answers stay right.
    run_table_commands(case, table, [cp.name, "_last_checkpoint"])
    r = stoke("query", table, "--count")
    if r.returncode == 0:
        assert r.stdout.decode().strip() == "12", f"{case}: a fallback read gave wrong rows: {r.stdout!r}"


LAST_CHECKPOINT_CASES = {
    "_last_checkpoint garbage": b"\xff\xfe not json",
    "_last_checkpoint deep nesting": b"[" * 100000,
    "_last_checkpoint points past the log": b'{"version":999999,"size":3}',
    "_last_checkpoint negative version": b'{"version":-7,"size":3}',
    "_last_checkpoint huge parts": b'{"version":2,"size":3,"parts":4000000000}',
}


@pytest.mark.parametrize("case", sorted(LAST_CHECKPOINT_CASES))
def test_bad_last_checkpoint(base, tmp_path, case):
    table = fresh_table(base, tmp_path)
    (table / "_delta_log" / "_last_checkpoint").write_bytes(LAST_CHECKPOINT_CASES[case])
    # `_last_checkpoint` is a hint (Delta protocol): readers may ignore a bad one or refuse it.
    run_table_commands(case, table, ["_last_checkpoint"])
    r = stoke("query", table, "--count")
    if r.returncode == 0:
        assert r.stdout.decode().strip() == "12", f"{case}: wrong rows: {r.stdout!r}"


def test_bad_sample_index_cache(base, tmp_path):
    table = fresh_table(base, tmp_path)
    r = stoke("bench", "load", table, "--batches", "2", "--batch-size", "2")
    assert r.returncode == 0, r.stderr
    # Every cache (ingest writes its versions' too), damaged each time from its intact bytes: the load
    # rebuilds only the cache of the version it opens.
    caches = {c: c.read_bytes() for c in (table / "_stoke").rglob("*.idx")}
    assert caches, "bench load wrote no sample-index cache"
    for variant, damage in [("garbage", lambda b: b"\xff" * len(b)), ("truncated", lambda b: b[:100]),
                            ("flipped", lambda b: b[:200] + bytes([b[200] ^ 1]) + b[201:])]:
        for c, intact in caches.items():
            c.write_bytes(damage(intact))
        # A damaged cache is rebuilt, never trusted.
        r = stoke("bench", "load", table, "--batches", "2", "--batch-size", "2", "--json")
        check_run(f"sample-index cache {variant}", "bench load", r, False, [])
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["index_from_cache"] is False


def test_prefetch_bytes_takes_a_size_and_refuses_others(base, tmp_path):
    """`stoke bench load --prefetch-bytes` takes a size with its unit, as the other byte options do;
    what is not a positive size is refused, naming the option and saying what it must be."""
    table = fresh_table(base, tmp_path)
    r = stoke("bench", "load", table, "--batches", "2", "--batch-size", "2", "--prefetch-bytes", "64MiB", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prefetch_bytes"] == 64 << 20
    for bad, says in (("0", b"must be a finite number > 0, got 0"), ("lots", b"unit not recognized"),
                      ("12XB", b"unit not recognized")):
        r = stoke("bench", "load", table, "--batches", "2", "--prefetch-bytes", bad)
        assert r.returncode != 0, bad
        assert r.stderr.startswith(b"--prefetch-bytes: ") and says in r.stderr, r.stderr
    r = stoke("bench", "load", table, "--batch-size", "0")
    assert r.returncode != 0 and b"--batch-size: must be a finite number > 0, got 0" in r.stderr, r.stderr
    r = stoke("bench", "load", table, "--batches", "2", "--compute-ms", "inf")
    assert r.returncode != 0 and b"--compute-ms: must be a finite number >= 0, got inf" in r.stderr, r.stderr


# ---------------------------------------------------------------------------------------------
# Valid inputs at awkward paths: the whole workflow must work.

@pytest.mark.parametrize("dirname", ["with space", "with: colon", "run:1", "naïve ünïcode", "semi;colon & amp"])
def test_awkward_paths(base, tmp_path, dirname):
    root = tmp_path / dirname
    root.mkdir()
    src = root / "my sources"
    shutil.copytree(base / "src", src)
    table_rel = Path(dirname) / "the table"
    table = tmp_path / table_rel
    steps = [
        ("ingest", ["ingest", src, "--labels", src / "labels.csv", "--table", table, "--rows-per-file", 3]),
        ("query", ["query", table, "--where", "label = 1", "--select", "id,file"]),
        ("optimize", ["optimize", table]),
        ("history", ["history", table]),
        ("checkpoint", ["checkpoint", table]),
        ("vacuum", ["vacuum", table, "--retain", "0"]),
        ("bench load", ["bench", "load", table, "--batches", "2", "--batch-size", "2"]),
        ("inspect", ["inspect", table]),
    ]
    for name, argv in steps:
        r = stoke(*argv)
        check_run(f"path '{dirname}'", name, r, False, [])
        assert r.returncode == 0, f"{name} at '{dirname}': {r.stderr.decode()}"
    # A relative path that looks like a URI scheme ("run:1/...") is a local path unless it has "://".
    r = stoke("query", table_rel, "--count", cwd=tmp_path)
    check_run(f"relative path '{dirname}'", "query --count", r, False, [])
    assert r.returncode == 0 and r.stdout.decode().strip() == "8", r.stderr.decode()
    part = data_files(table)[0]
    r = stoke("cat", part, "--limit", "2")
    assert r.returncode == 0, r.stderr.decode()


def test_zz_report_case_count():
    """Prints how many (case, command) runs the corpus made (run last by name)."""
    cases = {c for c, _, _ in RUNS}
    errors = sum(1 for _, _, o in RUNS if o == "error")
    print(f"\nbad-input corpus: {len(cases)} cases, {len(RUNS)} command runs ({errors} refused with an error, "
          f"{len(RUNS) - errors} succeeded where allowed), binary {STOKE_BIN}")
    assert len(RUNS) > 0
