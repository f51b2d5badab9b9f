#!/usr/bin/env python3
"""How far apart the ranks start each timed call, and what that costs the measured time.

    python3 benchmarks/compare/stagger.py TRACE [TRACE ...]

TRACE is the --trace prefix given to weft-bench, mpi-bench or gloo-bench: each rank wrote
TRACE.<rank> with the start and end of every timed call on the host's steady clock. Each
iteration starts after a barrier, and its time is the slowest rank's own (its end minus its
start). When the ranks leave the barrier at different moments, the first one out counts the
wait for the last one as part of the call. Per collective, size and form this prints the
medians over the iterations of:

    time     the slowest rank's time: what the table reports
    spread   last start - first start: how far apart the barrier let the ranks go
    together last end - last start: the call once every rank is in it

The ranks must share a host: each file's times are on its own host's steady clock, and the
files do not say which host wrote them, so a spread across hosts would mean nothing.
"""
import collections
import glob
import os
import re
import statistics
import sys


def load(prefix):
    """{(collective, bytes, form): {iteration: {rank: (start, end)}}} from prefix.<rank> files."""
    calls = collections.defaultdict(lambda: collections.defaultdict(dict))
    files = [f for f in glob.glob(glob.escape(prefix) + ".*") if re.fullmatch(r"\d+", f.rsplit(".", 1)[1])]
    if not files:
        raise SystemExit(f"stagger.py: no trace files {prefix}.<rank> (run with --trace {prefix})")
    ranks = set()
    for path in files:
        rank = int(path.rsplit(".", 1)[1])
        ranks.add(rank)
        with open(path) as lines:
            for number, line in enumerate(lines, 1):
                if line.startswith("#") or not line.strip():
                    continue
                fields = line.split()
                if len(fields) != 6:
                    raise SystemExit(f"stagger.py: {path}:{number}: expected 6 fields, got: {line.strip()}")
                collective, size, form, iteration, start, end = fields
                calls[(collective, int(size), form)][int(iteration)][rank] = (int(start), int(end))
    return calls, ranks


def summarize(prefix):
    calls, ranks = load(prefix)
    print(f"# {prefix}: {len(ranks)} ranks; medians over the iterations, microseconds")
    print(f"# {'collective':<15} {'bytes':>10} {'form':>4} {'iters':>5} {'time':>9} {'spread':>9} {'together':>9}")
    for (collective, size, form), iterations in sorted(calls.items()):
        times, spreads, together = [], [], []
        for by_rank in iterations.values():
            if set(by_rank) != ranks:
                continue  # a rank's file ended early
            starts = [start for start, _ in by_rank.values()]
            ends = [end for _, end in by_rank.values()]
            times.append(max(end - start for start, end in by_rank.values()) / 1e3)
            spreads.append((max(starts) - min(starts)) / 1e3)
            together.append((max(ends) - max(starts)) / 1e3)
        if not times:
            continue
        print(f"  {collective:<15} {size:>10} {form:>4} {len(times):>5} {statistics.median(times):>9.1f} "
              f"{statistics.median(spreads):>9.1f} {statistics.median(together):>9.1f}")


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    for prefix in sys.argv[1:]:
        summarize(prefix)


if __name__ == "__main__":
    main()
