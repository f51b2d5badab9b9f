"""weft under a real Slurm: a one-node cluster started for the test (tests/slurm/cluster.py), and
programs started by srun and sbatch with no WEFT_* variable set.

    python3 tests/slurm/srun_test.py BUILD_DIR

- the collective slice over tcp (tests' tcp_ranks) under srun -n 2 and -n 4, with
  --ntasks-per-node and --cpu-bind=none: rank 0 serves the store on the step's first node, and
  says so once; with --mpi=pmix: rank 0's address is handed out through PMIx (describe() says so);
- examples/shm_allreduce (no Boost, no TCP store) under srun -n 4: the one-node step meets in
  /dev/shm;
- weft-bench over shm under srun -n 2, its table checked;
- a rank that dies (SIGKILL, mid-allreduce) named by every survivor; one task of a running step
  killed from outside (its pid as scontrol listpids gives it: scancel signals every task of a
  step, not one) named by every survivor;
- sbatch --wait of a script that runs weft-bench with srun, its output file checked.
Skipped, saying why, where the daemons cannot start. Ends with "N passed, N failed"."""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

SKIP = 77
build = os.path.abspath(sys.argv[1])
tcp_ranks = os.path.join(build, "tests", "tcp_ranks")
shm_example = os.path.join(build, "examples", "shm_allreduce")
shm_ranks = os.path.join(build, "tests", "shm_ranks")
weft_bench = os.path.join(build, "benchmarks", "weft-bench")
passed, failed = [], []


def check(condition, what, detail=""):
    (passed if condition else failed).append(what)
    print(("ok   " if condition else "FAIL ") + what)
    if not condition and detail:
        print("     " + detail.strip().replace("\n", "\n     ")[-4000:])


def said_once(result, text):
    return (result.stdout + result.stderr).count(text) == 1


