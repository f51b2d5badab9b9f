// Allreduce across processes over TCP: the same call as between threads, with a transport that
// crosses process and machine boundaries. Run it with a launcher:
//
//   weft-run -n 4 ./tcp_allreduce                               # 4 processes on this machine
//   mpirun -n 8 -x WEFT_STORE=node0:29500 ./tcp_allreduce       # Open MPI starts the ranks
//   srun -n 8 --export=ALL,WEFT_STORE=node0:29500 ./tcp_allreduce
//
// weft::tcp::session::from_environment() reads the rank and size the launcher set, meets the
// other ranks through the store rank 0 serves at WEFT_STORE, connects to every one of them, and
// hands back a ready communicator. Every rank contributes rank+1 in each element; each then holds
// 1 + 2 + ... + p everywhere, and the report says which algorithm moved how many bytes.
#include <weft/transport/tcp.hpp>
#include <weft/weft.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main() {
  try {
    auto job = weft::tcp::session::from_environment();
    auto& comm = job.comm();
    const int p = comm.size();

    std::vector<float> gradients(1 << 20, static_cast<float>(comm.rank() + 1));  // 4 MiB
    const weft::report ring =
        weft::allreduce(comm, std::span<float>(gradients), weft::sum{}, weft::ring{});

    std::vector<double> loss = {0.5 * (comm.rank() + 1)};  // small: latency-bound
    const weft::report small = weft::allreduce(comm, std::span<double>(loss), weft::sum{});

    const float expected = static_cast<float>(p * (p + 1) / 2);
    const bool right = gradients.front() == expected && gradients.back() == expected &&
                       loss[0] == 0.5 * p * (p + 1) / 2;
    std::printf(
        "rank %d of %d (%s): gradients %s [%s, %d steps, %llu bytes sent]; loss %.1f [%s]\n",
        comm.rank(), p, job.launch().launcher.c_str(), right ? "summed" : "WRONG",
        std::string(ring.algorithm).c_str(), ring.steps,
        static_cast<unsigned long long>(ring.bytes_sent), loss[0],
        std::string(small.algorithm).c_str());
    return right ? 0 : 1;
  } catch (const weft::error& failure) {
    std::fprintf(stderr, "%s\n", failure.what());
    return 1;
  }
}
