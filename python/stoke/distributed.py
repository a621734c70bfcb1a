"""Sharded ingest on a Dask cluster: `stoke.ingest(source, table, client=dask_client)`.

The source listing is cut into `shards` contiguous parts (`shard=(i, shards)`, as `stoke ingest
--shard`), one Dask task each. Every task ingests and commits its part on its own, on whichever
worker runs it, so tasks may run in any order and at once; a task whose worker dies is run again by
the scheduler (Dask's allowed failures), and `retries` more times on an error, and a run again adds
only what its shard's earlier run did not commit. The workers need stoke importable and the store's
credentials in their environment; the source and the table must be on storage every worker reaches.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, List, Optional

# The counts of the shards' reports that add up.
_SUMMED = ("source_files", "new_files", "skipped", "changed", "rows", "files_added", "files_removed",
           "bytes_in", "bytes_out")


def _ingest_shard(index: int, count: int, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """One task: stoke.ingest of shard `index` of `count`, on the worker that runs it."""
    from .table import ingest
    return ingest(**kwargs, shard=(index, count))


def ingest_on(client: Any, kwargs: Dict[str, Any], shards: Optional[int] = None, retries: int = 2) -> Dict[str, Any]:
    """Runs stoke.ingest(**kwargs) as `shards` tasks on the Dask `client`'s cluster (default: one
    per worker thread) and waits for them. Returns the shards' reports summed (version: the newest
    a shard committed; seconds: the wall time of the whole), with "shards", the list of reports in
    shard order."""
    if kwargs.get("mode", "append") != "append":
        raise ValueError("ingest with a Dask client: mode must be 'append' (each shard commits on its own)")
    if kwargs.get("shard") is not None:
        raise ValueError("ingest with a Dask client: give `shards` (the number of tasks), not `shard`")
    if shards is None:
        shards = max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))
    if shards < 1:
        raise ValueError(f"ingest with a Dask client: shards must be at least 1, got {shards}")
    kwargs = {k: v for k, v in kwargs.items() if k != "shard"}
    kwargs["progress"] = False  # a worker's progress bar has no terminal
    start = time.perf_counter()
    run = uuid.uuid4().hex[:12]  # keys of this call's tasks, never a cached result of another's
    futures = client.map(_ingest_shard, range(shards), count=shards, kwargs=kwargs, retries=retries,
                         pure=False, key=[f"stoke-ingest-{run}-{i}-of-{shards}" for i in range(shards)])
    reports: List[Dict[str, Any]] = client.gather(futures)
    total: Dict[str, Any] = {k: sum(r[k] for r in reports) for k in _SUMMED}
    total["version"] = max(r["version"] for r in reports)
    total["changed_files"] = [f for r in reports for f in r["changed_files"]][:1000]
    total["seconds"] = time.perf_counter() - start
    total["shards"] = reports
    return total
