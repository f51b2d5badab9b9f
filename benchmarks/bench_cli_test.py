"""weft-bench's flags, types, ops, roots, JSON output and errors (in-process transport).

    python3 benchmarks/bench_cli_test.py build/benchmarks/weft-bench
"""
import json
import os
import subprocess
import sys
import tempfile

from checks import expect, finish

BENCH = sys.argv[1]


def run(*args, env=None):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, **(env or {})))


def rows(stdout):
    """The table's data rows: (collective, fields)."""
    collective, out = None, []
    for line in stdout.splitlines():
        if line.startswith("# collective: "):
            collective = line.split(": ")[1]
        elif line.strip() and not line.startswith("#"):
            out.append((collective, line.split()))
    return out


# Every type with every op on 5 ranks, root 3: results exact, so #wrong is 0 in both forms.
for dtype in ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"]:
    for op in ["sum", "prod", "max", "min", "avg"]:
        result = run("--ranks", "5", "-d", dtype, "-o", op, "-r", "3", "-b", "4", "-e", "4K", "-f", "32",
                     "-n", "2", "-w", "1", "--collective", "allreduce" if op != "sum" else "all")
        table = rows(result.stdout)
        wrong = [f for _, f in table if f[8] not in ("0", "n/a") or f[12] not in ("0", "n/a")]
        expect(result.returncode == 0 and table and not wrong and "Out of bounds values : 0 OK" in result.stdout,
               f"{dtype} {op}: {len(table)} rows, #wrong 0", result)
        if op == "sum":
            collectives = {c for c, _ in table}
            expect(len(collectives) == 9, f"{dtype}: all nine collectives ran ({sorted(collectives)})", result)
            roots = {c: f[4] for c, f in table}
            expect(roots.get("broadcast") == "3" and roots.get("gather") == "3" and roots.get("allreduce") == "-1",
                   f"{dtype}: root column", result)

# Columns and busbw factors: busbw / algbw as nccl-tests defines them for 4 ranks.
result = run("--ranks", "4", "-b", "1M", "-e", "1M", "-n", "3", "-w", "1")
factors = {"allreduce": 1.5, "broadcast": 1.0, "reduce": 1.0, "allgather": 0.75, "reduce_scatter": 0.75,
           "alltoall": 0.75, "gather": 0.75, "scatter": 0.75, "sendrecv": 1.0}
for collective, fields in rows(result.stdout):
    form = 5 if fields[5] != "n/a" else 9
    algbw, busbw = float(fields[form + 1]), float(fields[form + 2])
    expect(algbw > 0 and abs(busbw / algbw - factors[collective]) < 0.02,
           f"busbw factor of {collective}: {busbw}/{algbw}", result)
    expect(fields[0] == "1048576" and int(fields[1]) * 4 == 1048576, f"{collective}: size and count columns", result)

# JSON output carries the same rows.
with tempfile.TemporaryDirectory() as scratch:
    path = os.path.join(scratch, "out.json")
    result = run("--ranks", "2", "--collective", "allreduce", "-b", "8", "-e", "8K", "-f", "4", "-n", "2",
                 "--json", path)
    with open(path) as handle:
        document = json.load(handle)
    expect(document["ranks"] == 2 and document["transport"] == "inproc" and len(document["results"]) == 6
           and all(r["out_of_place"]["wrong"] == 0 and r["in_place"]["busbw"] > 0 for r in document["results"])
           and [r["bytes"] for r in document["results"]] == [8, 32, 128, 512, 2048, 8192],
           "--json writes every row", result)

