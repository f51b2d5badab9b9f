// weft/stream/flags.hpp — the 32-bit flags that order the streams of stream-ordered ranks.
//
// A flag is a 32-bit word that streams write (write_flag) and wait on (wait_flag: until the
// word reaches a value) and that the host can read and write too: flags live in memory both
// see (pinned host memory mapped into every device, for CUDA). Values only grow, and "reaches"
// is the cyclic comparison of stream memory operations, (int32)(word - value) >= 0, so a flag
// never needs to be reset. A slot is handed to one transfer at a time with the next value; it
// goes back to the pool once the host sees that value written.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::stream {

// True when `word` has reached `value` (the cyclic >= of cuStreamWaitValue32's GEQ).
inline bool reached(std::uint32_t word, std::uint32_t value) {
  return static_cast<std::int32_t>(word - value) >= 0;
}

// The host's view of a flag (memory a device may write at any time).
inline std::uint32_t read_flag(const std::uint32_t* flag) {
  return std::atomic_ref<std::uint32_t>(*const_cast<std::uint32_t*>(flag))
      .load(std::memory_order_acquire);
}
inline void store_flag(std::uint32_t* flag, std::uint32_t value) {
  std::atomic_ref<std::uint32_t>(*flag).store(value, std::memory_order_release);
}

// One wait of several a stream makes at once (a backend's optional wait_flags).
struct flag_wait {
  const std::uint32_t* word;
  std::uint32_t value;
};

// One flag handed out: where it is and the value that means "done".
struct flag_ticket {
  std::uint32_t* word = nullptr;
  std::uint32_t value = 0;
  bool done() const { return reached(read_flag(word), value); }
};

// Flags in chunks of the backend's flag memory (allocate_flags / free_flags). Chunks are never
// moved, so a flag's address stays valid while streams may still touch it. Not thread-safe:
// the ranks' lock guards it.
template <class Backend>
class flag_pool {
 public:
  explicit flag_pool(Backend& backend) : backend_(&backend) {}
  flag_pool(const flag_pool&) = delete;
  flag_pool& operator=(const flag_pool&) = delete;
  ~flag_pool() {
    for (std::uint32_t* chunk : chunks_) backend_->free_flags(chunk, chunk_flags);
  }

  // A flag no stream will write again, with a value above every one it had. With `count` > 1,
  // the flag counts `count` steps: the ticket's value is the first, value + count - 1 the last
  // (what the slot waits for before it is free again, and what abort writes).
  flag_ticket take(std::uint32_t count = 1) {
    if (free_.empty()) reclaim();
    if (free_.empty()) grow();
    const std::size_t index = free_.back();
    free_.pop_back();
    slot& s = slots_[index];
    s.busy = true;
    const std::uint32_t first = s.last + 1;
    s.last += count;
    return {s.word, first};
  }

  // A flag kept for good (a rank's "posted" counter, whose value its owner advances); abort
  // leaves it alone.
  flag_ticket take_permanent() {
    flag_ticket ticket = take();
    slots_[index_of(ticket.word)].permanent = true;
    return ticket;
  }

  // The ticket's transfer will write its value (or never will: withdrawn, and nobody waits on
  // it); the slot is free once the host sees the value, or at once when `written` is false.
  void give_back(const flag_ticket& ticket, bool written) {
    slot& s = slots_[index_of(ticket.word)];
    if (!written) {
      s.busy = false;
      free_.push_back(index_of(ticket.word));
    } else {
      s.pending = true;
    }
  }

  // Every flag a stream may still wait on set to its value from the host (abort).
  void release_all() {
    for (slot& s : slots_) {
      if (s.busy && !s.permanent) store_flag(s.word, s.last);
    }
  }

 private:
  static constexpr std::size_t chunk_flags = 1024;
  struct slot {
    std::uint32_t* word;
    std::uint32_t last = 0;  // the last value handed out
    bool busy = false;       // handed out and not yet back
    bool pending = false;    // back, once the host sees `last`
    bool permanent = false;  // never back
  };

  std::size_t index_of(const std::uint32_t* word) const {
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      if (word >= chunks_[c] && word < chunks_[c] + chunk_flags) {
        return c * chunk_flags + static_cast<std::size_t>(word - chunks_[c]);
      }
    }
    return slots_.size();  // not ours: never happens
  }

  void reclaim() {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      slot& s = slots_[i];
      if (s.busy && s.pending && reached(read_flag(s.word), s.last)) {
        s.busy = s.pending = false;
        free_.push_back(i);
      }
    }
  }

  void grow() {
    std::uint32_t* chunk = backend_->allocate_flags(chunk_flags);
    chunks_.push_back(chunk);
    for (std::size_t i = 0; i < chunk_flags; ++i) {
      store_flag(chunk + i, 0);
      slots_.push_back(slot{chunk + i});
      free_.push_back(slots_.size() - 1);
    }
  }

  Backend* backend_;
  std::vector<std::uint32_t*> chunks_;
  std::vector<slot> slots_;
  std::vector<std::size_t> free_;
};

}  // namespace weft::stream
