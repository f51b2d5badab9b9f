"""A rank killed while calls are in flight: every other rank gets a RuntimeError naming it.

Started by tests/torch/launch.py --spawn (not torchrun, which would stop the survivors as soon as
it sees a worker die). The last rank kills itself (SIGKILL) while four allreduces are in flight;
each survivor must get a RuntimeError naming that rank from wait(), long before the timeout,
and then close its process group and exit normally.
"""

import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import weft_torch  # noqa: F401


def main():
    dist.init_process_group("weft", timeout=timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    victim = size - 1
    data = [torch.full((1 << 16,), float(rank)) for _ in range(4)]
    started = time.monotonic()
    for step in range(100000):
        works = [dist.all_reduce(t, async_op=True) for t in data]  # four in flight
        if rank == victim and step == 20:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            for work in works:
                work.wait()
        except RuntimeError as failure:
            message = str(failure)
            if f"rank {victim}" not in message:
                print(f"rank {rank}: the error does not name rank {victim}: {message}", flush=True)
                return 1
            print(f"rank {rank}: RuntimeError naming rank {victim} after {time.monotonic() - started:.1f} s: "
                  f"{message.splitlines()[0][:200]}", flush=True)
            dist.destroy_process_group()
            return 0
    print(f"rank {rank}: no error after rank {victim} was killed", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
