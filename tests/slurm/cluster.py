"""A one-node Slurm cluster on this machine, for the tests: munge with a key of its own, slurmctld
and slurmd with a generated slurm.conf (this node's real CPUs and memory, one partition that
overcommits), state and logs in a temporary directory; everything stopped at the end, and on
failure.

    with cluster.one_node() as slurm:
        if not slurm:                  # the daemons could not start here: slurm.reason says why
            ...
        slurm.srun("-n", "2", "-O", program)   # a CompletedProcess

Needs Debian's slurm-wlm and munge (scripts/ensure-packages installs them) and root (the
daemons run as root, as slurm.conf's SlurmUser says)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


class one_node:
    def __init__(self, timeout=30.0):
        self.timeout = timeout
        self.reason = ""
        self.processes = []
        self.directory = None
        self.env = None

    def __bool__(self):
        return not self.reason

    # --- starting ------------------------------------------------------------------------------

    def __enter__(self):
        try:
            self._start()
        except Exception as failure:  # noqa: BLE001 - any failure to start is a reason to skip
            self.reason = self.reason or str(failure)
            self._stop()
        return self

    def _missing(self):
        for tool in ("munged", "slurmctld", "slurmd", "srun", "sinfo"):
            if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool):
                return "%s is not installed (Debian: slurm-wlm, munge)" % tool
        if os.geteuid() != 0:
            return "the Slurm daemons need root"
        return ""

    def _start(self):
        self.reason = self._missing()
        if self.reason:
            return
        self.directory = tempfile.mkdtemp(prefix="weft-slurm-")
        os.chmod(self.directory, 0o755)
        d = self.directory
        for sub in ("munge", "state", "spool", "log"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        # munge: a key of this cluster's own, its socket in the directory, run as munge
        munge = os.path.join(d, "munge")
        key = os.path.join(munge, "munge.key")
        with open(key, "wb") as out:
            out.write(os.urandom(1024))
        shutil.chown(munge, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        os.chmod(key, 0o400)
        os.chmod(munge, 0o700)
        socket_path = os.path.join(munge, "munge.socket")
        munged = [self._tool("munged"), "--foreground", "--key-file", key, "--socket", socket_path,
                  "--pid-file", os.path.join(munge, "munged.pid"), "--log-file", os.path.join(d, "log", "munged.log"),
                  "--seed-file", os.path.join(munge, "munged.seed"), "--force"]
        self.processes.append(subprocess.Popen(["runuser", "-u", "munge", "--"] + munged,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        self._wait_for(lambda: os.path.exists(socket_path), "munged's socket")
        # slurm.conf: this node, its real CPUs and memory, a partition that overcommits
        host = socket.gethostname().split(".")[0]
        cpus = os.cpu_count() or 1
        memory_mb = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 20)) - 512
        port = self._free_ports(2)
        conf = os.path.join(d, "slurm.conf")
        with open(conf, "w") as out:
            out.write("\n".join([
                "ClusterName=weft-test",
                "SlurmctldHost=%s" % host,
                "SlurmctldPort=%d" % port[0],
                "SlurmdPort=%d" % port[1],
                "AuthType=auth/munge",
                "AuthInfo=socket=%s" % socket_path,
                "CredType=cred/munge",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "SlurmUser=root",
                "SlurmdUser=root",
                "ReturnToService=2",
                "MpiDefault=none",
                "JobAcctGatherType=jobacct_gather/none",
                "StateSaveLocation=%s" % os.path.join(d, "state"),
                "SlurmdSpoolDir=%s" % os.path.join(d, "spool"),
                "SlurmctldPidFile=%s" % os.path.join(d, "slurmctld.pid"),
                "SlurmdPidFile=%s" % os.path.join(d, "slurmd.pid"),
                "SlurmctldLogFile=%s" % os.path.join(d, "log", "slurmctld.log"),
                "SlurmdLogFile=%s" % os.path.join(d, "log", "slurmd.log"),
                "NodeName=%s CPUs=%d RealMemory=%d State=UNKNOWN" % (host, cpus, max(memory_mb, 256)),
                "PartitionName=test Nodes=%s Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" % host,
                ""]))
        self.env = dict(os.environ, SLURM_CONF=conf)
        for name in list(self.env):
            if name.startswith(("SLURM_", "WEFT_", "PMIX_", "OMPI_")) and name != "SLURM_CONF":
                del self.env[name]
        for daemon in ("slurmctld", "slurmd"):
            self.processes.append(subprocess.Popen([self._tool(daemon), "-D", "-f", conf], env=self.env,
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        self._wait_for(self._node_idle, "the node idle in sinfo")

    def _tool(self, name):
        return shutil.which(name) or "/usr/sbin/" + name

    @staticmethod
    def _free_ports(count):
        sockets = [socket.socket() for _ in range(count)]
        try:
            for s in sockets:
                s.bind(("", 0))
            return [s.getsockname()[1] for s in sockets]
        finally:
            for s in sockets:
                s.close()

    def _node_idle(self):
        result = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True,
                                timeout=10)
        return result.returncode == 0 and result.stdout.strip() in ("idle", "mix", "alloc")

    def _wait_for(self, ready, what):
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError("a daemon exited (code %s) while waiting for %s; logs in %s"
                                       % (process.returncode, what, self.directory))
            try:
                if ready():
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            time.sleep(0.2)
        raise RuntimeError("no %s within %.0f s; logs in %s" % (what, self.timeout, self.directory))

    # --- using ---------------------------------------------------------------------------------

    def run(self, *command, timeout=120, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        return subprocess.run(list(command), env=env, capture_output=True, text=True, timeout=timeout)

    def srun(self, *args, timeout=120, extra_env=None):
        return self.run("srun", *args, timeout=timeout, extra_env=extra_env)

    def logs(self):
        text = ""
        for name in ("slurmctld.log", "slurmd.log"):
            path = os.path.join(self.directory or "", "log", name)
            if os.path.exists(path):
                with open(path, errors="replace") as log:
                    text += "--- %s (last lines)\n%s" % (name, "".join(log.readlines()[-20:]))
        return text

    # --- stopping ------------------------------------------------------------------------------

    def __exit__(self, *failure):
        self._stop()
        return False

    def _stop(self):
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes = []
        if self.directory and not os.environ.get("WEFT_KEEP_SLURM"):
            shutil.rmtree(self.directory, ignore_errors=True)
