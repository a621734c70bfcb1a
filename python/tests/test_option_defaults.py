"""One definition per option: the loader's and ingest's defaults are the C++ structs' (LoaderOptions,
IngestOptions), and the binding's keywords, the Python API's keywords and the CLI's options must all
agree with them.

    /usr/bin/python3 -m pytest -q python/tests/test_option_defaults.py
"""

import inspect
import re
import subprocess

from stoke_env import STOKE_BIN, import_stoke

stoke = import_stoke()
from stoke import _stoke  # noqa: E402

# The CLI's option names that are not the Python keyword with '-' for '_'.
CLI_NAMES = {
    "target-file-size": "target_file_bytes",
    "row-group-size": "row_group_bytes",
    "remote-coalesce-gap": "remote_coalesce_gap_bytes",
}
SIZE_UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "KB": 1 << 10, "MIB": 1 << 20, "MB": 1 << 20, "GIB": 1 << 30, "GB": 1 << 30}


def cli_defaults(*command):
    """{python keyword: default text} of the options `stoke COMMAND --help` shows a default for."""
    text = subprocess.run([STOKE_BIN, *command, "--help"], capture_output=True, text=True, check=True).stdout
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s+--([\w-]+)\s+(.*)", line)
        if not m:
            continue
        # The type and default, before the description: "INT:POSITIVE=32", "INT:INT in [0 - 4096]=0",
        # "INT:SIZE [b, kb(=1024b), ...]=8MiB".
        head = re.match(r"(\S*(?:\s+in)?(?:\s\[[^\]]*\]\S*)?)", m.group(2)).group(1)
        if "=" in head:
            name = m.group(1)
            out[CLI_NAMES.get(name, name.replace("-", "_"))] = head.rsplit("=", 1)[1]
    return out


def cli_value(text, like):
    """The CLI's default text as a value of the type of `like` (sizes such as 8MiB as bytes)."""
    if isinstance(like, bool):
        return text.lower() == "true"
    if isinstance(like, int):
        m = re.fullmatch(r"(-?\d+)\s*([A-Za-z]*)", text)
        assert m, f"not a number: {text!r}"
        return int(m.group(1)) * SIZE_UNITS[m.group(2).upper()]
    return text


def binding_defaults(function):
    """{keyword: default as pybind11 prints it} from the signature in a binding's docstring."""
    signature = function.__doc__.split("\n", 1)[0]
    # A type may hold commas (Dict[str, List[int]]), never ':' or '='.
    return dict(re.findall(r"(\w+): [^=:]+? = ([^,)]+)", signature))


def printed(value):
    return repr(value) if isinstance(value, str) else str(value)


def python_defaults(function):
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.default is not inspect.Parameter.empty}


def check_agreement(defaults, binding, python, cli):
    """The names checked in each front end; asserts that every default there is the struct's."""
    checked = {"binding": set(), "python": set(), "cli": set()}
    for name, value in defaults.items():
        if name in binding:
            assert binding[name] == printed(value), f"binding default of {name}: {binding[name]}, C++ {value!r}"
            checked["binding"].add(name)
        # None in Python means "decided at the call" (rank and world_size from torch.distributed or
        # $RANK/$WORLD_SIZE, cache_dir none): not a default of its own.
        if name in python and python[name] is not None:
            assert python[name] == value, f"Python default of {name}: {python[name]!r}, C++ {value!r}"
            checked["python"].add(name)
        if name in cli:
            assert cli_value(cli[name], value) == value, f"CLI default of {name}: {cli[name]}, C++ {value!r}"
            checked["cli"].add(name)
    return checked


def test_loader_defaults_agree_in_cpp_the_binding_python_and_the_cli():
    defaults = _stoke.loader_defaults()
    assert defaults["batch_size"] == 32 and defaults["shuffle"] == "global" and defaults["on_error"] == "raise"
    checked = check_agreement(defaults, binding_defaults(_stoke.Loader.__init__), python_defaults(stoke.Loader.__init__),
                              cli_defaults("bench", "load"))
    # Every default the binding takes is the struct's, and the front ends' own keywords were found.
    assert checked["binding"] == set(defaults)
    assert {"batch_size", "shuffle", "seed", "prefetch_bytes", "drop_last", "cache_bytes"} <= checked["python"]
    assert {"batch_size", "shuffle", "shuffle_buffer", "seed", "prefetch_bytes", "threads", "queue_depth",
            "remote_coalesce_bytes", "remote_coalesce_gap_bytes", "cache_bytes", "backend",
            "image_channels"} <= checked["cli"]


def test_ingest_defaults_agree_in_cpp_the_binding_python_and_the_cli():
    defaults = _stoke.ingest_defaults()
    assert defaults["mode"] == "append" and defaults["codec"] == "auto"
    checked = check_agreement(defaults, binding_defaults(_stoke.ingest), python_defaults(stoke.ingest),
                              cli_defaults("ingest"))
    assert checked["binding"] == set(defaults)
    assert checked["python"] == set(defaults)
    assert {"mode", "tensor_column", "codec", "target_file_bytes", "row_group_bytes", "threads",
            "hdf5_samples"} <= checked["cli"]


def test_a_disagreement_is_found():
    # The checker itself: a front end whose default differs fails.
    try:
        check_agreement({"batch_size": 32}, {"batch_size": "64"}, {}, {})
    except AssertionError as e:
        assert "batch_size" in str(e)
    else:
        raise AssertionError("a differing default went unnoticed")
    try:
        check_agreement({"prefetch_bytes": 512 << 20}, {}, {}, {"prefetch_bytes": "256MiB"})
    except AssertionError as e:
        assert "prefetch_bytes" in str(e)
    else:
        raise AssertionError("a differing CLI size went unnoticed")
