// The weft process group over shared memory (weft/transport/shm.hpp): every rank on one host.
#include "meeting.hpp"

#include "weft/transport/shm.hpp"

#include <memory>

namespace weft_torch {

c10::intrusive_ptr<process_group> make_shm(const group_request& request) {
  auto meeting = std::make_unique<c10d_store>(request.store);
  auto config = weft::shm::config::from_environment();
  config.connect_timeout = timeout_of(request);
  config.secret = group_secret(*meeting, request);
  auto transport =
      std::make_unique<weft::shm::transport>(request.rank, request.size, meeting.get(), config);
  return c10::make_intrusive<process_group_over<weft::shm::transport>>(
      std::move(meeting), std::move(transport), options_for(request), "shm");
}

}  // namespace weft_torch
