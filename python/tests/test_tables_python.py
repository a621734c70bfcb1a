"""Tests of the table tools from Python (stoke.ingest, stoke.synth_volumes, Table.query / count /
info / history / optimize / vacuum / checkpoint): results equal the source files and the CLI's,
nulls survive, errors keep their messages.

    STOKE_BIN=build/stoke /usr/bin/python3 -m pytest python/tests/test_tables_python.py
"""

import csv
import json
import os
import subprocess

import numpy as np
import pytest

from stoke_env import STOKE_BIN, import_stoke

stoke = import_stoke()


N = 60


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """N small volumes, a labels CSV with nullable columns (score: double, ok: bool, note: string),
    ingested from Python in three data files."""
    base = tmp_path_factory.mktemp("tables_py")
    src = base / "src"
    r = stoke.synth_volumes(src, samples=N, shape=(3, 3, 2), channels=2, seed=5, threads=1, progress=False)
    assert r["files"] == N and r["bytes"] > 0
    rows = list(csv.DictReader(open(src / "labels.csv", newline="")))
    labels = base / "labels.csv"
    expect = {}
    with open(labels, "w", newline="") as f:
        f.write("file,label,split,score,ok,note\n")
        for i, row in enumerate(rows):
            score = None if i % 3 == 0 else i * 0.5
            ok = None if i % 4 == 1 else bool(i % 2)
            note = None if i % 5 == 2 else f"n{i}"
            f.write(f"{row['file']},{row['label']},{row['split']},{'' if score is None else score},"
                    f"{'' if ok is None else str(ok).lower()},{'' if note is None else note}\n")
            expect[row["file"]] = dict(label=int(row["label"]), split=row["split"], score=score, ok=ok, note=note)
    table = base / "table"
    r = stoke.ingest(src, table, labels=labels, tensor_column="volume", codec="uncompressed",
                     rows_per_file=N // 3, threads=1, progress=False)
    assert r["version"] == 0 and r["rows"] == N and r["files_added"] == 3 and r["source_files"] == N
    return dict(src=src, table=table, labels=labels, expect=expect)


def test_query_values_equal_sources(data):
    t = stoke.open_table(data["table"])
    q = t.query(columns=["file", "volume", "label", "split"])
    assert set(q) == {"file", "volume", "label", "split"}
    assert q["volume"].shape == (N, 3, 3, 2, 2) and q["volume"].dtype == np.float32
    assert q["label"].dtype == np.int32 and q["file"].dtype == object
    assert sorted(q["file"]) == sorted(data["expect"])
    for i, name in enumerate(q["file"]):
        np.testing.assert_array_equal(q["volume"][i], np.load(data["src"] / name))
        assert q["label"][i] == data["expect"][name]["label"]
        assert q["split"][i] == data["expect"][name]["split"]


def test_query_nulls_as_valid_masks_and_none(data):
    q = stoke.open_table(data["table"]).query(columns=["file", "score", "ok", "note"])
    assert q["score"].dtype == np.float64 and q["ok"].dtype == np.bool_
    for i, name in enumerate(q["file"]):
        e = data["expect"][name]
        assert q["score.valid"][i] == (e["score"] is not None)
        assert q["score"][i] == (0.0 if e["score"] is None else e["score"])
        assert q["ok.valid"][i] == (e["ok"] is not None)
        if e["ok"] is not None:
            assert q["ok"][i] == e["ok"]
        assert q["note"][i] == e["note"]  # None for nulls
    assert "note.valid" not in q and "file.valid" not in q


def test_query_where_limit_and_table_where_combine(data):
    expect = data["expect"]
    t = stoke.open_table(data["table"])
    q = t.query("label = 1 AND score IS NOT NULL", columns=["file", "label"])
    want = sorted(f for f, e in expect.items() if e["label"] == 1 and e["score"] is not None)
    assert sorted(q["file"]) == want and set(q["label"]) <= {1}
    assert t.count("label = 1 AND score IS NOT NULL") == len(want)
    train = t.filter("split = 'train'")
    assert train.count() == sum(e["split"] == "train" for e in expect.values())
    both = train.query("label = 0", columns=["file"])["file"]
    assert sorted(both) == sorted(f for f, e in expect.items() if e["split"] == "train" and e["label"] == 0)
    assert len(t.query(columns=["file"], limit=7)["file"]) == 7
    empty = t.query("label = 99", columns=["file", "volume", "score"])
    assert len(empty["file"]) == 0 and empty["volume"].shape == (0, 3, 3, 2, 2) and len(empty["score"]) == 0


def test_query_same_rows_as_cli(data):
    r = subprocess.run([STOKE_BIN, "query", str(data["table"]), "--where", "ok = TRUE", "--select", "file,score",
                        "--format", "json"], capture_output=True, text=True, check=True)
    cli = [json.loads(line) for line in r.stdout.splitlines()]
    q = stoke.open_table(data["table"]).query("ok = TRUE", columns=["file", "score"])
    assert [c["file"] for c in cli] == list(q["file"])
    for c, s, v in zip(cli, q["score"], q["score.valid"]):
        assert (c["score"] is None) == (v == 0) and (c["score"] is None or c["score"] == s)


def test_query_to_pandas(data):
    pd = pytest.importorskip("pandas")
    df = stoke.open_table(data["table"]).query(columns=["file", "score", "ok", "note", "label", "volume"], to="pandas")
    assert isinstance(df, pd.DataFrame) and len(df) == N
    assert list(df.columns) == ["file", "score", "ok", "note", "label", "volume"]
    assert str(df["score"].dtype) == "Float64" and str(df["ok"].dtype) == "boolean"
    assert str(df["label"].dtype) == "int32"
    for _, row in df.iterrows():
        e = data["expect"][row["file"]]
        assert (row["score"] is pd.NA) == (e["score"] is None)
        assert (row["ok"] is pd.NA) == (e["ok"] is None)
        assert row["note"] == e["note"]
        np.testing.assert_array_equal(row["volume"], np.load(data["src"] / row["file"]))


def test_info_history_optimize_vacuum_time_travel(tmp_path, data):
    # A private copy: this test commits new versions.
    table = tmp_path / "t"
    r = stoke.ingest(data["src"], table, labels=data["labels"], codec="uncompressed", rows_per_file=10,
                     progress=False)
    assert r["files_added"] == N // 10
    t = stoke.open_table(table)
    info = t.info()
    assert info["version"] == 0 and info["rows"] == N and info["files"] == N // 10
    tensor = [c for c in info["schema"] if c["name"] == "data"][0]["tensor"]
    assert tensor == {"dtype": "float32", "shape": [3, 3, 2, 2]}
    assert "data_files" not in info
    listed = t.info(data_files=True)["data_files"]
    assert len(listed) == N // 10 and sum(f["stats"]["numRecords"] for f in listed) == N
    assert all((table / f["path"]).is_file() and f["size"] == (table / f["path"]).stat().st_size for f in listed)

    # Appending again resumes: nothing new.
    again = stoke.ingest(data["src"], table, labels=data["labels"], progress=False)
    assert again["version"] == 0 and again["skipped"] == N and again["files_added"] == 0

    before = t.query(columns=["file", "data"])
    o = t.optimize(codec="uncompressed", progress=False)
    assert o["version"] == 1 and o["files_before"] == N // 10 and o["files_after"] == 1 and o["rows_rewritten"] == N
    assert t.info()["files"] == 1 and t.at(0).info()["files"] == N // 10
    after = t.query(columns=["file", "data"])
    order = np.argsort(after["file"])
    np.testing.assert_array_equal(np.sort(before["file"]), after["file"][order])
    np.testing.assert_array_equal(before["data"][np.argsort(before["file"])], after["data"][order])

    h = t.history()
    assert [(x["version"], x["operation"]) for x in h] == [(1, "OPTIMIZE"), (0, "WRITE")]
    assert h[0]["files_removed"] == N // 10 and h[0]["files_added"] == 1 and isinstance(h[0]["timestamp"], int)
    assert len(t.history(limit=1)) == 1
    assert t.history(limit=0) == []

    # Time travel by time: the newest version committed by then, as ms, ISO text or a datetime.
    import datetime
    t0, t1 = h[1]["timestamp"], h[0]["timestamp"]
    assert t1 > t0
    assert t.at(timestamp=t0).version == 0 and t.at(timestamp=t1 - 1).version == 0
    assert t.at(timestamp=t1).version == 1 and t.at(timestamp=t1 + 10**9).version == 1
    as_utc = (datetime.datetime.fromtimestamp(t1 // 1000, tz=datetime.timezone.utc) +
              datetime.timedelta(milliseconds=t1 % 1000))  # exact, no float seconds
    assert t.at(timestamp=as_utc).version == 1
    assert t.at(timestamp=as_utc.replace(tzinfo=None)).version == 1  # naive: UTC
    assert t.at(timestamp=as_utc.astimezone(datetime.timezone(datetime.timedelta(hours=5)))).version == 1
    assert t.at(timestamp=as_utc.isoformat()).version == 1
    with pytest.raises(stoke.NotFoundError, match="no version at or before"):
        t.at(timestamp=t0 - 1)
    with pytest.raises(ValueError, match="no timestamp"):
        t.at(timestamp="yesterday")
    with pytest.raises(TypeError):
        t.at(timestamp=1.5)
    with pytest.raises(ValueError, match="not both"):
        t.at(1, timestamp=t1)

    dry = t.vacuum(retain_hours=0, dry_run=True)
    assert dry["dry_run"] and len(dry["files"]) == N // 10 and dry["bytes"] > 0
    assert t.at(0).count() == N  # a dry run deletes nothing
    done = t.vacuum(retain_hours=0)
    assert sorted(done["files"]) == sorted(dry["files"])
    assert all(not (table / f).exists() for f in done["files"])
    assert t.count() == N
    with pytest.raises(OSError):
        t.at(0).query(columns=["data"])  # its files are gone

    t.checkpoint()
    assert list((table / "_delta_log").glob("*.checkpoint.parquet"))


def test_errors_keep_their_messages(tmp_path, data):
    with pytest.raises(stoke.NotFoundError, match="no Delta table"):
        stoke.open_table(tmp_path / "nope")
    t = stoke.open_table(data["table"])
    with pytest.raises(ValueError, match="unknown column 'nope'"):
        t.query("nope = 1")
    with pytest.raises(ValueError, match="unknown column 'nope'"):
        t.query(columns=["nope"])
    with pytest.raises(ValueError, match="to:"):
        t.query(to="arrow")
    with pytest.raises(stoke.NotFoundError):
        t.at(99).count()
    with pytest.raises(ValueError, match="codec"):
        stoke.ingest(data["src"], tmp_path / "t2", codec="brotli9", progress=False)
    with pytest.raises(stoke.NotFoundError):
        stoke.ingest(tmp_path / "missing", tmp_path / "t3", progress=False)
    with pytest.raises(stoke.NotFoundError):
        stoke.Table(str(tmp_path / "nope")).history()


def test_sharded_ingest_from_python(tmp_path, data):
    """stoke.ingest(..., shard=(i, n)): three shards in turn build the same rows, with the same
    ids, as one ingest; a shard run again has nothing to do; bad shards raise ValueError."""
    table = tmp_path / "sharded"
    for i in (2, 0, 1):
        r = stoke.ingest(data["src"], table, labels=data["labels"], tensor_column="volume", shard=(i, 3),
                         threads=1, progress=False)
        assert r["source_files"] == N // 3 and r["rows"] == N // 3
    assert stoke.ingest(data["src"], table, labels=data["labels"], tensor_column="volume", shard=(1, 3),
                        progress=False)["files_added"] == 0
    got = stoke.open_table(table).query(columns=["id", "file"])
    want = stoke.open_table(data["table"]).query(columns=["id", "file"])
    assert sorted(zip(got["id"].tolist(), got["file"])) == sorted(zip(want["id"].tolist(), want["file"]))
    with pytest.raises(ValueError, match="`shard`"):
        stoke.ingest(data["src"], tmp_path / "bad", shard=(3, 3), progress=False)


def test_same_names_elsewhere_are_new_rows_and_changed_files_follow_on_changed(tmp_path):
    """Appending day2/ after day1/ (the same file names, other volumes) adds day2's rows; a file
    rewritten in place is reported and skipped by default, raises with on_changed="error" and is
    appended with on_changed="append"; every row records its absolute location."""
    day1, day2, table = tmp_path / "day1", tmp_path / "day2", tmp_path / "t"
    stoke.synth_volumes(day1, samples=4, shape=(2, 2, 1), channels=1, seed=1, threads=1, progress=False)
    stoke.synth_volumes(day2, samples=3, shape=(2, 2, 1), channels=1, seed=2, threads=1, progress=False)
    assert stoke.ingest(day1, table, progress=False)["rows"] == 4
    r = stoke.ingest(day2, table, progress=False)
    assert (r["new_files"], r["skipped"], r["changed"], r["rows"]) == (3, 0, 0, 3)
    q = stoke.open_table(table).query(columns=["file", "source_location", "data"])
    assert sorted(q["source_location"]) == sorted(str((d / f"volume_{i:06d}.npy").resolve())
                                         for d, n in ((day1, 4), (day2, 3)) for i in range(n))
    for name, source, volume in zip(q["file"], q["source_location"], q["data"]):
        assert source.endswith("/" + name)
        np.testing.assert_array_equal(volume, np.load(source))

    changed = day2 / "volume_000001.npy"
    np.save(changed, np.full((2, 2, 1, 1), 7.0, np.float32))
    st = changed.stat()
    os.utime(changed, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    r = stoke.ingest(day2, table, progress=False)
    assert (r["skipped"], r["changed"], r["rows"], r["files_added"]) == (2, 1, 0, 0)
    assert r["changed_files"][0]["location"] == str(changed.resolve())
    assert r["changed_files"][0]["table_version"] != r["changed_files"][0]["source_version"]
    with pytest.raises(ValueError, match="changed since it was ingested"):
        stoke.ingest(day2, table, on_changed="error", progress=False)
    with pytest.raises(ValueError, match="skip, append or error"):
        stoke.ingest(day2, table, on_changed="replace", progress=False)
    r = stoke.ingest(day2, table, on_changed="append", progress=False)
    assert (r["changed"], r["rows"]) == (1, 1)
    q = stoke.open_table(table).query(where=f"source_location = '{changed.resolve()}'", columns=["data"])
    assert len(q["data"]) == 2 and any((v == 7.0).all() for v in q["data"])
    assert stoke.ingest(day2, table, on_changed="error", progress=False)["files_added"] == 0


def _rename_with_column_mapping(table, renames):
    """Turns on column mapping (mode name) and renames columns as Spark's ALTER TABLE does: one commit
    of a protocol and a metaData whose columns keep their names as physical names."""
    log = table / "_delta_log"
    commits = sorted(log.glob("*.json"))
    meta = None
    for path in commits:
        for line in open(path):
            meta = json.loads(line).get("metaData", meta)
    schema = json.loads(meta["schemaString"])
    for i, f in enumerate(schema["fields"], 1):
        f["metadata"] = {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f["name"]}
        f["name"] = renames.get(f["name"], f["name"])
    meta["schemaString"] = json.dumps(schema)
    meta["configuration"].update({"delta.columnMapping.mode": "name",
                                  "delta.columnMapping.maxColumnId": str(len(schema["fields"]))})
    latest = stoke.open_table(table).history()[0]
    with open(log / f"{len(commits):020d}.json", "x") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": latest["timestamp"] + 1, "operation": "RENAME COLUMN"}}) + "\n")
        f.write(json.dumps({"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}) + "\n")
        f.write(json.dumps({"metaData": meta}) + "\n")


def test_appends_into_a_column_mapped_table_load_under_the_new_names(tmp_path):
    """After another writer turned on column mapping and renamed the tensor column, an append from
    stoke writes the physical names, and the loader delivers every row, old and new, under the new
    name."""
    day1, day2, table = tmp_path / "day1", tmp_path / "day2", tmp_path / "t"
    stoke.synth_volumes(day1, samples=4, shape=(2, 2, 1), channels=1, seed=1, threads=1, progress=False)
    stoke.synth_volumes(day2, samples=3, shape=(2, 2, 1), channels=1, seed=2, threads=1, progress=False)
    assert stoke.ingest(day1, table, progress=False)["rows"] == 4
    _rename_with_column_mapping(table, {"data": "voxels"})
    r = stoke.ingest(day2, table, tensor_column="voxels", progress=False)
    assert (r["new_files"], r["rows"]) == (3, 3)
    loader = stoke.Loader(table, batch_size=3, columns=["source_location", "voxels"], to="numpy", threads=1)
    seen = []
    for b in loader:
        for source, volume in zip(b["source_location"], b["voxels"]):
            np.testing.assert_array_equal(volume, np.load(source))
            seen.append(source)
    assert len(seen) == 7 and len(set(seen)) == 7
    assert stoke.ingest(day2, table, tensor_column="voxels", progress=False)["skipped"] == 3


def test_samples_with_more_dimensions_than_numpy_batches_name_the_column(tmp_path):
    # A sample of numpy's largest rank loads in the CLI, but a batch of it (or a query result) needs one
    # more dimension than numpy has: a ValueError naming the column, not numpy's bare message.
    max_dims = 32 if np.__version__.startswith("1.") else 64
    src = tmp_path / "src"
    src.mkdir()
    for i in range(2):
        np.save(src / f"a{i}.npy", np.full((1,) * (max_dims - 2) + (2, 3), i, np.int32))
    subprocess.run([STOKE_BIN, "--no-progress", "ingest", src, "--table", tmp_path / "t"], check=True,
                   capture_output=True)
    t = stoke.open_table(tmp_path / "t")
    with pytest.raises(ValueError, match=f"column 'data' holds samples of {max_dims} dimensions"):
        t.query()
    with pytest.raises(ValueError, match=f"a batch of them needs {max_dims + 1}"):
        next(iter(stoke.Loader(t, batch_size=2, to="numpy")))


def test_open_table_takes_plain_parquet_datasets_and_ingest_relays_them_out(data, tmp_path):
    """A table's data files without its log are a plain Parquet dataset: open_table reads them
    (a directory, a glob, one file), and ingest re-lays them out into a table of their rows."""
    plain = tmp_path / "plain" / "part=all"
    plain.mkdir(parents=True)
    files = sorted(p for p in data["table"].iterdir() if p.suffix == ".parquet")
    for p in files:
        (plain / p.name).write_bytes(p.read_bytes())
    want = stoke.open_table(data["table"]).query(columns=["id", "label"])
    for location in (tmp_path / "plain", str(plain / "*.parquet")):
        got = stoke.open_table(location).query(columns=["id", "label", "part"])
        assert sorted(zip(got["id"].tolist(), got["label"].tolist())) == sorted(zip(want["id"].tolist(), want["label"].tolist()))
    assert set(stoke.open_table(tmp_path / "plain").query(columns=["part"])["part"]) == {"all"}
    assert sum(stoke.open_table(p).count() for p in files) == N  # one file at a time
    with pytest.raises(stoke.NotFoundError):
        stoke.open_table(tmp_path / "plain" / "*.none")
    with pytest.raises(ValueError, match="no version"):
        stoke.open_table(tmp_path / "plain", version=0)
    r = stoke.ingest(tmp_path / "plain", tmp_path / "relaid", progress=False)
    assert r["rows"] == N
    again = stoke.open_table(tmp_path / "relaid").query(columns=["source_id", "volume"])
    before = stoke.open_table(data["table"]).query(columns=["id", "volume"])
    by_id = {i: v for i, v in zip(before["id"].tolist(), before["volume"])}
    assert all(np.array_equal(v, by_id[i]) for i, v in zip(again["source_id"].tolist(), again["volume"]))
