"""What the benchmarks' command-line tests share: a check that prints ok or FAIL (with the
program's output when it failed), and the ending line and status."""
import sys

failures = []


def expect(condition, what, result=None):
    if not condition:
        detail = f"\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}" if result else ""
        failures.append(what + detail)
        print("FAIL", what)
    else:
        print("ok  ", what)


def finish():
    for failure in failures:
        print("\n" + failure)
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)
