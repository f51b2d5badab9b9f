// expect: transport
#include <weft/weft.hpp>

struct half_a_transport {  // no recv, wait, test or memory
  int rank() const { return 0; }
  int size() const { return 1; }
};

weft::communicator<half_a_transport>* pointer = nullptr;
