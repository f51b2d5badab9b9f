#!/usr/bin/env python3
"""What finding mismatched calls without check mode costs a small call: an 8 B allreduce over
weft's tcp and shm transports, with WEFT_DETECT_MISMATCH=1 (the default: a digest of the call
in its tags, early messages read at each call's end) and =0, in alternating runs.

    python3 benchmarks/compare/mismatch_cost.py [--ranks 2,4] [--system weft-tcp,weft-shm]
        [--rounds 5] [--iterations 2000] [--bytes 8]

Each round runs both settings (which goes first alternates), each a weft-bench run under
weft-run with compare.py's command line; a run's figure is weft-bench's median call time.
Prints, per system and rank count, the median time of each setting and the median of the
rounds' ratios on/off (1.03 = 3% slower with detection).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from compare import ROOT, Systems


def one_run(systems, system, ranks, args, detect):
    with tempfile.TemporaryDirectory() as scratch:
        output = os.path.join(scratch, "run.json")
        argv, env = systems.command(system, ranks, "allreduce", (args.bytes, args.bytes, args.iterations), output, scratch)
        env = dict(env, WEFT_DETECT_MISMATCH="1" if detect else "0")
        finished = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
        if finished.returncode != 0:
            raise SystemExit(f"mismatch_cost.py: {system} failed (exit {finished.returncode}):\n"
                             f"{' '.join(argv)}\n{(finished.stdout + finished.stderr)[-2000:]}")
        with open(output) as handle:
            return json.load(handle)["results"][0]["out_of_place"]["time_us"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--system", default="weft-tcp,weft-shm")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--bytes", type=int, default=8)
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args()
    systems = Systems(argparse.Namespace(build=args.build, smoke=False, no_shm=False, factor=2, warmup=20,
                                         bind_to="none"))
    print(f"# allreduce of {args.bytes} B, {args.iterations} calls a run, {args.rounds} rounds, "
          f"{os.cpu_count()} cores; median call time (us)")
    print(f"{'system':<10} {'ranks':>5} {'detect on':>10} {'detect off':>10} {'on/off':>7}")
    for system in args.system.split(","):
        for ranks in (int(r) for r in args.ranks.split(",")):
            on, off, ratios = [], [], []
            for round_number in range(args.rounds):
                order = (True, False) if round_number % 2 == 0 else (False, True)
                times = {detect: one_run(systems, system, ranks, args, detect) for detect in order}
                on.append(times[True])
                off.append(times[False])
                ratios.append(times[True] / times[False])
            print(f"{system:<10} {ranks:>5} {statistics.median(on):>10.2f} {statistics.median(off):>10.2f} "
                  f"{statistics.median(ratios):>7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
