"""What the tests of the Python binding share: where the built package and the stoke binary are.

The package is imported from $STOKE_PYTHONPATH (default <repo>/build/python, where the `_stoke`
CMake target assembles it), the binary is $STOKE_BIN (default <repo>/build/stoke). A test module
calls import_stoke() at import time: it skips the module, saying why, when either is missing.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYTHONPATH = os.environ.get("STOKE_PYTHONPATH") or str(REPO / "build" / "python")
STOKE_BIN = os.environ.get("STOKE_BIN") or str(REPO / "build" / "stoke")


def import_stoke():
    """The `stoke` package from PYTHONPATH (module-level skip when it or the binary is not built)."""
    if not list(Path(PYTHONPATH).glob("stoke/_stoke*.so")):
        pytest.skip(f"stoke Python module not built (no {PYTHONPATH}/stoke/_stoke*.so; "
                    f"build the _stoke target or set STOKE_PYTHONPATH)", allow_module_level=True)
    if not Path(STOKE_BIN).is_file():
        pytest.skip(f"no stoke binary at {STOKE_BIN} (set STOKE_BIN)", allow_module_level=True)
    if PYTHONPATH not in sys.path:
        sys.path.insert(0, PYTHONPATH)
    import stoke
    return stoke


def run_stoke(*args):
    """Runs `stoke --no-progress ARGS...` and returns the CompletedProcess; fails the test on error."""
    r = subprocess.run([STOKE_BIN, "--no-progress", *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"stoke {args}: {r.stderr}"
    return r


def synth_table(base, samples, shape, channels, seed, rows_per_file):
    """`stoke synth volumes` into base/src and `stoke ingest` of them into base/table (tensor
    column `volume`, uncompressed, rows_per_file rows per data file); returns (src, table)."""
    src, table = base / "src", base / "table"
    run_stoke("synth", "volumes", "--samples", samples, "--shape", ",".join(map(str, shape)),
              "--channels", channels, "--out", src, "--seed", seed, "--threads", 1)
    run_stoke("ingest", src, "--labels", src / "labels.csv", "--table", table, "--tensor-column", "volume",
              "--codec", "uncompressed", "--rows-per-file", rows_per_file)
    return src, table