# --trace: one file per rank, a line per timed call and form, each call's end after its start;
# stagger.py reads them back into one row per collective, size and form.
with tempfile.TemporaryDirectory() as scratch:
    prefix = os.path.join(scratch, "calls")
    result = run("--ranks", "3", "--collective", "allreduce", "-b", "64", "-e", "256", "-f", "4", "-n", "5",
                 "-w", "1", "--trace", prefix)
    traced = {}
    for rank in range(3):
        path = f"{prefix}.{rank}"
        lines = open(path).read().splitlines() if os.path.exists(path) else []
        traced[rank] = [line.split() for line in lines if not line.startswith("#")]
    calls_ok = all(len(traced[rank]) == 2 * 2 * 5 for rank in traced)  # 2 sizes, 2 forms, 5 calls
    ordered = all(int(f[5]) > int(f[4]) for rank in traced for f in traced[rank])
    keys = {tuple(f[:4]) for f in traced[0]}
    same_calls = all({tuple(f[:4]) for f in traced[rank]} == keys for rank in traced)
    expect(result.returncode == 0 and calls_ok and ordered and same_calls
           and ("allreduce", "256", "in", "4") in keys,
           "--trace writes every timed call of every rank", result)
    stagger_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare", "stagger.py")
    stagger = subprocess.run([sys.executable, stagger_py, prefix], capture_output=True, text=True, timeout=60)
    summary = [line.split() for line in stagger.stdout.splitlines() if not line.startswith("#")]
    expect(stagger.returncode == 0 and len(summary) == 4 and all(f[3] == "5" for f in summary)
           and all(float(f[4]) >= float(f[6]) > 0 for f in summary),
           f"stagger.py summarizes the trace: {summary}", result)
    missing = subprocess.run([sys.executable, stagger_py, prefix + "-none"], capture_output=True, text=True,
                             timeout=60)
    expect(missing.returncode != 0 and "no trace files" in missing.stderr, "stagger.py names a missing trace", result)
result = run("--ranks", "2", "--collective", "allreduce", "-e", "64", "-n", "1", "--trace", "/nonexistent/dir/t")
expect(result.returncode == 1 and "--trace" in result.stderr and "cannot write" in result.stderr,
       "an unwritable --trace is refused on every rank", result)

# -c 0 skips the check and says so.
result = run("--ranks", "2", "--collective", "reduce", "-b", "64", "-e", "64", "-c", "0", "-n", "1")
expect(result.returncode == 0 and rows(result.stdout)[0][1][8] == "N/A", "-c 0 prints N/A for #wrong", result)

# An algorithm for every collective it implements; the others are skipped and named.
result = run("--ranks", "3", "--algorithm", "ring", "-b", "64", "-e", "64", "-n", "1")
collectives = {c for c, _ in rows(result.stdout)}
expect(result.returncode == 0 and {"allreduce", "broadcast", "allgather", "reduce_scatter"} <= collectives
       and "skipped: ring does not implement alltoall" in result.stdout, "--algorithm ring skips what ring lacks",
       result)

# An algorithm asked for one collective it cannot run is an error naming the choices.
result = run("--ranks", "3", "--collective", "allreduce", "--algorithm", "pairwise", "-n", "1", "-e", "64")
expect(result.returncode == 1 and "pairwise" in result.stderr and "choose one of" in result.stderr,
       "--algorithm pairwise --collective allreduce is refused", result)

# Bad flags: a clear message and exit status 2, before anything runs.
for args, text in [(["-b", "lots"], "-b wants a size"), (["-d", "complex"], "-d 'complex' is not one of"),
                   (["-o", "xor"], "-o 'xor' is not one of"), (["--collective", "allsum"], "is not one of"),
                   (["--algorithm", "fast"], "--algorithm 'fast'"), (["-n", "0"], "-n wants a whole number >= 1"),
                   (["-b", "1M", "-e", "1K"], "-b is larger than -e"), (["--bogus"], "unknown flag '--bogus'"),
                   (["-w"], "missing value after -w"), (["--transport", "carrier-pigeon"], "--transport"),
                   (["--transport", "tcp", "--ranks", "2"], "--ranks is for --transport inproc")]:
    result = run(*args)
    expect(result.returncode == 2 and text in result.stderr and "usage:" in result.stderr and not result.stdout,
           f"bad flags {args}: exit 2 and '{text}'", result)

for flag in ("--help", "-h"):
    result = run(flag)
    expect(result.returncode == 0 and "usage:" in result.stdout and "[4]" in result.stdout
           and "[automatic]" in result.stdout and not result.stderr,
           f"{flag}: the flags with their defaults on stdout, exit 0", result)

result = run("--ranks", "3", "-r", "3", "--collective", "broadcast", "-n", "1", "-e", "64")
expect(result.returncode == 1 and "root 3 is not a rank" in result.stderr, "a root outside the world is refused",
       result)

finish()
