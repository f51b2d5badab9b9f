#!/usr/bin/env python3
"""Multi-process tests of a transport: real processes, real sockets and shared memory, bounded in
time. RANKS_PROGRAM is the transport's build of ranks.hpp (tcp_ranks, ofi_ranks, shm_ranks).

    multiprocess.py SCENARIO RANKS_PROGRAM WEFT_RUN

weft-run   the collective slice on 2, 3 and 4 processes under weft-run, and weft-run's own
           behaviour: rank prefixes, a failing rank, a killed rank, --timeout, --bind-to
failures   ranks started by hand from the environment: meeting through a file store, a rank
           killed mid-collective, a rank that closes its transport, a rank later than the
           others' timeout, a rank whose forked child exits, two processes as one rank, a rank
           killed at start-up before the others have met, a rank that never starts, a store that never comes, a wrong secret
mpirun     the slice under Open MPI's mpirun --oversubscribe (skipped without mpirun)
netns      two ranks in separate network namespaces joined by a veth pair (skipped where
           namespaces cannot be made)
ofi        (with ofi_ranks) the libfabric transport on shm, tcp;ofi_rxm, sockets and net,
           ranks killed mid-allreduce, mid-alltoall and mid-broadcast on shm, tcp;ofi_rxm and
           sockets with the default timeout (every survivor must know within 10 s), and one
           killed at start-up, before the others have met, on the same providers; a rank later
           than the timeout, on shm one killed while it copies a large message (holding its
           region's lock), an unknown provider
hierarchical (with hierarchical_ranks) a tiered world, shared memory within each host and TCP
           between hosts: hosts named by WEFT_HOST on this machine (2 x 2 ranks, interleaved;
           and 2 + 1 ranks with no node-local transport, over TCP alone),
           then hosts as network namespaces joined by a bridge (2 x 2 interleaved, 3 hosts of
           1, 2 and 3 ranks), every hierarchical collective against the reference, and a rank
           killed on one host named by every survivor on every host (namespaces skipped where
           they cannot be made)
hierarchical-bench  (with hierarchical_ranks; not a test) hierarchical against flat allreduce on
           2 hosts x 2 ranks whose links tc shapes (WEFT_BENCH_SHAPE, WEFT_BENCH_BYTES, WEFT_BENCH_HOSTS)
shm        (with shm_ranks) the shared-memory transport: the slice on 2, 3, 4 and 8 processes
           under weft-run (and 3 under mpirun where installed), ranks killed mid-allreduce,
           mid-alltoall and mid-broadcast with the default timeout, one killed before the others
           have met, a rank later than the timeout, a rank that never starts, and nothing left
           in /dev/shm
stream     (with stream_ranks) the stream-ordered protocol between processes on host threads: the
           slice on 2, 3 and 4 processes under weft-run, collectives on pool buffers, a rank
           killed mid-allreduce (peer_lost naming it within a second), one that closes its transport,
           one killed before the others have met, a rank that never issues its call (the others'
           synchronize names it), nothing left in /dev/shm

Exits 0 when every check passed, 1 otherwise, 77 (skip) with the reason when the scenario
cannot run on this machine.
"""
import glob
import importlib.machinery
import importlib.util
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
failures = []


def check(condition, what, detail=""):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     ")[:4000])


def free_port():
    """A port for a job's store, chosen as weft-run chooses its own (tools/weft-run's free_port,
    loaded from the script main() was given)."""
    return weft_run_module.free_port()


weft_run_module = None


def run(command, timeout, env=None):
    started = time.monotonic()
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                                env=env, text=True)
        return result.returncode, result.stdout, time.monotonic() - started
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout or ""
        return None, output if isinstance(output, str) else output.decode(errors="replace"), timeout


def rank_environment(rank, size, port, timeout_ms, extra=None):
    env = dict(os.environ)
    env.update({"WEFT_RANK": str(rank), "WEFT_SIZE": str(size), "WEFT_STORE": "127.0.0.1:%d" % port,
                "WEFT_SECRET": "multiprocess-test", "WEFT_TIMEOUT_MS": str(timeout_ms)})
    env.update(extra or {})
    return env


