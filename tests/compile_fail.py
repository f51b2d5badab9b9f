#!/usr/bin/env python3
"""Compile-fail tests: each source must fail to compile with the text after `// expect:` in
the compiler's diagnostics (or, with `// expect-success:`, must compile).

usage: compile_fail.py <include-dir>... -- <compiler and flags...> -- <sources...>
"""
import subprocess
import sys

from script_args import split_arguments


def main():
    includes, compiler, sources = split_arguments(sys.argv[1:])
    failed = 0
    for source in sources:
        header = open(source, encoding="utf-8").readline().strip()
        command = compiler + ["-std=c++20", "-fsyntax-only"] + ["-I" + i for i in includes] + [source]
        result = subprocess.run(command, capture_output=True, text=True)
        if header.startswith("// expect-success:"):
            ok = result.returncode == 0
            why = "did not compile:\n" + result.stderr[-3000:]
        else:
            expected = header.removeprefix("// expect:").strip()
            ok = result.returncode != 0 and expected in result.stderr
            why = ("compiled, but must not" if result.returncode == 0
                   else "diagnostic lacks '%s':\n%s" % (expected, result.stderr[-3000:]))
        print(("PASS " if ok else "FAIL ") + source)
        if not ok:
            print("  " + why)
            failed += 1
    print("%d of %d compile-fail checks failed" % (failed, len(sources)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
