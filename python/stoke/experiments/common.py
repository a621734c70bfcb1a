"""What the experiments share: options, storage, devices, output files and terminal tables.

Results are JSON documents. Everything measured on the clock (times, rates, shares, ratios of
times, trace analyses, dates) sits under keys named "measured"; everything else (options, data
sets, sample orders, losses, accuracies, parameter counts) follows from the options and the seed,
so two runs with the same seed give the same JSON once the "measured" members are removed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .store import EmulatedBlobStore
from .text import text_table  # noqa: F401 (the experiments call common.text_table)

# The emulated cloud link: the latency every read request gets and the read bandwidth of the link.
DEFAULT_LATENCY_MS = 20.0        # cloud object stores answer small GETs in about 10-100 ms
DEFAULT_BANDWIDTH = 125e6        # bytes/s: 1 Gbit/s, a modest cloud VM's network share


def add_common_arguments(p: argparse.ArgumentParser, default_storage: str,
                         default_latency_ms: float = DEFAULT_LATENCY_MS) -> None:
    p.add_argument("--scale", choices=("small", "default"), default="default",
                   help="small: a run of about a minute (the test suite's); default: the documented scale")
    p.add_argument("--out", default="experiments-out", help="directory for NAME.json, NAME.html and traces "
                   "(default experiments-out)")
    p.add_argument("--storage", choices=("azurite", "local"), default=default_storage,
                   help=f"where the data sets live: azurite (Azure Blob emulator behind a latency/bandwidth "
                        f"proxy; needs a stoke checkout's tests/servers) or local disk (default {default_storage})")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: the CPU, and CUDA too where present (default auto)")
    p.add_argument("--seed", type=int, default=0, help="data set, model initialisation and sample orders (default 0)")
    p.add_argument("--latency-ms", type=float, default=default_latency_ms,
                   help=f"azurite: latency added to every read request (default {default_latency_ms:g})")
    p.add_argument("--bandwidth-mb", type=float, default=DEFAULT_BANDWIDTH / 1e6,
                   help=f"azurite: read bandwidth of the emulated link in MB/s, 10^6 bytes (default "
                        f"{DEFAULT_BANDWIDTH / 1e6:g}; 0: no cap)")
    p.add_argument("--work", default="", help="keep the generated data in WORK/NAME, replaced on each run "
                   "(default: a temporary directory, removed afterwards)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default 0: all cores)")


def devices(choice: str) -> Tuple[List[str], List[str]]:
    """(devices to run, notes on devices skipped)."""
    import torch
    has_cuda = torch.cuda.is_available()
    if choice == "cuda":
        if not has_cuda:
            raise SystemExit("--device cuda: torch sees no CUDA device")
        return ["cuda"], []
    if choice == "cpu":
        return ["cpu"], []
    if has_cuda:
        return ["cpu", "cuda"], []
    return ["cpu"], ["CUDA: no CUDA device here (torch.cuda.is_available() is False); the CUDA cells are skipped"]


def setup_torch(threads: int) -> int:
    """torch threads (0: the cores this process may use); returns the count."""
    import torch
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n = threads or cores
    torch.set_num_threads(n)
    return n


def environment() -> Dict[str, Any]:
    """Facts about the machine and software (not measured; may differ between machines)."""
    import numpy
    import torch
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
            "cores": cores, "machine": platform.machine(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def run_facts(name: str, args: argparse.Namespace, argv: Sequence[str]) -> Dict[str, Any]:
    return {"experiment": name, "scale": args.scale, "storage": args.storage, "seed": args.seed,
            "command": "python3 -m stoke.experiments " + " ".join([name, *argv]),
            "environment": environment(),
            "measured": {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                         "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}}


# ---------------------------------------------------------------------------
# storage

@dataclass
class Storage:
    """Where the data sets of one run live: `uri(name)` is a local path or az://container/name;
    `work` is a local directory for files that are not measured (removed afterwards unless --work)."""
    kind: str
    root: str
    work: str
    store: Optional[EmulatedBlobStore] = None

    def uri(self, name: str) -> str:
        return f"{self.root}/{name}"

    def label(self, name: str) -> str:
        """uri(name) as the JSON records it: the same on every run (no temporary directory)."""
        return self.uri(name) if self.kind != "local" else f"<work>/{name}"

    def emulate(self) -> None:
        """Switches the emulated link's latency and bandwidth on (after the data is written)."""
        if self.store is not None:
            self.store.emulate()

    def describe(self) -> Dict[str, Any]:
        if self.store is None:
            return {"kind": "local", "text": "local disk (page cache warm unless said)"}
        mb = self.store.bytes_per_s / 1e6
        link = f"{mb:g} MB/s" if mb > 0 else "no bandwidth cap"
        return {"kind": "azurite", "latency_ms": self.store.latency_ms, "bandwidth_bytes_per_s": self.store.bytes_per_s,
                "text": f"Azurite (Azure Blob emulator) behind a proxy adding {self.store.latency_ms:g} ms to every "
                        f"read request, read bandwidth {link}"}


