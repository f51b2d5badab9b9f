#!/usr/bin/env python3
"""weft side by side with Open MPI and Gloo: same sizes, same rank counts, same inputs and
timing, alternating the systems in one run so the machine's noise hits all of them alike.

    python3 benchmarks/compare/compare.py [--build build] [--ranks 2,4] [--reps 3]
        [--collectives allreduce,broadcast,alltoall,allgather,reduce_scatter]
        [-b 8] [-e 64M] [-f 2] [-n 10] [-w 2] [--small-max 64K] [--small-iterations 100]
        [--seed 1] [--bind-to none|core] [--systems NAME,...] [--out DIR] [--smoke]

Systems (each skipped, loudly, when its program or launcher is missing):
    weft-tcp    weft-run -n N weft-bench --transport tcp
    mpi-tcp     mpirun -n N --mca btl self,tcp mpi-bench          (Open MPI's TCP path)
    gloo-ALG    weft-run -n N gloo-bench --algorithm ALG           (Gloo's TCP transport; ALG
                ring and halving_doubling for allreduce, ring_chunked and bcube too unless --smoke)
    weft-shm    weft-run -n N weft-bench --transport shm              (weft's shared-memory transport)
    weft-ofi-shm  WEFT_OFI_PROVIDER=shm weft-run -n N weft-bench --transport ofi  (libfabric's shm)
    mpi-vader   mpirun -n N --mca btl self,vader mpi-bench        (Open MPI's shared memory)

Every repetition runs every system once per rank count and collective, in an order shuffled
afresh each time (from --seed), so no system always follows the same one. Per system and size
the report takes the median busbw of the repetitions and its spread (min-max); ratios are
weft / peer of those medians, with weft's result in the same form (out of place, or in place
where the peer has only that). "gloo-best" is, per size, the best of Gloo's algorithms. The
goals are also given per repetition: weft / peer within each repetition, its range, and how
many repetitions reached the goal. Writes to --out: every run's JSON, summary.json, report.md
(the ratio tables and the goals) and busbw.svg (busbw vs size, one line per system).
Exit status 0 when every run finished with #wrong 0 (whether the goals were met is reported,
not judged here); --smoke runs a tiny sweep of every system (what CI runs).
"""
import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GLOO_COLLECTIVES = {"allreduce", "allgather", "broadcast"}
MPI_COLLECTIVES = {"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall", "gather",
                   "scatter", "sendrecv"}
PAIRS = [  # (weft, peer, what the ratio says)
    ("weft-tcp", "mpi-tcp", "weft TCP / Open MPI TCP"),
    ("weft-tcp", "gloo-best", "weft TCP / Gloo's best"),
    ("weft-shm", "mpi-vader", "weft shm / Open MPI vader"),
    ("weft-shm", "weft-ofi-shm", "weft shm / weft over libfabric shm"),
    ("weft-ofi-shm", "mpi-vader", "weft over libfabric shm / Open MPI vader"),
]
COLOURS = {"weft-tcp": "#d62728", "mpi-tcp": "#1f77b4", "gloo-best": "#2ca02c", "weft-shm": "#ff7f0e",
           "weft-ofi-shm": "#8c564b", "mpi-vader": "#9467bd"}
