#!/usr/bin/env python3
"""Every C++ and CUDA source of the project is in its format (.clang-format: 100 columns).

usage: format.py <source-root> <clang-format>

Prints each file clang-format would change, with the first differences, and how to fix them:
clang-format -i FILE.
"""
import glob
import os
import subprocess
import sys

FOLDERS = ("include", "nonblocking", "transports", "bootstrap", "tests", "examples", "benchmarks", "python")
SUFFIXES = (".hpp", ".cpp", ".cu", ".h")


def main():
    root, tool = sys.argv[1], sys.argv[2]
    files = sorted(path for folder in FOLDERS
                   for path in glob.glob(os.path.join(root, folder, "**", "*"), recursive=True)
                   if path.endswith(SUFFIXES) and os.path.isfile(path))
    if not files:
        print("no sources found under %s" % root)
        return 1
    wrong = []
    for path in files:
        result = subprocess.run([tool, "--dry-run", "-Werror", "--style=file", path], capture_output=True, text=True,
                                cwd=root)
        if result.returncode != 0:
            wrong.append(path)
            print("NOT FORMATTED %s\n%s" % (os.path.relpath(path, root), result.stderr[:1500]))
    print("%d of %d sources in the project's format%s" %
          (len(files) - len(wrong), len(files), "; fix with: clang-format -i FILE" if wrong else ""))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
