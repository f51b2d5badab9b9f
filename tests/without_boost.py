#!/usr/bin/env python3
"""The transports that need no Boost build and run with Boost out of sight.

usage: without_boost.py <source-root> <weft-run> <c++ compiler...> [-- <nvcc>]

Every include directory the compiler searches is replaced by a copy without `boost` (a folder of
links to everything else), and the compiler is told to search only those. Then, with no Boost
header reachable (checked first: a file including <boost/version.hpp> must fail):
  - every header of the core (the nonblocking engine, which needs Boost.Context, is a root of its
    own), of the shared-memory and stream-ordered transports, and of libfabric's where it is
    installed, compiles, all in one translation unit (test headers_alone shows each complete
    alone; here the point is that none reaches Boost, which any one would make the unit fail);
  - examples/shm_allreduce.cpp is built and runs as 3 processes under weft-run, meeting through
    the file store weft-run names.
With nvcc, weft/transport/cuda/ipc.hpp's dependencies (nvcc -M) hold no Boost header.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

# The core's headers that run calls in flight on Boost.Context fibers (weft-nonblocking).
def search_dirs(compiler):
    probe = subprocess.run(compiler + ["-std=c++20", "-E", "-x", "c++", "-", "-v"], input="",
                           capture_output=True, text=True)
    text = probe.stderr
    start = text.index("#include <...> search starts here:")
    end = text.index("End of search list.")
    return [line.strip() for line in text[start:end].splitlines()[1:] if line.strip()]


def hide_boost(dirs, work):
    """The search list with every directory holding boost/ replaced by a copy of links without it."""
    out = []
    for index, directory in enumerate(dirs):
        if not os.path.isdir(os.path.join(directory, "boost")):
            out.append(directory)
            continue
        copy = os.path.join(work, "include-%d" % index)
        os.makedirs(copy)
        for entry in os.listdir(directory):
            if entry != "boost":
                os.symlink(os.path.join(directory, entry), os.path.join(copy, entry))
        out.append(copy)
    return out


def headers_under(root, skip=()):
    found = []
    for path in sorted(glob.glob(os.path.join(root, "weft", "**", "*.hpp"), recursive=True)):
        name = os.path.relpath(path, root)
        if name not in skip:
            found.append(name)
    return found


def main():
    arguments = sys.argv[1:]
    nvcc = None
    if "--" in arguments:
        nvcc = arguments[arguments.index("--") + 1:]
        arguments = arguments[:arguments.index("--")]
    source_root, weft_run, compiler = arguments[0], arguments[1], arguments[2:]
    have_libfabric = subprocess.run(["pkg-config", "--exists", "libfabric"]).returncode == 0
    roots = [os.path.join(source_root, part) for part in ("include", "transports/inproc", "transports/shm", "transports/stream")]
    if have_libfabric:
        roots.append(os.path.join(source_root, "transports/ofi"))
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        system = hide_boost(search_dirs(compiler), work)
        base = compiler + ["-std=c++20", "-nostdinc", "-Wall", "-Wextra", "-Werror"]
        base += ["-isystem" + d for d in system] + ["-I" + r for r in roots]

        source = os.path.join(work, "probe.cpp")
        with open(source, "w") as out:
            out.write("#include <boost/version.hpp>\n")
        if subprocess.run(base + ["-fsyntax-only", source], capture_output=True).returncode == 0:
            print("FAIL Boost is still reachable: the check would prove nothing")
            return 1
        print("Boost hidden: <boost/version.hpp> is not found")

        names = headers_under(os.path.join(source_root, "include"))
        names += headers_under(os.path.join(source_root, "transports/inproc"))
        names += headers_under(os.path.join(source_root, "transports/shm"))
        names += headers_under(os.path.join(source_root, "transports/stream"))
        if have_libfabric:
            names += headers_under(os.path.join(source_root, "transports/ofi"))
        else:
            print("SKIP libfabric's headers: libfabric is not installed")
        with open(source, "w") as out:
            out.write("".join('#include "%s"\n' % name for name in names))
        result = subprocess.run(base + ["-fsyntax-only", source], capture_output=True, text=True)
        if result.returncode != 0:
            failed += 1
            print("FAIL the headers do not compile without Boost\n%s" % result.stderr[-4000:])
        else:
            print("PASS %d headers compile without Boost, in one translation unit" % len(names))

        program = os.path.join(work, "shm_allreduce")
        built = subprocess.run(base + ["-O1", "-o", program, os.path.join(source_root, "examples/shm_allreduce.cpp"),
                                       "-pthread"], capture_output=True, text=True)
        if built.returncode != 0:
            failed += 1
            print("FAIL examples/shm_allreduce.cpp does not build without Boost\n" + built.stderr[-3000:])
        else:
            environment = {k: v for k, v in os.environ.items() if not k.startswith("WEFT_")}
            ran = subprocess.run([sys.executable, weft_run, "-n", "3", "--timeout", "60", "--", program],
                                 capture_output=True, text=True, env=environment)
            lines = [l for l in ran.stdout.splitlines() if "summed" in l and "meeting: file store" in l]
            if ran.returncode != 0 or len(lines) != 3:
                failed += 1
                print("FAIL shm_allreduce under weft-run (exit %d):\n%s%s" % (ran.returncode, ran.stdout, ran.stderr))
            else:
                print("PASS shm_allreduce built without Boost ran as 3 processes:\n  " + "\n  ".join(lines))

        if nvcc:
            ipc = os.path.join(work, "ipc.cu")
            with open(ipc, "w") as out:
                out.write('#include "weft/transport/cuda/ipc.hpp"\n')
            deps = subprocess.run(nvcc + ["-std=c++20", "-M", "-I" + os.path.join(source_root, "transports/cuda")]
                                  + ["-I" + r for r in roots] + [ipc], capture_output=True, text=True)
            boost_files = sorted(set(re.findall(r"\S*/boost/\S*", deps.stdout)))
            if deps.returncode != 0 or boost_files:
                failed += 1
                print("FAIL weft/transport/cuda/ipc.hpp under nvcc: %s\n%s" %
                      (", ".join(boost_files[:5]) or "did not preprocess", deps.stderr[-2000:]))
            else:
                print("PASS weft/transport/cuda/ipc.hpp reaches no Boost header under nvcc")
        else:
            print("SKIP the CUDA IPC transport: no nvcc")
    print("%s" % ("failed" if failed else "passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
