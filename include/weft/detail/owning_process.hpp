// weft/detail/owning_process.hpp — which process made an object: a forked child holds a copy of
// every object of its parent, sockets, threads and shared mappings included, and a copy that
// acts as the parent would (says goodbye on the parent's connections, shuts them down, joins a
// thread that exists only in the parent) breaks the parent's job or hangs. Objects that own
// such things ask forked() in their destructor and, in a child, let go of them quietly.
#pragma once

#include <sys/types.h>
#include <unistd.h>

namespace weft::detail {

class owning_process {
 public:
  // True in a process forked from the one that made this object.
  bool forked() const { return ::getpid() != pid_; }

 private:
  pid_t pid_ = ::getpid();
};

}  // namespace weft::detail
