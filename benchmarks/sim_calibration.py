"""The simulator against this machine: latency, bandwidth and memory bandwidth measured here by
weft-bench, then the ring allreduce times weft-bench measures, predicted by weft-sim on a uniform
fabric with those constants, side by side.

    python3 benchmarks/sim_calibration.py BUILD_DIR [--transports inproc,tcp] [--ranks 2,4] [--rounds 5]

A host's bandwidth depends on where the bytes are (blocks that stay in the caches move several
times faster than blocks from DRAM) and on how a transfer is paced, so the constants are
measured per predicted size N, from the steps the ring itself takes, on the same transport and
rank count:

  alpha    one latency for all sizes. weft-bench times each call after a barrier, as its
           slowest rank, so a measured call also pays once the skew the barrier leaves; the
           simulator starts every rank at once. A line through the sendrecv times (every rank
           sends to the next and receives from the previous at once: one step of a ring) from
           64 KiB / p to 64 MiB / p blocks, least squares of the relative error, crosses zero
           at skew + alpha; one through the ring allgather's (p - 1 such steps) at
           skew + (p - 1) alpha. With 2 ranks both are one step: the skew counts as latency.
  beta(N)  the link bandwidth at which weft-sim's ring allgather of N bytes (p - 1 steps of
           N / p, no reduction: the second half of the ring allreduce) takes what weft-bench
           measured for it, less the skew (bisection through weft-sim). Where even free bytes
           would take longer (the call is all latency), the sendrecv line's beta.
  mem(N)   what a combine's traffic is timed at: one rank copying p N bytes (weft-bench's
           allreduce on 1 rank, out of place; the p ranks' working set), 2 p N bytes over
           the time.

So the simulator is told how fast this machine moves the allgather's bytes and copies memory;
it predicts what the reduce-scatter half adds (the combines, overlapped with the pieces in
flight, and its steps). Every measurement runs --rounds times, the benchmarks interleaved, and
the medians are used. The table prints, per size, the measured median and the spread of the
rounds (largest / smallest: how far this machine moves between runs of the same thing), the
prediction (simulated time plus the skew) and its error against the median.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

build = sys.argv[1]
args = sys.argv[2:]
transports = ["inproc", "tcp"]
ranks_list = [2, 4]
rounds = 5
for i, flag in enumerate(args):
    if flag == "--transports":
        transports = args[i + 1].split(",")
    if flag == "--ranks":
        ranks_list = [int(r) for r in args[i + 1].split(",")]
    if flag == "--rounds":
        rounds = int(args[i + 1])
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
bench = os.path.join(build, "benchmarks", "weft-bench")
sim = os.path.join(build, "benchmarks", "weft-sim")
pieces = {"inproc": "1M", "tcp": "256K"}
low, high = 64 << 10, 64 << 20


def bench_rows(transport, p, collective, algorithm, first, last, env):
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "bench.json")
        command = [bench, "--collective", collective, "--algorithm", algorithm, "-b", str(first), "-e", str(last),
                   "-f", "2", "-n", "40", "-w", "5", "--json", out]
        if transport == "inproc":
            command += ["--ranks", str(p)]
        else:
            command = [sys.executable, os.path.join(root, "tools", "weft-run"), "-n", str(p), "--timeout", "300",
                       "--"] + command + ["--transport", transport]
        subprocess.run(command, check=True, capture_output=True, env=dict(os.environ, **env), timeout=600)
        return {row["bytes"]: row["out_of_place"]["time_us"] for row in json.load(open(out))["results"]}


def measured_rounds(jobs):
    """Runs every job `rounds` times, interleaved; per job, per size, the list of times."""
    results = [dict() for _ in jobs]
    for round_ in range(rounds):
        print(f"# round {round_ + 1} of {rounds}", file=sys.stderr, flush=True)
        for result, job in zip(results, jobs):
            for size, time_us in bench_rows(*job).items():
                result.setdefault(size, []).append(time_us)
    return results


def relative_line(times, sizes):
    """alpha (us) and beta (us per byte) minimising sum ((alpha + beta x - y) / y)^2."""
    w = [1 / times[x] ** 2 for x in sizes]
    sw = sum(w)
    sx = sum(wi * x for wi, x in zip(w, sizes))
    sy = sum(wi * times[x] for wi, x in zip(w, sizes))
    sxx = sum(wi * x * x for wi, x in zip(w, sizes))
    sxy = sum(wi * x * times[x] for wi, x in zip(w, sizes))
    beta = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    return max((sy - beta * sx) / sw, 0.1), beta


def predict(collective, p, alpha_us, beta_us_per_byte, memory_gbs, size, env):
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "sim.json")
        subprocess.run([sim, "--fabric", "uniform", "--ranks", str(p), "--gbps", f"{8e-3 / beta_us_per_byte:.6g}",
                        "--latency-us", f"{alpha_us:.6g}", "--memory-gbs", f"{memory_gbs:.6g}", "--algorithm", "ring",
                        "--collective", collective, "-b", str(size), "-e", str(size), "--json", out],
                       check=True, capture_output=True, env=dict(os.environ, **env), timeout=600)
        return json.load(open(out))["rows"][0]["seconds"] * 1e6


def fitted_beta(p, alpha_us, memory_gbs, size, measured_us, fallback, env):
    """The beta at which the simulated ring allgather of `size` takes `measured_us`; `fallback`
    where even free bytes would take longer (the call is all latency)."""
    if predict("allgather", p, alpha_us, fallback * 1e-3, memory_gbs, size, env) >= measured_us:
        return fallback
    fast, slow = fallback * 1e-3, fallback * 1e3
    for _ in range(40):  # bisection on log(beta): the simulated time grows with beta
        middle = (fast * slow) ** 0.5
        if predict("allgather", p, alpha_us, middle, memory_gbs, size, env) < measured_us:
            fast = middle
        else:
            slow = middle
        if slow / fast < 1.001:
            break
    return (fast * slow) ** 0.5


worst = 0.0
for transport in transports:
    for p in ranks_list:
        env = {"WEFT_REDUCE_CHUNK_BYTES": pieces.get(transport, "1M")}
        steps, gathers, copies, allreduces = measured_rounds([
            (transport, p, "sendrecv", "automatic", low // p, high // p, env),
            (transport, p, "allgather", "ring", low, high, env),
            ("inproc", 1, "allreduce", "ring", low, p * high, env),
            (transport, p, "allreduce", "ring", low, high, env),
        ])
        step = {size: statistics.median(times) for size, times in steps.items()}
        gather = {size // p: statistics.median(times) for size, times in gathers.items()}
        copy = {size: statistics.median(times) for size, times in copies.items()}
        blocks = sorted(step)
        one_step, line_beta = relative_line(step, blocks)
        skew = 0.0
        if p > 2:
            p_minus_1_steps, _ = relative_line(gather, blocks)
            skew = max(one_step - max((p_minus_1_steps - one_step) / (p - 2), 0.1), 0.0)
        alpha = one_step - skew
        print(f"\n# {transport}, {p} ranks: alpha {alpha:.1f} us, skew {skew:.1f} us; pieces "
              f"{env['WEFT_REDUCE_CHUNK_BYTES']}; medians of {rounds} rounds")
        print(f"# {'size (B)':>10} {'beta (GB/s)':>11} {'mem (GB/s)':>10} {'measured (us)':>14} {'spread':>7} "
              f"{'predicted (us)':>15} {'error':>8}")
        for size in (low << shift for shift in range(0, 11, 2)):  # 64 KiB, 256 KiB, ... 64 MiB
            memory = 2 * p * size / copy[p * size] / 1e3
            beta = fitted_beta(p, alpha, memory, size, gather[size // p] - skew, line_beta, env)
            times = allreduces[size]
            median = statistics.median(times)
            predicted = skew + predict("allreduce", p, alpha, beta, memory, size, env)
            error = predicted / median - 1
            worst = max(worst, abs(error))
            print(f"  {size:>10} {1e-3 / beta:>11.2f} {memory:>10.1f} {median:>14.1f} {max(times) / min(times):>6.2f}x "
                  f"{predicted:>15.1f} {100 * error:>+7.1f}%")
print(f"\n# largest error {100 * worst:.1f}% (goal: within 25%)")