SHOWN = ["weft-tcp", "mpi-tcp", "gloo-best", "weft-shm", "weft-ofi-shm", "mpi-vader"]


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def human(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


class Systems:
    """The command line of each system, given a rank count, collectives and a JSON path."""

    def __init__(self, args):
        self.args = args
        build = os.path.abspath(args.build)
        self.weft_bench = os.path.join(build, "benchmarks", "weft-bench")
        self.mpi_bench = os.path.join(build, "benchmarks", "compare", "mpi-bench")
        self.gloo_bench = os.path.join(build, "benchmarks", "compare", "gloo-bench")
        self.weft_run = [sys.executable, os.path.join(ROOT, "tools", "weft-run")]
        # Open MPI's by its alternative's own name: MPICH's mpirun may be installed beside it
        self.mpirun = shutil.which("mpirun.openmpi") or shutil.which("mpirun")
        self.missing = {}
        if not os.path.exists(self.weft_bench):
            sys.exit(f"compare.py: {self.weft_bench} is not built (meson setup {args.build} && ninja -C {args.build})")
        if not os.path.exists(self.mpi_bench) or not self.mpirun:
            self.missing["mpi"] = "mpi-bench or mpirun missing (apt-get install openmpi-bin libopenmpi-dev, then rebuild)"
        if not os.path.exists(self.gloo_bench):
            self.missing["gloo"] = "gloo-bench missing (apt-get install libgloo-dev, then rebuild)"
        self.gloo_algorithms = ["ring", "halving_doubling"] if args.smoke else \
            ["ring", "halving_doubling", "ring_chunked", "bcube"]

    def names(self):
        names = self.all_names()
        wanted = getattr(self.args, "systems", None)
        if wanted:
            unknown = [n for n in wanted if n not in names]
            if unknown:
                sys.exit(f"compare.py: --systems: {', '.join(unknown)} not among {', '.join(names)}")
            names = [n for n in names if n in wanted]
        return names

    def all_names(self):
        names = ["weft-tcp"]
        if "mpi" not in self.missing:
            names.append("mpi-tcp")
        if "gloo" not in self.missing:
            names += [f"gloo-{a}" for a in self.gloo_algorithms]
        if not self.args.no_shm:
            names += ["weft-shm", "weft-ofi-shm"]
            if "mpi" not in self.missing:
                names.append("mpi-vader")
        return names

    def collectives_for(self, name, collectives):
        if name.startswith("gloo-"):
            wanted = [c for c in collectives if c in GLOO_COLLECTIVES]
            # the algorithm only changes allreduce; the others run once, with the first
            if name != f"gloo-{self.gloo_algorithms[0]}":
                wanted = [c for c in wanted if c == "allreduce"]
            return wanted
        if name.startswith("mpi-"):
            return [c for c in collectives if c in MPI_COLLECTIVES]
        return list(collectives)

    def command(self, name, ranks, collective, piece, json_path, store_dir):
        a = self.args
        low, high, iterations = piece
        sweep = ["--collective", collective, "-b", str(low), "-e", str(high), "-f", str(a.factor),
                 "-n", str(iterations), "-w", str(a.warmup), "--json", json_path]
        env = dict(os.environ, WEFT_OFI_QUIET="1")
        weft_run = self.weft_run + ["-n", str(ranks), "--no-prefix", "--bind-to", a.bind_to, "--"]
        if name == "weft-tcp":
            return weft_run + [self.weft_bench, "--transport", "tcp"] + sweep, env
        if name == "weft-shm":
            return weft_run + [self.weft_bench, "--transport", "shm"] + sweep, env
        if name == "weft-ofi-shm":
            env["WEFT_OFI_PROVIDER"] = "shm"
            return weft_run + [self.weft_bench, "--transport", "ofi"] + sweep, env
        if name.startswith("mpi-"):
            btl = "self,tcp" if name == "mpi-tcp" else "self,vader"
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl=btl,
                       OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo", OMPI_MCA_pml="ob1")
            # core binding as weft-run's: rank r on core r, round-robin past the last core
            binding = ["--map-by", "core", "--bind-to", "core:overload-allowed"] if a.bind_to == "core" else \
                ["--bind-to", "none"]
            return [self.mpirun, "-n", str(ranks), "--oversubscribe"] + binding + [self.mpi_bench,
                    "--transport", name[4:]] + sweep, env
        algorithm = name[len("gloo-"):]
        env["WEFT_STORE_PATH"] = store_dir
        return weft_run + [self.gloo_bench, "--algorithm", algorithm] + sweep, env


def sweep_pieces(args):
    """The sweep as (min, max, iterations) runs: sizes up to --small-max get --small-iterations
    (a latency median over 10 calls of ~100 us is one scheduler hiccup away from doubling), the
    rest -n."""
    sizes = []
    size = args.min_bytes
    while size <= args.max_bytes:
        sizes.append(size)
        size *= args.factor
    small = [s for s in sizes if s <= args.small_max]
    large = [s for s in sizes if s > args.small_max]
    pieces = []
    if small:
        pieces.append((small[0], small[-1], max(args.iterations, args.small_iterations)))
    if large:
        pieces.append((large[0], large[-1], args.iterations))
    return pieces


def run_one(systems, name, ranks, collective, piece, path, args):
    """Runs one program over one piece of the sweep: (document, problem or None, output)."""
    with tempfile.TemporaryDirectory() as store_dir:
        command, env = systems.command(name, ranks, collective, piece, path, store_dir)
        try:
            finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
            problem = None if finished.returncode == 0 else f"exit status {finished.returncode}"
            output = finished.stdout + finished.stderr
        except subprocess.TimeoutExpired as expired:
            problem, output = f"did not finish in {args.timeout} s", str(expired.stdout or "")
    with open(path.replace(".json", ".txt"), "w") as log:
        log.write(" ".join(command) + "\n" + output)
    document = None
    if problem is None:
        try:
            with open(path) as handle:
                document = json.load(handle)
        except (OSError, ValueError) as error:
            problem = f"no JSON ({error})"
    return document, problem, output


def run_all(args, systems, out_dir):
    """Runs every repetition; returns {(ranks, collective, system): [json document, ...]}."""
    names = systems.names()
    results = {}
    failures = []
    plan = [(rep, ranks, collective) for rep in range(args.reps) for ranks in args.ranks for collective in args.collectives]
    started = time.time()
    for step, (rep, ranks, collective) in enumerate(plan):
        # A fresh order for every step: a rotation would keep each system behind the same
        # predecessor in every repetition, so whatever one system leaves behind (memory to fault
        # back in, sockets closing) would always land on the same next one.
        order = list(names)
        random.Random(f"{args.seed}/{step}").shuffle(order)
        for name in order:
            if collective not in systems.collectives_for(name, [collective]):
                continue
            print(f"[{time.time() - started:6.0f} s] rep {rep + 1}/{args.reps}, {ranks} ranks, {collective}: {name}",
                  file=sys.stderr, flush=True)
            document, problem, output = None, None, ""
            for part, piece in enumerate(sweep_pieces(args)):
                path = os.path.join(out_dir, "runs", f"{name}-{ranks}ranks-{collective}-rep{rep + 1}-part{part + 1}.json")
                part_document, problem, output = run_one(systems, name, ranks, collective, piece, path, args)
                if problem:
                    break
                if document is None:
                    document = part_document
                else:
                    document["results"] += part_document["results"]
                    document["wrong"] += part_document["wrong"]
            if problem is None and document["wrong"] != 0:
                problem = f"{document['wrong']} wrong elements"
            if problem:
                failures.append(f"{name}, {ranks} ranks, {collective}, rep {rep + 1}: {problem}\n{output[-2000:]}")
                print(f"  FAILED: {problem}", file=sys.stderr)
                continue
            document["rep"] = rep
            results.setdefault((ranks, collective, name), []).append(document)
    return results, failures


def busbw_of(row, form=None):
    """(busbw, time_us, form) of a row: the form asked for, else out of place, else in place."""
    forms = [form] if form else ["out_of_place", "in_place"]
    for name in forms:
        if row.get(name):
            return row[name]["busbw"], row[name]["time_us"], name
    return None


def summarise(results, systems, args):
    """{(ranks, collective): {system: {bytes: {median, min, max, time_us, form, runs, by_rep}}}},
    gloo-best added; by_rep holds each repetition's (busbw, time_us, in-place busbw or None)."""
    table = {}
    for (ranks, collective, name), documents in results.items():
        per_size = {}
        for document in documents:
            for row in document["results"]:
                per_size.setdefault(row["bytes"], []).append(dict(row, rep=document.get("rep")))
        entry = {}
        for size, rows in per_size.items():
            first = busbw_of(rows[0])
            if first is None:
                continue
            form = first[2]
            values = [busbw_of(r, form)[0] for r in rows]
            times = [busbw_of(r, form)[1] for r in rows]
            entry[size] = {"median": statistics.median(values), "min": min(values), "max": max(values),
                           "time_us": statistics.median(times), "form": form, "runs": len(values),
                           "in_place_busbw": statistics.median([r["in_place"]["busbw"] for r in rows])
                           if all(r.get("in_place") for r in rows) else None,
                           "by_rep": {r["rep"]: busbw_of(r, form)[:2] + (r["in_place"]["busbw"] if r.get("in_place")
                                                                          else None,) for r in rows}}
        table.setdefault((ranks, collective), {})[name] = entry
    for key, by_system in table.items():
        gloo = {n: e for n, e in by_system.items() if n.startswith("gloo-")}
        if not gloo:
            continue
        best = {}
        for name, entry in gloo.items():
            for size, cell in entry.items():
                if size not in best or cell["median"] > best[size]["median"]:
                    # by_rep stays that algorithm's: per repetition, the best algorithm by median
                    best[size] = dict(cell, algorithm=name[len("gloo-"):])
        by_system["gloo-best"] = best
    return table


def in_place_only(weft_cell, peer_cell):
    """Whether the peer has only the in-place form where weft's figure is out of place, so that
    weft's in-place figure is the one to compare."""
    return peer_cell["form"] == "in_place" and weft_cell["form"] == "out_of_place"


def weft_cell_like(weft_cell, peer_cell):
    """weft's busbw in the peer's form (in place when the peer has only that)."""
    if in_place_only(weft_cell, peer_cell) and weft_cell.get("in_place_busbw"):
        return weft_cell["in_place_busbw"]
    return weft_cell["median"]


def paired_ratios(weft_cell, peer_cell, latency=False):
    """weft / peer within each repetition both ran in (the two ran minutes apart at most, in the
    same step): busbw ratios in the peer's form, or for latency the peer's time / weft's."""
    ratios = []
    for rep, (busbw, time_us, in_place) in weft_cell.get("by_rep", {}).items():
        peer = peer_cell.get("by_rep", {}).get(rep)
        if peer is None:
            continue
        if latency:
            ratios.append(peer[1] / time_us if time_us > 0 else math.inf)
            continue
        mine = in_place if in_place_only(weft_cell, peer_cell) and in_place else busbw
        if peer[0] > 0:
            ratios.append(mine / peer[0])
    return ratios


def ratio_rows(table, ranks, collective):
    by_system = table.get((ranks, collective), {})
    rows = []
    sizes = sorted({s for e in by_system.values() for s in e})
    for size in sizes:
        line = {"bytes": size}
        for weft, peer, _ in PAIRS:
            w, p = by_system.get(weft, {}).get(size), by_system.get(peer, {}).get(size)
            if w and p and p["median"] > 0:
                line[(weft, peer)] = weft_cell_like(w, p) / p["median"]
        rows.append(line)
    return rows


def goals(table, args):
    """The issue's performance goals, each with its measured ratios and whether it was met."""
    checks = []

    def each(ranks_list, collective, weft, peer, sizes, threshold, what):
        for ranks in ranks_list:
            by_system = table.get((ranks, collective), {})
            for size in sizes:
                w, p = by_system.get(weft, {}).get(size), by_system.get(peer, {}).get(size)
                if not (w and p):
                    continue
                value = weft_cell_like(w, p) / p["median"]
                checks.append((what, ranks, size, value, threshold, value >= threshold, paired_ratios(w, p)))

    big = [s for s in (1 << 20, 4 << 20, 16 << 20, 64 << 20) if args.min_bytes <= s <= args.max_bytes]
    each([2, 4], "allreduce", "weft-tcp", "mpi-tcp", big, 1.0, "TCP allreduce busbw vs Open MPI TCP")
    each([2, 4], "allreduce", "weft-tcp", "gloo-best", big, 1.25, "TCP allreduce busbw vs Gloo's best")
    for ranks in (2, 4):
        by_system = table.get((ranks, "allreduce"), {})
        w, p = by_system.get("weft-tcp", {}).get(8), by_system.get("mpi-tcp", {}).get(8)
        if w and p:
            value = p["time_us"] / w["time_us"]
            checks.append(("8 B allreduce latency, Open MPI TCP time / weft time", ranks, 8, value, 1.0, value >= 1.0,
                           paired_ratios(w, p, latency=True)))
    each([2], "allreduce", "weft-shm", "mpi-vader", big, 2.0, "shm allreduce busbw vs Open MPI vader")
    each([2], "allreduce", "weft-shm", "weft-ofi-shm", big, 1.5, "shm allreduce busbw vs weft over libfabric shm")
    each([4], "allreduce", "weft-shm", "mpi-vader", big, 1.0, "shm allreduce busbw vs Open MPI vader")
    by_system = table.get((2, "allreduce"), {})
    w, p = by_system.get("weft-shm", {}).get(8), by_system.get("mpi-vader", {}).get(8)
    if w and p:
        value = p["time_us"] / w["time_us"]
        checks.append(("8 B shm allreduce latency, Open MPI vader time / weft time", 2, 8, value, 1.0, value >= 1.0,
                       paired_ratios(w, p, latency=True)))
    each([2, 4], "allreduce", "weft-ofi-shm", "mpi-vader", big, 0.8,
         "libfabric shm allreduce busbw vs Open MPI vader")
    mid = [s for s in (1 << 20, 16 << 20) if args.min_bytes <= s <= args.max_bytes]
    each([4], "broadcast", "weft-tcp", "mpi-tcp", mid, 1.0, "broadcast busbw vs Open MPI TCP")
    each([4], "alltoall", "weft-tcp", "mpi-tcp", mid, 1.0, "alltoall busbw vs Open MPI TCP")
    return checks


def report(table, checks, args, systems, failures):
    lines = [f"# weft vs Open MPI vs Gloo: busbw (GB/s), median [min-max] of {args.reps} repetition(s)", ""]
    lines.append(f"Sizes {human(args.min_bytes)} to {human(args.max_bytes)} (factor {args.factor}), float32 sum, "
                 f"{args.iterations} timed iterations ({max(args.iterations, args.small_iterations)} up to "
                 f"{human(args.small_max)}) after {args.warmup} warm-up, median of the slowest rank's "
                 f"time per call; systems in a shuffled order per step (seed {args.seed}); ranks "
                 f"{'bound to cores' if args.bind_to == 'core' else 'unbound'}. "
                 f"Machine: {machine()}.")
    for name, why in systems.missing.items():
        lines.append(f"\nNot measured: {name}: {why}")
    for ranks in args.ranks:
        for collective in args.collectives:
            by_system = table.get((ranks, collective))
            if not by_system:
                continue
            shown = [n for n in SHOWN if n in by_system]
            pairs = [(w, p, what) for w, p, what in PAIRS if w in by_system and p in by_system]
            lines += ["", f"## {collective}, {ranks} ranks", ""]
            header = ["size"] + shown + [f"{w} / {p}" for w, p, _ in pairs]
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "---|" * len(header))
            for row in ratio_rows(table, ranks, collective):
                size = row["bytes"]
                cells = [human(size)]
                for name in shown:
                    cell = by_system[name].get(size)
                    if not cell:
                        cells.append("")
                        continue
                    text = f"{cell['median']:.3g} [{cell['min']:.3g}-{cell['max']:.3g}]"
                    if size <= 64:
                        text = f"{cell['time_us']:.0f} us"
                    if name == "gloo-best":
                        text += f" {cell['algorithm']}"
                    if cell["form"] == "in_place":
                        text += " (in place)"
                    cells.append(text)
                for w, p, _ in pairs:
                    value = row.get((w, p))
                    cells.append(f"{value:.2f}" if value is not None else "")
                lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Goals", "",
              "measured: the ratio of the medians over the repetitions; per repetition: weft / peer within "
              "each repetition (the two ran in the same step), its range, and in how many repetitions it "
              "reached the goal.", "",
              "| goal | ranks | size | measured | needed | met | per repetition | reps at goal |",
              "|---|---|---|---|---|---|---|---|"]
    for what, ranks, size, value, threshold, met, paired in checks:
        spread = f"{min(paired):.2f}-{max(paired):.2f}" if paired else ""
        at_goal = f"{sum(r >= threshold for r in paired)}/{len(paired)}" if paired else ""
        lines.append(f"| {what} | {ranks} | {human(size)} | {value:.2f}x | >= {threshold:.2f}x | "
                     f"{'yes' if met else 'NO'} | {spread} | {at_goal} |")
    if failures:
        lines += ["", "## Failed runs", ""] + [f"- {f.splitlines()[0]}" for f in failures]
    return "\n".join(lines) + "\n"


