"""Builds the `stoke` Python package with CMake.

The project metadata is in pyproject.toml; this file holds what setuptools cannot express there:
the version (read from CMakeLists.txt, the single source of truth) and a build_ext that builds the
`stoke._stoke` extension with CMake instead of compiling sources itself.

    pip install --no-build-isolation .             # configures and builds in build-setuptools/
    STOKE_BUILD_DIR=build pip install --no-build-isolation .   # reuses an existing CMake build

Environment:
  STOKE_BUILD_DIR             an already configured CMake build directory (relative paths are taken
                              from the source directory): only its `_stoke` target is built, a
                              no-op when it is up to date. Unset: the package configures its own
                              Release build in build-setuptools/cmake-<python tag>/ and reuses it
                              on the next install.
  STOKE_CMAKE_ARGS            extra arguments for the CMake configure step (shell syntax), e.g.
                              "-DSTOKE_WITH_CUDA=OFF".
  CMAKE_BUILD_PARALLEL_LEVEL  parallel build jobs (default: `build_ext -j`, else all cores).
  CMAKE_GENERATOR             the CMake generator (default: Ninja).
"""

import atexit
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError

ROOT = Path(__file__).resolve().parent
EXTENSION = "stoke._stoke"


def read_version() -> str:
    """The version of `project(stoke VERSION x.y.z)` in CMakeLists.txt."""
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"project\(\s*stoke\s+VERSION\s+([0-9][0-9A-Za-z.]*)", text)
    if not match:
        raise BaseError("cannot find `project(stoke VERSION ...)` in CMakeLists.txt")
    return match.group(1)


class CMakeExtension(Extension):
    """An extension built by the CMake target of the same base name (`_stoke`)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])
        self.target = name.rpartition(".")[2]


class CMakeBuild(build_ext):
    """Builds CMake extensions with the project's CMakeLists.txt and copies them into the package."""

    def build_extension(self, ext: Extension) -> None:
        if not isinstance(ext, CMakeExtension):
            super().build_extension(ext)
            return
        if shutil.which("cmake") is None:
            raise BaseError("cmake not found: install CMake >= 3.25 (Debian: apt install cmake)")

        reuse = os.environ.get("STOKE_BUILD_DIR")
        if reuse:
            build_dir = (ROOT / reuse).resolve()
            if not (build_dir / "CMakeCache.txt").is_file():
                raise BaseError(
                    f"STOKE_BUILD_DIR={reuse}: {build_dir} is not a configured CMake build directory "
                    f"(no CMakeCache.txt); configure one (cmake -S . -B {reuse} -G Ninja) or unset "
                    "STOKE_BUILD_DIR to let the package build its own")
        else:
            build_dir = ROOT / "build-setuptools" / f"cmake-{python_tag()}"
            self.configure(build_dir)

        if not self.has_target(build_dir, ext.target):
            raise BaseError(
                f"the CMake build in {build_dir} has no `{ext.target}` target: CMake skips the Python "
                "binding when pybind11 or the Python development files are missing (see 'Python "
                "binding skipped' in its configure output). Debian: apt install pybind11-dev python3-dev")

        cmd = ["cmake", "--build", str(build_dir), "--target", ext.target]
        if not os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL"):  # cmake --build reads it itself
            cmd += ["-j", str(self.parallel or os.cpu_count() or 1)]
        self.spawn(cmd)

        # The target writes the module next to the pure-Python files: <build>/python/stoke/.
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = build_dir / "python" / "stoke" / f"{ext.target}{suffix}"
        if not built.is_file():
            found = sorted(p.name for p in built.parent.glob(f"{ext.target}*")) or ["nothing"]
            raise BaseError(
                f"{built} was not built; found {', '.join(found)} there. A build directory configured "
                f"for another Python builds another module name: this interpreter is "
                f"{sys.executable} ({suffix}); configure with -DPython3_EXECUTABLE={sys.executable}")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.copy_file(str(built), str(dest))

    def configure(self, build_dir: Path) -> None:
        """Configures (or re-configures, which is quick) the package's own Release build."""
        args = [
            "-S", str(ROOT), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DSTOKE_BUILD_TESTS=OFF",  # the package needs the libraries and the module only
            f"-DPython3_EXECUTABLE={sys.executable}",
        ]
        if not os.environ.get("CMAKE_GENERATOR"):
            if shutil.which("ninja") is None:
                raise BaseError("ninja not found: install Ninja (Debian: apt install ninja-build) "
                                "or choose another generator with CMAKE_GENERATOR")
            args += ["-G", "Ninja"]
        try:  # a pybind11 installed with pip: point CMake at its config (a search hint, not a pin)
            import pybind11
            args.append(f"-Dpybind11_ROOT={pybind11.get_cmake_dir()}")
        except (ImportError, AttributeError):
            pass
        args += shlex.split(os.environ.get("STOKE_CMAKE_ARGS", ""))
        build_dir.mkdir(parents=True, exist_ok=True)
        self.spawn(["cmake", *args])

    @staticmethod
    def has_target(build_dir: Path, target: str) -> bool:
        """Whether the configured build defines `target`, from the directory list CMake writes for
        every generator. True when the list is missing: the build step then reports the problem."""
        listing = build_dir / "CMakeFiles" / "TargetDirectories.txt"
        if not listing.is_file():
            return True
        dirs = listing.read_text(encoding="utf-8").split()
        return any(Path(d).name == f"{target}.dir" for d in dirs)


def python_tag() -> str:
    """Names a build directory for this interpreter, e.g. cpython-311-x86_64-linux-gnu."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return suffix.strip(".").rpartition(".")[0] or sys.implementation.cache_tag


def scratch_dir() -> str:
    """setuptools' intermediate files (build/lib, bdist, egg-info) go to a private temporary
    directory: the default `build/` is the CMake build directory of the Makefile, and a directory
    of its own per run keeps concurrent installs apart. Nothing there is worth keeping: the
    compiled code lives in the CMake build directory."""
    path = tempfile.mkdtemp(prefix="stoke-setuptools-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


scratch = scratch_dir()
setup(
    version=read_version(),
    packages=["stoke", "stoke.experiments"],
    package_dir={"": "python"},
    package_data={"stoke": ["_stoke.pyi", "py.typed"]},
    ext_modules=[CMakeExtension(EXTENSION)],
    cmdclass={"build_ext": CMakeBuild},
    options={
        "build": {"build_base": os.path.join(scratch, "build")},
        "egg_info": {"egg_base": scratch},
    },
    zip_safe=False,
)
