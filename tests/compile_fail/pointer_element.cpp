// expect: element
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

void call(weft::communicator<weft::inproc::transport>& comm, std::span<int*> data) {
  weft::broadcast(comm, data, 0);
}
