"""Every call of the weft backend, for every dtype, against gloo on the same inputs.

Run under torchrun (tests/torch/run_suite.py starts it): the default group is weft's, a second
group over the same ranks is gloo's. Each call runs on both with the same inputs; where gloo
does not offer the call or dtype (reduce_scatter, AVG, bfloat16, int16, ...) the result is
checked against one computed here from every rank's inputs. Inputs are small integers, so every
float sum, product and average is exact and results must be equal bit for bit; random floats
are compared with gloo's within a relative 1e-5 (float32) or 1e-12 (float64), and must be the
same bits on every rank. Prints one line
per rank: 'rank R: N checks passed (G against gloo)'.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

import weft_torch  # registers "weft"; Options for a group over shm

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
INTEGERS = {torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}
BITWISE = {"BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR}

rank = size = gloo = None
checks = against_gloo = 0


def values(of_rank, count, dtype, small=False):
    """Rank `of_rank`'s input: small integers (in [-2, 2] for products), non-negative for uint8."""
    i = torch.arange(count, dtype=torch.int64)
    raw = (i * 7 + of_rank * 3 + 1) % (5 if small else 11) - (2 if small else 5)
    if dtype == torch.uint8:
        raw = raw.abs()
    return raw.to(dtype)


def reference_reduce(name, tensors):
    """What reducing `tensors` (one per rank) with op `name` gives, computed here."""
    result = tensors[0].clone()
    for t in tensors[1:]:
        if name in ("SUM", "AVG"):
            result = result + t
        elif name == "PRODUCT":
            result = result * t
        elif name == "MIN":
            result = torch.minimum(result, t)
        elif name == "MAX":
            result = torch.maximum(result, t)
        elif name == "BAND":
            result = result & t
        elif name == "BOR":
            result = result | t
        elif name == "BXOR":
            result = result ^ t
    if name == "AVG":
        result = torch.div(result, size, rounding_mode="trunc") if result.dtype in INTEGERS else torch.div(result, size)
    return result.to(tensors[0].dtype)


def same(what, got, expected):
    global checks
    checks += 1
    if got.dtype != expected.dtype or got.shape != expected.shape or not torch.equal(got, expected):
        raise AssertionError(f"rank {rank}: {what}: got {got.flatten()[:8].tolist()}..., "
                             f"expected {expected.flatten()[:8].tolist()}... ({got.dtype}, {tuple(got.shape)})")


def compare(what, run, expected):
    """run(group) returns this rank's result; weft's must equal gloo's (when gloo runs it) and `expected`."""
    global against_gloo
    ours = run(None)
    same(what + " (weft vs reference)", ours, expected)
    try:
        theirs = run(gloo)
    except RuntimeError:
        return  # gloo does not offer this call or dtype
    same(what + " (weft vs gloo)", ours, theirs)
    against_gloo += 1


def check_allreduce(dtype, count):
    names = dict(OPS, **(BITWISE if dtype in INTEGERS else {}))
    for name, op in names.items():
        small = name == "PRODUCT"
        expected = reference_reduce(name, [values(r, count, dtype, small) for r in range(size)])

        def run(group, op=op, small=small):
            t = values(rank, count, dtype, small)
            dist.all_reduce(t, op=op, group=group)
            return t
        compare(f"all_reduce {name} {dtype} x{count}", run, expected)


def check_rooted(dtype, count):
    root = size - 1

    def bcast(group):
        t = values(rank, count, dtype)
        dist.broadcast(t, src=root, group=group)
        return t
    compare(f"broadcast {dtype}", bcast, values(root, count, dtype))

    dst = 1 % size
    for name in ("SUM", "MAX"):
        def red(group, name=name):
            t = values(rank, count, dtype)
            dist.reduce(t, dst=dst, op=OPS[name], group=group)
            return t if rank == dst else values(rank, count, dtype)
        expected = reference_reduce(name, [values(r, count, dtype) for r in range(size)]) if rank == dst \
            else values(rank, count, dtype)
        compare(f"reduce {name} {dtype}", red, expected)

    def gath(group):
        outs = [torch.empty(count, dtype=dtype) for _ in range(size)] if rank == root else None
        dist.gather(values(rank, count, dtype), gather_list=outs, dst=root, group=group)
        return torch.cat(outs) if rank == root else torch.zeros(0, dtype=dtype)
    expected = torch.cat([values(r, count, dtype) for r in range(size)]) if rank == root else torch.zeros(0, dtype=dtype)
    compare(f"gather {dtype}", gath, expected)

    def scat(group):
        out = torch.empty(count, dtype=dtype)
        pieces = [values(100 + r, count, dtype) for r in range(size)] if rank == root else None
        dist.scatter(out, scatter_list=pieces, src=root, group=group)
        return out
    compare(f"scatter {dtype}", scat, values(100 + rank, count, dtype))


