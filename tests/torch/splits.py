"""all_to_all_single with split sizes that disagree: every rank gets an error saying calls differ.

Started by tests/torch/launch.py --spawn. Rank 0 sends rank 1 one row more than rank 1 expects
from it. Every rank must fail with weft's mismatch (not a timeout, and no rank told that it was
"stopped or slower than their timeout"), in that call or the barrier after it.
"""

import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import weft_torch  # noqa: F401


def main():
    dist.init_process_group("weft", timeout=timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    input_splits = [2] * size
    output_splits = [2] * size
    if rank == 0:
        input_splits[1] = 3
    data = torch.full((sum(input_splits),), float(rank))
    out = torch.empty(sum(output_splits))
    try:
        dist.all_to_all_single(out, data, output_split_sizes=output_splits, input_split_sizes=input_splits)
        dist.barrier()
    except RuntimeError as failure:
        message = " ".join(str(failure).split())
        if "mismatch" in message and "calls differ" in message and "slower" not in message:
            print(f"rank {rank}: told the calls differ: {message[:300]}", flush=True)
            return 0
        print(f"rank {rank}: another error: {message[:600]}", flush=True)
        return 1
    print(f"rank {rank}: no error", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
