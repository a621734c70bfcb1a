"""stoke.ingest(..., client=...) on a local Dask cluster (Debian's python3-distributed): the shards
run as tasks, each committing on its own; the table holds every source file once, and a second call
adds nothing. Multi-node runs (scheduler and workers in separate network namespaces, a worker killed
mid-ingest) are in tests/cluster/test_dask.py."""

import json

import pytest

from stoke_env import import_stoke, run_stoke

stoke = import_stoke()
distributed = pytest.importorskip("distributed", reason="python3-distributed is not installed")

SAMPLES = 30


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    src = tmp_path_factory.mktemp("dask") / "src"
    run_stoke("synth", "volumes", "--samples", SAMPLES, "--shape", "4,4,2", "--channels", 1, "--out", src)
    return src


def test_shards_run_as_tasks_and_commit_every_file_once(client, source, tmp_path):
    table = tmp_path / "t"
    r = stoke.ingest(source, table, labels=source / "labels.csv", tensor_column="volume", client=client, shards=3)
    assert r["rows"] == SAMPLES and r["new_files"] == SAMPLES and len(r["shards"]) == 3
    rows = stoke.open_table(table).query(columns=["id", "source_location"])
    assert sorted(rows["id"].tolist()) == list(range(SAMPLES))
    assert len(set(rows["source_location"].tolist())) == SAMPLES
    history = [json.loads(x) for x in run_stoke("history", table, "--json").stdout.splitlines() if x.strip()]
    shards = [h["commitInfo"]["operationParameters"].get("shard") for h in history]
    assert sorted(s for s in shards if s) == ["0/3", "1/3", "2/3"], "one commit per shard"
    assert r["version"] == max(h["version"] for h in history)
    again = stoke.ingest(source, table, labels=source / "labels.csv", tensor_column="volume", client=client)
    assert again["rows"] == 0 and again["skipped"] == SAMPLES and len(again["shards"]) == 2  # one per thread


def test_client_refuses_what_shards_cannot_do(client, source, tmp_path):
    with pytest.raises(ValueError, match="mode must be 'append'"):
        stoke.ingest(source, tmp_path / "t", mode="overwrite", client=client)
    with pytest.raises(ValueError, match="not `shard`"):
        stoke.ingest(source, tmp_path / "t", shard=(0, 2), client=client)
    with pytest.raises(ValueError, match="goes with a Dask client"):
        stoke.ingest(source, tmp_path / "t", shards=2)