def main():
    for program in (tcp_ranks, weft_bench):
        if not os.access(program, os.X_OK):
            print("SKIP: %s is not built" % program)
            return SKIP
    with cluster.one_node() as slurm:
        if not slurm:
            print("SKIP: a one-node Slurm cluster cannot start here: %s" % slurm.reason)
            return SKIP
        print("Slurm: %s" % slurm.run("sinfo", "--version").stdout.strip())
        serves = "Slurm gives no rendezvous; rank 0 serves the store on "
        through_pmix = "(from rank 0's choice, handed out through PMIx)"
        through_pmi = "(from rank 0's choice, handed out through PMI)"
        for ranks, options in ((2, []), (2, ["--ntasks-per-node=2"]), (4, ["--cpu-bind=none"]),
                               (2, ["--mpi=pmix"]), (4, ["--mpi=pmix", "--cpu-bind=none"]), (4, ["--mpi=pmi2"])):
            how = ("through PMIx" if "--mpi=pmix" in options else
                   "through PMI-1" if "--mpi=pmi2" in options else "at the derived address")
            result = slurm.srun("-n", str(ranks), "-O", *options, tcp_ranks, "slice", timeout=120,
                                extra_env={"WEFT_VERBOSE": "1"})
            what = "srun -n %d %s: the tcp slice on every rank, no rendezvous set, met %s" % (
                ranks, " ".join(options), how)
            text = result.stdout + result.stderr
            launcher = "Slurm"
            met = {"through PMIx": through_pmix in text and serves not in text,
                   "through PMI-1": through_pmi in text and serves not in text,
                   "at the derived address": said_once(result, serves)}[how]
            check(result.returncode == 0 and result.stdout.count("slice ok on %d ranks (%s)" % (ranks, launcher)) == ranks
                  and met, what, text + slurm.logs())
        if os.access(shm_ranks, os.X_OK):
            for options in ([], ["--mpi=pmix"]):
                result = slurm.srun("-n", "4", "-O", *options, shm_ranks, "slice", timeout=120)
                check(result.returncode == 0
                      and result.stdout.count("slice ok on 4 ranks (Slurm) over shared memory") == 4,
                      "srun -n 4 %s shm_ranks slice: the shm slice on every rank, no rendezvous set"
                      % " ".join(options), result.stdout + result.stderr)

        if os.access(shm_example, os.X_OK):
            result = slurm.srun("-n", "4", "-O", shm_example, timeout=120)
            check(result.returncode == 0 and said_once(result, "the ranks of this one-node step meet in /dev/shm/job-")
                  and "error" not in (result.stdout + result.stderr).lower(),
                  "srun -n 4 examples/shm_allreduce (no TCP store): meets in /dev/shm", result.stdout + result.stderr)
        else:
            print("(examples/shm_allreduce is not built: examples disabled)")

        result = slurm.srun("-n", "2", "-O", weft_bench, "--transport", "shm", "--collective", "allreduce",
                            "-b", "8", "-e", "1M", "-f", "64", timeout=180)
        rows = re.findall(r"^\s+(\d+)\s+\d+\s+float\s+sum", result.stdout, re.M)
        check(result.returncode == 0 and rows == ["8", "512", "32768"] and "processes started by Slurm" in result.stdout,
              "srun -n 2 weft-bench --transport shm: its table, 8 B to 32 KiB", result.stdout + result.stderr)

        # A rank that dies: rank 2 of 4 SIGKILLs itself mid-allreduce; every survivor names it.
        result = slurm.srun("-n", "4", "-O", tcp_ranks, "kill", "2", timeout=120,
                            extra_env={"WEFT_TIMEOUT_MS": "30000"})
        text = result.stdout + result.stderr
        named = [r for r in (0, 1, 3) if re.search(r"peer_lost: rank %d .*rank 2 is lost" % r, text)]
        check(named == [0, 1, 3] and text.count("rebuilt a world of 3 ranks without rank 2") == 3,
              "srun -n 4, rank 2 killed mid-allreduce: every survivor names it and goes on without it",
              text[-4000:])

        # One task of a running step killed from outside, as a lost node would: its pid from
        # scontrol listpids (scancel has no task to aim at: it signals every task of a step).
        step = subprocess.Popen(["srun", "-n", "4", "-O", "--mpi=pmix", tcp_ranks, "die", "-1", "0"],
                                env=dict(slurm.env, WEFT_TIMEOUT_MS="30000"), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        victim = None
        until = time.monotonic() + 30
        while victim is None and time.monotonic() < until and step.poll() is None:
            time.sleep(0.5)
            listed = slurm.run("scontrol", "listpids").stdout
            for line in listed.splitlines():
                fields = line.split()
                if len(fields) == 5 and fields[4] == "2" and fields[0].isdigit():
                    try:
                        command = open("/proc/%s/cmdline" % fields[0], "rb").read()
                    except OSError:
                        continue
                    if b"tcp_ranks" in command:
                        victim = int(fields[0])
        if victim is not None:
            time.sleep(1.0)  # the step is in its loop of collectives
            os.kill(victim, 9)
        try:
            text, _ = step.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            step.kill()
            text = step.communicate()[0] + "\n(the step did not end within 90 s)"
        errors = re.findall(r"^survivor error: .*$", text, re.M)
        culprits = re.findall(r"^survivor culprit: (-?\d+)$", text, re.M)
        check(victim is not None and len(errors) == 3 and all("rank 2" in e for e in errors)
              and culprits == ["2", "2", "2"],
              "srun -n 4 --mpi=pmix, task 2 killed from outside (scontrol listpids, SIGKILL): every "
              "survivor names rank 2", "victim pid %s\n%s" % (victim, text[-4000:]))

        with tempfile.TemporaryDirectory() as scratch:
            os.chmod(scratch, 0o755)
            script = os.path.join(scratch, "bench.sh")
            output = os.path.join(scratch, "bench.out")
            with open(script, "w") as out:
                out.write("#!/bin/sh\nsrun -n 2 -O %s --transport tcp --collective allreduce -b 1K -e 64K -f 8\n"
                          % weft_bench)
            os.chmod(script, 0o755)
            result = slurm.run("sbatch", "--wait", "-n", "2", "-O", "-o", output, script, timeout=240)
            text = open(output).read() if os.path.exists(output) else ""
            check(result.returncode == 0 and re.search(r"^\s+65536\s+16384\s+float", text, re.M) is not None,
                  "sbatch --wait of a script running weft-bench: the table in its output file",
                  result.stdout + result.stderr + text + slurm.logs())
    print("%d passed, %d failed" % (len(passed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
