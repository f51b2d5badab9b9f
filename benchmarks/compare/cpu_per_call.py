#!/usr/bin/env python3
"""CPU seconds per call: how much processor time one collective call costs, summed over its
ranks (user + system, every process the launcher started), and how many cores were busy.

    python3 benchmarks/compare/cpu_per_call.py [--ranks 4] [--bytes 64M] [--runs 2]
        [--collective allreduce] [--system weft-tcp,gloo-ring,mpi-tcp] [--few 2] [--many 22]
        [-- extra flags for every program]

Systems are compare.py's (weft-tcp, weft-shm, weft-ofi-shm, gloo-ALG, mpi-tcp, mpi-vader), run
with its command lines.

When the ranks outnumber the cores, busbw says little about why one library is ahead: every
system keeps the cores busy, and the one that needs less processor time per call wins. Each
system runs twice, with --few and with --many timed iterations at one size; the difference in
CPU time (getrusage of the children) and in wall time, divided by the difference in calls,
cancels start-up, connection set-up and warm-up. A program times one call per iteration for each
form its row has (weft-bench: out of place and in place where the collective has both; the peers
one), so the calls are counted from the forms in its JSON output; the in-place form's inputs are
restored between calls, which that figure includes.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from compare import ROOT, Systems


def command(systems, system, args, iterations, scratch):
    """(argv, env, JSON output path) of one system's run: compare.py's command line for it, at
    one size, without warm-up calls."""
    if not (system in ("weft-tcp", "weft-shm", "weft-ofi-shm", "mpi-tcp", "mpi-vader") or system.startswith("gloo-")):
        raise SystemExit(f"cpu_per_call.py: unknown system '{system}' (weft-tcp, weft-shm, weft-ofi-shm, gloo-ALG, mpi-tcp, "
                         "mpi-vader)")
    for family, why in systems.missing.items():
        if system.startswith(f"{family}-"):
            raise SystemExit(f"cpu_per_call.py: {system}: {why}")
    output = os.path.join(scratch, "run.json")
    argv, env = systems.command(system, args.ranks, args.collective, (args.bytes, args.bytes, iterations),
                                output, scratch)
    return argv + args.extra, env, output


def measure(systems, system, args, iterations):
    """(cpu seconds, wall seconds, calls) of one run."""
    with tempfile.TemporaryDirectory() as scratch:
        argv, env, output = command(systems, system, args, iterations, scratch)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        finished = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if finished.returncode != 0:
            raise SystemExit(f"cpu_per_call.py: {system} failed (exit {finished.returncode}):\n"
                             f"{' '.join(argv)}\n{(finished.stdout + finished.stderr)[-2000:]}")
        with open(output) as handle:
            row = json.load(handle)["results"][0]
    forms = sum(1 for form in ("out_of_place", "in_place") if row.get(form))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, iterations * forms


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--bytes", default="64M")
    parser.add_argument("--collective", default="allreduce")
    parser.add_argument("--system", default="weft-tcp,gloo-ring,mpi-tcp")
    parser.add_argument("--runs", type=int, default=2, help="alternating rounds over the systems")
    parser.add_argument("--few", type=int, default=2)
    parser.add_argument("--many", type=int, default=22)
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("extra", nargs="*", help="after --: flags for every program")
    args = parser.parse_args()
    if args.many <= args.few:
        raise SystemExit("cpu_per_call.py: --many must exceed --few")
    # compare.py's systems, as its options would name them: no warm-up calls (the difference
    # between the two runs cancels start-up), one size so the factor does not matter.
    systems = Systems(argparse.Namespace(build=args.build, smoke=False, no_shm=False, factor=2, warmup=0,
                                         bind_to="none"))
    print(f"# {args.collective}, {args.bytes} bytes, {args.ranks} ranks on {os.cpu_count()} cores; "
          f"processor time per call summed over the ranks (us)")
    print(f"{'system':<24} {'cpu us/call':>11} {'wall us/call':>12} {'cores busy':>10}")
    for _ in range(args.runs):
        for system in args.system.split(","):
            cpu_few, wall_few, calls_few = measure(systems, system, args, args.few)
            cpu_many, wall_many, calls_many = measure(systems, system, args, args.many)
            calls = calls_many - calls_few
            cpu, wall = (cpu_many - cpu_few) / calls, (wall_many - wall_few) / calls
            busy = cpu / wall if wall > 0 else float("nan")
            print(f"{system:<24} {cpu * 1e6:>11.1f} {wall * 1e6:>12.1f} {busy:>10.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