def machine():
    try:
        with open("/proc/cpuinfo") as handle:
            model = next((l.split(":", 1)[1].strip() for l in handle if l.startswith("model name")), "unknown CPU")
    except OSError:
        model = "unknown CPU"
    # The system's TCP congestion control: Open MPI's and Gloo's connections run under it; weft's
    # between ranks on one host under config::local_congestion (cubic, else reno).
    try:
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as handle:
            congestion = handle.read().strip()
    except OSError:
        congestion = "unknown"
    return (f"{os.cpu_count()} cores ({model}), {os.uname().sysname} {os.uname().release}, "
            f"TCP congestion control {congestion}")


def svg_plot(table, args, path):
    """busbw vs size, log-log, one panel per (collective, ranks), one line per system."""
    panels = [(c, r) for c in args.collectives for r in args.ranks if table.get((r, c))]
    columns = len(args.ranks)
    rows = math.ceil(len(panels) / columns) if panels else 1
    width, height, margin = 420, 300, 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{columns * width}" height="{rows * height + 40}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="18" font-size="14">busbw (GB/s) vs message size, median of {args.reps} run(s)</text>',
           f'<text x="10" y="34">{machine()}</text>']
    for index, (collective, ranks) in enumerate(panels):
        by_system = table[(ranks, collective)]
        x0 = (index % columns) * width + margin
        y0 = (index // columns) * height + 40 + 20
        w, h = width - margin - 20, height - margin - 20
        sizes = sorted({s for e in by_system.values() for s in e})
        values = [c["median"] for n, e in by_system.items() if not n.startswith("gloo-") or n == "gloo-best"
                  for c in e.values() if c["median"] > 0]
        if not sizes or not values:
            continue
        lo_x, hi_x = math.log2(sizes[0]), math.log2(sizes[-1]) if sizes[-1] > sizes[0] else math.log2(sizes[0]) + 1
        lo_y = math.floor(math.log10(min(values)))
        hi_y = math.ceil(math.log10(max(values))) if max(values) > 10 ** lo_y else lo_y + 1

        def px(size):
            return x0 + (math.log2(size) - lo_x) / (hi_x - lo_x) * w

        def py(value):
            return y0 + h - (math.log10(max(value, 10 ** lo_y)) - lo_y) / (hi_y - lo_y) * h

        out.append(f'<text x="{x0}" y="{y0 - 6}" font-size="12">{collective}, {ranks} ranks</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>')
        for decade in range(lo_y, hi_y + 1):
            y = py(10 ** decade)
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{10.0 ** decade:g}</text>')
        for size in sizes[::max(1, len(sizes) // 6)]:
            x = px(size)
            out.append(f'<text x="{x:.1f}" y="{y0 + h + 14}" text-anchor="middle">{human(size).replace(" ", "")}</text>')
        legend = 0
        for name in SHOWN:
            entry = by_system.get(name)
            if not entry:
                continue
            points = " ".join(f"{px(s):.1f},{py(entry[s]['median']):.1f}" for s in sorted(entry))
            out.append(f'<polyline points="{points}" fill="none" stroke="{COLOURS[name]}" stroke-width="2"/>')
            out.append(f'<text x="{x0 + 6}" y="{y0 + 14 + 13 * legend}" fill="{COLOURS[name]}">{name}</text>')
            legend += 1
    out.append("</svg>")
    with open(path, "w") as handle:
        handle.write("\n".join(out) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--collectives", default="allreduce,broadcast,alltoall,allgather,reduce_scatter")
    parser.add_argument("-b", dest="min_bytes", default="8")
    parser.add_argument("-e", dest="max_bytes", default="64M")
    parser.add_argument("-f", dest="factor", type=int, default=2)
    parser.add_argument("-n", dest="iterations", type=int, default=10)
    parser.add_argument("-w", dest="warmup", type=int, default=2)
    parser.add_argument("--small-max", default="64K", help="sizes up to this run --small-iterations times")
    parser.add_argument("--small-iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1, help="seed of the systems' order in each step")
    parser.add_argument("--bind-to", choices=("none", "core"), default="none",
                        help="none (default): every system unbound; core: every system's rank r on core r "
                             "(weft-run --bind-to core, mpirun --map-by core --bind-to core:overload-allowed)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per run")
    parser.add_argument("--out", default=None, help="directory for the results (default: compare-results/<time>)")
    parser.add_argument("--no-shm", action="store_true", help="leave out weft-shm, weft-ofi-shm and mpi-vader")
    parser.add_argument("--systems", default=None,
                        help="only these systems, comma-separated (e.g. weft-shm,weft-ofi-shm,mpi-vader)")
    parser.add_argument("--smoke", action="store_true", help="a tiny sweep of every system (2 ranks, 1 run)")
    args = parser.parse_args()
    if args.smoke:
        args.ranks, args.reps, args.collectives = "2", 1, "allreduce,broadcast"
        args.min_bytes, args.max_bytes, args.factor, args.iterations, args.warmup = "8", "64K", 16, 2, 1
        args.small_max, args.small_iterations = "2K", 2  # both pieces of the sweep run
    args.ranks = [int(r) for r in args.ranks.split(",")]
    args.systems = args.systems.split(",") if args.systems else None
    args.collectives = args.collectives.split(",")
    args.min_bytes, args.max_bytes = parse_size(str(args.min_bytes)), parse_size(str(args.max_bytes))
    args.small_max = parse_size(str(args.small_max))
    out_dir = args.out or os.path.join("compare-results", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    systems = Systems(args)
    for name, why in systems.missing.items():
        print(f"compare.py: NOT MEASURED: {name}: {why}", file=sys.stderr)
    results, failures = run_all(args, systems, out_dir)
    table = summarise(results, systems, args)
    checks = goals(table, args)
    text = report(table, checks, args, systems, failures)
    with open(os.path.join(out_dir, "report.md"), "w") as handle:
        handle.write(text)
    with open(os.path.join(out_dir, "summary.json"), "w") as handle:
        json.dump({f"{r} ranks {c}": {n: {str(s): v for s, v in e.items()} for n, e in by_system.items()}
                   for (r, c), by_system in table.items()}, handle, indent=1)
    svg_plot(table, args, os.path.join(out_dir, "busbw.svg"))
    print(text)
    print(f"compare.py: wrote {out_dir}/report.md, summary.json, busbw.svg and runs/", file=sys.stderr)
    for failure in failures:
        print(f"compare.py: FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
