"""A one-node Slurm cluster in a folder (munged, slurmctld and slurmd from Debian's
slurm-wlm), for tests; installed with apt where it is missing and that is allowed."""

import os
import shutil
import socket
import stat
import subprocess
import time

PACKAGES = ["slurm-wlm", "munge"]
DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")


def missing_reason() -> str | None:
    """Why no cluster can be started here, or None."""
    if os.geteuid() != 0:
        return "starting slurmctld and slurmd as a test needs root"
    if all(os.path.exists(d) for d in DAEMONS) and shutil.which("sbatch"):
        return None
    if not shutil.which("apt-get"):
        return "slurm-wlm is not installed and there is no apt-get to install it"
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(install, capture_output=True, env=env).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env)
        if subprocess.run(install, capture_output=True, env=env).returncode != 0:
            return "apt-get could not install slurm-wlm and munge (no network or no Debian archive?)"
    return None


GPUS = 2  # GPUs the node declares, so that slurmctld validates and hands out a GPU request


def _gres_conf(folder: str, host: str) -> str:
    """The node's GPUs: stand-in device nodes (copies of /dev/null), as slurmd drops a GPU without
    a File. Tasks get CUDA_VISIBLE_DEVICES; what runs on this machine's own GPUs, if any, is
    unchanged (task/none binds no device)."""
    for index in range(GPUS):
        path = os.path.join(folder, f"gpu{index}")
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:  # no CAP_MKNOD: slurmd logs that a plain file is no device, and counts it
            open(path, "w").close()
    return f"NodeName={host} Name=gpu File={folder}/gpu[0-{GPUS - 1}]\n"


def _conf(folder: str, host: str) -> str:
    return f"""ClusterName=grading
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge/socket
MpiDefault=none
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ReturnToService=2
GresTypes=gpu
NodeName={host} CPUs={os.cpu_count()} Gres=gpu:{GPUS} State=UNKNOWN
PartitionName=grading Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    def __init__(self, folder: str):
        self.folder, self.host = folder, socket.gethostname().split(".")[0]
        self.conf = os.path.join(folder, "slurm.conf")

    def start(self) -> None:
        munge = os.path.join(self.folder, "munge")
        for sub in ("munge", "state", "spool"):
            os.makedirs(os.path.join(self.folder, sub), mode=0o700)
        key = os.path.join(munge, "munge.key")
        with open(key, "wb") as handle:
            handle.write(os.urandom(1024))
        os.chmod(key, 0o400)
        subprocess.run(
            [
                "/usr/sbin/munged",
                "--force",
                f"--key-file={key}",
                f"--socket={munge}/socket",
                f"--pid-file={munge}/pid",
                f"--log-file={munge}/log",
                f"--seed-file={munge}/seed",
            ],
            check=True,
        )
        with open(self.conf, "w") as handle:
            handle.write(_conf(self.folder, self.host))
        with open(os.path.join(self.folder, "gres.conf"), "w") as handle:  # read beside slurm.conf
            handle.write(_gres_conf(self.folder, self.host))
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run([f"/usr/sbin/{daemon}", "-f", self.conf], check=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=self.env()).stdout
            if state.strip() == "idle":
                return
            time.sleep(1)
        raise RuntimeError(f"the node never became idle: see {self.folder}/slurmd.log and slurmctld.log")

    def env(self) -> dict:
        return {**os.environ, "SLURM_CONF": self.conf}

    def stop(self) -> None:
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munge/pid"):
            try:
                with open(os.path.join(self.folder, pid_file)) as handle:
                    os.kill(int(handle.read().strip()), 15)
            except (OSError, ValueError):
                pass
