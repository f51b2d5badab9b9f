// The multi-process scenarios of the stream-ordered protocol between processes
// (weft/stream/processes.hpp) on host threads: the collective slice (ranks.hpp),
// messages read in place from the pool, a rank killed mid-allreduce, and a rank that never
// issues its call.
//
//   stream_ranks slice | pool | kill VICTIM | close VICTIM | never VICTIM [fused]
#include "ranks.hpp"

#include <weft/stream/processes.hpp>

namespace {

using namespace std::chrono_literals;
using weft_test::multiprocess::now_us;

struct stream_traits {
  using session = weft::stream::host_process_session;
  using transport = weft::stream::host_process_transport;
  using config = weft::stream::process_config;
  static void before_slice(session&) {}
  static std::string describe(session& job) { return " over " + job.endpoint().describe(); }
};

// Buffers from the pool (comm.memory()): sends are read by the receiver in place, and whole
// collectives (fused) read and write every rank's pool.
int pool(stream_traits::session& job) {
  auto& comm = job.comm();
  auto& memory = comm.memory();
  const int p = comm.size();
  for (const std::size_t count : {std::size_t{1}, std::size_t{4099}, std::size_t{1} << 20}) {
    const std::size_t bytes = count * sizeof(float);
    auto* data = reinterpret_cast<float*>(memory.allocate(bytes));
    auto* out = reinterpret_cast<float*>(memory.allocate(bytes * static_cast<std::size_t>(p)));
    if (!memory.in_pool(reinterpret_cast<std::byte*>(data), bytes)) {
      std::cout << "the pool did not hold " << bytes << " bytes" << std::endl;
      return 1;
    }
    for (std::size_t i = 0; i < count; ++i)
      data[i] = static_cast<float>((comm.rank() + 1) * (i % 7));
    weft::allreduce(comm, std::span<float>(data, count), weft::sum{}, weft::ring{});
    // Whole: each rank's share (of at least 1 MiB) read from every pool into every pool.
    weft::allreduce(comm, std::span<float>(data, count), weft::sum{}, weft::fused{});
    const std::span<float> all(out, count * static_cast<std::size_t>(p));
    if (count % 2 == 0)
      weft::allgather(comm, std::span<const float>(data, count), all, weft::fused{});
    else
      weft::allgather(comm, std::span<const float>(data, count), all, weft::ring{});
    weft::stream::synchronize(comm, 60s);
    const float ranks_sum = static_cast<float>(p * (p + 1) / 2 * p);  // summed twice
    for (std::size_t i = 0; i < count * static_cast<std::size_t>(p); ++i) {
      if (out[i] != ranks_sum * static_cast<float>((i % count) % 7)) {
        std::cout << "pool: element " << i << " of " << count * static_cast<std::size_t>(p)
                  << " is " << out[i] << ", not " << ranks_sum * static_cast<float>((i % count) % 7)
                  << std::endl;
        return 1;
      }
    }
    memory.deallocate(reinterpret_cast<std::byte*>(out), bytes * static_cast<std::size_t>(p));
    memory.deallocate(reinterpret_cast<std::byte*>(data), bytes);
  }
  std::cout << "pool ok on " << p << " ranks" << std::endl;
  return 0;
}

// Rank `victim` SIGKILLs itself mid-allreduce (or, with `close`, closes its transport and stays
// alive); every other rank must get peer_lost naming it, be refused on its next call, and build
// a new world without it over the same store.
int killed(stream_traits::session& job, int victim, bool close) {
  auto& comm = job.comm();
  const int rank = comm.rank();
  const int p = comm.size();
  std::vector<float> data(std::size_t{3} << 16);
  if (rank == victim &&
      close) {  // a few rounds, then the transport closed mid-job, the process alive
    for (int round = 0; round < 3; ++round) {
      weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
      weft::stream::synchronize(comm, 60s);
    }
    job.meeting()->set("test/event-at", std::to_string(now_us()));
    job.close_transport();
    std::this_thread::sleep_for(60s);
    return 0;
  }
  if (rank == victim) {
    std::thread trigger([&job] {
      std::this_thread::sleep_for(300ms);
      job.meeting()->set("test/event-at", std::to_string(now_us()));
      std::raise(SIGKILL);
    });
    while (true) {
      weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
      weft::stream::synchronize(comm, 60s);
    }
  }
  long long caught_at = 0;
  std::string message;
  try {
    for (int round = 0; round < 1000000; ++round) {
      weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
      weft::stream::synchronize(comm, 60s);
    }
    std::cout << "never saw rank " << victim << " fail" << std::endl;
    return 1;
  } catch (const weft::error& failure) {
    caught_at = now_us();
    message = failure.what();
    if (failure.code() != weft::errc::peer_lost) {
      std::cout << "wrong error: " << message << std::endl;
      return 1;
    }
  }
  auto event = job.meeting()->get("test/event-at", weft::deadline_clock::now() + 10s);
  std::cout << "detected in " << (event ? (caught_at - std::stoll(*event)) / 1000.0 : -1.0)
            << " ms: " << message << std::endl;
  try {
    weft::allreduce(comm, std::span<float>(data), weft::sum{});
    weft::stream::synchronize(comm, 60s);
    std::cout << "the aborted transport accepted another call" << std::endl;
    return 1;
  } catch (const weft::error&) {
  }
  auto settings = weft::stream::process_config::from_environment();
  settings.prefix = "weft-without-" + std::to_string(victim);
  settings.secret = job.launch().secret;
  settings.connect_timeout = 30s;
  weft::stream::host_process_transport transport(rank < victim ? rank : rank - 1, p - 1,
                                                 job.meeting(), settings);
  weft::communicator survivors(transport);
  std::vector<int> ones(1000, 1);
  weft::allreduce(survivors, std::span<int>(ones), weft::sum{});
  weft::stream::synchronize(survivors, 60s);
  if (ones.front() != p - 1 || ones.back() != p - 1) {
    std::cout << "the new world computed " << ones.front() << std::endl;
    return 1;
  }
  std::cout << "rebuilt a world of " << p - 1 << " ranks without rank " << victim << std::endl;
  return 0;
}

// Rank `victim` never issues its allreduce: every other rank's synchronize times out naming
// it and the call (fused: the call whole), then one rank's abort releases every stream.
int never(stream_traits::session& job, int victim, bool whole) {
  auto& comm = job.comm();
  if (comm.rank() == victim) {
    std::this_thread::sleep_for(3s);  // alive, silent, while the others time out
    return 0;
  }
  std::vector<float> data(1000, 1.0f);
  if (whole)
    weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::fused{});
  else
    weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
  try {
    weft::stream::synchronize(comm, 500ms);
    std::cout << "synchronize returned although rank " << victim << " never issued its call"
              << std::endl;
    return 1;
  } catch (const weft::error& failure) {
    const std::string text = failure.what();
    const std::string v = std::to_string(victim);
    const bool named = failure.code() == weft::errc::timeout &&
                       text.find("allreduce") != std::string::npos &&
                       (text.find("waits for rank " + v + " ") != std::string::npos ||
                        text.find("waits for rank(s) " + v + " ") != std::string::npos);
    std::cout << (named ? "timeout named it: " : "timeout did not name it: ") << text << std::endl;
    // One rank gives up for all once every other has timed out too (an abort reaches every rank
    // at once, and would otherwise end a later rank's wait before its own timeout).
    const std::string key = std::string("test/timed-out/") + (whole ? "fused/" : "ring/");
    job.meeting()->set(key + std::to_string(comm.rank()), "1");
    if (comm.rank() == (victim == 0 ? 1 : 0)) {
      for (int r = 0; r < comm.size(); ++r) {
        if (r != victim)
          static_cast<void>(
              job.meeting()->get(key + std::to_string(r), weft::deadline_clock::now() + 30s));
      }
      weft::stream::abort(comm, "the test gave up on rank " + v);
    }
    try {
      weft::stream::synchronize(comm, 10s);
    } catch (const weft::error&) {  // aborted, as asked; the stream ran to its end
    }
    return named ? 0 : 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "slice";
  try {
    auto job = stream_traits::session::from_environment();
    if (scenario == "slice") return weft_test::multiprocess::slice<stream_traits>(job);
    if (scenario == "pool") return pool(job);
    if (scenario == "kill" && argc > 2) return killed(job, std::stoi(argv[2]), false);
    if (scenario == "close" && argc > 2) return killed(job, std::stoi(argv[2]), true);
    if (scenario == "never" && argc > 2)
      return never(job, std::stoi(argv[2]), argc > 3 && std::string(argv[3]) == "fused");
    std::cerr << "usage: " << argv[0]
              << " slice | pool | kill RANK | close RANK | never RANK [fused]" << std::endl;
    return 2;
  } catch (const weft::error& failure) {
    std::cout << "error: " << failure.what() << std::endl;
    return 3;
  }
}
