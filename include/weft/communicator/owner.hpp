// weft/communicator/owner.hpp — what a world communicator knows of the session that owns it, so
// that weft::agree and weft::shrink (weft/recovery.hpp) can be called on the communicator: the
// session rebuilds the world over its store and hands back the communicator of the survivors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

// What weft::agree decided, the same on every rank that returns it.
struct agreement {
  // The bitwise AND of the flags of the ranks that took part.
  std::uint64_t flag = ~std::uint64_t{0};
  // The ranks counted lost (ranks of the communicator agree was called on, ascending), and why,
  // one text per rank. They are excluded from every later agreement and from the next shrink.
  std::vector<int> lost;
  std::vector<std::string> why;
};

namespace detail {

// Implemented by a session (weft/bootstrap/session.hpp) for its world communicator.
template <class Communicator>
class world_owner {
 public:
  virtual agreement agree(std::uint64_t flag) = 0;
  virtual Communicator& shrink() = 0;

 protected:
  ~world_owner() = default;
};

}  // namespace detail
}  // namespace weft
