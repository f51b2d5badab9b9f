// expect: this algorithm reduces out of rank order and needs a commutative op
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

struct concatenate {  // associative, not commutative (no `commutative` member)
  int operator()(int a, int b) const { return a * 10 + b; }
};

void call(weft::communicator<weft::inproc::transport>& comm, std::span<int> data) {
  weft::allreduce(comm, data, concatenate{}, weft::ring{});
}
