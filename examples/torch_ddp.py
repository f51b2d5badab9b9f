"""A small model trained with DistributedDataParallel over weft, on synthetic data.

    python3 -m weft_torch.run --nproc_per_node 2 examples/torch_ddp.py                  # over weft
    python3 -m weft_torch.run --nproc_per_node 2 examples/torch_ddp.py --backend gloo   # the same over gloo

(weft_torch.run is torch.distributed.run; with PYTHONPATH=<build>/python from a build tree.)
Each rank trains on its own batches; DDP averages the gradients with one allreduce per bucket,
in flight while the backward pass computes the next bucket. At the end every rank hashes its
parameters and the hashes are compared: they must be identical on every rank, bit for bit.
Prints the mean and median step time, which benchmarks/torch_compare.py compares.
"""

import argparse
import hashlib
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="weft", help="weft (default) or gloo")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    parser.add_argument("--width", type=int, default=1024, help="width of the hidden layers")
    parser.add_argument("--layers", type=int, default=4, help="hidden layers")
    parser.add_argument("--bucket-mb", type=float, default=4, help="DDP's bucket_cap_mb")
    parser.add_argument("--quiet", action="store_true", help="print the summary line only")
    return parser.parse_args()


def model(width, layers):
    blocks = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(layers - 1):
        blocks += [nn.Linear(width, width), nn.ReLU()]
    blocks.append(nn.Linear(width, 10))
    return nn.Sequential(*blocks)


def main():
    args = parse()
    if args.backend == "weft":
        import weft_torch  # noqa: F401  registers the backend
    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same initial parameters everywhere (DDP also broadcasts rank 0's)
    net = DistributedDataParallel(model(args.width, args.layers), bucket_cap_mb=args.bucket_mb)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    teacher = torch.Generator().manual_seed(7)
    truth = torch.randn(64, 10, generator=teacher)

    times = []
    for step in range(args.steps):
        x = torch.randn(args.batch, 64, generator=data)
        y = (x @ truth).argmax(dim=1)
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()  # DDP's allreduces run in flight here
        optimizer.step()
        times.append(time.perf_counter() - started)
        if rank == 0 and not args.quiet and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {loss.item():.4f}  {times[-1] * 1e3:.1f} ms", flush=True)

    flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    digests = [None] * size
    dist.all_gather_object(digests, digest)
    identical = all(d == digest for d in digests)
    steady = times[min(5, len(times) - 1):]  # the first steps build DDP's buckets
    if rank == 0:
        params = sum(p.numel() for p in net.parameters())
        print(f"backend {args.backend}, {size} ranks, {params} parameters, {args.steps} steps: "
              f"mean step {statistics.mean(steady) * 1e3:.2f} ms, median {statistics.median(steady) * 1e3:.2f} ms; "
              f"parameters {'identical' if identical else 'DIFFERENT'} on every rank (sha256 {digest[:16]})",
              flush=True)
    dist.destroy_process_group()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