@contextlib.contextmanager
def storage(args: argparse.Namespace, name: str) -> Iterator[Storage]:
    """The run's storage: a work directory (local) or a container on a fresh emulated blob store,
    stopped and removed afterwards, also on failure. With --work the data goes to WORK/NAME, emptied
    first (a data set of an earlier run with other options must not be appended to) and kept."""
    if args.work:
        work = os.path.join(args.work, name)
        shutil.rmtree(work, ignore_errors=True)
    else:
        work = tempfile.mkdtemp(prefix=f"stoke-{name}-")
    os.makedirs(work, exist_ok=True)
    try:
        if args.storage == "local":
            yield Storage("local", os.path.abspath(work), os.path.abspath(work))
        else:
            with EmulatedBlobStore(args.latency_ms, args.bandwidth_mb * 1e6) as store:
                yield Storage("azurite", f"az://{name}", os.path.abspath(work), store)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------
# output

def strip_measured(doc: Any) -> Any:
    """The document without its "measured" members: what the seed and options determine."""
    if isinstance(doc, dict):
        return {k: strip_measured(v) for k, v in doc.items() if k != "measured"}
    if isinstance(doc, list):
        return [strip_measured(v) for v in doc]
    return doc


def write_outputs(out_dir: str, name: str, result: Dict[str, Any], page: str) -> Tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jpath, hpath = out / f"{name}.json", out / f"{name}.html"
    tmp = jpath.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, sort_keys=False, allow_nan=False) + "\n")
    tmp.replace(jpath)
    tmp = hpath.with_suffix(".html.tmp")
    tmp.write_text(page)
    tmp.replace(hpath)
    return jpath, hpath


def say(*parts: Any) -> None:
    """Progress notes, on stderr (stdout carries the tables)."""
    print(*parts, file=sys.stderr, flush=True)


def fmt(v: Optional[float], spec: str) -> str:
    return "–" if v is None else format(v, spec)


# ---------------------------------------------------------------------------
# traces: the stall attribution of a traced run

def save_trace(loader: Any, step_log: Sequence[Dict[str, float]], out_dir: Path, stem: str) -> Dict[str, Any]:
    """Writes a traced loader's Chrome trace and the trainer's step log next to the report
    (STEM-trace.json, STEM-steps.json) and analyses them (stoke.report). Returns the JSON members:
    trace_file, steps_file, and the attribution under measured.stalls."""
    from .. import report
    trace_file, steps_file = out_dir / f"{stem}-trace.json", out_dir / f"{stem}-steps.json"
    loader.trace(str(trace_file))
    steps_file.write_text(json.dumps({"clock": "time.perf_counter", "steps": list(step_log)}) + "\n")
    att = report.attribute_stalls(report.load_trace(str(trace_file)), report.load_steps(str(steps_file)))
    return {"trace_file": trace_file.name, "steps_file": steps_file.name, "measured": {"stalls": att}}


def stall_section(out_dir: Path, rec: Dict[str, Any], path: Sequence[Any], title: str, chart_prefix: str) -> str:
    """The report's "where the time goes" section for a record made with save_trace, found in the
    JSON at `path`."""
    from .. import report
    from . import html as H
    trace = report.load_trace(str(out_dir / rec["trace_file"]))
    steps = report.load_steps(str(out_dir / rec["steps_file"]))
    return report.section_html(trace, steps, rec["measured"]["stalls"], base=H.pointer(*path, "measured", "stalls"),
                               title=title, chart_prefix=chart_prefix)
