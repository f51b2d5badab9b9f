// weft/bootstrap/store.hpp — the key-value store ranks meet through.
//
// A transport publishes its address under a key and reads its peers' the same way. Two stores
// come with weft: the TCP store rank 0 serves (weft/bootstrap/tcp_store.hpp, with the tcp
// transport) and the file store (weft/bootstrap/file_store.hpp) for a shared filesystem.
// Keys are at most 1024 bytes, values at most 1 MiB.
#pragma once

#include "weft/transport.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace weft::bootstrap {

inline constexpr std::size_t max_key_bytes = 1024;
inline constexpr std::size_t max_value_bytes = std::size_t{1} << 20;

class store {
 public:
  virtual ~store() = default;
  // Sets key to value; a key is set once per job (a second set replaces the value).
  virtual void set(std::string_view key, std::string_view value) = 0;
  // The value of key, waiting for it to be set until `deadline`; nullopt when the deadline passed.
  virtual std::optional<std::string> get(std::string_view key,
                                         deadline_clock::time_point deadline) = 0;
  // Where the store is, for messages ("tcp store at 10.0.0.1:29500").
  virtual std::string describe() const = 0;
};

}  // namespace weft::bootstrap
