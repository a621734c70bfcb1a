#!/usr/bin/env python3
"""The layering rules of stoke's sources that the compiler does not check (src/README.md):

- Above io/ (src/format, src/table, src/ingest, src/loader, src/cli; not the naive one-file-per-
  sample baseline of src/bench), nothing calls open(2) or mmap(2) or uses std::filesystem: local
  files are reached through io/ (LocalStorage(), io/local_files.h). Tests (*_test.cc) are exempt;
  test helpers in headers are not.
- The front ends (src/cli, python/src) include public headers (stoke/*.h) and their own, never a
  layer's private header.

    scripts/check_layers.py    exit 1 with one line per breach, "file:line: what"
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ABOVE_IO = ["src/format", "src/table", "src/ingest", "src/loader", "src/cli"]
FORBIDDEN = re.compile(r"::open\(|\bmmap\(|std::filesystem")
FRONT_ENDS = {"src/cli": ("stoke/", "cli/"), "python/src": ("stoke/", "binding.h")}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def sources(directory):
    for path in sorted((ROOT / directory).glob("*")):
        if path.suffix in (".cc", ".h") and not path.name.endswith("_test.cc"):
            yield path


def code_of(line):
    return line.split("//", 1)[0]


def main():
    problems = []
    for directory in ABOVE_IO:
        for path in sources(directory):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = FORBIDDEN.search(code_of(line))
                if match:
                    problems.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)} above io/ (use io/local_files.h)")
    for directory, allowed in FRONT_ENDS.items():
        for path in sources(directory):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = INCLUDE.match(line)
                if match and not match.group(1).startswith(allowed):
                    problems.append(f"{path.relative_to(ROOT)}:{number}: front end includes private header {match.group(1)}")
    for p in problems:
        print(p)
    print(f"check_layers: {len(problems)} breaches" if problems else
          "check_layers: nothing above io/ opens, maps or walks files itself; front ends include public headers only")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
