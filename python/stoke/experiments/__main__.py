"""python3 -m stoke.experiments NAME [options]: runs one experiment (see stoke.experiments)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

# The loader's threads share the cores with torch's OpenMP threads; spinning idle OpenMP threads
# take CPU from them. Let them sleep unless the environment says otherwise (read when torch loads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from . import EXPERIMENTS, __doc__ as OVERVIEW  # noqa: E402


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = argparse.ArgumentParser(prog="python3 -m stoke.experiments", description=OVERVIEW,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="name", metavar="NAME", required=True)
    modules = {}
    for name in EXPERIMENTS:
        mod = importlib.import_module(f".{name}", __package__)
        modules[name] = mod
        p = sub.add_parser(name, help=mod.__doc__.split("\n")[0], description=mod.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
    args = top.parse_args(argv)
    mod = modules[args.name]
    from .common import say, write_outputs
    t = time.perf_counter()
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)  # traces are written there while the experiment runs
        result = mod.run(args, argv[1:])
    except (ValueError, RuntimeError, OSError) as e:  # bad options, missing tools, I/O: the message says which
        print(f"python3 -m stoke.experiments {args.name}: {e}", file=sys.stderr)
        return 1
    page = mod.report_html(result, Path(args.out))
    jpath, hpath = write_outputs(args.out, args.name, result, page)
    print(mod.terminal(result))
    say(f"{args.name}: {time.perf_counter() - t:.0f} s; wrote {jpath} and {hpath}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
