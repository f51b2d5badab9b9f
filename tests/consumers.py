#!/usr/bin/env python3
"""weft as its users consume it, outside this build: (1) as a Meson subproject, through
dependency('weft-inproc'); (2) installed (meson install), with the README's compiler line per
component (`pkg-config --cflags --libs weft-<component>`); (3) installed, through CMake's
find_package(weft CONFIG COMPONENTS ...) and a target per component. Every component this build
installs is built and run: a transport's program runs as 2 processes under the installed
weft-run where it crosses processes; CUDA's says whether a GPU is there (it runs either way).

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

# A session's program: 2 ranks allreduce rank+1; exit 0 when both hold 3.
SESSION = r"""
%s
#include <weft/weft.hpp>
#include <cstdio>
#include <vector>
int main() {
  auto job = %s::from_environment();
  std::vector<int> data(1000, job.comm().rank() + 1);
  weft::allreduce(job.comm(), std::span<int>(data));
  std::printf("rank %%d: %%d\n", job.comm().rank(), data[999]);
  return data[999] == 3 ? 0 : 1;
}
"""

SIM = r"""
#include <weft/transport/sim.hpp>
#include <weft/weft.hpp>
#include <vector>
int main() {
  auto machine = weft::sim::fabric::uniform(4, {.gbit_per_s = 100, .latency_us = 1});
  int wrong = 0;
  auto measured = weft::sim::run(machine, [&](weft::communicator<weft::sim::transport>& comm) {
    std::vector<float> data(1024, 1.0f);
    weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
    if (data[0] != 4.0f) ++wrong;
  });
  return wrong == 0 && measured.seconds > 0 ? 0 : 1;
}
"""

CUDA = r"""
#include <weft/transport/cuda.hpp>
#include <cstdio>
int main() {
  const std::string why = weft::cuda::why_no_device();
  std::printf("weft-cuda: %s\n", why.empty() ? "a CUDA device is here" : why.c_str());
  return 0;
}
"""

# component -> (source, file suffix, pkg-config names, environment for weft-run or None)
COMPONENTS = {
    "inproc": (PROGRAM, "cpp", ["weft-inproc"], None),
    "sim": (SIM, "cpp", ["weft-sim"], None),
    "tcp": (SESSION % ("#include <weft/transport/tcp.hpp>", "weft::tcp::session"), "cpp", ["weft-tcp"], {}),
    "shm": (SESSION % ("#include <weft/transport/shm.hpp>", "weft::shm::session"), "cpp", ["weft-shm"], {}),
    "ofi": (SESSION % ("#include <weft/transport/ofi.hpp>", "weft::ofi::session"), "cpp", ["weft-ofi"],
            {"WEFT_OFI_PROVIDER": "tcp;ofi_rxm", "WEFT_OFI_QUIET": "1"}),
    "tiered": (SESSION % ("#include <weft/bootstrap/tiered_session.hpp>\n#include <weft/transport/shm.hpp>\n"
                          "#include <weft/transport/tcp.hpp>",
                          "weft::tiered_session<weft::shm::transport, weft::tcp::transport>"),
               "cpp", ["weft-shm", "weft-tcp"], {}),
    "nonblocking": (PROGRAM.replace("#include <weft/weft.hpp>", "#include <weft/weft.hpp>\n#include <weft/nonblocking.hpp>")
                    .replace("weft::allreduce(comm, std::span<int>(data));",
                             "weft::iallreduce(comm, std::span<int>(data)).wait();"),
                    "cpp", ["weft-nonblocking", "weft-inproc"], None),
    "stream": ((SESSION % ("#include <weft/stream/processes.hpp>", "weft::stream::host_process_session"))
               .replace("  std::printf(", "  weft::stream::synchronize(job.comm(), std::chrono::seconds(60));\n  std::printf("),
               "cpp", ["weft-stream"], {}),
    "cuda": (CUDA, "cu", ["weft-cuda"], None),
}


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        print("FAILED:", " ".join(command))
        print(result.stdout[-3000:], result.stderr[-3000:])
        sys.exit(1)
    return result.stdout


def run_program(binary, prefix, launch):
    """Runs a consumer's program: alone, or as 2 ranks under the installed weft-run."""
    if launch is None:
        return run([binary])
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEFT_")}
    env.update(launch)
    return run([sys.executable, os.path.join(prefix, "bin", "weft-run"), "-n", "2", "--timeout", "120", "--", binary],
               env=env)


