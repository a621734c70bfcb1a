"""A test cluster of network namespaces, made and torn down by the tests that use it.

    with Cluster(tmp_path, nodes=2) as c:
        c.start_storage()                      # s3rver and a fault proxy per node, in "storage"
        c.node(1).run(["stoke", "query", ...], env=c.s3_env(1))

Layout (every address is link-local, 169.254.0.0/16, and exists only inside these namespaces):

    <p>-hub       a bridge (br0) joining one veth per member; nothing else
    <p>-storage   169.254.10.1, host name "storage": s3rver (and Azurite) on its own loopback, reached
                  only through one fault proxy per node and store (latency, 503s, resets, bandwidth,
                  per node request logs)
    <p>-head      169.254.10.2, host name "head" (with head=True): a scheduler's machine
    <p>-node<i>   169.254.10.(10+i), host name "node<i>": its own local directory (its disk and read
                  cache), its own host name (a UTS namespace) and /etc/hosts naming every member;
                  optionally its own wall clock (clock_offset_s: libfaketime shifts CLOCK_REALTIME
                  of the processes started with s3_env; a time namespace shifts only the monotonic
                  and boot clocks)

<p> is "stk" and this process's id, so clusters of concurrent test runs never meet. Processes run in
a member through `ip netns exec`, then `unshare --uts --mount`, which sets the host name and binds
the cluster's hosts file over /etc/hosts for that process tree only. Every wait is bounded; close()
kills what still runs in the namespaces and deletes them.

Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), `ip` and `unshare`: available() says whether this
machine can make namespaces, and why not.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "tests" / "servers" / "launch.mjs"
STOKE_BIN = os.environ.get("STOKE_BIN") or str(REPO / "build" / "stoke")
STOKE_PYTHONPATH = os.environ.get("STOKE_PYTHONPATH") or str(REPO / "build" / "python")
PYTHON = "/usr/bin/python3"  # Debian's, with torch
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"  # Debian's faketime
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
               "K1SZFPTOtr/KBHBeksoGMGw==")  # Azurite's published development key, not a secret
SUBNET = "169.254.10"
STORAGE_ADDR = f"{SUBNET}.1"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def available() -> Optional[str]:
    """None where namespaces can be made here, else why not (for a visible skip)."""
    if not Path(STOKE_BIN).is_file() or not list(Path(STOKE_PYTHONPATH).glob("stoke/_stoke*.so")):
        return f"the cluster tests need stoke built ({STOKE_BIN} and the module in {STOKE_PYTHONPATH})"
    if not (REPO / "tests" / "servers" / "node_modules" / "s3rver").is_dir():
        return "the cluster tests need the emulators of tests/servers (run scripts/bootstrap.sh)"
    if os.geteuid() != 0:
        return "the cluster tests need root to make network namespaces"
    for tool in ("ip", "unshare", "node"):
        if shutil.which(tool) is None:
            return f"the cluster tests need '{tool}'"
    probe = f"stkprobe{os.getpid()}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"cannot make a network namespace here: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def kill_namespace_processes(netns: str, sig: int = signal.SIGKILL) -> None:
    """Sends sig to every process of the network namespace `netns`."""
    for pid in _ip("netns", "pids", netns, check=False).stdout.split():
        try:
            os.kill(int(pid), sig)
        except (ProcessLookupError, ValueError):
            pass


def remove_stale_namespaces() -> None:
    """Deletes the namespaces of clusters whose test process is gone (one killed before its
    close(); "stk<pid>-<member>"), with what still runs in them."""
    r = _ip("netns", "list", check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(r"stk(\d+)-\w+", name)
        if not m or Path(f"/proc/{m.group(1)}").exists():
            continue
        kill_namespace_processes(name)
        _ip("netns", "del", name, check=False)


class Member:
    """One namespace of the cluster: a node or the storage."""

    def __init__(self, cluster: "Cluster", name: str, addr: str) -> None:
        self.cluster, self.name, self.addr = cluster, name, addr
        self.netns = f"{cluster.prefix}-{name}"
        self.dir = cluster.root / name  # its local disk
        self.procs: List[subprocess.Popen] = []
        self.clock_offset_s = 0.0  # this node's wall clock against the host's (see module docstring)

    def command(self, argv: Sequence[str]) -> List[str]:
        """argv run in this member: its network, its host name, the cluster's /etc/hosts."""
        setup = 'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"'
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "--mount", "sh", "-c", setup,
                self.name, str(self.cluster.hosts_file), *map(str, argv)]

    def run(self, argv: Sequence[str], env: Optional[Dict[str, str]] = None, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess:
        """Runs argv here to its end (at most `timeout` s) and returns it; check: fail on a non-zero exit."""
        r = subprocess.run(self.command(argv), capture_output=True, text=True, env=env, timeout=timeout,
                           cwd=REPO)
        if check and r.returncode != 0:
            raise AssertionError(f"{self.name}: {' '.join(map(str, argv))} exited {r.returncode}:\n"
                                 f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        return r

    def start(self, argv: Sequence[str], env: Optional[Dict[str, str]] = None, log: Optional[str] = None,
              **kw) -> subprocess.Popen:
        """Starts argv here in its own process group (killed by the cluster's close()). Its stdout and
        stderr are pipes for the caller to read, or with `log` (a daemon nobody reads: a full pipe
        would stop it) both go to <member dir>/<log>.log."""
        if log is not None:
            with open(self.dir / f"{log}.log", "ab") as f:
                return self._popen(argv, env, stdout=f, stderr=subprocess.STDOUT, **kw)
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        return self._popen(argv, env, **kw)

    def _popen(self, argv: Sequence[str], env: Optional[Dict[str, str]], **kw) -> subprocess.Popen:
        p = subprocess.Popen(self.command(argv), env=env, cwd=REPO, text=True, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def kill_all(self, sig: int = signal.SIGKILL) -> None:
        """Sends sig to every process of this member's namespace (what a dying machine does to them)."""
        kill_namespace_processes(self.netns, sig)

    def link(self, up: bool) -> None:
        """Connects or cuts this member's network link (its port on the hub's bridge)."""
        _ip("-n", self.cluster.hub, "link", "set", f"v-{self.name}", "up" if up else "down")


class Server:
    """A process of tests/servers/launch.mjs in a member, and the port it printed ("READY <port>")."""

    def __init__(self, member: Member, *args: str) -> None:
        self.proc = member.start(["node", str(LAUNCHER), *args], stdin=subprocess.PIPE)
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("READY") or not line:
                break
        if not line.startswith("READY"):
            raise AssertionError(f"{args[0]} did not start in {member.name}: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.split()[1])


class Cluster:
    """The namespaces of one test run; a context manager that deletes them on exit."""

    def __init__(self, root: Path, nodes: int = 2, head: bool = False) -> None:
        self.root = Path(root)
        self.prefix = f"stk{os.getpid()}"
        self.hub = f"{self.prefix}-hub"
        self.storage = Member(self, "storage", STORAGE_ADDR)
        self.nodes = [Member(self, f"node{i}", f"{SUBNET}.{10 + i}") for i in range(1, nodes + 1)]
        self.head = Member(self, "head", f"{SUBNET}.2") if head else None  # a scheduler's machine
        self._on_close: List[Callable[[], None]] = []
        self.hosts_file = self.root / "hosts"
        self.proxies: Dict[Tuple[str, str], Server] = {}  # (backend, member name) -> its proxy
        self.s3: Optional[Server] = None
        self.azurite: Optional[Server] = None
        self._made: List[str] = []

    def __enter__(self) -> "Cluster":
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def node(self, i: int) -> Member:
        """Node i (1-based)."""
        return self.nodes[i - 1]

    def members(self) -> List[Member]:
        return [self.storage, *self.nodes, *([self.head] if self.head else [])]

    def on_close(self, stop: Callable[[], None]) -> None:
        """Runs stop() at close(), before the namespaces go (last registered, first run)."""
        self._on_close.append(stop)

    def _make(self) -> None:
        remove_stale_namespaces()
        self.root.mkdir(parents=True, exist_ok=True)
        lines = ["127.0.0.1 localhost"] + [f"{m.addr} {m.name}" for m in self.members()]
        self.hosts_file.write_text("\n".join(lines) + "\n")
        self._netns(self.hub)
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        for m in self.members():
            m.dir.mkdir(parents=True, exist_ok=True)
            self._netns(m.netns)
            _ip("link", "add", "name", f"v-{m.name}", "netns", self.hub, "type", "veth",
                "peer", "name", "eth0", "netns", m.netns)
            _ip("-n", self.hub, "link", "set", f"v-{m.name}", "master", "br0", "up")
            _ip("-n", m.netns, "addr", "add", f"{m.addr}/24", "dev", "eth0")
            _ip("-n", m.netns, "link", "set", "eth0", "up")
            _ip("-n", m.netns, "link", "set", "lo", "up")

    def _netns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made.append(name)

    def _wait_reachable(self, member: Member, ports: Sequence[int]) -> None:
        """Waits (at most 10 s) until `member` connects to each of the storage's `ports`."""
        probe = ("import socket, sys, time\n"
                 "deadline = time.monotonic() + 10\n"
                 "for port in map(int, sys.argv[2:]):\n"
                 "    while True:\n"
                 "        try:\n"
                 "            socket.create_connection((sys.argv[1], port), timeout=1).close(); break\n"
                 "        except OSError as e:\n"
                 "            if time.monotonic() > deadline: sys.exit(f'cannot reach {sys.argv[1]}:{port}: {e}')\n"
                 "            time.sleep(0.05)\n")
        member.run([PYTHON, "-c", probe, STORAGE_ADDR, *ports], timeout=20)

    # -- storage

    def clients(self) -> List[Member]:
        """The members that reach the storage: the nodes, and the head when there is one."""
        return [*self.nodes, *([self.head] if self.head else [])]

    def start_storage(self, azurite: bool = False) -> None:
        """s3rver (and Azurite) on the storage's loopback, each reached through one fault proxy per
        client member on the storage's address."""
        self.s3 = Server(self.storage, "s3rver")
        self.azurite = Server(self.storage, "azurite") if azurite else None
        for backend, server in (("s3", self.s3), ("az", self.azurite)):
            if server is None:
                continue
            for m in self.clients():
                self.proxies[(backend, m.name)] = Server(self.storage, "proxy", str(server.port), STORAGE_ADDR)
        for m in self.clients():
            self._wait_reachable(m, [p.port for (_, name), p in self.proxies.items() if name == m.name])

    def _client_env(self, member: Member, base: Optional[Dict[str, str]]) -> Dict[str, str]:
        """base (default os.environ) without any store's settings, with member's clock."""
        env = {k: v for k, v in (base or os.environ).items() if not k.startswith(("AZURE_", "AWS_", "STOKE_SINGLE"))}
        if member.clock_offset_s:
            if not Path(FAKETIME_LIB).is_file():
                raise AssertionError(f"a node's clock offset needs {FAKETIME_LIB} (Debian's faketime)")
            env.update(LD_PRELOAD=FAKETIME_LIB, FAKETIME=f"{member.clock_offset_s:+g}s",
                       FAKETIME_DONT_FAKE_MONOTONIC="1")
        return env

    def s3_env(self, node: Member, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """The environment of a process on `node` that reaches the S3 emulator through its proxy."""
        env = self._client_env(node, base)
        env.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER", AWS_REGION="us-east-1",
                   AWS_ENDPOINT_URL=f"http://{STORAGE_ADDR}:{self.proxies[('s3', node.name)].port}",
                   STOKE_SINGLE_WRITER="1")  # s3rver ignores conditional writes: one writer at a time
        return env

    def az_env(self, node: Member, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """The environment of a process on `node` that reaches Azurite through its proxy (Azurite
        honours conditional writes: writers on several nodes may commit at once)."""
        env = self._client_env(node, base)
        port = self.proxies[("az", node.name)].port
        env["AZURE_STORAGE_CONNECTION_STRING"] = (
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={AZURITE_KEY};BlobEndpoint=http://{STORAGE_ADDR}:{port}/devstoreaccount1;")
        return env

    def proxy(self, node: Member, what: str, backend: str = "s3") -> object:
        """GET /__fault/<what> of the node's proxy to `backend` ("s3" or "az"), asked from the storage
        namespace; JSON-decoded ("set?..." answers "ok", returned as is)."""
        url = f"http://{STORAGE_ADDR}:{self.proxies[(backend, node.name)].port}/__fault/{what}"
        script = ("import urllib.request, sys\n"
                  f"sys.stdout.write(urllib.request.urlopen({url!r}, timeout=10).read().decode())")
        r = subprocess.run(["ip", "netns", "exec", self.storage.netns, PYTHON, "-c", script],
                           capture_output=True, text=True, timeout=30, check=True)
        return r.stdout if what.startswith("set") else json.loads(r.stdout)

    def torchrun(self, nodes: Sequence[Member], argv: Callable[[Member], Sequence[object]], nproc: int = 2,
                 run_id: str = "job", nnodes: Optional[str] = None,
                 env: Optional[Dict[str, str]] = None, extra: Sequence[str] = ()) -> List[subprocess.Popen]:
        """Starts `torchrun` of argv(node) on each of `nodes` (one agent per node, nproc processes each),
        meeting through c10d rendezvous on the first node; gloo runs over the nodes' eth0. nnodes:
        torchrun's --nnodes (default: as many as `nodes`; "MIN:MAX" for elastic jobs). Each
        node's process environment is s3_env(node) with the stoke package importable, plus `env`.
        extra: more torchrun options (e.g. --max_restarts)."""
        procs = []
        for m in nodes:
            e = self.s3_env(m)
            e.update(PYTHONPATH=STOKE_PYTHONPATH, GLOO_SOCKET_IFNAME="eth0", **(env or {}))
            # --redirects 2 --tee 2: torch 1.13's torchrun cannot parse its own default under Python 3.11.
            cmd = [PYTHON, "-m", "torch.distributed.run", "--nnodes", nnodes or str(len(nodes)), "--nproc_per_node",
                   str(nproc), "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{nodes[0].name}:29400",
                   "--rdzv_id", run_id, "--monitor_interval", "0.2", "--redirects", "2", "--tee", "2",
                   *extra, *map(str, argv(m))]
            procs.append(m.start(cmd, env=e))
        return procs

    # -- teardown

    def close(self) -> None:
        """Stops every process started here, kills what is left in the namespaces, deletes them."""
        while self._on_close:
            try:
                self._on_close.pop()()
            except Exception:  # noqa: BLE001 - teardown goes on
                pass
        for m in self.members():
            for p in m.procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            for p in m.procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(timeout=10)
        for name in reversed(self._made):
            kill_namespace_processes(name)
            _ip("netns", "del", name, check=False)
        self._made.clear()
