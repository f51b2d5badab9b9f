// The multi-process scenarios (ranks.hpp) over the TCP transport.
#include "ranks.hpp"

#include <weft/transport/tcp.hpp>

namespace {

struct tcp_traits {
  using session = weft::tcp::session;
  using transport = weft::tcp::transport;
  using config = weft::tcp::config;

  // Each connection's congestion control, for multiprocess.py to check: before the slice, while
  // every connection is open (a peer that finishes first closes its own).
  static void before_slice(session& job) {
    for (int peer = 0; peer < job.comm().size(); ++peer) {
      if (peer == job.comm().rank()) continue;
      std::cout << "congestion control to rank " << peer << ": "
                << job.comm().underlying_transport().congestion_control(peer) << std::endl;
    }
  }
  static std::string describe(session&) { return {}; }
  // Over TCP a death is always seen: peer_lost naming the victim.
  static bool expected_failure(const weft::error& failure, const std::string& victim_text) {
    return failure.code() == weft::errc::peer_lost &&
           std::string(failure.what()).find(victim_text) != std::string::npos;
  }
  // The new world presents the job's secret, as drawn by rank 0 when the launcher gave none.
  static void rebuild_settings(config& settings, session& job) {
    using namespace std::chrono_literals;
    if (!job.launch().secret.empty()) settings.secret = job.launch().secret;
    if (settings.secret.empty())
      settings.secret = *job.meeting()->get("weft/secret", weft::deadline_clock::now() + 10s);
  }
};

}  // namespace

int main(int argc, char** argv) {
  return weft_test::multiprocess::ranks_main<tcp_traits>(argc, argv);
}