def start_ranks(ranks, size, command, timeout_ms, port=None, extra=None):
    """Starts the given ranks by hand; `extra` is more environment: a dict, or rank -> dict."""
    port = port or free_port()
    more = extra if callable(extra) else (lambda rank: extra)
    return {rank: subprocess.Popen(command, env=rank_environment(rank, size, port, timeout_ms, more(rank)),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for rank in ranks}


def tcp_sockets(state):
    """{inode: (local port, remote port)} of this network namespace's TCP sockets in `state`
    (/proc/net/tcp's hex code: "0A" listening, "01" established)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == state:
                found[fields[9]] = (int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16))
    return found


def socket_inodes(process):
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % process.pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (process.pid, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    except OSError:
        pass
    return inodes


def wait_for_store(process, port, serving, timeout=30.0, connections=1):
    """Waits until `process` serves the store at `port` (serving) or holds `connections`
    connections to it, rather than guessing how long a loaded machine takes to start a process;
    False if it did not in `timeout` seconds or ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        sockets = tcp_sockets("0A" if serving else "01")
        mine = socket_inodes(process)
        held = sum(1 for inode, (local, remote) in sockets.items()
                   if inode in mine and (local if serving else remote) == port)
        if held >= (1 if serving else connections):
            return True
        time.sleep(0.02)
    return False


def collect(processes, timeout):
    """Waits for every process (killing what outlives the timeout); returns {rank: (code, output)}."""
    deadline = time.monotonic() + timeout
    results = {}
    for rank, process in processes.items():
        try:
            output, _ = process.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results[rank] = (process.returncode, output)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
            results[rank] = (None, output)
    return results


def said_once(ranks_program, weft_run, label, transport_words):
    """WEFT_VERBOSE=1: rank 0 says once what the job runs on (ranks, launcher, transport,
    meeting); without it nothing is said."""
    env = dict(os.environ, WEFT_VERBOSE="1", WEFT_TIMEOUT_MS="60000")
    code, output, _ = run([sys.executable, weft_run, "-n", "2", "--", ranks_program, "slice"], timeout=300, env=env)
    lines = [line for line in output.splitlines() if "weft: 2 ranks, launcher weft; transport: " in line]
    check(code == 0 and len(lines) == 1 and lines[0].startswith("[0]") and transport_words in lines[0]
          and "meeting: tcp store at 127.0.0.1:" in lines[0],
          "%s, WEFT_VERBOSE=1: rank 0 says once what the job runs on (%s)" % (label, lines[0] if lines else "nothing"),
          output)
    env["WEFT_VERBOSE"] = "0"
    code, output, _ = run([sys.executable, weft_run, "-n", "2", "--", ranks_program, "slice"], timeout=300, env=env)
    check(code == 0 and "transport: " not in output, "%s, WEFT_VERBOSE=0: nothing is said" % label, output)


def scenario_weft_run(ranks_program, weft_run):
    for size in (2, 3, 4):
        code, output, took = run([sys.executable, weft_run, "-n", str(size), "--timeout", "240", "--",
                                  ranks_program, "slice"], timeout=300)
        lines = [line for line in output.splitlines() if "slice ok on %d ranks (weft)" % size in line]
        prefixes = sorted(line.split("]")[0] + "]" for line in lines)
        check(code == 0 and prefixes == ["[%d]" % r for r in range(size)],
              "weft-run -n %d: the collective slice passes on every rank (%.1f s)" % (size, took), output)
        # Ranks on one host talk under a congestion control that does not pace (cubic, else reno).
        chosen = [line.rsplit(": ", 1)[1] for line in output.splitlines() if "congestion control to rank" in line]
        check(len(chosen) == size * (size - 1) and all(name in ("cubic", "reno") for name in chosen),
              "weft-run -n %d: every connection between the ranks runs cubic or reno (%s)"
              % (size, ", ".join(sorted(set(chosen)))), output)

    said_once(ranks_program, weft_run, "tcp", "transport: tcp (Boost.Asio), 2 ranks")

    code, output, _ = run([sys.executable, weft_run, "-n", "3", "--", "sh", "-c", "echo hello $WEFT_RANK of $WEFT_SIZE"], 60)
    check(code == 0 and all("[%d] hello %d of 3" % (r, r) in output for r in range(3)),
          "weft-run prefixes every line with its rank", output)

    code, output, took = run([sys.executable, weft_run, "-n", "3", "--", "sh", "-c",
                              'if [ "$WEFT_RANK" = 1 ]; then exit 3; fi; sleep 60'], 60)
    check(code == 3 and "rank 1 exited with status 3" in output and took < 20,
          "weft-run: a failing rank stops the job with its status, named (%.1f s)" % took, output)

    code, output, took = run([sys.executable, weft_run, "-n", "3", "--", "sh", "-c",
                              'if [ "$WEFT_RANK" = 2 ]; then kill -9 $$; fi; sleep 60'], 60)
    check(code == 137 and "rank 2 was killed by SIGKILL" in output and took < 20,
          "weft-run: a killed rank stops the job, named with its signal (%.1f s)" % took, output)

    code, output, took = run([sys.executable, weft_run, "-n", "2", "--timeout", "1", "--", "sleep", "60"], 60)
    check(code == 124 and "--timeout" in output and took < 20, "weft-run --timeout stops a job that hangs", output)

    code, output, _ = run([sys.executable, weft_run, "-n", "2", "--", "/nonexistent/program"], 60)
    check(code != 0 and "cannot start" in output, "weft-run: a program that cannot start is an error", output)

    # --bind-to core: one more rank than there are CPUs, so the ranks wrap around the cores.
    allowed = os.sched_getaffinity(0)
    size = len(allowed) + 1
    show = [sys.executable, "-c", "import os; print('cpus', *sorted(os.sched_getaffinity(0)))"]

    def placements(extra):
        code, output, _ = run([sys.executable, weft_run, "-n", str(size)] + extra + ["--"] + show, 60)
        found = {}
        for line in output.splitlines():
            if " cpus " in line:
                found[int(line.split("]")[0].lstrip("["))] = frozenset(int(c) for c in line.split(" cpus ")[1].split())
        return code, output, [found.get(rank) for rank in range(size)]

    code, output, unbound = placements([])
    check(code == 0 and all(cpus == allowed for cpus in unbound),
          "weft-run without --bind-to leaves every rank free to run on all %d CPUs" % len(allowed), output)
    code, output, bound = placements(["--bind-to", "core"])
    cores = []
    for cpus in bound:
        if cpus is None or cpus in cores:
            break
        cores.append(cpus)
    disjoint = sum(len(c) for c in cores) == len(frozenset().union(*cores))
    check(code == 0 and None not in bound and disjoint and frozenset().union(*cores) == allowed and
          all(bound[rank] == cores[rank % len(cores)] for rank in range(size)),
          "weft-run --bind-to core: ranks on distinct cores covering every allowed CPU (%d cores), then "
          "round-robin" % len(cores), output)
    code, output, _ = run([sys.executable, weft_run, "-n", "2", "--bind-to", "socket", "--", "true"], 60)
    check(code == 2 and "--bind-to" in output, "weft-run refuses an unknown --bind-to", output)


def failure_run(ranks_program, mode, size, victim, timeout_ms=30000, extra=None, label="", bound=None,
                expect=None, collective=None):
    """Rank `victim` fails (mode kill, close or flood); the others must see it, be refused after, and
    rebuild a world without it. `expect`: text every survivor's error must hold; `bound`: the
    detection time every survivor must stay under (default: the timeout + 5 s); `collective`: what
    the ranks run when the victim is killed (allreduce by default)."""
    command = [ranks_program, mode, str(victim)] + ([collective] if collective else [])
    processes = start_ranks(range(size), size, command, timeout_ms, extra=extra)
    mode = label + mode + (" mid-" + collective if collective else "")
    survivors = {r: p for r, p in processes.items() if r != victim}
    results = collect(survivors, timeout=90)
    times = []
    slowest = ""
    for rank, (code, output) in results.items():
        detected = re.search(r"detected in ([-0-9.]+) ms", output)
        if detected:
            times.append(float(detected.group(1)))
            if float(detected.group(1)) == max(times):
                slowest = "rank %d:\n%s" % (rank, output)
        expected = (expect,) if isinstance(expect, str) else expect  # alternatives
        if expect:
            what = " or ".join("'%s'" % each for each in expected)
        else:
            what = "peer_lost or timeout" if label.startswith("ofi") else "peer_lost naming rank %d" % victim
        check(code == 0 and "rebuilt a world of %d ranks without rank %d" % (size - 1, victim) in output
              and (expect is None or (detected and any(each in output.split("detected in", 1)[1].splitlines()[0]
                                                        for each in expected))),
              "%s: rank %d got %s, was refused after, and rebuilt the world" % (mode, rank, what),
              "exit status %s\n%s" % (code, output))
    victim_process = processes[victim]
    if victim_process.poll() is None:
        victim_process.kill()
    victim_output, _ = victim_process.communicate()
    if label.startswith("ofi shm"):
        # The survivors remove the region libfabric's shm provider made for the dead rank
        # (/dev/shm/<pid>:<...>), which it could not remove itself.
        left = glob.glob("/dev/shm/%d:*" % victim_process.pid)
        check(not left, "%s: the survivors removed the dead rank's shared region (%s)" % (mode, " ".join(left) or "none left"))
        for segment in left:
            os.remove(segment)
    if mode.endswith("kill") or mode.endswith("flood"):
        check(victim_process.returncode == -9, "%s: the victim died of SIGKILL" % mode, victim_output)
    if times:
        print("     detection times (ms after the event): " + ", ".join("%.1f" % t for t in times))
        bound = bound or timeout_ms + 5000
        check(max(times) < bound, "%s: every rank knew within %d ms (max %.1f ms)" % (mode, bound, max(times)),
              slowest)


def blames_only(message, victim, live):
    """Whether an error names `victim` as the rank lost and no rank of `live` as lost, ended or
    closed (a survivor that closed after the loss may be named as doing so "after that")."""
    if "rank %d" % victim not in message:
        return False
    for rank in live:
        for wrong in ("rank %d is lost" % rank, "rank %d's process" % rank, "process of rank %d " % rank,
                      "process of rank %d:" % rank):
            if wrong in message:
                return False
        if re.search(r"rank %d closed its transport(?! after)" % rank, message):
            return False
    return True


def survivors_by_hand(ranks_program, label, runs=20, extra=None, hosts=None):
    """4 ranks started by hand; one of ranks 1-3, drawn per run, is SIGKILLed at a point of a loop
    of collectives drawn per run; each survivor prints its error and closes at once, as a user's
    program does. Every survivor of every run must name the killed rank (never a survivor that
    closed its transport after it), and its error's culprit() must be it or unknown (-1). On
    libfabric's shm provider a survivor may instead be stuck inside the provider on a lock the
    killed process held in the survivor's own region (libfabric 1.17; nothing outside can free
    it): it must end naming the killed rank, and such runs are counted and printed."""
    draw = random.Random(0x5eed)
    named = 0
    stuck = 0
    for run in range(runs):
        victim, seed = draw.choice([1, 2, 3]), draw.randrange(1 << 30)
        if hosts is None:
            processes = start_ranks(range(4), 4, [ranks_program, "die", str(victim), str(seed)], 30000, extra=extra)
            results = collect({r: p for r, p in processes.items() if r != victim}, timeout=90)
            processes[victim].kill()
            processes[victim].communicate()
        else:
            results = {r: out for r, out in run_hosts(ranks_program, hosts, ["die", str(victim), str(seed)],
                                                       timeout=90).items() if r != victim}
        good = 0
        for rank, (code, output) in sorted(results.items()):
            error = re.search(r"survivor error: (.*)", output)
            culprit = re.search(r"survivor culprit: (-?\d+)", output)
            live = [r for r in range(4) if r != victim]
            ok = (code == 0 and error is not None and blames_only(error.group(1), victim, live)
                  and culprit is not None and int(culprit.group(1)) in (victim, -1))
            if not ok and label.startswith("ofi shm") and \
                    "a lock held by the process of rank %d (pid" % victim in output:
                ok = True
                stuck += 1
            good += ok
            if not ok:
                check(False, "%s survivors, run %d (rank %d killed, seed %d): rank %d names rank %d"
                      % (label, run + 1, victim, seed, rank, victim), "exit status %s\n%s" % (code, output))
        named += good == len(results)
    check(named == runs, "%s survivors by hand: in %d of %d runs every survivor named the killed rank%s"
          % (label, named, runs, " (%d survivor(s) stuck in the provider on the dead rank's lock, ended naming it)"
                                 % stuck if stuck else ""))


def recorder_runs(ranks_program, weft_run, label, extra=None):
    """The flight recorder: a hang (one rank SIGSTOPped before its 11th call), a mismatch (one
    rank calls reduce where the others call allreduce) and a kill each leave records that
    weft-why reads into a line naming the right rank and call; SIGUSR1 on a healthy job writes
    records without harm; weft-run prints weft-why's reading when a job fails."""
    why = os.path.join(os.path.dirname(os.path.abspath(weft_run)), "weft-why")
    cases = (("hang", 2, ["rank 2 never called allreduce #11", "wait for rank 2 in allreduce #11"]),
             ("mismatch", 1, ["mismatch in call #11", "ranks 0,2-3 called allreduce(count 1000, float32, sum",
                              "rank 1 called reduce(count 1000, float32, sum, root 0"]),
             ("kill", 3, ["rank 3 was lost during allreduce #11"]))
    for mode, victim, expected in cases:
        directory = tempfile.mkdtemp(prefix="weft-records-")
        try:
            environment = dict(extra or {}, WEFT_RECORDER_DIR=directory)
            processes = start_ranks(range(4), 4, [ranks_program, "recorder", mode, str(victim)], 2000,
                                    extra=environment)
            results = collect({r: p for r, p in processes.items() if r != victim}, timeout=60)
            if mode == "hang":  # its records, as it is (stopped before its 11th call), then it goes
                os.kill(processes[victim].pid, signal.SIGUSR1)
                os.kill(processes[victim].pid, signal.SIGCONT)
                until = time.monotonic() + 10
                while time.monotonic() < until and not os.path.exists(os.path.join(directory, "rank-%d.jsonl" % victim)):
                    time.sleep(0.05)
                time.sleep(0.2)
            processes[victim].kill()
            processes[victim].communicate()
            for rank, (code, output) in sorted(results.items()):
                check(code == 0 and "recorded failure" in output and os.path.exists(
                    os.path.join(directory, "rank-%d.jsonl" % rank)),
                      "%s recorder, %s of rank %d: rank %d failed and wrote its records" % (label, mode, victim, rank),
                      output)
            code, output, _ = run([sys.executable, why, directory], timeout=60)
            check(code == 0 and all(words in output for words in expected),
                  "%s recorder, %s of rank %d: weft-why says %s" % (label, mode, victim, " / ".join(expected)), output)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    # SIGUSR1 on a healthy job: every rank writes its records and the job ends well.
    directory = tempfile.mkdtemp(prefix="weft-records-")
    try:
        processes = start_ranks(range(3), 3, [ranks_program, "recorder", "healthy", "0"], 30000,
                                extra=dict(extra or {}, WEFT_RECORDER_DIR=directory))
        time.sleep(2)
        for process in processes.values():
            os.kill(process.pid, signal.SIGUSR1)
        results = collect(processes, timeout=60)
        written = sorted(os.listdir(directory))
        reasons = "".join(open(os.path.join(directory, name)).read() for name in written)
        check(all(code == 0 and "recorded run ended: healthy" in output for code, output in results.values())
              and written == ["rank-%d.jsonl" % r for r in range(3)] and reasons.count('"reason":"SIGUSR1"') >= 3,
              "%s recorder: SIGUSR1 on a healthy job writes every rank's records and the job ends well (%s)"
              % (label, " ".join(written)), "\n".join(output for _, output in results.values()))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    # weft-run: a job that fails prints what weft-why reads in the ranks' records.
    env = dict(os.environ, WEFT_TIMEOUT_MS="2000", **(extra or {}))
    env.pop("WEFT_RECORDER_DIR", None)
    code, output, _ = run([sys.executable, weft_run, "-n", "4", "--", ranks_program, "recorder", "kill", "3"],
                          timeout=120, env=env)
    check(code == 137 and "weft-why: rank 3 was lost during allreduce #11" in output
          and "flight records are in" in output,
          "%s recorder: weft-run prints weft-why's reading of a failed job" % label, output)


def killed_before_joining(ranks_program, label="", extra=None):
    """Ranks 0, 2 and 3 of 4 start, rank 2 is SIGKILLed while it waits at start-up for rank 1 (not
    yet started), then rank 1 starts: with the communicator's timeout at its default (5 minutes),
    ranks 0 and 3 must fail naming rank 2 within 10 s of the kill, and rank 1 fail too."""
    port = free_port()
    early = start_ranks([0, 2, 3], 4, [ranks_program, "slice"], 300000, port=port, extra=extra)
    # Two connections: the session's, and its transport's failure watch, whose end is what tells
    # the others (a rank killed before its transport has one is only found by their timeout).
    check(wait_for_store(early[2], port, serving=False, connections=2),
          "%skilled before it joins: rank 2 reached the store, its failure watch too" % label)
    if label.startswith("ofi shm"):
        # libfabric's shm provider makes rank 2's region (/dev/shm/<pid>:...) just before rank 2
        # publishes its address: wait for the region, so that the kill comes after it is known.
        deadline = time.monotonic() + 30
        while not glob.glob("/dev/shm/%d:*" % early[2].pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    time.sleep(1.0)  # rank 2 has met the store (it is connected) and waits for rank 1
    early[2].kill()
    killed = time.monotonic()
    # Rank 1 may reach the store only after rank 0 failed and took it along: it cannot tell that
    # from a rank 0 yet to start, and waits its start-up timeout (3 s here) for the store.
    late = start_ranks([1], 4, [ranks_program, "slice"], 3000, port=port, extra=extra)
    survivors = {0: early[0], 1: late[1], 3: early[3]}
    deadline = killed + 30
    ended = {}
    while len(ended) < len(survivors) and time.monotonic() < deadline:
        for rank, process in survivors.items():
            if rank not in ended and process.poll() is not None:
                ended[rank] = time.monotonic() - killed
        time.sleep(0.02)
    for rank, (code, output) in collect(survivors, timeout=1).items():
        took = ended.get(rank)
        error = output.split("error:", 1)[-1]
        named = "rank 2" in error or (rank == 1 and "tcp store" in error)
        check(code not in (None, 0) and took is not None and took < 10 and named,
              "%skilled before it joins: rank %d fails naming rank 2%s within 10 s (%s)"
              % (label, rank, " (or the store gone with rank 0)" if rank == 1 else "",
                 "%.2f s" % took if took is not None else "still running after 30 s"), output)
    early[2].communicate()
    check(early[2].returncode == -9, "%skilled before it joins: rank 2 died of SIGKILL" % label)
    if label.startswith("ofi shm"):
        # Rank 2 published its endpoint before it died: the survivors remove its region.
        left = glob.glob("/dev/shm/%d:*" % early[2].pid)
        check(not left, "%skilled before it joins: the survivors removed rank 2's shared region (%s)"
              % (label, " ".join(left) or "none left"))
        for segment in left:
            os.remove(segment)


def file_store_run(ranks_program):
    """Three processes meet through a directory (WEFT_STORE_PATH) instead of rank 0's TCP store,
    twice in the same directory: the last rank to leave removes the job's files at a normal end
    (none is left for the next job to trip over)."""
    directory = tempfile.mkdtemp(prefix="weft-file-store-")
    try:
        for run in (1, 2):
            processes = {}
            for rank in range(3):
                env = rank_environment(rank, 3, 0, 30000)
                del env["WEFT_STORE"]
                del env["WEFT_SECRET"]  # rank 0 draws one and hands it out through the directory
                env["WEFT_STORE_PATH"] = directory
                processes[rank] = subprocess.Popen([ranks_program, "slice"], env=env, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT, text=True)
            for rank, (code, output) in collect(processes, timeout=120).items():
                check(code == 0 and "slice ok on 3 ranks" in output,
                      "file store, job %d: rank %d met the others through a directory and passed the slice"
                      % (run, rank), output)
            left = os.listdir(directory)
            check(not left, "file store, job %d: the last rank removed the job's files (left: %s)"
                  % (run, " ".join(left) or "none"))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def two_jobs_one_store(ranks_program):
    """Two jobs of 2 ranks started as Open MPI and Slurm start them, at one WEFT_STORE and without
    WEFT_SECRET: job A's rank 0 serves the store, job B's rank 1 reaches it first. B's rank must
    be refused at once (the launcher's job identity differs), and A must still complete."""
    port = free_port()
    for launcher, identity in (("Open MPI", {"PMIX_NAMESPACE": "%s"}), ("Slurm", {"SLURM_JOB_ID": "%s", "SLURM_STEP_ID": "0"})):
        def environment(rank, job):
            env = {name: value for name, value in os.environ.items() if not name.startswith("WEFT_")}
            if launcher == "Open MPI":
                env.update({"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "2"})
            else:
                env.update({"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2"})
            env.update({name: value.replace("%s", job) for name, value in identity.items()})
            env.update({"WEFT_STORE": "127.0.0.1:%d" % port, "WEFT_TIMEOUT_MS": "20000"})
            return env
        def start(rank, job):
            return subprocess.Popen([ranks_program, "slice"], env=environment(rank, job), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
        first = start(0, "4242")
        check(wait_for_store(first, port, serving=True), "two %s jobs at one store: job A's rank 0 serves it" % launcher)
        started = time.monotonic()
        intruder = start(1, "4343")
        code, output = collect({1: intruder}, timeout=30)[1]
        took = time.monotonic() - started
        check(code not in (None, 0) and "another job" in output and took < 5,
              "two %s jobs at one store: the other job's rank is refused in %.1f s" % (launcher, took), output)
        results = collect({0: first, 1: start(1, "4242")}, timeout=60)
        check(all(code == 0 and "slice ok on 2 ranks (%s)" % launcher in output for code, output in results.values()),
              "two %s jobs at one store: the first job still completes" % launcher,
              results[0][1] + results[1][1])
        port = free_port()


def slurm_derived_store(ranks_program):
    """Slurm's variables and no WEFT_* at all (srun without PMIx): rank 0 serves the store on the
    step's first node at 10000 + (job * 64 + step) mod 20000, says so once, and the ranks meet."""
    for candidate in range(10000 + random.randrange(0, 19000, 64), 30000, 64):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", candidate))
            except OSError:
                continue
        port = candidate
        break
    job, step = (port - 10000) // 64 + 20000 * random.randrange(1, 50), (port - 10000) % 64
    def environment(rank):
        env = {name: value for name, value in os.environ.items() if not name.startswith("WEFT_")}
        env.update({"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_LOCALID": str(rank),
                    "SLURM_JOB_ID": str(job), "SLURM_STEP_ID": str(step), "SLURM_STEP_NODELIST": "localhost",
                    "SLURM_JOB_NODELIST": "localhost", "WEFT_TIMEOUT_MS": "20000"})
        return env
    processes = {rank: subprocess.Popen([ranks_program, "slice"], env=environment(rank), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True) for rank in range(2)}
    results = collect(processes, timeout=60)
    said = "Slurm gives no rendezvous; rank 0 serves the store on localhost:%d" % port
    check(all(code == 0 and "slice ok on 2 ranks (Slurm)" in output for code, output in results.values()),
          "Slurm without WEFT_STORE: the ranks meet at the step's first node, port %d" % port,
          results[0][1] + results[1][1])
    check(results[0][1].count(said) == 1 and said not in results[1][1],
          "Slurm without WEFT_STORE: rank 0 says where it serves, once", results[0][1])


def scenario_failures(ranks_program, weft_run):
    two_jobs_one_store(ranks_program)
    slurm_derived_store(ranks_program)
    file_store_run(ranks_program)
    # 4 ranks started by hand, the communicator's timeout at its default (5 minutes), rank 2
    # killed mid-allreduce, mid-alltoall and mid-broadcast: every survivor fails naming rank 2
    # within 10 s, whether it talks to rank 2 or not.
    # And while 4 calls are in flight at once: every survivor's wait throws.
    for collective in ("allreduce", "alltoall", "broadcast", "inflight"):
        failure_run(ranks_program, "kill", 4, 2, timeout_ms=300000, bound=10000, expect="rank 2",
                    collective=collective)
    failure_run(ranks_program, "close", 4, 1)
    failure_run(ranks_program, "kill", 3, 1)
    killed_before_joining(ranks_program)
    survivors_by_hand(ranks_program, "tcp")
    recorder_runs(ranks_program, weft_run, "tcp")

    # A rank that joins 3 timeouts late (stopped, then resumed) fails the call the others gave up
    # on, rather than completing it.
    # Rank 0 times out waiting for rank 1 and says so to it: rank 1, late, reads rank 0's data
    # and that notice together.
    processes = start_ranks(range(2), 2, [ranks_program, "stall", "1"], timeout_ms=1000)
    results = collect(processes, timeout=60)
    check(results[1][0] == 0 and "late rank failed" in results[1][1] and "count this rank as lost" in results[1][1],
          "a rank later than the others' timeout fails the call they gave up on", results[1][1])
    check(results[0][0] == 0 and "gave up" in results[0][1],
          "a rank later than the timeout: rank 0 gives up on it", results[0][1])

    # A forked child that returns from main leaves the parent's connections alone.
    processes = start_ranks(range(3), 3, [ranks_program, "fork", "1"], timeout_ms=10000)
    for rank, (code, output) in collect(processes, timeout=60).items():
        check(code == 0 and "fork ok" in output,
              "a forked child of rank 1 that returns from main: rank %d goes on" % rank, output)

    # Rank 3 of 4 never starts: the others time out at start-up, naming it.
    processes = start_ranks(range(3), 4, [ranks_program, "slice"], timeout_ms=2000)
    started = time.monotonic()
    results = collect(processes, timeout=30)
    took = time.monotonic() - started
    for rank, (code, output) in results.items():
        check(code == 3 and "weft: timeout:" in output and "rank(s) 3" in output,
              "a rank that never starts: rank %d times out at start-up naming rank 3" % rank, output)
    check(took < 10, "a rank that never starts: detected within the 2 s timeout (+ start-up), %.1f s" % took)

    # Two processes started as rank 1: the second is refused at once, naming the first.
    port = free_port()
    processes = start_ranks([0, 1], 3, [ranks_program, "slice"], 3000, port=port)
    check(wait_for_store(processes[1], port, serving=False), "two processes started as rank 1: the first reached the store")
    time.sleep(0.5)  # connected, it has claimed its place
    twin = subprocess.Popen([ranks_program, "slice"], env=rank_environment(1, 3, port, 3000),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    twin_output, _ = twin.communicate(timeout=30)
    collect(processes, timeout=30)
    check(twin.returncode == 3 and "rank 1 is already taken by" in twin_output,
          "two processes started as rank 1: the second is refused, naming the first", twin_output)

    # Rank 0 (the store) never starts: the others say they could not reach it.
    processes = start_ranks([1, 2], 3, [ranks_program, "slice"], timeout_ms=1500)
    for rank, (code, output) in collect(processes, timeout=30).items():
        check(code == 3 and "could not reach the tcp store" in output,
              "no rank 0: rank %d times out reaching the store" % rank, output)

    # A wrong secret on one rank: it is refused, by the store, with a message saying why.
    processes = start_ranks(range(2), 2, [ranks_program, "slice"], 3000,
                            extra=lambda rank: {"WEFT_SECRET": "other" if rank == 1 else "multiprocess-test"})
    results = collect(processes, timeout=30)
    check(results[1][0] == 3 and "WEFT_SECRET" in results[1][1],
          "a rank with the wrong secret is refused and told why", results[1][1])
    check(results[0][0] == 3 and "dropped a connection" in results[0][1] and "wrong secret" in results[0][1],
          "rank 0 logs the refused connection and times out naming rank 1", results[0][1])


# udp;ofi_rxd passes here too, but hung inside the provider once in five in-process runs: it runs
# only when named in WEFT_TEST_OFI_PROVIDERS (comma-separated).
OFI_PROVIDERS = os.environ.get("WEFT_TEST_OFI_PROVIDERS", "shm,tcp;ofi_rxm,sockets,net").split(",")


def scenario_ofi(ranks_program, weft_run):
    """The libfabric transport: the slice on every provider, killed ranks on shm and tcp;ofi_rxm."""
    listed = subprocess.run(["fi_info", "-l"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) \
        if shutil.which("fi_info") else None
    for provider in OFI_PROVIDERS:
        if listed is not None and provider.split(";")[0] + ":" not in listed.stdout:
            print("SKIP provider %s: not in this libfabric (fi_info -l)" % provider)
            continue
        sizes = (2, 3, 4) if provider in ("shm", "tcp;ofi_rxm", "sockets") else (3,)
        for size in sizes:
            env = dict(os.environ, WEFT_OFI_PROVIDER=provider, WEFT_TIMEOUT_MS="60000")
            code, output, took = run([sys.executable, weft_run, "-n", str(size), "--timeout", "240", "--",
                                      ranks_program, "slice"], timeout=300, env=env)
            ok = [line for line in output.splitlines() if "slice ok on %d ranks" % size in line and provider in line]
            check(code == 0 and len(ok) == size,
                  "ofi %s, %d processes: the collective slice passes on every rank (%.1f s)" % (provider, size, took),
                  output)
    # 4 ranks started by hand, the communicator's timeout at its default (5 minutes), rank 2
    # killed mid-allreduce, mid-alltoall and mid-broadcast: every survivor must fail naming rank 2
    # within 10 s, whether it talks to rank 2 or not (the job's failure notice, through the store),
    # then rebuild a world without it. Not on sockets: its rebuilt world lost a message (a send
    # completed, never received) in about one run in eight, inside the provider.
    for provider in ("shm", "tcp;ofi_rxm", "sockets"):
        if listed is not None and provider.split(";")[0] + ":" not in listed.stdout:
            continue
        for collective in ("allreduce", "alltoall", "broadcast") if provider != "sockets" else ():
            failure_run(ranks_program, "kill", 4, 2, timeout_ms=300000, extra={"WEFT_OFI_PROVIDER": provider},
                        label="ofi %s " % provider, bound=10000, expect="rank 2", collective=collective)
        killed_before_joining(ranks_program, label="ofi %s: " % provider, extra={"WEFT_OFI_PROVIDER": provider})
        if provider != "sockets":
            survivors_by_hand(ranks_program, "ofi " + provider, extra={"WEFT_OFI_PROVIDER": provider})
    # A rank later than the other's timeout hears, through the store, that it was given up on,
    # and fails the call rather than completing it with what was already delivered.
    processes = start_ranks(range(2), 2, [ranks_program, "stall", "1"], timeout_ms=1000,
                            extra={"WEFT_OFI_PROVIDER": "shm"})
    results = collect(processes, timeout=60)
    check(results[1][0] == 0 and "late rank failed" in results[1][1] and "count this rank as lost" in results[1][1],
          "ofi shm: a rank later than the others' timeout fails the call they gave up on", results[1][1])
    check(results[0][0] == 0 and "gave up" in results[0][1],
          "ofi shm: a rank later than the timeout: rank 0 gives up on it", results[0][1])
    # Killed while copying a 32 MiB message, so most often holding the lock of its shared region:
    # the senders still learn of it at once, from the watch on its process or from the job's
    # notice through the store (whichever comes first), and rebuild.
    for round in range(3):
        failure_run(ranks_program, "flood", 3, 1, timeout_ms=3000, extra={"WEFT_OFI_PROVIDER": "shm"},
                    label="ofi shm (round %d) " % (round + 1), bound=1000, expect=("has ended", "rank 1 is lost"))
    # A provider that does not exist: a clear error on every rank.
    env = dict(os.environ, WEFT_OFI_PROVIDER="no-such-provider", WEFT_TIMEOUT_MS="3000")
    code, output, _ = run([sys.executable, weft_run, "-n", "2", "--", ranks_program, "slice"], timeout=60, env=env)
    check(code != 0 and "no libfabric provider 'no-such-provider'" in output,
          "ofi: an unknown provider is a clear error", output)


def scenario_shm(ranks_program, weft_run):
    """The shared-memory transport (shm_ranks)."""
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    for size in (2, 3, 4, 8):
        env = dict(os.environ, WEFT_TIMEOUT_MS="60000")
        code, output, took = run([sys.executable, weft_run, "-n", str(size), "--timeout", "240", "--",
                                  ranks_program, "slice"], timeout=300, env=env)
        ok = [line for line in output.splitlines() if "slice ok on %d ranks (weft) over shared memory" % size in line]
        check(code == 0 and len(ok) == size,
              "shm, %d processes under weft-run: the collective slice passes on every rank (%.1f s)" % (size, took),
              output)
    said_once(ranks_program, weft_run, "shm", "transport: shared memory, 2 ranks")
    # Messages from 4 KiB lent: from the pool (scratch), and from anywhere else read straight from
    # the sender's memory by process_vm_readv, copied and combined; or, with the host refusing
    # that, through the slots: either way the slice passes and each rank says which holds.
    for size in (2, 3):
        env = dict(os.environ, WEFT_TIMEOUT_MS="60000", WEFT_SHM_LEND_BYTES="4K", WEFT_SHM_CMA_BYTES="4K")
        code, output, took = run([sys.executable, weft_run, "-n", str(size), "--timeout", "240", "--",
                                  ranks_program, "slice"], timeout=300, env=env)
        ok = [line for line in output.splitlines() if "slice ok on %d ranks (weft) over shared memory" % size in line]
        readable = [line for line in ok if "process_vm_readv from 4096 B, readable on %d of %d peers" % (size - 1, size - 1) in line]
        check(code == 0 and len(ok) == size,
              "shm, %d processes, messages from 4 KiB lent or read by process_vm_readv: the slice passes (%.1f s)"
              % (size, took), output)
        if len(readable) != size:
            print("     (process_vm_readv is refused on this host: the slice went through the pool and the slots)")
    mpirun = open_mpi_mpirun()
    if mpirun is None:
        print("SKIP part: mpirun is not installed (Debian: openmpi-bin); shm under mpirun was not tested here")
    else:
        command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "3",
                   "-x", "WEFT_STORE=127.0.0.1:%d" % free_port(), "-x", "WEFT_TIMEOUT_MS=60000", ranks_program, "slice"]
        env = {name: value for name, value in os.environ.items() if name not in ("WEFT_RANK", "WEFT_SIZE")}
        code, output, took = run(command, timeout=300, env=env)
        check(code == 0 and output.count("slice ok on 3 ranks (Open MPI)") == 3,
              "shm, mpirun -n 3: the collective slice passes on every rank (%.1f s)" % took, output)
    # 4 ranks started by hand, the communicator's timeout at its default (5 minutes), rank 2
    # killed mid-allreduce, mid-alltoall and mid-broadcast: every survivor fails naming rank 2,
    # each from the pidfd of rank 2's process (or the job's notice through the store).
    for collective in ("allreduce", "alltoall", "broadcast"):
        failure_run(ranks_program, "kill", 4, 2, timeout_ms=300000, label="shm ", bound=1000, expect="rank 2",
                    collective=collective)
    killed_before_joining(ranks_program, label="shm: ")
    survivors_by_hand(ranks_program, "shm")
    recorder_runs(ranks_program, weft_run, "shm")
    # A rank later than the others' timeout hears that it was given up on, and fails the call.
    processes = start_ranks(range(2), 2, [ranks_program, "stall", "1"], timeout_ms=1000)
    results = collect(processes, timeout=60)
    check(results[1][0] == 0 and "late rank failed" in results[1][1] and "count this rank as lost" in results[1][1],
          "shm: a rank later than the others' timeout fails the call they gave up on", results[1][1])
    check(results[0][0] == 0 and "gave up" in results[0][1], "shm: a rank later than the timeout: rank 0 gives up on it",
          results[0][1])
    # Rank 2 of 3 never starts: the others time out at start-up, naming it.
    processes = start_ranks(range(2), 3, [ranks_program, "slice"], timeout_ms=2000)
    for rank, (code, output) in collect(processes, timeout=30).items():
        check(code == 3 and "weft: timeout:" in output and "rank(s) 2" in output,
              "shm: a rank that never starts: rank %d times out at start-up naming rank 2" % rank, output)
    after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    check(after <= before, "shm: nothing left in /dev/shm after every run, killed ranks included (%s)"
          % (" ".join(sorted(after - before)) or "nothing new"))


def scenario_stream(ranks_program, weft_run):
    """The stream-ordered protocol between processes (stream_ranks, on host threads)."""
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    for size in (2, 3, 4):
        env = dict(os.environ, WEFT_TIMEOUT_MS="60000")
        code, output, took = run([sys.executable, weft_run, "-n", str(size), "--timeout", "240", "--",
                                  ranks_program, "slice"], timeout=300, env=env)
        ok = [line for line in output.splitlines() if "slice ok on %d ranks (weft) over stream-ordered" % size in line]
        check(code == 0 and len(ok) == size,
              "stream-ordered, %d processes under weft-run: the collective slice passes on every rank (%.1f s)"
              % (size, took), output)
    # Sends from outside the pool staged in pieces of 4 KiB through two areas (messages of up to
    # 256 KiB here: up to 64 pieces each).
    env = dict(os.environ, WEFT_TIMEOUT_MS="60000", WEFT_SHM_STAGE_BYTES="4K")
    code, output, took = run([sys.executable, weft_run, "-n", "3", "--timeout", "240", "--", ranks_program, "slice"],
                             timeout=300, env=env)
    check(code == 0 and output.count("slice ok on 3 ranks (weft) over stream-ordered") == 3,
          "stream-ordered, 3 processes, sends staged in pieces of 4 KiB: the slice passes (%.1f s)" % took, output)
    # Buffers from the pool are read in place.
    env = dict(os.environ, WEFT_TIMEOUT_MS="60000")
    code, output, took = run([sys.executable, weft_run, "-n", "3", "--timeout", "240", "--", ranks_program, "pool"],
                             timeout=300, env=env)
    check(code == 0 and output.count("pool ok on 3 ranks") == 3,
          "stream-ordered, 3 processes: collectives on buffers from the pool (%.1f s)" % took, output)
    # Rank 2 of 4 killed mid-allreduce, the timeout at its default: every survivor's stream is
    # released and its synchronize throws peer_lost naming rank 2 within a second.
    failure_run(ranks_program, "kill", 4, 2, timeout_ms=300000, label="stream-ordered ", bound=1000, expect="rank 2")
    # Rank 2 closes its transport mid-job and stays alive: the others are told it closed.
    failure_run(ranks_program, "close", 4, 2, timeout_ms=300000, label="stream-ordered ", bound=1000,
                expect="rank 2 closed its transport")
    killed_before_joining(ranks_program, label="stream-ordered: ")
    # Rank 1 of 3 never issues its allreduce (ring, then fused): the others' synchronize times out
    # naming it and the call; abort releases their streams.
    for algorithm in ("ring", "fused"):
        processes = start_ranks(range(3), 3, [ranks_program, "never", "1"] + (["fused"] if algorithm == "fused" else []),
                                timeout_ms=60000)
        results = collect(processes, timeout=60)
        for rank in (0, 2):
            code, output = results[rank]
            check(code == 0 and "timeout named it" in output,
                  "stream-ordered: rank 1 never issues its allreduce (%s): rank %d's synchronize times out naming it"
                  % (algorithm, rank), output)
    after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    check(after <= before, "stream-ordered: nothing left in /dev/shm after every run, the killed rank's included (%s)"
          % (" ".join(sorted(after - before)) or "nothing new"))


def open_mpi_mpirun():
    """Open MPI's mpirun by its alternative's own name (MPICH's may own "mpirun" beside it)."""
    return shutil.which("mpirun.openmpi") or shutil.which("mpirun")


def scenario_mpirun(ranks_program):
    mpirun = open_mpi_mpirun()
    if mpirun is None:
        print("SKIP: mpirun is not installed (Debian: openmpi-bin); weft under mpirun was not tested here")
        return SKIP
    env = dict(os.environ)
    for name in ("WEFT_RANK", "WEFT_SIZE", "WEFT_STORE", "WEFT_STORE_PATH", "WEFT_SECRET"):
        env.pop(name, None)
    port = free_port()
    command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "3",
               "-x", "WEFT_STORE=127.0.0.1:%d" % port, "-x", "WEFT_SECRET=" + secrets.token_hex(8),
               "-x", "WEFT_TIMEOUT_MS=60000", ranks_program, "slice"]
    code, output, took = run(command, timeout=300, env=env)
    check(code == 0 and output.count("slice ok on 3 ranks (Open MPI)") == 3,
          "mpirun --oversubscribe -n 3 -x WEFT_STORE: the collective slice passes on every rank (%.1f s)" % took,
          output)
    # Nothing set: rank 0 hands its store's address out through mpirun's PMIx server (where the
    # program was built with PMIx: its describe() says so with WEFT_VERBOSE).
    command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "3", "-x", "WEFT_VERBOSE=1",
               "-x", "WEFT_TIMEOUT_MS=60000", ranks_program, "slice"]
    code, output, took = run(command, timeout=300, env=env)
    if "built without it" in output:
        print("SKIP part: this build has no PMIx (Debian: libpmix-dev): mpirun with nothing set was not tested")
    else:
        check(code == 0 and output.count("slice ok on 3 ranks (Open MPI)") == 3
              and "handed out through PMIx)" in output,
              "mpirun --oversubscribe -n 3, nothing set: met through PMIx, the slice passes on every rank (%.1f s)"
              % took, output)
    return None


def scenario_netns(ranks_program):
    ip = shutil.which("ip")
    if ip is None or os.geteuid() != 0:
        print("SKIP: network namespaces need root and iproute2 (ip); the two-host run was not tested here")
        return SKIP
    tag = "%x" % (os.getpid() & 0xffff)
    a, b = "weft-a-" + tag, "weft-b-" + tag
    veth_a, veth_b = "wfa" + tag, "wfb" + tag
    setup = [[ip, "netns", "add", a], [ip, "netns", "add", b],
             [ip, "link", "add", veth_a, "type", "veth", "peer", "name", veth_b],
             [ip, "link", "set", veth_a, "netns", a], [ip, "link", "set", veth_b, "netns", b],
             [ip, "-n", a, "addr", "add", "198.18.0.1/24", "dev", veth_a],
             [ip, "-n", b, "addr", "add", "198.18.0.2/24", "dev", veth_b],
             [ip, "-n", a, "link", "set", veth_a, "up"], [ip, "-n", b, "link", "set", veth_b, "up"],
             [ip, "-n", a, "link", "set", "lo", "up"], [ip, "-n", b, "link", "set", "lo", "up"]]
    try:
        for step in setup:
            result = subprocess.run(step, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if result.returncode != 0:
                print("SKIP: cannot build the two namespaces (%s: %s); the two-host run was not tested here"
                      % (" ".join(step[1:]), result.stdout.strip()))
                return SKIP
        port = 29000 + os.getpid() % 1000
        processes = {}
        for rank, namespace in ((0, a), (1, b)):
            env = rank_environment(rank, 2, port, 60000, {"WEFT_STORE": "198.18.0.1:%d" % port})
            processes[rank] = subprocess.Popen([ip, "netns", "exec", namespace, ranks_program, "slice"], env=env,
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # Each namespace's own default congestion control: a connection to another host keeps it.
        system = {namespace: subprocess.run([ip, "netns", "exec", namespace, "cat", "/proc/sys/net/ipv4/tcp_congestion_control"],
                                            stdout=subprocess.PIPE, text=True).stdout.strip() for namespace in (a, b)}
        for rank, (code, output) in collect(processes, timeout=240).items():
            check(code == 0 and "slice ok on 2 ranks" in output,
                  "two network namespaces over a veth pair: rank %d passes the slice" % rank, output)
            namespace = (a, b)[rank]
            check(system[namespace] and "congestion control to rank %d: %s\n" % (1 - rank, system[namespace]) in output,
                  "two network namespaces: rank %d's connection to the other host keeps the system's congestion "
                  "control (%s)" % (rank, system[namespace]), output)
    finally:
        for namespace in (a, b):
            subprocess.run([ip, "netns", "del", namespace], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return None


def run_hosts(ranks_program, hosts, args, namespaces=None, store_address="127.0.0.1", timeout=300):
    """Starts one process per entry of `hosts` (the host index of each rank), in that host's
    namespace (or with WEFT_HOST naming it); returns {rank: (code, output)}."""
    port = free_port()
    processes = {}
    for rank, host in enumerate(hosts):
        extra = {"WEFT_STORE": "%s:%d" % (store_address, port), "WEFT_TIMEOUT_MS": "60000"}
        command = [ranks_program] + args
        if namespaces is None:
            extra["WEFT_HOST"] = "host-%d" % host
        else:
            command = [shutil.which("ip"), "netns", "exec", namespaces[host]] + command
        env = rank_environment(rank, len(hosts), port, 60000, extra)
        processes[rank] = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return collect(processes, timeout=timeout)


def check_hierarchical(ranks_program, hosts, what, namespaces=None, store_address="127.0.0.1"):
    started = time.monotonic()
    results = run_hosts(ranks_program, hosts, ["slice"], namespaces, store_address)
    took = time.monotonic() - started
    layout = "%d host%s: %s ranks" % (len(set(hosts)), "s" if len(set(hosts)) > 1 else "",
                                     " + ".join(str(hosts.count(h)) for h in sorted(set(hosts))))
    for rank, (code, output) in sorted(results.items()):
        check(code == 0 and ("hierarchical slice ok on %d ranks (%s; within a host shm, between hosts tcp)"
                             % (len(hosts), layout)) in output,
              "%s: rank %d passes every hierarchical collective (%.1f s)" % (what, rank, took), output)
    return results


def check_hierarchical_kill(ranks_program, hosts, victim, what, namespaces=None, store_address="127.0.0.1"):
    results = run_hosts(ranks_program, hosts, ["kill", str(victim)], namespaces, store_address, timeout=120)
    for rank, (code, output) in sorted(results.items()):
        if rank == victim:
            check(code == -signal.SIGKILL, "%s: rank %d was killed" % (what, rank), output)
        else:
            check(code == 0 and "detected: " in output,
                  "%s: rank %d (host %d) names the killed rank %d" % (what, rank, hosts[rank], victim), output)


class host_namespaces:
    """`count` network namespaces on one bridge (198.18.1.1, .2, ...), as hosts; `shape` (a tc
    qdisc and its arguments, e.g. "netem rate 1gbit delay 50us") shapes each host's link. Falsy when they cannot be made
    (`reason` says why); deleted on exit."""

    def __init__(self, count, shape=None):
        self.ip = shutil.which("ip")
        tag = "%x" % (os.getpid() & 0xffff)
        self.names = ["weft-h%d-%s" % (h, tag) for h in range(count)]
        self.switch = "weft-sw-" + tag
        self.reason = None
        if self.ip is None or os.geteuid() != 0:
            self.reason = "network namespaces need root and iproute2 (ip)"
            return
        ip = self.ip
        setup = [[ip, "netns", "add", self.switch], [ip, "-n", self.switch, "link", "add", "br0", "type", "bridge"],
                 [ip, "-n", self.switch, "link", "set", "br0", "up"]]
        for h, namespace in enumerate(self.names):
            host_end, switch_end = "wh%d%s" % (h, tag), "ws%d%s" % (h, tag)
            setup += [[ip, "netns", "add", namespace],
                      [ip, "link", "add", host_end, "type", "veth", "peer", "name", switch_end],
                      [ip, "link", "set", host_end, "netns", namespace], [ip, "link", "set", switch_end, "netns", self.switch],
                      [ip, "-n", self.switch, "link", "set", switch_end, "master", "br0"],
                      [ip, "-n", self.switch, "link", "set", switch_end, "up"],
                      [ip, "-n", namespace, "addr", "add", "198.18.1.%d/24" % (h + 1), "dev", host_end],
                      [ip, "-n", namespace, "link", "set", host_end, "up"], [ip, "-n", namespace, "link", "set", "lo", "up"]]
            if shape:
                setup.append([ip, "netns", "exec", namespace, "tc", "qdisc", "add", "dev", host_end, "root"] + shape.split())
        for step in setup:
            result = subprocess.run(step, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if result.returncode != 0:
                self.reason = "cannot build the namespaces (%s: %s)" % (" ".join(step[1:]), result.stdout.strip())
                return

    def __bool__(self):
        return self.reason is None

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        if self.ip is not None:
            for namespace in self.names + [self.switch]:
                subprocess.run([self.ip, "netns", "del", namespace], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def scenario_hierarchical(ranks_program):
    # Hosts named by WEFT_HOST: the ranks of a "host" meet through shared memory, all through TCP.
    check_hierarchical(ranks_program, [0, 1, 0, 1], "WEFT_HOST, 2 hosts x 2 ranks (interleaved)")
    check_hierarchical_kill(ranks_program, [0, 0, 1, 1], 3, "WEFT_HOST, 2 x 2, rank 3 killed")
    survivors_by_hand(ranks_program, "tiered (WEFT_HOST, 2 x 2)", hosts=[0, 0, 1, 1])
    results = run_hosts(ranks_program, [0, 0, 1], ["network-only"])
    said = "no node-local transport is compiled in: the ranks of each host talk over tcp (2 hosts: 2 + 1 ranks)"
    for rank, (code, output) in sorted(results.items()):
        check(code == 0 and "network-only ok on 3 ranks" in output and output.count(said) == (1 if rank == 0 else 0),
              "no node-local transport, 2 hosts of 2 and 1 ranks: rank %d passes over tcp alone%s"
              % (rank, ", saying so once" if rank == 0 else ""), output)
    with host_namespaces(3) as hosts:
        if not hosts:
            print("SKIP: %s; hosts as namespaces were not tested here" % hosts.reason)
            return None
        store = "198.18.1.1"
        check_hierarchical(ranks_program, [0, 1, 0, 1], "namespaces, 2 hosts x 2 ranks (interleaved)", hosts.names, store)
        check_hierarchical(ranks_program, [0, 1, 1, 2, 2, 2], "namespaces, 3 hosts of 1, 2 and 3 ranks", hosts.names, store)
        check_hierarchical_kill(ranks_program, [0, 0, 1, 1], 2, "namespaces, 2 x 2, rank 2 killed", hosts.names, store)
    return None


def scenario_hierarchical_bench(ranks_program):
    """Not a test: 2 hosts x 2 ranks (WEFT_BENCH_HOSTS, the host of each rank: 0,0,1,1) whose links are shaped (WEFT_BENCH_SHAPE, a tc qdisc and its
    arguments; default "netem rate 1gbit delay 50us", where the kernel has netem, else "tbf rate
    1gbit burst 256kb latency 20ms": the rate alone), allreduce of each of WEFT_BENCH_BYTES (default 1, 4, 16 and
    64 MiB), hierarchical against the flat algorithms, alternating (hierarchical_ranks bench)."""
    shapes = [os.environ["WEFT_BENCH_SHAPE"]] if os.environ.get("WEFT_BENCH_SHAPE") else \
        ["netem rate 1gbit delay 50us", "tbf rate 1gbit burst 256kb latency 20ms"]
    sizes = os.environ.get("WEFT_BENCH_BYTES", "1048576,4194304,16777216,67108864").split(",")
    placement = [int(h) for h in os.environ.get("WEFT_BENCH_HOSTS", "0,0,1,1").split(",")]
    for shape in shapes:
        hosts = host_namespaces(2, shape)
        if hosts:
            break
        print("(%s)" % hosts.reason)
        hosts.__exit__()
    with hosts:
        if not hosts:
            print("SKIP: %s" % hosts.reason)
            return SKIP
        print("2 hosts x 2 ranks (host of each rank: %s), each host's link shaped by tc: %s" % (placement, shape))
        for size in sizes:
            results = run_hosts(ranks_program, placement, ["bench", size], hosts.names, "198.18.1.1", timeout=1800)
            code, output = results[0]
            print(output.strip())
            check(all(result[0] == 0 for result in results.values()), "bench %s ran on every rank" % size, output)
    return None


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    scenario, ranks_program, weft_run = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    global weft_run_module
    loader = importlib.machinery.SourceFileLoader("weft_run", weft_run)
    weft_run_module = importlib.util.module_from_spec(importlib.util.spec_from_loader("weft_run", loader))
    loader.exec_module(weft_run_module)
    outcome = None
    if scenario == "weft-run":
        scenario_weft_run(ranks_program, weft_run)
    elif scenario == "failures":
        scenario_failures(ranks_program, weft_run)
    elif scenario == "ofi":
        scenario_ofi(ranks_program, weft_run)
    elif scenario == "shm":
        scenario_shm(ranks_program, weft_run)
    elif scenario == "stream":
        scenario_stream(ranks_program, weft_run)
    elif scenario == "mpirun":
        outcome = scenario_mpirun(ranks_program)
    elif scenario == "netns":
        outcome = scenario_netns(ranks_program)
    elif scenario == "hierarchical":
        outcome = scenario_hierarchical(ranks_program)
    elif scenario == "hierarchical-bench":
        outcome = scenario_hierarchical_bench(ranks_program)
    else:
        print("unknown scenario " + scenario)
        return 2
    if outcome == SKIP:
        return SKIP
    print("%d check(s) failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
