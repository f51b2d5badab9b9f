// expect: weft::allreduce: this algorithm does not implement allreduce
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

void call(weft::communicator<weft::inproc::transport>& comm, std::span<float> data) {
  weft::allreduce(comm, data, weft::sum{}, weft::bruck{});
}
