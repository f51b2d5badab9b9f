#!/usr/bin/env python3
"""Two of weft's algorithms, or two builds of weft, side by side: weft-bench runs of each,
alternating, several rounds.

    python3 benchmarks/compare/versus.py --a recursive_doubling --b direct [--system weft-tcp]
        [--ranks 4] [--rounds 6] [--collective allreduce] [-b 8] [-e 1K] [-f 4] [-n 100] [-w 5]
    python3 benchmarks/compare/versus.py --a automatic --b automatic --build-b OTHER_BUILD ...

With --build-b, B runs the weft-bench of another build (the same algorithm before and after a
change, say); --a and --b may then name the same algorithm.

Each round runs weft-bench once with --algorithm A and once with --algorithm B (which goes
first alternates from round to round), with compare.py's command line for the system (weft-tcp,
weft-shm or weft-ofi-shm), so machine noise hits both alike. Per size and form it prints each algorithm's
median time over the rounds, B's time / A's (above 1: A is faster), the range of that ratio
within a round, and in how many rounds A was faster. Either may be `automatic`. A run with a
wrong result, or one that fails, stops it with exit status 1.

Between separate runs a busy or virtual machine can swing by 2x for minutes; a difference that
matters shows in most rounds, not only in the medians.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from compare import ROOT, Systems, parse_size


def run_once(systems, args, algorithm, scratch):
    """{(bytes, form): time_us} of one weft-bench run with this algorithm."""
    json_path = os.path.join(scratch, "run.json")
    piece = (args.min_bytes, args.max_bytes, args.iterations)
    argv, env = systems.command(args.system, args.ranks, args.collective, piece, json_path, scratch)
    argv = argv + ["--algorithm", algorithm]
    finished = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
    if finished.returncode != 0:
        raise SystemExit(f"versus.py: {args.system} with --algorithm {algorithm} failed (exit "
                         f"{finished.returncode}):\n{' '.join(argv)}\n{(finished.stdout + finished.stderr)[-2000:]}")
    with open(json_path) as handle:
        result = json.load(handle)
    if result["wrong"]:
        raise SystemExit(f"versus.py: {args.system} with --algorithm {algorithm}: {result['wrong']} wrong results")
    times = {}
    for row in result["results"]:
        for form in ("out_of_place", "in_place"):
            if row[form] is not None:
                times[(row["bytes"], form)] = row[form]["time_us"]
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="an algorithm name, or automatic")
    parser.add_argument("--b", required=True, help="an algorithm name, or automatic")
    parser.add_argument("--system", default="weft-tcp", choices=("weft-tcp", "weft-shm", "weft-ofi-shm"))
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--build-b", default=None, help="run B from this build's weft-bench")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--collective", default="allreduce")
    parser.add_argument("-b", dest="min_bytes", default="8")
    parser.add_argument("-e", dest="max_bytes", default="1K")
    parser.add_argument("-f", dest="factor", type=int, default=4)
    parser.add_argument("-n", dest="iterations", type=int, default=100)
    parser.add_argument("-w", dest="warmup", type=int, default=5)
    parser.add_argument("--bind-to", choices=("none", "core"), default="none")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per run")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.a == args.b and args.build_b is None:
        parser.error("--a and --b name the same algorithm (give --build-b to compare two builds)")
    args.min_bytes, args.max_bytes = parse_size(args.min_bytes), parse_size(args.max_bytes)
    args.no_shm, args.smoke = args.system == "weft-tcp", False
    sides = {"A": (args.a, Systems(args))}  # Systems exits with a clear message when weft-bench is not built
    if args.build_b is not None:
        sides["B"] = (args.b, Systems(argparse.Namespace(**{**vars(args), "build": args.build_b})))
    else:
        sides["B"] = (args.b, sides["A"][1])

    times = {"A": [], "B": []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(args.rounds):
            order = ["A", "B"] if round_index % 2 == 0 else ["B", "A"]
            for side in order:
                algorithm, systems = sides[side]
                print(f"versus.py: round {round_index + 1}/{args.rounds}: {side} ({algorithm})", file=sys.stderr,
                      flush=True)
                times[side].append(run_once(systems, args, algorithm, scratch))

    b_name = args.b if args.build_b is None else f"{args.b} from {args.build_b}"
    print(f"# {args.system}, {args.ranks} ranks, {args.collective}, {args.rounds} rounds of weft-bench -n "
          f"{args.iterations} -w {args.warmup}; A = {args.a}, B = {b_name}; times are medians over the rounds")
    print("| size (B) | form | A (us) | B (us) | B / A | B / A within a round | rounds A faster |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(times["A"][0]):
        a_times = [run[key] for run in times["A"] if key in run]
        b_times = [run[key] for run in times["B"] if key in run]
        if len(a_times) != args.rounds or len(b_times) != args.rounds:
            continue
        ratios = [b / a for a, b in zip(a_times, b_times)]
        a_median, b_median = statistics.median(a_times), statistics.median(b_times)
        wins = sum(1 for a, b in zip(a_times, b_times) if a < b)
        print(f"| {key[0]} | {key[1].replace('_', ' ')} | {a_median:.1f} | {b_median:.1f} | {b_median / a_median:.2f} "
              f"| {min(ratios):.2f}-{max(ratios):.2f} | {wins}/{args.rounds} |")


if __name__ == "__main__":
    main()
