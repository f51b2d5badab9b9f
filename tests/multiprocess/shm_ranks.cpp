// The multi-process scenarios (ranks.hpp) over the shared-memory transport.
#include "ranks.hpp"

#include <weft/transport/shm.hpp>

namespace {

struct shm_traits {
  using session = weft::shm::session;
  using transport = weft::shm::transport;
  using config = weft::shm::config;

  static void before_slice(session&) {}
  static std::string describe(session& job) { return " over " + job.endpoint().describe(); }
  // Every peer is on this host and watched through a pidfd: a death is peer_lost; a peer that
  // stops is a timeout (and the first rank to time out tells the others).
  static bool expected_failure(const weft::error& failure, const std::string&) {
    return failure.code() == weft::errc::peer_lost || failure.code() == weft::errc::timeout;
  }
  static void rebuild_settings(config&, session&) {}
};

}  // namespace

int main(int argc, char** argv) {
  return weft_test::multiprocess::ranks_main<shm_traits>(argc, argv);
}