def check_gathers(dtype, count):
    everyone = [values(r, count, dtype) for r in range(size)]

    def allgather(group):
        outs = [torch.empty(count, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, values(rank, count, dtype), group=group)
        return torch.cat(outs)
    compare(f"all_gather {dtype}", allgather, torch.cat(everyone))

    def allgather_base(group):
        out = torch.empty(size * count, dtype=dtype)
        dist.all_gather_into_tensor(out, values(rank, count, dtype), group=group)
        return out
    compare(f"all_gather_into_tensor {dtype}", allgather_base, torch.cat(everyone))

    # reduce_scatter: rank r's input holds size pieces; piece j of every rank is summed into rank j.
    inputs = [values(r, size * count, dtype) for r in range(size)]
    for name in ("SUM", "MIN"):
        full = reference_reduce(name, inputs)
        expected = full[rank * count:(rank + 1) * count]

        def rs(group, name=name):
            out = torch.empty(count, dtype=dtype)
            dist.reduce_scatter(out, list(values(rank, size * count, dtype).chunk(size)), op=OPS[name], group=group)
            return out
        compare(f"reduce_scatter {name} {dtype}", rs, expected)

        def rs_base(group, name=name):
            out = torch.empty(count, dtype=dtype)
            dist.reduce_scatter_tensor(out, values(rank, size * count, dtype), op=OPS[name], group=group)
            return out
        compare(f"reduce_scatter_tensor {name} {dtype}", rs_base, expected)


def check_alltoall(dtype, count):
    # Even: rank r sends piece j of its input to rank j.
    inputs = [values(r, size * count, dtype) for r in range(size)]
    expected = torch.cat([inputs[r][rank * count:(rank + 1) * count] for r in range(size)])

    def even(group):
        out = torch.empty(size * count, dtype=dtype)
        dist.all_to_all_single(out, values(rank, size * count, dtype), group=group)
        return out
    compare(f"all_to_all_single {dtype}", even, expected)

    # Uneven: rank r sends (r + j + 1) rows of 3 to rank j.
    def rows(src, dst):
        return src + dst + 1

    def uneven_input(r):
        return values(r, sum(rows(r, j) for j in range(size)) * 3, dtype).reshape(-1, 3)
    pieces = []
    for r in range(size):
        start = sum(rows(r, j) for j in range(rank))
        pieces.append(uneven_input(r)[start:start + rows(r, rank)])
    expected_uneven = torch.cat(pieces)

    def uneven(group):
        out = torch.empty(sum(rows(r, rank) for r in range(size)), 3, dtype=dtype)
        dist.all_to_all_single(out, uneven_input(rank), output_split_sizes=[rows(r, rank) for r in range(size)],
                               input_split_sizes=[rows(rank, j) for j in range(size)], group=group)
        return out
    compare(f"all_to_all_single with splits {dtype}", uneven, expected_uneven)

    def listed(group):
        outs = [torch.empty(rows(r, rank), dtype=dtype) for r in range(size)]
        ins = [values(rank * 10 + j, rows(rank, j), dtype) for j in range(size)]
        dist.all_to_all(outs, ins, group=group)
        return torch.cat(outs)
    compare(f"all_to_all {dtype}", listed, torch.cat([values(r * 10 + rank, rows(r, rank), dtype) for r in range(size)]))


def check_point_to_point(dtype, count):
    right, left = (rank + 1) % size, (rank - 1) % size

    def ring(group):
        got = torch.empty(count, dtype=dtype)
        sending = dist.isend(values(rank, count, dtype), dst=right, group=group)
        dist.recv(got, src=left, group=group)
        sending.wait()
        return got
    compare(f"send/recv {dtype}", ring, values(left, count, dtype))


def check_random_floats():
    """Random floats: weft's sum is the same bits on every rank, and within a stated tolerance of
    gloo's (the two may add in different orders)."""
    global checks, against_gloo
    tolerance = {torch.float32: 1e-5, torch.float64: 1e-12}
    for dtype, rtol in tolerance.items():
        for count in (3, 100000):
            mine = torch.randn(count, dtype=dtype, generator=torch.Generator().manual_seed(rank))
            ours, theirs = mine.clone(), mine.clone()
            dist.all_reduce(ours)
            dist.all_reduce(theirs, group=gloo)
            everyone = [torch.empty_like(ours) for _ in range(size)]
            dist.all_gather(everyone, ours)
            for r, other in enumerate(everyone):
                same(f"random {dtype} x{count}: rank {r}'s sum has this rank's bits", other, ours)
            if not torch.allclose(ours, theirs, rtol=rtol, atol=rtol * size):
                worst = (ours - theirs).abs().max().item()
                raise AssertionError(f"rank {rank}: random {dtype} x{count}: weft and gloo differ by {worst}")
            checks += 1
            against_gloo += 1


def check_non_contiguous():
    base = values(rank, 6 * 4, torch.float32).reshape(6, 4)
    t = base.t()  # 4 x 6, not contiguous
    assert not t.is_contiguous()
    dist.all_reduce(t)
    expected = sum(values(r, 6 * 4, torch.float32).reshape(6, 4) for r in range(size)).t()
    same("all_reduce of a transposed tensor", t, expected)
    same("all_reduce of a transposed tensor writes through to its base", base, expected.t())

    b = values(rank, 6 * 4, torch.int32).reshape(6, 4).t()
    dist.broadcast(b, src=0)
    same("broadcast into a transposed tensor", b, values(0, 24, torch.int32).reshape(6, 4).t())

    outs = [torch.empty(4, 3).t() for _ in range(size)]
    mine = values(rank, 12, torch.float32).reshape(3, 4)
    dist.all_gather(outs, mine)
    for r in range(size):
        same(f"all_gather into transposed tensor {r}", outs[r], values(r, 12, torch.float32).reshape(3, 4))

    strided = values(rank, 20, torch.int64)[::2]  # every second element
    out = torch.empty(size * 10, dtype=torch.int64)
    dist.all_gather_into_tensor(out, strided)
    same("all_gather_into_tensor from a strided input", out, torch.cat([values(r, 20, torch.int64)[::2] for r in range(size)]))


def check_coalesced():
    tensors = [values(rank, n, torch.float32) for n in (1, 7, 300)] + [values(rank, 5, torch.int32)]
    dist.all_reduce_coalesced(tensors[:3])
    dist.all_reduce_coalesced(tensors[3:], op=dist.ReduceOp.MAX)
    for n, t in zip((1, 7, 300), tensors[:3]):
        same(f"all_reduce_coalesced x{n}", t, reference_reduce("SUM", [values(r, n, torch.float32) for r in range(size)]))
    same("all_reduce_coalesced MAX int32", tensors[3], reference_reduce("MAX", [values(r, 5, torch.int32) for r in range(size)]))


def check_async():
    # Several in flight at once, waited for in reverse order, while this rank computes.
    works, tensors = [], []
    for i in range(4):
        t = values(rank + i, 1 << 18, torch.float32)  # 1 MiB each
        tensors.append(t)
        works.append(dist.all_reduce(t, async_op=True))
    a = torch.randn(256, 256)
    for _ in range(20):
        a = torch.tanh(a @ a)
    for w in reversed(works):
        assert w.wait()
    for i, t in enumerate(tensors):
        same(f"async all_reduce {i}", t, reference_reduce("SUM", [values(r + i, 1 << 18, torch.float32) for r in range(size)]))
    f = dist.broadcast(values(rank, 10, torch.int64), src=0, async_op=True).get_future()
    same("a future's value", f.wait()[0], values(0, 10, torch.int64))
    assert works[0].is_completed() and works[0].is_success()


def check_groups():
    """new_group: a subset of the ranks, and all of them over shared memory chosen by pg_options."""
    evens = list(range(0, size, 2))
    subset = dist.new_group(evens, backend="weft")  # every rank calls new_group; only members join
    if rank in evens:
        t = values(rank, 100, torch.int64)
        dist.all_reduce(t, group=subset)
        same("all_reduce on the even ranks' group", t, reference_reduce("SUM", [values(r, 100, torch.int64) for r in evens]))
    over_shm = dist.new_group(backend="weft", pg_options=weft_torch.Options(transport="shm"))
    t = values(rank, 1000, torch.float32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=over_shm)
    same("all_reduce on a group over shm", t, reference_reduce("MAX", [values(r, 1000, torch.float32) for r in range(size)]))
    dist.destroy_process_group(over_shm)
    if rank in evens:
        dist.destroy_process_group(subset)


def check_refusals():
    global checks
    expectations = [
        ("all_reduce", lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND)),
        ("all_reduce", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool))),
        ("allgather_coalesced", lambda: dist.all_gather_coalesced([[torch.ones(2)] * size], [torch.ones(2)])),
        ("recv", lambda: dist.recv(torch.ones(2))),
        ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(torch.ones(size * 2 + 1), torch.ones(2))),
        ("broadcast", lambda: dist.broadcast(torch.ones(2), src=size)),
    ]
    for call, action in expectations:
        try:
            action()
        except RuntimeError as failure:
            if call not in str(failure):
                raise AssertionError(f"rank {rank}: the error for {call} does not name it: {failure}")
            checks += 1
            continue
        raise AssertionError(f"rank {rank}: {call} should have raised RuntimeError")


def main():
    global rank, size, gloo
    dist.init_process_group("weft")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    assert dist.get_backend() == "weft"
    started = time.monotonic()
    for dtype in DTYPES:
        for count in (1, 1000):
            check_allreduce(dtype, count)
        check_rooted(dtype, 37)
        check_gathers(dtype, 29)
        check_alltoall(dtype, 5)
        check_point_to_point(dtype, 33)
    check_allreduce(torch.float32, 1 << 20)  # 4 MiB: the pipelined algorithms
    check_random_floats()
    check_non_contiguous()
    check_coalesced()
    check_async()
    check_groups()
    check_refusals()
    dist.barrier()
    print(f"rank {rank}: {checks} checks passed ({against_gloo} against gloo) in {time.monotonic() - started:.1f} s",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
