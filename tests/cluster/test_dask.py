"""stoke.ingest(..., client=...) on a Dask cluster across network namespaces (cluster.py): the
scheduler on the head, one worker on each node, the source and the table on Azurite (each member
through its own proxy). Node 2 dies (every process in its namespace SIGKILLed) while its worker
reads the source of a shard: the scheduler runs its shards again on node 1, and the table holds
every source file exactly once.

    sudo STOKE_BIN=build/stoke /usr/bin/python3 -m pytest -rs tests/cluster/test_dask.py
"""

import csv
import io
import json
import time

import pytest

from cluster import PYTHON, STOKE_BIN, STOKE_PYTHONPATH, Cluster, available

why_not = available()
if why_not:
    pytest.skip(why_not, allow_module_level=True)
pytest.importorskip("distributed", reason="python3-distributed is not installed (run scripts/bootstrap.sh)")

SOURCE = "az://dsrc/vols"
TABLE = "az://dtables/t"
SAMPLES = 48
PORT = 8786

CLIENT = """
import json, sys
import stoke
from distributed import Client
with Client(sys.argv[1], timeout=30) as client:
    client.wait_for_workers(2, timeout=60)
    r = stoke.ingest(sys.argv[2], sys.argv[3], tensor_column="volume", client=client, shards=4)
print(json.dumps({k: v for k, v in r.items() if k != "shards"}))
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("dask"), nodes=2, head=True) as c:
        c.start_storage(azurite=True)
        c.head.run([STOKE_BIN, "--no-progress", "synth", "volumes", "--samples", SAMPLES, "--shape", "16,16,8",
                    "--channels", 2, "--seed", 31, "--out", SOURCE], env=c.az_env(c.head))
        scheduler = f"tcp://{c.head.addr}:{PORT}"
        c.head.start(["dask-scheduler", "--host", c.head.addr, "--port", PORT, "--no-dashboard"], log="dask-scheduler")
        for m in c.nodes:
            env = {**c.az_env(m), "PYTHONPATH": STOKE_PYTHONPATH}
            m.start(["dask-worker", scheduler, "--host", m.addr, "--nthreads", 1, "--nworkers", 1,
                     "--no-dashboard", "--name", m.name, "--death-timeout", 60], env=env, log="dask-worker")
        c.scheduler = scheduler
        yield c


def test_ingest_on_dask_survives_a_dead_worker(cluster):
    node2 = cluster.node(2)
    # Node 2's link to the source is slow, so that it dies while a shard of its is reading.
    cluster.proxy(node2, "set?methods=GET&paths=.npy&bytes_per_s=100000", backend="az")
    env = {**cluster.az_env(cluster.head), "PYTHONPATH": STOKE_PYTHONPATH}
    client = cluster.head.start([PYTHON, "-c", CLIENT, cluster.scheduler, SOURCE, TABLE], env=env)
    deadline = time.monotonic() + 90
    while not [r for r in cluster.proxy(node2, "requests", backend="az") if ".npy" in r]:
        assert client.poll() is None, client.communicate()
        assert time.monotonic() < deadline, "node 2's worker never read the source"
        time.sleep(0.1)
    node2.kill_all()
    out, err = client.communicate(timeout=180)
    assert client.returncode == 0, err[-4000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report["new_files"] + report["skipped"] >= SAMPLES

    rows = list(csv.DictReader(io.StringIO(cluster.head.run(
        [STOKE_BIN, "--no-progress", "query", TABLE, "--format", "csv"], env=cluster.az_env(cluster.head)).stdout)))
    assert len(rows) == SAMPLES and len({r["source_location"] for r in rows}) == SAMPLES, "every file once"
    assert sorted(int(r["id"]) for r in rows) == list(range(SAMPLES))
