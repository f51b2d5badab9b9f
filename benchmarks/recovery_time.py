#!/usr/bin/env python3
"""How long the survivors take to go on after a rank is SIGKILLed (weft::revoke + weft::shrink).

    recovery_time.py RECOVERY_RANKS WEFT_RUN [--runs N] [--ranks 4,8] [--transports tcp,shm]

RECOVERY_RANKS is tests/recovery_ranks of a build (one rank of a loop of allreduces with four
calls in flight; it prints "recovered: K ranks in T ms" on each survivor: from the victim's
SIGKILL, whose time it writes into the store just before, to the first completed allreduce on the
shrunk world; one host, one steady clock). For each transport and rank count, each run kills the
last rank at step 10 of 40; a run's time is its slowest survivor's (when every survivor has gone
on). Prints the median and the slowest over the runs, for the ranks meeting through weft-run's
file store (weft-run --keep-going, the store that outlives rank 0) and, for tcp, through the TCP
store rank 0 serves (whose lifelines tell of the death at once).
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys

TIME = re.compile(r"recovered: \d+ ranks in ([0-9.]+) ms")


def clean_environment():
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEFT_")}
    env["WEFT_TIMEOUT_MS"] = "10000"
    return env


def under_weft_run(weft_run, program, ranks, transport):
    done = subprocess.run([sys.executable, weft_run, "-n", str(ranks), "--keep-going", "--timeout", "120",
                           "--", program, transport, "40", "kill:%d@10" % (ranks - 1)],
                          env=clean_environment(), capture_output=True, text=True, timeout=180)
    return done.returncode, done.stdout + done.stderr


def around_tcp_store(program, ranks, transport):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    processes = []
    for rank in range(ranks):
        env = clean_environment()
        env.update({"WEFT_RANK": str(rank), "WEFT_SIZE": str(ranks), "WEFT_STORE": "127.0.0.1:%d" % port,
                    "WEFT_SECRET": "recovery-time"})
        processes.append(subprocess.Popen([program, transport, "40", "kill:%d@10" % (ranks - 1)], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    output, codes = "", []
    for process in processes:
        out, _ = process.communicate(timeout=180)
        output += out
        codes.append(process.returncode)
    return (0 if all(code in (0, -9) for code in codes) and codes[-1] == -9 else 1), output


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    parser.add_argument("weft_run")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--ranks", default="4,8")
    parser.add_argument("--transports", default="tcp,shm")
    options = parser.parse_args()
    rows = []
    for transport in options.transports.split(","):
        for ranks in (int(r) for r in options.ranks.split(",")):
            ways = [("file store (weft-run --keep-going)", lambda: under_weft_run(
                options.weft_run, options.program, ranks, transport))]
            if transport == "tcp":
                ways.append(("TCP store (rank 0)", lambda: around_tcp_store(options.program, ranks, transport)))
            for store, start in ways:
                times, failed = [], 0
                for run in range(options.runs):
                    status, output = start()
                    measured = [float(t) for t in TIME.findall(output)]
                    if status != 0 or len(measured) != ranks - 1:
                        failed += 1
                        continue
                    times.append(max(measured))
                print("%s, %d ranks, %s: %s" % (transport, ranks, store,
                                                ", ".join("%.1f" % t for t in times)), flush=True)
                rows.append((transport, ranks, store, times, failed))
    print()
    print("| transport | ranks | store | median (ms) | slowest (ms) | runs |")
    print("|---|---|---|---|---|---|")
    for transport, ranks, store, times, failed in rows:
        if times:
            print("| %s | %d → %d | %s | %.1f | %.1f | %d%s |" % (
                transport, ranks, ranks - 1, store, statistics.median(times), max(times), len(times),
                " (%d failed)" % failed if failed else ""))
        else:
            print("| %s | %d → %d | %s | - | - | all %d failed |" % (transport, ranks, ranks - 1, store, failed))
    return 0 if all(not failed for *_, failed in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
