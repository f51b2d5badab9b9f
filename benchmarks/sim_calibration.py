"""The simulator against this machine: alpha, beta and the memory bandwidth measured here (by
weft-bench and memcpy_ratio), then the ring allreduce times weft-bench measures, predicted by
weft-sim on a uniform fabric with those constants, side by side.

    python3 benchmarks/sim_calibration.py BUILD_DIR [--transports inproc,tcp] [--ranks 2,4]

alpha and beta: a line through weft-bench's sendrecv times (least squares of the relative error) (every rank sends to
the next and receives from the previous at once: one step of a ring) over the block sizes the
ring allreduce moves, 64 KiB / p to 64 MiB / p. Memory: twice memcpy's rate (a copy reads and
writes each byte), what a combine's traffic is timed at. The ring allreduce runs from 64 KiB to
64 MiB with the same reduction pieces in both (WEFT_REDUCE_CHUNK_BYTES). Prints a table per
transport and rank count: measured and predicted microseconds, and the error.
"""
import json
import os
import subprocess
import sys
import tempfile

build = sys.argv[1]
args = sys.argv[2:]
transports = ["inproc", "tcp"]
ranks_list = [2, 4]
for i, flag in enumerate(args):
    if flag == "--transports":
        transports = args[i + 1].split(",")
    if flag == "--ranks":
        ranks_list = [int(r) for r in args[i + 1].split(",")]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
bench = os.path.join(build, "benchmarks", "weft-bench")
sim = os.path.join(build, "benchmarks", "weft-sim")
memcpy = os.path.join(build, "benchmarks", "memcpy_ratio")
pieces = {"inproc": "1M", "tcp": "256K"}


def bench_rows(transport, p, collective, algorithm, low, high, env):
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "bench.json")
        command = [bench, "--collective", collective, "--algorithm", algorithm, "-b", low, "-e", high, "-f", "4",
                   "-n", "40", "-w", "5", "--json", out]
        if transport == "inproc":
            command += ["--ranks", str(p)]
        else:
            command = [sys.executable, os.path.join(root, "tools", "weft-run"), "-n", str(p), "--timeout", "300",
                       "--"] + command + ["--transport", transport]
        subprocess.run(command, check=True, capture_output=True, env=dict(os.environ, **env), timeout=600)
        return {row["bytes"]: row["out_of_place"]["time_us"] for row in json.load(open(out))["results"]}


def memory_gbs():
    text = subprocess.run([memcpy, "1"], check=True, capture_output=True, text=True).stdout
    for line in text.splitlines():
        if line.startswith("single-thread memcpy"):
            return 2 * float(line.split(":")[1].split()[0])
    raise RuntimeError("memcpy_ratio printed no memcpy rate")


memory = memory_gbs()
print(f"# memory bandwidth for the simulator: {memory:.1f} GB/s (twice memcpy's)")
worst = 0.0
for transport in transports:
    for p in ranks_list:
        env = {"WEFT_REDUCE_CHUNK_BYTES": pieces.get(transport, "1M")}
        steps = bench_rows(transport, p, "sendrecv", "automatic", str((64 << 10) // p), str((64 << 20) // p), env)
        # least squares of the relative error: minimise sum ((alpha + beta x - y) / y)^2
        sizes = sorted(steps)
        w = [1 / steps[x] ** 2 for x in sizes]
        sw = sum(w)
        sx = sum(wi * x for wi, x in zip(w, sizes))
        sy = sum(wi * steps[x] for wi, x in zip(w, sizes))
        sxx = sum(wi * x * x for wi, x in zip(w, sizes))
        sxy = sum(wi * x * steps[x] for wi, x in zip(w, sizes))
        beta = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)  # us per byte
        alpha = max((sy - beta * sx) / sw, 0.1)  # us
        measured = bench_rows(transport, p, "allreduce", "ring", "64K", "64M", env)
        with tempfile.TemporaryDirectory() as scratch:
            out = os.path.join(scratch, "sim.json")
            subprocess.run([sim, "--fabric", "uniform", "--ranks", str(p), "--gbps", f"{8e-3 / beta:.6g}",
                            "--latency-us", f"{alpha:.6g}", "--memory-gbs", f"{memory:.6g}", "--algorithm", "ring",
                            "-b", "64K", "-e", "64M", "-f", "4", "--json", out],
                           check=True, capture_output=True, env=dict(os.environ, **env), timeout=600)
            predicted = {row["bytes"]: row["seconds"] * 1e6 for row in json.load(open(out))["rows"]}
        print(f"\n# {transport}, {p} ranks: alpha {alpha:.1f} us, beta 1/{1 / beta / 1e3:.2f} GB/s, "
              f"pieces {env['WEFT_REDUCE_CHUNK_BYTES']}")
        print(f"# {'size (B)':>10} {'measured (us)':>14} {'predicted (us)':>15} {'error':>8}")
        for size in sorted(measured):
            error = predicted[size] / measured[size] - 1
            worst = max(worst, abs(error))
            print(f"  {size:>10} {measured[size]:>14.1f} {predicted[size]:>15.1f} {100 * error:>+7.1f}%")
print(f"\n# largest error {100 * worst:.1f}% (goal: within 25%)")
