// weft/bootstrap/store.hpp — the key-value store ranks meet through.
//
// A transport publishes its address under a key and reads its peers' the same way. Two stores
// come with weft: the TCP store rank 0 serves (weft/bootstrap/tcp_store.hpp, Boost.Asio) and
// the file store (weft/bootstrap/file_store.hpp) for a shared filesystem; a session meets
// through whichever its launch names (weft/bootstrap/rendezvous.hpp).
// Keys are at most 1024 bytes, values at most 1 MiB.
#pragma once

#include "weft/error.hpp"
#include "weft/transport.hpp"

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>
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
  // The value of key now, or nullopt when it is not set, without waiting. The stores that come with
  // weft answer at once; this default is a get whose deadline has passed.
  virtual std::optional<std::string> look(std::string_view key) {
    return get(key, deadline_clock::now());
  }
  // Sets key to value unless it is set already, and returns the value it holds afterwards (the
  // given one when this call set it). The stores that come with weft do this atomically; this
  // default, for stores that cannot, reads and then sets.
  virtual std::string claim(std::string_view key, std::string_view value) {
    if (auto held = get(key, deadline_clock::now())) return *held;
    set(key, value);
    return std::string(value);
  }
  // Where the store is, for messages ("tcp store at 10.0.0.1:29500").
  virtual std::string describe() const = 0;
  // The address of this host's interface that reaches the store over a network (where a rank
  // listens unless told otherwise); empty for a store that is not reached over one.
  virtual std::string local_address() const { return {}; }

  // What a failure watch (weft/bootstrap/failure_watch.hpp) asks of a store. A maker of new
  // connections to the same store, each for a thread of its own, trying until the deadline
  // (empty: this store has none).
  using connector_type = std::function<std::unique_ptr<store>(deadline_clock::time_point)>;
  virtual connector_type connector() const { return {}; }
  // Asks the store to claim key with value when this connection ends, unless some connection
  // withdraws it first (withdraw_on_close with the same key and value); false where the store
  // has no connections to watch.
  virtual bool set_on_close(std::string_view /*key*/, std::string_view /*value*/) { return false; }
  virtual void withdraw_on_close(std::string_view /*key*/, std::string_view /*value*/) {}
  // From another thread: ends a get waiting on this connection (it throws, or returns nullopt).
  virtual void interrupt() {}
  // After a call on this connection threw: whether the store had said it was closing in order
  // (the job ended on the rank that serves it), rather than the connection breaking.
  virtual bool closed_in_order() const { return false; }
};

// "host pid N": this process, as another process would name it.
inline std::string this_process() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "localhost") + " pid " + std::to_string(::getpid());
}

// Claims `key` (a transport's place as `rank` in a job) for this process; when another process
// holds it, throws invalid_argument naming both: two processes were started as one rank (a
// launcher's rank variables, or two jobs on one store under one key prefix).
inline void claim_rank(store& meeting, const std::string& key, int rank) {
  const std::string mine = this_process();
  const std::string holder = meeting.claim(key, mine);
  if (holder != mine) {
    throw error(errc::invalid_argument,
                "rank " + std::to_string(rank) + " is already taken by " + holder + " (this is " +
                    mine + ") in the " + meeting.describe() +
                    ": two processes were started as rank " + std::to_string(rank) +
                    "; check the launcher's rank variables (WEFT_RANK), and "
                    "give jobs that share a store their own WEFT_SECRET or key prefix");
  }
}

}  // namespace weft::bootstrap
