#!/usr/bin/env python3
"""Every public header compiles alone (its includes are complete), each in its own TU.

usage: headers.py [--cuda | --together] <include-dir>... -- <compiler and flags...> -- <headers...>

With --cuda the compiler is nvcc and each header is compiled as a .cu file, warnings as errors.
With --together every header is compiled in one TU (each twice: include guards), warnings as
errors: for a second compiler, whose diagnostics on the code are the point, once the first has
shown each header alone complete (the same standard library, so the same transitive includes).
"""
import os
import subprocess
import sys
import tempfile

from script_args import split_arguments


def name_of(header, includes):
    """The header's name as included: its path under the include directory that holds it."""
    name = None
    for include in includes:
        rel = os.path.relpath(header, include)
        if not rel.startswith(".."):
            name = rel
    return name


def main():
    arguments = sys.argv[1:]
    cuda = arguments[:1] == ["--cuda"]
    together = arguments[:1] == ["--together"]
    includes, compiler, headers = split_arguments(arguments[1:] if cuda or together else arguments)
    failed = 0
    flags = ["-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
    if together:
        names = [name_of(header, includes) for header in headers]
        with tempfile.TemporaryDirectory() as work:
            source = os.path.join(work, "together.cpp")
            with open(source, "w", encoding="utf-8") as out:
                out.write("".join('#include "%s"\n' % name for name in names * 2))
            result = subprocess.run(compiler + flags + ["-I" + i for i in includes] + [source],
                                    capture_output=True, text=True)
        print(result.stderr[-6000:])
        print("%d headers %s in one translation unit" %
              (len(names), "compile" if result.returncode == 0 else "do not compile"))
        return 1 if result.returncode != 0 else 0
    with tempfile.TemporaryDirectory() as work:
        for header in headers:
            name = name_of(header, includes)
            source = os.path.join(work, "alone.cu" if cuda else "alone.cpp")
            with open(source, "w", encoding="utf-8") as out:
                out.write('#include "%s"\n#include "%s"\n' % (name, name))  # twice: include guards
            if cuda:
                flags = ["-std=c++20", "-c", "-o", os.devnull, "-Werror", "all-warnings",
                         "-Xcompiler=-Wall,-Wextra,-Werror"]
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
