"""weft under MPICH's mpiexec (Hydra), installed beside Open MPI: the alternatives' own names
(mpiexec.mpich, mpiexec.hydra), never the shared "mpiexec".

    python3 tests/mpich/mpiexec_test.py BUILD_DIR

- the collective slice over tcp (tests' tcp_ranks) under mpiexec -n 2 and -n 4 with no WEFT_*
  variable: rank 0 hands its store's address out through Hydra's PMI-1 (PMI_FD), and describe()
  says so;
- the same with WEFT_STORE and WEFT_SECRET passed by -genv;
- the slice over shm (tests' shm_ranks) with nothing set;
- examples/shm_allreduce (no TCP store) with nothing set: rank 0 names a file store directory in
  /dev/shm through PMI, which is gone at the end;
- two hosts: 2 ranks in each of two network namespaces joined by a veth pair (Hydra's MPMD form,
  each rank started by `ip netns exec`), with nothing set: rank 0 hands out its host's name, which
  each namespace resolves (its /etc/netns/<name>/hosts) to rank 0's address on the link. Skipped,
  saying why, where namespaces cannot be made (not root, no iproute2).
Skipped, saying why, where MPICH is not installed. Ends with "N passed, N failed"."""
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys

SKIP = 77
build = os.path.abspath(sys.argv[1])
tcp_ranks = os.path.join(build, "tests", "tcp_ranks")
shm_ranks = os.path.join(build, "tests", "shm_ranks")
shm_example = os.path.join(build, "examples", "shm_allreduce")
passed, failed = [], []


def check(condition, what, detail=""):
    (passed if condition else failed).append(what)
    print(("ok   " if condition else "FAIL ") + what)
    if not condition and detail:
        print("     " + detail.strip().replace("\n", "\n     ")[-4000:])


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def two_hosts(launch, through_pmi):
    ip = shutil.which("ip")
    if ip is None or os.geteuid() != 0:
        print("SKIP part: network namespaces need root and iproute2 (ip); mpiexec across two hosts was not tested")
        return
    tag = "%x" % (os.getpid() & 0xffff)
    spaces = ["weft-ma-" + tag, "weft-mb-" + tag]
    links = ["wma" + tag, "wmb" + tag]
    addresses = ["198.18.7.1", "198.18.7.2"]
    host = socket.gethostname()
    try:
        steps = [[ip, "netns", "add", spaces[0]], [ip, "netns", "add", spaces[1]],
                 [ip, "link", "add", links[0], "type", "veth", "peer", "name", links[1]]]
        for space, link, address in zip(spaces, links, addresses):
            steps += [[ip, "link", "set", link, "netns", space],
                      [ip, "-n", space, "addr", "add", address + "/24", "dev", link],
                      [ip, "-n", space, "link", "set", link, "up"], [ip, "-n", space, "link", "set", "lo", "up"]]
        for step in steps:
            made = subprocess.run(step, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if made.returncode != 0:
                print("SKIP part: cannot make the namespaces (%s: %s); mpiexec across two hosts was not tested"
                      % (" ".join(step[1:]), made.stdout.strip()))
                return
        for space in spaces:  # what a cluster's name service says: rank 0's host is at its address
            os.makedirs("/etc/netns/" + space, exist_ok=True)
            with open("/etc/netns/%s/hosts" % space, "w") as hosts:
                hosts.write("127.0.0.1 localhost\n%s %s\n" % (addresses[0], host))
        code, text = launch(2, ip, "netns", "exec", spaces[0], tcp_ranks, "slice",
                            tail=[":", "-n", "2", ip, "netns", "exec", spaces[1], tcp_ranks, "slice"])
        check(code == 0 and text.count("slice ok on 4 ranks (MPICH)") == 4 and through_pmi in text
              and "tcp store at %s:" % host in text and "rank 0 listening on %s:" % addresses[0] in text,
              "mpiexec across two hosts (network namespaces, 2 ranks each), nothing set: met through PMI at "
              "rank 0's host name, the slice on every rank", text)
    finally:
        for space in spaces:
            subprocess.run([ip, "netns", "del", space], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            shutil.rmtree("/etc/netns/" + space, ignore_errors=True)


def main():
    mpiexec = shutil.which("mpiexec.mpich") or shutil.which("mpiexec.hydra")
    if mpiexec is None:
        print("SKIP: MPICH's mpiexec is not installed (Debian: mpich)")
        return SKIP
    if not os.access(tcp_ranks, os.X_OK):
        print("SKIP: %s is not built" % tcp_ranks)
        return SKIP
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WEFT_", "PMI", "OMPI_", "SLURM_"))}
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, env=env).stdout
    print("%s: %s" % (mpiexec, " ".join(re.findall(r"Version:\s+(\S+)", version)[:1]) or "version unknown"))

    def launch(ranks, *command, genv=(), tail=()):
        arguments = [mpiexec]
        for name, value in (("WEFT_VERBOSE", "1"), ("WEFT_TIMEOUT_MS", "60000")) + tuple(genv):
            arguments += ["-genv", name, value]
        result = subprocess.run(arguments + ["-n", str(ranks)] + list(command) + list(tail), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=180, env=env)
        return result.returncode, result.stdout

    through_pmi = "(from rank 0's choice, handed out through PMI)"
    for ranks in (2, 4):
        code, text = launch(ranks, tcp_ranks, "slice")
        check(code == 0 and text.count("slice ok on %d ranks (MPICH)" % ranks) == ranks and through_pmi in text,
              "mpiexec -n %d tcp_ranks slice, nothing set: met through PMI, the slice on every rank" % ranks, text)

    port = free_port()
    code, text = launch(4, tcp_ranks, "slice",
                        genv=(("WEFT_STORE", "127.0.0.1:%d" % port), ("WEFT_SECRET", secrets.token_hex(8))))
    check(code == 0 and text.count("slice ok on 4 ranks (MPICH)") == 4 and "127.0.0.1:%d" % port in text
          and through_pmi not in text,
          "mpiexec -n 4 -genv WEFT_STORE: met at the given store, the slice on every rank", text)

    if os.access(shm_ranks, os.X_OK):
        code, text = launch(4, shm_ranks, "slice")
        check(code == 0 and text.count("slice ok on 4 ranks (MPICH) over shared memory") == 4,
              "mpiexec -n 4 shm_ranks slice, nothing set: the shm slice on every rank", text)
    if os.access(shm_example, os.X_OK):
        before = set(os.listdir("/dev/shm"))
        code, text = launch(4, shm_example)
        named = re.findall(r"meeting: file store in (/dev/shm/job-PMI-[0-9a-f]+)", text)
        left = set(os.listdir("/dev/shm")) - before
        check(code == 0 and len(named) >= 1 and len(set(named)) == 1 and not os.path.exists(named[0])
              and not left,
              "mpiexec -n 4 examples/shm_allreduce (no TCP store), nothing set: rank 0 names a directory in "
              "/dev/shm through PMI, removed at the end", text + "\nleft in /dev/shm: %s" % sorted(left))
    else:
        print("(examples/shm_allreduce is not built: examples disabled)")
    two_hosts(launch, through_pmi)
    print("%d passed, %d failed" % (len(passed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
