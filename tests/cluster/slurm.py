"""A Slurm cluster on the namespace test cluster (cluster.py): munged (its own key and socket),
slurmctld in the "head" member, slurmd in every node, all configured under one directory and
stopped with the cluster.

    with Cluster(tmp, nodes=2, head=True) as c:
        s = Slurm(c)
        job = s.sbatch(script_path, "--array=0-3")
        s.wait(job)

Debian's slurm-wlm and munge provide the daemons; available() says when they are missing. Nothing
is written outside the cluster's directory: commands find the configuration through $SLURM_CONF.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

from cluster import Cluster


def available() -> Optional[str]:
    """None where Slurm and munge are installed, else what is missing."""
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sacct"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"the Slurm tests need '{tool}' (Debian's slurm-wlm and munge: run scripts/bootstrap.sh)"
    return None


def _sbin(tool: str) -> str:
    return shutil.which(tool) or f"/usr/sbin/{tool}"


class Slurm:
    """munged, slurmctld and one slurmd per node, started at construction."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.dir = cluster.root / "slurm"
        self.dir.mkdir(mode=0o700, exist_ok=True)
        self.socket = self.dir / "munge.socket"
        self.conf = self.dir / "slurm.conf"
        self._start_munge()
        self._write_conf()
        self._start_daemons()

    def env(self, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """base (default os.environ) with SLURM_CONF pointing at this cluster's configuration."""
        e = dict(base if base is not None else os.environ)
        e["SLURM_CONF"] = str(self.conf)
        return e

    def _start_munge(self) -> None:
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        subprocess.run([_sbin("munged"), "--force", f"--socket={self.socket}", f"--key-file={key}",
                        f"--pid-file={self.dir / 'munged.pid'}", f"--log-file={self.dir / 'munged.log'}",
                        f"--seed-file={self.dir / 'munged.seed'}"], check=True, timeout=30,
                       capture_output=True, text=True)
        self.cluster.on_close(self._stop_munge)

    def _stop_munge(self) -> None:
        subprocess.run([_sbin("munged"), "--stop", f"--socket={self.socket}"], capture_output=True, timeout=30)

    def _write_conf(self) -> None:
        c = self.cluster
        nodes = "\n".join(f"NodeName={m.name} NodeAddr={m.addr} CPUs=2 State=UNKNOWN" for m in c.nodes)
        for m in c.nodes:
            (self.dir / m.name).mkdir(exist_ok=True)
        (self.dir / "state").mkdir(exist_ok=True)
        (self.dir / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
        self.conf.write_text(f"""\
ClusterName=stoke
SlurmctldHost={c.head.name}({c.head.addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
StateSaveLocation={self.dir / 'state'}
SlurmdSpoolDir={self.dir}/%n
SlurmctldPidFile={self.dir / 'slurmctld.pid'}
SlurmdPidFile={self.dir}/%n/slurmd.pid
SlurmctldLogFile={self.dir / 'slurmctld.log'}
SlurmdLogFile={self.dir}/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=2
{nodes}
PartitionName=test Nodes={','.join(m.name for m in c.nodes)} Default=YES MaxTime=INFINITE State=UP
""")

    def _start_daemons(self) -> None:
        env = self.env()
        self.cluster.head.start([_sbin("slurmctld"), "-D", "-i", "-f", self.conf], env=env, log="slurmctld")
        # slurmd initialises a cgroup plugin whatever the configuration; `ip netns exec` mounted a
        # /sys of the namespace without cgroups: mount the v1 freezer hierarchy for it (in its
        # process's own mount namespace, so nothing of the host changes).
        cgroups = ("mount -t tmpfs stoke-cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/freezer && "
                   "mount -t cgroup -o freezer stoke-cgroup /sys/fs/cgroup/freezer && exec \"$@\"")
        for m in self.cluster.nodes:
            m.start(["sh", "-c", cgroups, "slurmd", _sbin("slurmd"), "-D", "-N", m.name, "-f", self.conf], env=env,
                    log="slurmd")
        self._wait_idle()

    def _wait_idle(self, timeout: float = 60) -> None:
        """Waits until every node is idle (registered with slurmctld)."""
        deadline = time.monotonic() + timeout
        out = ""
        while time.monotonic() < deadline:
            r = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False)
            out = r.stdout + r.stderr
            states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
            if r.returncode == 0 and all(states.get(m.name) == "idle" for m in self.cluster.nodes):
                return
            time.sleep(0.2)
        log = self.dir / "slurmctld.log"
        logs = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        raise AssertionError(f"the Slurm nodes did not come up in {timeout} s: {out}\n{logs}")

    def run(self, argv: List[object], env: Optional[Dict[str, str]] = None, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess:
        """A Slurm command, run in the head member."""
        return self.cluster.head.run(argv, env=self.env(env), check=check, timeout=timeout)

    def sbatch(self, *args: object, env: Optional[Dict[str, str]] = None) -> str:
        """Submits a batch job; returns its id."""
        r = self.run(["sbatch", "--parsable", *args], env=env)
        return r.stdout.strip().split(";")[0]

    def wait(self, job: str, timeout: float = 180) -> None:
        """Waits until job (all its array tasks) left the queue."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.run(["squeue", "-h", "-j", job, "-o", "%i %T"], check=False)
            if r.returncode == 0 and not r.stdout.strip():
                return
            time.sleep(0.2)
        raise AssertionError(f"job {job} still queued after {timeout} s: {r.stdout}")

    def states(self, job: str) -> Dict[str, str]:
        """{job or array task id: state} from the controller (kept MinJobAge seconds after the end)."""
        r = self.run(["scontrol", "-o", "show", "job", job])
        out = {}
        for line in r.stdout.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            task = fields.get("ArrayTaskId")
            key = f"{fields['ArrayJobId']}_{task}" if task else fields["JobId"]
            out[key] = fields["JobState"]
        return out
