// The weft process group over libfabric (weft/transport/ofi.hpp); the provider from
// WEFT_OFI_PROVIDER.
#include "meeting.hpp"

#include "weft/transport/ofi.hpp"

#include <memory>

namespace weft_torch {

c10::intrusive_ptr<process_group> make_ofi(const group_request& request) {
  auto meeting = std::make_unique<c10d_store>(request.store);
  auto config = weft::ofi::config::from_environment();
  config.connect_timeout = timeout_of(request);
  auto transport =
      std::make_unique<weft::ofi::transport>(request.rank, request.size, meeting.get(), config);
  return c10::make_intrusive<process_group_over<weft::ofi::transport>>(
      std::move(meeting), std::move(transport), options_for(request), "ofi");
}

}  // namespace weft_torch
