"""Where an experiment's data lives: the local disk, or an emulated cloud object store.

The emulated store is the one `bench/blob_storage.sh` and `scripts/demo.sh` use: Azurite
(Microsoft's Azure Blob emulator) behind the fault proxy of tests/servers (`fault_proxy.mjs`), both
started by `tests/servers/launch.mjs` on free loopback ports. The proxy adds a fixed latency to every
request and caps the bandwidth of read responses (all connections together, as one network link);
both are switched on only once the data is written, so uploads are not what is measured.

The servers are Node.js programs of a stoke source checkout (npm packages installed by
scripts/bootstrap.sh); the checkout is found from this file (a build tree or the source tree), or
from $STOKE_SOURCE_DIR.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

# Azurite's published development account and key (not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def source_dir() -> Path:
    """The stoke checkout whose tests/servers run the emulators."""
    env = os.environ.get("STOKE_SOURCE_DIR")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve()
    candidates += list(here.parents) + [Path.cwd()]
    for c in candidates:
        if (c / "tests" / "servers" / "launch.mjs").is_file():
            return c
        # a CMake build tree: <build>/python/stoke/experiments; its source dir is in CMakeCache.txt
        cache = c / "CMakeCache.txt"
        if cache.is_file():
            for line in cache.read_text(errors="replace").splitlines():
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    src = Path(line.split("=", 1)[1])
                    if (src / "tests" / "servers" / "launch.mjs").is_file():
                        return src
    raise RuntimeError("--storage azurite needs the object-store emulators of a stoke source checkout "
                       "(tests/servers, installed by scripts/bootstrap.sh): set STOKE_SOURCE_DIR to it, "
                       "or use --storage local")


class _Server:
    """One `node tests/servers/launch.mjs KIND ARGS` process, stopped by close()."""

    def __init__(self, servers: Path, kind: str, *args: str) -> None:
        if not (servers / "node_modules" / "azurite").is_dir():
            raise RuntimeError(f"{servers}/node_modules has no azurite: run scripts/bootstrap.sh "
                               "(or use --storage local)")
        self.kind = kind
        # stdin stays open: the launcher stops its server when it closes (if this process dies).
        self.proc = subprocess.Popen(["node", str(servers / "launch.mjs"), kind, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("READY") or not line:
                break
        if not line.startswith("READY"):
            err = self._stop()
            raise RuntimeError(f"the {kind} emulator did not start: {line.strip()!r} {err.strip()}")
        self.port = int(line.split()[1])

    def _stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f:
                f.close()
        return err

    def close(self) -> None:
        self._stop()


class EmulatedBlobStore:
    """Azurite behind the latency/bandwidth proxy, for `with` blocks: started on entry, stopped on
    exit (also when the block raises). While it runs, AZURE_STORAGE_CONNECTION_STRING in this
    process (and the children it starts) points at the proxy, so `az://container/path` URIs work
    in stoke, and `connection_string` serves the Azure SDK."""

    def __init__(self, latency_ms: float, bytes_per_s: float) -> None:
        self.latency_ms = float(latency_ms)
        self.bytes_per_s = float(bytes_per_s)
        self._servers: List[_Server] = []
        self._saved: Optional[str] = None
        self.port = 0

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
                f"BlobEndpoint=http://127.0.0.1:{self.port}/{AZURITE_ACCOUNT};")

    def __enter__(self) -> "EmulatedBlobStore":
        servers = source_dir() / "tests" / "servers"
        try:
            azurite = _Server(servers, "azurite")
            self._servers.append(azurite)
            proxy = _Server(servers, "proxy", str(azurite.port))
            self._servers.append(proxy)
            self.port = proxy.port
            self._saved = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
            os.environ["AZURE_STORAGE_CONNECTION_STRING"] = self.connection_string
            self.set_link(0, 0)  # writing the data set is not measured
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is None:
            os.environ.pop("AZURE_STORAGE_CONNECTION_STRING", None)
        else:
            os.environ["AZURE_STORAGE_CONNECTION_STRING"] = self._saved
        while self._servers:
            self._servers.pop().close()  # the proxy first, then Azurite

    def set_link(self, latency_ms: float, bytes_per_s: float) -> None:
        """Latency added to every read request (GET, HEAD) and the read bandwidth cap (0: none)."""
        query = urllib.parse.urlencode({"delay_ms": f"{latency_ms:.3f}", "bytes_per_s": f"{bytes_per_s:.0f}",
                                        "methods": "GET,HEAD"})
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/__fault/set?{query}", timeout=10) as r:
            r.read()

    def emulate(self) -> None:
        """Switches the configured latency and bandwidth on (after the data set is written)."""
        self.set_link(self.latency_ms, self.bytes_per_s)

    def stats(self) -> Dict[str, int]:
        """{"forwarded", "injected"}: requests the proxy forwarded since the last set_link."""
        import json
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/__fault/stats", timeout=10) as r:
            return json.loads(r.read())
