// expect-success: the same calls with a valid combination compile
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

void call(weft::communicator<weft::inproc::transport>& comm, std::span<float> data) {
  weft::allreduce(comm, data, weft::sum{}, weft::ring{});
  weft::broadcast(comm, data, 0, weft::binomial_tree{});
}
