"""Ranks given different world sizes: every rank's init_process_group fails saying so.

Started by tests/torch/launch.py --spawn. Rank 1 is told the world has one rank more than the
others are. Each rank must get an error that says the world sizes differ and names both (not a
reset connection on one rank with the reason only in rank 0's log), and no rank may hang.
"""

import os
import re
import sys
from datetime import timedelta

import torch.distributed as dist

import weft_torch  # noqa: F401


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    told = size + 1 if rank == 1 else size
    # The store outlives every rank's error, as torchrun's agent keeps it: rank 0 serves it until
    # each rank has said it is done (a store that went with rank 0's failed init would leave a
    # slower rank a broken pipe instead of the job's notice).
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), size, rank == 0,
                          timeout=timedelta(seconds=60))
    try:
        return attempt(rank, size, told, store)
    finally:
        store.set(f"done/{rank}", "1")
        if rank == 0:
            store.wait([f"done/{r}" for r in range(size)], timedelta(seconds=60))


def attempt(rank, size, told, store):
    try:
        dist.init_process_group("weft", store=store, rank=rank, world_size=told, timeout=timedelta(seconds=30))
        # c10d may make the backend on first use
        dist.barrier()
    except Exception as failure:  # noqa: BLE001 (whatever torch wraps it in)
        message = " ".join(str(failure).split())
        sizes = {int(n) for found in re.findall(r"world of (\d+) ranks|for one of (\d+)", message) for n in found if n}
        if "world sizes differ" in message and sizes == {size, size + 1}:
            print(f"rank {rank}: told the world sizes differ: {message[:300]}", flush=True)
            return 0
        print(f"rank {rank}: an error that does not say the world sizes differ: {message[:600]}", flush=True)
        return 1
    print(f"rank {rank}: started with world size {told}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
