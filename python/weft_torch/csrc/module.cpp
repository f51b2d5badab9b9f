// weft_torch._C — the process group class and the function torch.distributed calls to make one
// (weft_torch/__init__.py registers it as backend "weft").
#include "meeting.hpp"

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace weft_torch {
namespace {

// The transports this build has, in the order WEFT_TRANSPORT's values are listed.
std::vector<std::string> transports() {
  std::vector<std::string> built{"tcp"};
#ifdef WEFT_TORCH_SHM
  built.push_back("shm");
#endif
#ifdef WEFT_TORCH_OFI
  built.push_back("ofi");
#endif
  return built;
}

c10::intrusive_ptr<process_group> create(const std::string& transport,
                                         const group_request& request) {
  if (transport == "tcp") return make_tcp(request);
#ifdef WEFT_TORCH_SHM
  if (transport == "shm") return make_shm(request);
#endif
#ifdef WEFT_TORCH_OFI
  if (transport == "ofi") return make_ofi(request);
#endif
  std::string known;
  for (const auto& name : transports()) known += (known.empty() ? "" : ", ") + name;
  throw std::runtime_error("weft backend: transport '" + transport +
                           "' is not one this build has (" + known + ")");
}

}  // namespace
}  // namespace weft_torch

PYBIND11_MODULE(_C, module) {
  using namespace weft_torch;
  py::module_::import("torch.distributed");  // ProcessGroup and Store are registered by torch
  module.doc() = "weft collectives as a torch.distributed process group";
  py::class_<process_group, c10d::ProcessGroup, c10::intrusive_ptr<process_group>>(
      module, "ProcessGroupWeft")
      .def_property_readonly("transport", &process_group::transport_name,
                             "The weft transport the group runs over: tcp, shm or ofi");
  module.def("transports", &transports, "The transports this build of weft_torch has");
  module.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, const std::string& transport) {
        return create(transport, group_request{store, rank, size, timeout});
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("transport"),
      py::call_guard<py::gil_scoped_release>(),
      "Connects this rank to the group's others over `transport` and returns the process group");
}
