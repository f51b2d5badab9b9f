"""torch.distributed over weft against gloo, side by side in one job.

    python3 -m weft_torch.run --nproc_per_node 4 benchmarks/torch_compare.py
    (PYTHONPATH=<build>/python from a build tree; --quick for a short smoke run)

One job holds two process groups over the same ranks: weft's (the default group) and gloo's.
Part 1: torch.distributed.all_reduce of float32 SUM, 1 KiB to 64 MiB, the two backends taking
turns at every size (--rounds times each, each timing at least --min-time seconds of calls); time
per call is the slowest rank's, the best round's in the table; busbw = size x 2(n-1)/n / time,
as nccl-tests reports it. The last column is the median over rounds of the ratio within a round
(the two backends timed back to back), which the machine's noise moves less than the best.
Part 2: the model of examples/torch_ddp.py under DistributedDataParallel, one copy over each
group, steps taking turns. Rank 0 prints markdown tables and the ratios weft/gloo.
"""

import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

import weft_torch  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from torch_ddp import model  # noqa: E402  the example's model


def human(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def timed_allreduce(tensor, group, iterations, gloo):
    dist.barrier(group=gloo)
    started = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor, group=group)
    elapsed = torch.tensor([(time.perf_counter() - started) / iterations], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=gloo)  # the slowest rank's time
    return elapsed.item()


def allreduce_table(args, size, weft, gloo):
    rows = []
    sizes = [1 << k for k in range(10, 27, 2)] if not args.quick else [1 << 10, 1 << 20]
    for nbytes in sizes:
        tensor = torch.ones(nbytes // 4)
        # warm-up (connections, buffers), which also sizes the timings: the slower backend's
        # calls fill at least --min-time (every rank gets the same slowest time, so the same count)
        slowest = max(timed_allreduce(tensor, group, 2, gloo) for group in (weft, gloo))
        iterations = 3 if args.quick else max(3, min(1000, math.ceil(args.min_time / slowest)))
        best = {"weft": float("inf"), "gloo": float("inf")}
        ratios = []
        for turn in range(args.rounds):
            order = (("weft", weft), ("gloo", gloo)) if turn % 2 == 0 else (("gloo", gloo), ("weft", weft))
            times = {name: timed_allreduce(tensor, group, iterations, gloo) for name, group in order}
            ratios.append(times["gloo"] / times["weft"])
            best = {name: min(best[name], times[name]) for name in best}
        factor = 2 * (size - 1) / size
        busbw = {name: nbytes * factor / t / 1e9 for name, t in best.items()}
        rows.append((nbytes, best, busbw, statistics.median(ratios)))
    return rows


def ddp_steps(args, rank, weft, gloo):
    nets = {}
    for name, group in (("weft", weft), ("gloo", gloo)):
        torch.manual_seed(0)
        nets[name] = DistributedDataParallel(model(args.width, args.layers), process_group=group,
                                             bucket_cap_mb=args.bucket_mb)
    optimizers = {name: torch.optim.SGD(net.parameters(), lr=0.01) for name, net in nets.items()}
    loss_fn = nn.CrossEntropyLoss()
    data = torch.Generator().manual_seed(1000 + rank)
    times = {"weft": [], "gloo": []}
    for step in range(args.steps):
        x = torch.randn(args.batch, 64, generator=data)
        y = torch.randint(0, 10, (args.batch,), generator=data)
        for name in ("weft", "gloo") if step % 2 == 0 else ("gloo", "weft"):
            dist.barrier(group=gloo)
            started = time.perf_counter()
            optimizers[name].zero_grad(set_to_none=True)
            loss_fn(nets[name](x), y).backward()
            optimizers[name].step()
            times[name].append(time.perf_counter() - started)
    skip = min(3, args.steps - 1)
    return {name: statistics.median(t[skip:]) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds each timing lasts at least")
    parser.add_argument("--steps", type=int, default=20, help="DDP steps per backend")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--bucket-mb", type=float, default=4)
    parser.add_argument("--quick", action="store_true", help="two sizes, few steps: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps, args.width = 1, 4, 128

    dist.init_process_group("weft")
    rank, size = dist.get_rank(), dist.get_world_size()
    weft = dist.distributed_c10d._get_default_group()
    gloo = dist.new_group(backend="gloo")
    transport = os.environ.get("WEFT_TRANSPORT", "tcp")

    rows = allreduce_table(args, size, weft, gloo)
    step = ddp_steps(args, rank, weft, gloo)
    if rank == 0:
        print(f"## torch.distributed all_reduce, float32 sum, {size} ranks (weft over {transport})\n")
        print("| size | weft time | gloo time | weft busbw | gloo busbw | weft/gloo busbw | median of rounds |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for nbytes, best, busbw, ratio in rows:
            print(f"| {human(nbytes)} | {best['weft'] * 1e6:.0f} us | {best['gloo'] * 1e6:.0f} us | "
                  f"{busbw['weft']:.3f} GB/s | {busbw['gloo']:.3f} GB/s | {busbw['weft'] / busbw['gloo']:.2f}x | "
                  f"{ratio:.2f}x |")
        large = [ratio for nbytes, _, _, ratio in rows if nbytes >= 1 << 20]
        if large:
            print(f"\nweft/gloo busbw at >= 1 MiB, median of rounds: min {min(large):.2f}x, "
                  f"median {statistics.median(large):.2f}x")
        params = sum(p.numel() for p in model(args.width, args.layers).parameters())
        print(f"\n## DDP step, examples/torch_ddp.py's model ({params} parameters, batch {args.batch}), {size} ranks\n")
        print(f"median step: weft {step['weft'] * 1e3:.2f} ms, gloo {step['gloo'] * 1e3:.2f} ms; "
              f"weft/gloo step time {step['weft'] / step['gloo']:.3f}")
        print("torch_compare done", flush=True)
    dist.destroy_process_group(gloo)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
