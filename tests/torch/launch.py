"""Runs a torch.distributed script on N local ranks and checks what every rank printed.

    launch.py --nproc 4 --expect 'checks passed' [--env K=V ...] script.py [args ...]
    launch.py --spawn --nproc 3 --count 2 --expect 'RuntimeError naming' killed.py

By default the ranks are started by torchrun (python3 -m weft_torch.run); with --spawn, by
this script itself (env:// variables), for a job in which a rank dies on purpose. Passes when
--expect appears --count times (once per rank by default) and, without --spawn,
torchrun exited 0; the whole job is bounded by --timeout.
"""

import argparse
import os
import socket
import subprocess
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, required=True)
    parser.add_argument("--expect", required=True)
    parser.add_argument("--count", type=int, help="lines that must contain --expect (default: one per rank)")
    parser.add_argument("--spawn", action="store_true")
    parser.add_argument("--env", action="append", default=[], help="K=V for every rank")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()

    env = dict(os.environ)
    for pair in options.env:
        key, _, value = pair.partition("=")
        env[key] = value
    env.setdefault("PYTHONWARNINGS", "ignore")
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1")
    port = free_port()
    if options.spawn:
        procs = []
        for rank in range(options.nproc):
            rank_env = dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                            WORLD_SIZE=str(options.nproc), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(options.nproc))
            procs.append(subprocess.Popen([sys.executable, options.script] + options.args, env=rank_env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        output, returncode = "", 0
        for rank, proc in enumerate(procs):
            try:
                out, _ = proc.communicate(timeout=options.timeout)
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                print(f"FAIL: rank {rank} still running after {options.timeout} s (a hang)")
                return 1
            output += out
    else:
        command = [sys.executable, "-m", "weft_torch.run", "--nproc_per_node", str(options.nproc),
                   "--master_addr", "127.0.0.1", "--master_port", str(port), options.script] + options.args
        try:
            done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=options.timeout)
        except subprocess.TimeoutExpired as expired:
            print(expired.output or "")
            print(f"FAIL: the job still ran after {options.timeout} s (a hang)")
            return 1
        output, returncode = done.stdout, done.returncode
    print(output)
    wanted = options.count if options.count is not None else options.nproc
    found = output.count(options.expect)  # ranks share one stdout: two lines may run together
    if not options.spawn and returncode != 0:
        print(f"FAIL: torchrun exited {returncode}")
        return 1
    if found != wanted:
        print(f"FAIL: {found} ranks printed '{options.expect}', expected {wanted}")
        return 1
    print(f"PASS: {found} ranks printed '{options.expect}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
