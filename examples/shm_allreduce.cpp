// Allreduce between the processes of one host through shared memory, with nothing beyond C++20
// and POSIX: no Boost, no network. Run it with a launcher:
//
//   weft-run -n 4 ./shm_allreduce                                 # 4 processes on this machine
//   WEFT_STORE_PATH=/dev/shm/job mpirun -n 4 -x WEFT_STORE_PATH ./shm_allreduce
//
// weft::shm::session::from_environment() reads the rank and size the launcher set and meets the
// other ranks through the file store in WEFT_STORE_PATH (weft-run makes one for each job): each
// rank publishes where its shared region is, maps the others' and hands back a ready
// communicator. To meet at WEFT_STORE instead (mpirun or srun without a shared directory),
// include <weft/bootstrap/tcp_meeting.hpp> too, which brings the TCP store (Boost.Asio).
#include <weft/transport/shm.hpp>
#include <weft/weft.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main() {
  try {
    auto job = weft::shm::session::from_environment();
    auto& comm = job.comm();
    const int p = comm.size();

    std::vector<float> activations(4096, static_cast<float>(comm.rank() + 1));  // 16 KiB
    const weft::report report = weft::allreduce(comm, std::span<float>(activations), weft::sum{});

    const float expected = static_cast<float>(p * (p + 1) / 2);
    const bool right = activations.front() == expected && activations.back() == expected;
    const std::string meeting = job.meeting() != nullptr ? job.meeting()->describe() : "none";
    std::printf("rank %d of %d: %s [%s, %d steps]; meeting: %s\n", comm.rank(), p,
                right ? "summed" : "WRONG", std::string(report.algorithm).c_str(), report.steps,
                meeting.c_str());
    return right ? 0 : 1;
  } catch (const weft::error& failure) {
    std::fprintf(stderr, "%s\n", failure.what());
    return 1;
  }
}