def installed_components(prefix):
    """The components whose pkg-config file the installation holds."""
    found = os.listdir(os.path.join(prefix, "share", "pkgconfig"))
    have = [name for name, (_, _, pcs, _) in COMPONENTS.items() if all(pc + ".pc" in found for pc in pcs)]
    if "cuda" in have and shutil.which("nvcc") is None:
        print("SKIP the cuda component's programs: nvcc is not on PATH")
        have.remove("cuda")
    return have


def pkg_config_users(work, prefix, compiler, components):
    """The README's line per component: <compiler> -std=c++20 app $(pkg-config --cflags --libs ...)."""
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = os.path.join(prefix, "share", "pkgconfig")
    for name in components:
        source_text, suffix, pcs, launch = COMPONENTS[name]
        source = os.path.join(work, "pc_%s.%s" % (name, suffix))
        with open(source, "w") as out:
            out.write(source_text)
        flags = run(["pkg-config", "--cflags", "--libs"] + pcs, env=env).split()
        binary = os.path.join(work, "pc_" + name)
        tool = ["nvcc", "-std=c++20"] if suffix == "cu" else [compiler, "-std=c++20"]
        run(tool + [source, "-o", binary] + flags)
        output = run_program(binary, prefix, launch)
        print("installed + pkg-config %s: built and ran%s" % (" ".join(pcs), (": " + output.strip().splitlines()[-1]) if output.strip() else ""))


def cmake_user(work, prefix, compiler, components):
    """A CMake project that finds the installed weft and links a target per component."""
    if shutil.which("cmake") is None:
        print("FAILED: cmake is not installed (Debian: cmake); the CMake package was not tested")
        sys.exit(1)
    user = os.path.join(work, "cmake-user")
    os.makedirs(user)
    lines = ["cmake_minimum_required(VERSION 3.16)", "project(user CXX)",
             "find_package(weft 0.1 CONFIG REQUIRED COMPONENTS %s)" % " ".join(components)]
    for name in components:
        source_text, suffix, _, _ = COMPONENTS[name]
        source_name = "%s.%s" % (name, suffix)
        if suffix == "cu":  # weft's CUDA headers are compiled by nvcc: a CUDA source
            lines += ["enable_language(CUDA)", "set(CMAKE_CUDA_STANDARD 20)", "set(CMAKE_CUDA_ARCHITECTURES 90)"]
        with open(os.path.join(user, source_name), "w") as out:
            out.write(source_text)
        extra = " weft::inproc" if name == "nonblocking" else ""
        lines += ["add_executable(user_%s %s)" % (name, source_name),
                  "target_link_libraries(user_%s PRIVATE weft::%s%s)" % (name, name, extra)]
    with open(os.path.join(user, "CMakeLists.txt"), "w") as out:
        out.write("\n".join(lines) + "\n")
    build = os.path.join(user, "build")
    run(["cmake", "-S", user, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_CXX_COMPILER=" + compiler])
    run(["cmake", "--build", build])
    for name in components:
        run_program(os.path.join(build, "user_" + name), prefix, COMPONENTS[name][3])
    print("installed + CMake find_package: built and ran " + ", ".join("weft::" + name for name in components))

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
    if shutil.which("nvcc") is None and os.path.exists("/usr/local/cuda/bin/nvcc"):
        os.environ["PATH"] += ":/usr/local/cuda/bin"
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
        components = installed_components(prefix)
        print("installed components: " + " ".join(components))
        for needed in ("inproc", "sim"):
            if needed not in components:
                print("FAILED: the installation has no pkg-config file for weft-" + needed)
                sys.exit(1)
        pkg_config_users(work, prefix, compiler, components)

        # 3. installed, found with CMake
        cmake_user(work, prefix, compiler, components)


if __name__ == "__main__":
    main()
