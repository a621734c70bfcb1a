"""Packaging: `pip install` of the repository gives a working `stoke` package.

Installs with pip --target into a temporary directory, reusing the CMake build in $STOKE_BUILD_DIR
(default: the directory of $STOKE_BIN when that is a CMake build, as `make test` sets it, else
<repo>/build) so that only its up-to-date `_stoke` target is "built", then imports the
installed package in a fresh interpreter that sees nothing of the source tree. Skipped when that
build has no `_stoke` module for this interpreter or when pip, setuptools or wheel are missing.

    /usr/bin/python3 -m pytest -q python/tests/test_packaging.py
"""

import importlib.util
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def build_dir():
    """The CMake build whose `_stoke` module the install reuses."""
    if os.environ.get("STOKE_BUILD_DIR"):
        return Path(os.environ["STOKE_BUILD_DIR"]).resolve()
    if os.environ.get("STOKE_BIN"):
        d = Path(os.environ["STOKE_BIN"]).resolve().parent
        if (d / "CMakeCache.txt").is_file():
            return d
    return REPO / "build"


BUILD = build_dir()
MODULE = BUILD / "python" / "stoke" / f"_stoke{sysconfig.get_config_var('EXT_SUFFIX')}"

# Runs in the installed package's interpreter: argv[1] the pip --target directory.
CHECK = textwrap.dedent("""
    import importlib.util, sys
    from pathlib import Path

    import stoke, stoke._stoke

    target = Path(sys.argv[1]).resolve()
    pkg = Path(stoke.__file__).resolve().parent
    assert pkg == target / "stoke", f"stoke imported from {pkg}, not from {target}"
    assert Path(stoke._stoke.__file__).resolve().parent == pkg, stoke._stoke.__file__
    for name in ("_stoke.pyi", "py.typed", "torch.py", "report.py", "experiments/__main__.py",
                 "experiments/deepiq.py", "experiments/shuffle.py", "experiments/batch.py"):
        assert (pkg / name).is_file(), f"{name} is not installed"
    try:
        stoke.open_table(target / "no-such-table")
    except stoke.NotFoundError:
        pass
    else:
        raise AssertionError("open_table of a missing directory did not raise NotFoundError")
    if importlib.util.find_spec("torch") is not None:
        import stoke.torch, stoke.experiments.deepiq, stoke.report
    print("ok", pkg)
""")


def missing_tools():
    for mod in ("pip", "setuptools", "wheel"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed for {sys.executable} (Debian: apt install python3-{mod})"
    return None


def setuptools_leftovers():
    """What a setuptools build could leave in the tree: egg-info and build/lib-like directories."""
    found = set()
    for d, patterns in ((REPO, ["*.egg-info", "build/lib*", "build/bdist*", "build/temp*"]),
                        (REPO / "python", ["*.egg-info"])):
        for pattern in patterns:
            found.update(d.glob(pattern))
    return found


def test_pip_install_target(tmp_path):
    if not MODULE.is_file():
        pytest.skip(f"no built extension {MODULE} (build the `_stoke` target of {BUILD} first, or "
                    "point STOKE_BUILD_DIR at a build that has it)")
    reason = missing_tools()
    if reason:
        pytest.skip(reason)

    target = tmp_path / "site"
    env = dict(os.environ, STOKE_BUILD_DIR=str(BUILD), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INPUT="1")
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    before = setuptools_leftovers()
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
         "--no-cache-dir", "--target", str(target), str(REPO)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"pip install failed:\n{r.stdout}\n{r.stderr}"
    assert setuptools_leftovers() == before, "the build left setuptools output in the source tree"

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(target)
    r = subprocess.run([sys.executable, "-c", CHECK, str(target)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"the installed package failed:\n{r.stdout}\n{r.stderr}"
    assert r.stdout.startswith("ok"), r.stdout
