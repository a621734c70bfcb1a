"""The stoke command starts again with glibc's heap in transparent huge pages (core/huge_page_heap.h),
unless the kernel's THP are off, the caller set the tunables or STOKE_HUGE_PAGE_HEAP=0; the program
started again sees the caller's GLIBC_TUNABLES, as do the processes it starts."""

import os
import subprocess
from pathlib import Path

import pytest

from stoke_env import STOKE_BIN

if not Path(STOKE_BIN).is_file():
    pytest.skip(f"no stoke binary at {STOKE_BIN} (set STOKE_BIN)", allow_module_level=True)

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
THP_ON = THP.is_file() and ("[always]" in THP.read_text() or "[madvise]" in THP.read_text())


def version_log(**env):
    """stderr of `stoke --version` at debug level, with `env` on top of this environment (None unsets)."""
    e = dict(os.environ, STOKE_LOG_LEVEL="debug")
    e.pop("STOKE_HUGE_PAGE_HEAP", None)
    e.pop("GLIBC_TUNABLES", None)
    for k, v in env.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    r = subprocess.run([STOKE_BIN, "--version"], capture_output=True, text=True, env=e)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("stoke "), r.stdout
    return r.stderr


@pytest.mark.skipif(not THP_ON, reason="transparent huge pages are off on this kernel")
def test_the_command_runs_with_its_heap_in_huge_pages_and_the_callers_tunables():
    log = version_log()
    assert "heap.huge_pages" in log, log
    assert 'caller_tunables="(unset)"' in log, log
    log = version_log(GLIBC_TUNABLES="glibc.malloc.arena_max=4")
    assert "heap.huge_pages" in log, log
    assert 'caller_tunables="glibc.malloc.arena_max=4"' in log, log


def test_the_callers_choice_stands():
    assert "heap.huge_pages" not in version_log(STOKE_HUGE_PAGE_HEAP="0")
    assert "heap.huge_pages" not in version_log(GLIBC_TUNABLES="glibc.malloc.hugetlb=0")
    assert "heap.huge_pages" not in version_log(GLIBC_TUNABLES="glibc.malloc.top_pad=0")
