#!/usr/bin/env python3
"""weft::cuda::ipc_transport on a GPU: ranks as processes sharing the visible GPUs.

    ipc.py IPC_RANKS WEFT_RUN [--bench]

The collective slice (ipc_ranks slice) on 2, 3 and 4 processes under weft-run, with the pools
shared as VMM descriptors where the GPU can (WEFT_CUDA_IPC=auto) and as legacy IPC handles
(WEFT_CUDA_IPC=legacy), and on 3 with sends staged in 64 KiB pieces and pools of a size the device rounds up; a rank SIGKILLed mid-allreduce among 3 started by hand (every survivor
must get peer_lost naming it within a second); nothing left in /dev/shm. With --bench, the
allreduce benchmark on 2 processes (ipc_ranks bench). Without a GPU it checks only what a rank
says before it touches one (ipc_ranks refusals) and exits 77 (skipped) when that holds.
"""
import importlib.util
import os
import socket
import subprocess
import sys
import time

# check() and the failures it records, as the multi-process tests have them.
_spec = importlib.util.spec_from_file_location(
    "multiprocess", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "multiprocess", "multiprocess.py"))
multiprocess = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(multiprocess)
check = multiprocess.check
failures = multiprocess.failures


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    ranks_program, weft_run = os.path.abspath(sys.argv[1]), sys.argv[2]
    refusals = subprocess.run([ranks_program, "refusals"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(refusals.stdout.rstrip())
    check(refusals.returncode == 0, "ipc: a bad WEFT_CUDA_DEVICE is refused, and no GPU is a clear error")
    if failures:
        return 1
    probe = subprocess.run([ranks_program, "probe"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if probe.returncode == 77:
        print(probe.stdout.strip() or "skipped: no CUDA device")
        return 77
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    for way in ("auto", "legacy"):
        for size in (2, 3, 4):
            env = dict(os.environ, WEFT_TIMEOUT_MS="60000", WEFT_CUDA_IPC=way, CUDA_DEVICE_MAX_CONNECTIONS="32")
            started = time.monotonic()
            result = subprocess.run([sys.executable, weft_run, "-n", str(size), "--timeout", "200", "--",
                                     ranks_program, "slice"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, env=env, timeout=240)
            ok = [line for line in result.stdout.splitlines() if "slice ok on %d ranks" % size in line]
            check(result.returncode == 0 and len(ok) == size,
                  "ipc, %d processes, WEFT_CUDA_IPC=%s: the slice passes on every rank (%.1f s)%s"
                  % (size, way, time.monotonic() - started, (": " + ok[0].split("over", 1)[1]) if ok else ""),
                  result.stdout)
    # A pool size no allocation granularity divides: the device rounds it up, and the peers map it whole.
    env = dict(os.environ, WEFT_TIMEOUT_MS="60000", WEFT_CUDA_STAGE_BYTES="64K", WEFT_CUDA_POOL_BYTES="200000001",
               CUDA_DEVICE_MAX_CONNECTIONS="32")
    started = time.monotonic()
    result = subprocess.run([sys.executable, weft_run, "-n", "3", "--timeout", "200", "--", ranks_program, "slice"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=240)
    check(result.returncode == 0 and result.stdout.count("slice ok on 3 ranks") == 3,
          "ipc, 3 processes, sends from cudaMalloc'd buffers staged in pieces of 64 KiB, pools of 200000001 bytes: "
          "the slice passes (%.1f s)"
          % (time.monotonic() - started), result.stdout)
    port = free_port()
    processes = {}
    for rank in range(3):
        env = dict(os.environ, WEFT_RANK=str(rank), WEFT_SIZE="3", WEFT_STORE="127.0.0.1:%d" % port,
                   WEFT_SECRET="ipc-test", CUDA_DEVICE_MAX_CONNECTIONS="32")
        processes[rank] = subprocess.Popen([ranks_program, "kill", "1"], env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)
    for rank, process in processes.items():
        try:
            output, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        if rank == 1:
            check(process.returncode == -9, "ipc kill: rank 1 died of SIGKILL", output)
        else:
            check(process.returncode == 0 and "lost ok" in output,
                  "ipc kill: rank %d got peer_lost naming rank 1 within a second" % rank, output)
    after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    check(after <= before, "ipc: nothing left in /dev/shm (%s)" % (" ".join(sorted(after - before)) or "nothing new"))
    if "--bench" in sys.argv:
        env = dict(os.environ, WEFT_CUDA_POOL_BYTES="1G", CUDA_DEVICE_MAX_CONNECTIONS="32")
        result = subprocess.run([sys.executable, weft_run, "-n", "2", "--", ranks_program, "bench"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=120)
        print(result.stdout)
        check(result.returncode == 0, "ipc bench ran", result.stdout)
    print("%d check(s) failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
