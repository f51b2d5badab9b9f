#!/usr/bin/env python3
"""weft as its users consume it: (1) as a Meson subproject, through dependency('weft-inproc');
(2) installed, through pkg-config. Each builds and runs a small allreduce program.

usage: consumers.py <source-root> <c++ compiler>
"""
import os
import shutil
import subprocess
import sys
import tempfile

PROGRAM = r"""
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>
#include <vector>
int main() {
  int wrong = 0;
  weft::inproc::run(3, [&](weft::communicator<weft::inproc::transport>& comm) {
    std::vector<int> data(10, comm.rank());
    weft::allreduce(comm, std::span<int>(data));
    if (data[9] != 3) ++wrong;
  });
  return wrong;
}
"""


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        print("FAILED:", " ".join(command))
        print(result.stdout[-3000:], result.stderr[-3000:])
        sys.exit(1)
    return result.stdout


def main():
    source, compiler = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        # 1. subproject
        user = os.path.join(work, "user")
        os.makedirs(os.path.join(user, "subprojects"))
        os.symlink(source, os.path.join(user, "subprojects", "weft"))
        with open(os.path.join(user, "meson.build"), "w") as out:
            out.write("project('user', 'cpp', default_options: ['cpp_std=c++20'])\n"
                      "weft = subproject('weft')\n"
                      "executable('user', 'user.cpp', dependencies: dependency('weft-inproc'))\n")
        with open(os.path.join(user, "user.cpp"), "w") as out:
            out.write(PROGRAM)
        run(["meson", "setup", "build"], cwd=user)
        run(["ninja", "-C", "build"], cwd=user)
        run([os.path.join(user, "build", "user")])
        print("subproject: built and ran")

        # 2. installed, found with pkg-config
        build = os.path.join(work, "weft-build")
        prefix = os.path.join(work, "prefix")
        run(["meson", "setup", build, source, "--prefix", prefix, "-Dtests=false",
             "-Dexamples=false", "-Dbenchmarks=false"])
        run(["meson", "install", "-C", build])
        env = dict(os.environ)
        env["PKG_CONFIG_PATH"] = os.path.join(prefix, "share", "pkgconfig")
        flags = run(["pkg-config", "--cflags", "--libs", "weft"], env=env).split()
        program = os.path.join(work, "installed.cpp")
        with open(program, "w") as out:
            out.write(PROGRAM)
        binary = os.path.join(work, "installed")
        run([compiler, "-std=c++20", program, "-o", binary] + flags)
        run([binary])
        print("installed + pkg-config: built and ran")


if __name__ == "__main__":
    main()
