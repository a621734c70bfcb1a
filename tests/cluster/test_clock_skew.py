"""Nodes whose clocks are off: node 1 runs 5 s ahead of the storage and node 2 5 s behind
(libfaketime in their processes), and both commit to one table in the S3 emulator.

Delta commit timestamps come from the committing node's clock. What stoke guarantees (docs/cluster.md,
"Clocks"), checked here:
- versions are ordered by the store's atomic create, never by clocks, and each commit's timestamp is
  above its predecessor's whatever the clocks say, so timestamps grow with versions;
- time travel by a version's own timestamp gives that version, one millisecond earlier the one
  before it, from either node;
- VACUUM judges retention by the vacuuming node's clock against commit timestamps and the storage's
  file times: with a retention longer than the skew it keeps every file a retained version needs.
"""

import json

import pytest

from cluster import STOKE_BIN, Cluster, available

why_not = available()
if why_not:
    pytest.skip(why_not, allow_module_level=True)

TABLE = "s3://clocks/t"
PER_COMMIT = 6  # rows each append adds


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("clocks"), nodes=2) as c:
        c.node(1).clock_offset_s = 5
        c.node(2).clock_offset_s = -5
        c.start_storage()
        yield c


def stoke(cluster, node, *args):
    """`stoke ARGS` on `node` (its clock, its link to the storage); returns stdout."""
    return node.run([STOKE_BIN, "--no-progress", *args], env=cluster.s3_env(node)).stdout


def history(cluster, node):
    """(version, timestamp ms) of every commit, oldest first."""
    rows = [json.loads(x) for x in stoke(cluster, node, "history", TABLE, "--json").splitlines() if x.strip()]
    return sorted((r["version"], r["timestamp"]) for r in rows)


def count(cluster, node, *how):
    """The table's row count (from the log) at the version `how` selects."""
    return int(stoke(cluster, node, "query", TABLE, "--count", *how).strip())


def read_rows(cluster, node, *how):
    """The table's rows at the version `how` selects, read from its data files (CSV lines), or None
    when they cannot be read."""
    r = node.run([STOKE_BIN, "--no-progress", "query", TABLE, "--format", "csv", *how], env=cluster.s3_env(node),
                 check=False)
    return len(r.stdout.splitlines()) - 1 if r.returncode == 0 else None


@pytest.fixture(scope="module")
def table(cluster):
    """Four appends, alternately from the node ahead and the node behind (versions 0-3)."""
    for i in range(4):
        node = cluster.node(1 + i % 2)
        src = node.dir / f"src{i}"
        stoke(cluster, node, "synth", "volumes", "--samples", PER_COMMIT, "--shape", "4,4,2", "--channels", 1,
              "--seed", 100 + i, "--out", src)
        stoke(cluster, node, "ingest", src, "--table", TABLE, "--tensor-column", "volume")
    return history(cluster, cluster.node(1))


def test_versions_and_timestamps_stay_in_order(cluster, table):
    assert [v for v, _ in table] == [0, 1, 2, 3]
    stamps = [t for _, t in table]
    # Node 2 is 10 s behind node 1, yet each of its commits is stamped after the one before it: its
    # clock said earlier, so the stamp is the predecessor's plus 1 ms.
    assert all(a < b for a, b in zip(stamps, stamps[1:])), stamps
    assert stamps[1] == stamps[0] + 1 and stamps[3] == stamps[2] + 1, stamps
    assert count(cluster, cluster.node(2)) == 4 * PER_COMMIT


def test_time_travel_by_each_versions_timestamp_from_either_node(cluster, table):
    for node in cluster.nodes:
        for version, stamp in table:
            assert count(cluster, node, "--timestamp", stamp) == (version + 1) * PER_COMMIT, (node.name, version)
            if version > 0:
                assert count(cluster, node, "--timestamp", stamp - 1) == version * PER_COMMIT


def test_vacuum_from_a_node_ahead_keeps_what_retained_versions_need(cluster, table):
    # Node 2 (behind) compacts the four files into one: version 4 removes them.
    stoke(cluster, cluster.node(2), "optimize", TABLE)
    after = history(cluster, cluster.node(1))
    assert after[-1][0] == 4 and after[-1][1] > table[-1][1]
    # Node 1 (5 s ahead) vacuums with a retention of 3 minutes: versions 0-3 are inside it, so the
    # removed files stay and the old versions still read.
    out = stoke(cluster, cluster.node(1), "vacuum", TABLE, "--retain", 0.05, "--dry-run")
    assert ".parquet" not in out, out
    stoke(cluster, cluster.node(1), "vacuum", TABLE, "--retain", 0.05)
    assert read_rows(cluster, cluster.node(1), "--version", 0) == PER_COMMIT
    # With no retention, the files only versions 0-3 read go; the latest version reads whole. (From
    # the node behind, a retention of 0 could still keep them: the commits node 1 stamped lie up to
    # 10 s in its future.)
    stoke(cluster, cluster.node(1), "vacuum", TABLE, "--retain", 0)
    assert read_rows(cluster, cluster.node(2)) == 4 * PER_COMMIT
    assert read_rows(cluster, cluster.node(2), "--version", 0) is None
