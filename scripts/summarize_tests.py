#!/usr/bin/env python3
"""The closing line of the test command: "N passed, N failed, N skipped" over the meson test logs
of the given build directories, after each failed test's failing checks, its last lines, and one
"failed: BUILD_DIR: NAME (RESULT, S s)" line per failed test; exits 1 when anything failed.

    STEPS_FAILED=0|1 summarize_tests.py BUILD_DIR...

STEPS_FAILED=1 (a build or set-up step failed) counts as one failure when no test failed, so a
broken build never reads as a clean run.
"""
import json, os, sys


def failed_checks(lines, most=40):
    """The lines that say what failed: a multi-process check's "FAIL ..." line with its indented
    detail, or a Catch2 "FAILED:" block, so a short CI tail still names the check."""
    picked, keep = [], False
    for line in lines:
        if line.startswith("FAIL ") or "FAILED:" in line:
            keep = True
        elif not line.startswith((" ", "\t")):
            keep = False
        if keep:
            picked.append(line)
    return picked[:most]

counts = {"passed": 0, "failed": 0, "skipped": 0}
failed = []
for directory in sys.argv[1:]:
    log = os.path.join(directory, "meson-logs", "testlog.json")
    if not os.path.exists(log):
        continue
    for line in open(log, encoding="utf-8"):
        entry = json.loads(line)
        result = entry.get("result")
        if result in ("OK", "EXPECTEDFAIL"):
            counts["passed"] += 1
        elif result == "SKIP":
            counts["skipped"] += 1
        else:
            counts["failed"] += 1
            lines = (entry.get("stdout") or "").splitlines()
            tail = failed_checks(lines) + ["..."] + lines[-12:]
            failed.append(("%s: %s (%s, %.0f s)" % (directory, entry.get("name"), result,
                                                    entry.get("duration") or 0), tail))
if os.environ.get("STEPS_FAILED") != "0" and counts["failed"] == 0:
    counts["failed"] = 1  # a build or set-up step failed: count it, never report a clean run
for name, tail in failed:  # the end of each failed test's output, then its name
    print("---- the last lines of " + name)
    for line in tail:
        print("   " + line)
for name, _ in failed:
    print("failed: " + name)
print("%d passed, %d failed, %d skipped" % (counts["passed"], counts["failed"], counts["skipped"]))
sys.exit(1 if counts["failed"] else 0)
