#!/usr/bin/env python3
"""Every public header compiles alone (its includes are complete), each in its own TU.

usage: headers.py [--cuda] <include-dir>... -- <compiler and flags...> -- <headers...>

With --cuda the compiler is nvcc and each header is compiled as a .cu file, warnings as errors.
"""
import os
import subprocess
import sys
import tempfile

from script_args import split_arguments


def main():
    arguments = sys.argv[1:]
    cuda = arguments[:1] == ["--cuda"]
    includes, compiler, headers = split_arguments(arguments[1:] if cuda else arguments)
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        for header in headers:
            name = None
            for include in includes:
                rel = os.path.relpath(header, include)
                if not rel.startswith(".."):
                    name = rel
            source = os.path.join(work, "alone.cu" if cuda else "alone.cpp")
            with open(source, "w", encoding="utf-8") as out:
                out.write('#include "%s"\n#include "%s"\n' % (name, name))  # twice: include guards
            if cuda:
                flags = ["-std=c++20", "-c", "-o", os.devnull, "-Werror", "all-warnings",
                         "-Xcompiler=-Wall,-Wextra,-Werror"]
            else:
                flags = ["-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
            command = compiler + flags + ["-I" + i for i in includes] + [source]
            result = subprocess.run(command, capture_output=True, text=True)
            print(("PASS " if result.returncode == 0 else "FAIL ") + name)
            if result.returncode != 0:
                print(result.stderr[-3000:])
                failed += 1
    print("%d of %d headers failed to compile alone" % (failed, len(headers)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
