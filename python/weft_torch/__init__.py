"""weft as a torch.distributed backend.

    import weft_torch                      # registers backend "weft"
    torch.distributed.init_process_group("weft")

The ranks meet through the store torch.distributed gives every backend (torchrun, env://,
tcp://, file://). The transport is WEFT_TRANSPORT (tcp by default; shm for ranks of one host;
ofi for libfabric, with WEFT_OFI_PROVIDER), or per group:

    torch.distributed.new_group(backend="weft", pg_options=weft_torch.Options(transport="shm"))

Every call runs on CPU tensors; a call weft does not offer raises RuntimeError naming it.
"""

import os

import torch.distributed as dist

from . import _C

__all__ = ["Options", "ProcessGroupWeft", "transports"]

ProcessGroupWeft = _C.ProcessGroupWeft


def transports():
    """The transports this build has, e.g. ['tcp', 'shm', 'ofi']."""
    return list(_C.transports())


class Options:
    """Per-group options, passed as init_process_group's or new_group's pg_options."""

    def __init__(self, transport=None):
        self.transport = transport

    def __repr__(self):
        return f"weft_torch.Options(transport={self.transport!r})"


def _transport_of(options):
    if options is not None and not isinstance(options, Options):
        raise RuntimeError(f"weft backend: pg_options must be weft_torch.Options, not {type(options).__name__}")
    # A transport this build lacks is refused by _C.create_process_group, naming those it has.
    return options.transport if options is not None and options.transport else os.environ.get("WEFT_TRANSPORT", "tcp")


def _create(backend_options, options):
    return _C.create_process_group(backend_options.store, backend_options.group_rank, backend_options.group_size,
                                   backend_options.timeout, _transport_of(options))


if "WEFT" not in dist.Backend._plugins:
    dist.Backend.register_backend("weft", _create, extended_api=True)
