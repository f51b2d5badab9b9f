"""torch.distributed.run (torchrun), working with Debian's torch 1.13 under Python 3.11.

    python3 -m weft_torch.run --nproc_per_node 4 train.py

Takes torchrun's arguments unchanged. Under Python 3.11, torch 1.13's launcher cannot read
its own default `--redirects 0` / `--tee 0` (iterating its Std flag enum no longer yields the
zero member) and stops before starting any worker; this reads "0" as Std.NONE and then runs
torch.distributed.run itself.
"""

import sys

from torch.distributed.elastic.multiprocessing import api


def _fixed_from_str(original):
    def from_str(text):
        parsed = original(text)
        if parsed is None:
            return api.Std.NONE
        if isinstance(parsed, dict):
            return {rank: api.Std.NONE if std is None else std for rank, std in parsed.items()}
        return parsed
    return from_str


api.Std.from_str = staticmethod(_fixed_from_str(api.Std.from_str))

if __name__ == "__main__":
    from torch.distributed.run import main
    sys.exit(main())
