#!/usr/bin/env python3
"""weft as its users consume it: (1) as a Meson subproject, through dependency('weft-inproc');
(2) installed, through pkg-config; (3) installed, through CMake's find_package(weft CONFIG) and
its targets (weft::inproc, and weft::tcp, weft::ofi and weft::nonblocking where this build has them). Each builds
and runs a small allreduce program.

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


TRANSPORT_PROGRAMS = {
    "tcp": "#include <weft/transport/tcp.hpp>\n#include <cstdio>\nint main() {\n"
           "  std::printf(\"%s\\n\", weft::tcp::config{}.local_congestion.c_str());\n}\n",
    "ofi": "#include <weft/transport/ofi.hpp>\n#include <cstdio>\nint main() {\n"
           "  std::printf(\"%s\\n\", weft::ofi::config{}.prefix.c_str());\n}\n",
    "nonblocking": PROGRAM.replace("#include <weft/weft.hpp>", "#include <weft/weft.hpp>\n#include <weft/nonblocking.hpp>")
                          .replace("weft::allreduce(comm, std::span<int>(data));",
                                   "weft::iallreduce(comm, std::span<int>(data)).wait();"),
}


def cmake_user(work, prefix, compiler):
    """A CMake project that finds the installed weft and links its targets."""
    if shutil.which("cmake") is None:
        print("FAILED: cmake is not installed (Debian: cmake); the CMake package was not tested")
        sys.exit(1)
    components = [name for name in ("tcp", "ofi")
                  if os.path.exists(os.path.join(prefix, "include", "weft", "transport", name + ".hpp"))]
    if os.path.exists("/usr/include/boost/context/fiber.hpp"):
        components.append("nonblocking")
    user = os.path.join(work, "cmake-user")
    os.makedirs(user)
    with open(os.path.join(user, "user.cpp"), "w") as out:
        out.write(PROGRAM)
    lines = ["cmake_minimum_required(VERSION 3.16)", "project(user CXX)",
             "find_package(weft 0.1 CONFIG REQUIRED COMPONENTS inproc %s)" % " ".join(components),
             "add_executable(user user.cpp)", "target_link_libraries(user PRIVATE weft::inproc)"]
    for name in components:
        with open(os.path.join(user, name + ".cpp"), "w") as out:
            out.write(TRANSPORT_PROGRAMS[name])
        lines += ["add_executable(user_%s %s.cpp)" % (name, name),
                  "target_link_libraries(user_%s PRIVATE weft::%s%s)"
                  % (name, name, " weft::inproc" if name == "nonblocking" else "")]
    with open(os.path.join(user, "CMakeLists.txt"), "w") as out:
        out.write("\n".join(lines) + "\n")
    build = os.path.join(user, "build")
    run(["cmake", "-S", user, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_CXX_COMPILER=" + compiler])
    run(["cmake", "--build", build])
    run([os.path.join(build, "user")])
    for name in components:
        run([os.path.join(build, "user_" + name)])
    print("installed + CMake find_package: built and ran weft::inproc" +
          "".join(", weft::" + name for name in components))

    # A component this installation does not have is refused at configure time, saying so.
    wrong = os.path.join(work, "cmake-wrong")
    os.makedirs(wrong)
    with open(os.path.join(wrong, "CMakeLists.txt"), "w") as out:
        out.write("cmake_minimum_required(VERSION 3.16)\nproject(wrong CXX)\n"
                  "find_package(weft CONFIG REQUIRED COMPONENTS cuda_typo)\n")
    result = subprocess.run(["cmake", "-S", wrong, "-B", os.path.join(wrong, "build"),
                             "-DCMAKE_PREFIX_PATH=" + prefix], capture_output=True, text=True)
    if result.returncode == 0 or "no component 'cuda_typo'" not in result.stdout + result.stderr:
        print("FAILED: find_package(weft COMPONENTS cuda_typo) was not refused with a reason")
        print(result.stdout[-2000:], result.stderr[-2000:])
        sys.exit(1)
    print("installed + CMake: an unknown component is refused, naming it")


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
        run(["meson", "setup", build, source, "--prefix", prefix, "-Dtests=false", "-Dtorch=disabled",
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

        # 3. installed, found with CMake
        cmake_user(work, prefix, compiler)


if __name__ == "__main__":
    main()
