// expect: band, bor and bxor need integer elements
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

void call(weft::communicator<weft::inproc::transport>& comm, std::span<float> data) {
  weft::allreduce(comm, data, weft::bxor{});
}
