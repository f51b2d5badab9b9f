// The multi-process scenarios (ranks.hpp) over the libfabric transport.
#include "ranks.hpp"

#include <weft/transport/ofi.hpp>

namespace {

struct ofi_traits {
  using session = weft::ofi::session;
  using transport = weft::ofi::transport;
  using config = weft::ofi::config;

  static void before_slice(session&) {}
  static std::string describe(session& job) {
    return " over " + job.endpoint().provider() + " on " + job.endpoint().fabric();
  }
  // A peer on this host is watched, so its death is peer_lost; fabrics without connections may
  // not see a death on another host: then the waits time out, and the first rank to time out
  // tells the others (peer_lost naming whomever it waited on).
  static bool expected_failure(const weft::error& failure, const std::string&) {
    return failure.code() == weft::errc::peer_lost || failure.code() == weft::errc::timeout;
  }
  static void rebuild_settings(config&, session&) {}
};

}  // namespace

int main(int argc, char** argv) {
  return weft_test::multiprocess::ranks_main<ofi_traits>(argc, argv);
}
