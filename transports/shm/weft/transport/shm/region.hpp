// weft/transport/shm/region.hpp — the memory each rank shares with the ranks of its host, and
// how it is laid out.
//
// Each rank owns one region, made with memfd_create (shm_open and an immediate shm_unlink where
// memfd is missing), so it has no name in /dev/shm or on disk: it lives while a rank maps it
// and goes with the last, whether the ranks exit, crash or are killed. The region holds
//
//   control   the owner's doorbell (a futex word a rank bumps when it changes something the
//             owner waits for while the owner sleeps), whether the owner sleeps, whether it closed
//   lent      per peer, what concerns the messages the owner lends it (below): the latest the
//             peer gave back and the latest it declined, whether it may read the owner's
//             memory (all set by the peer), and the latest the owner withdrew, on a line of
//             its own
//   inbound   one FIFO per sending rank (itself included): tail (slots the owner consumed), on
//             a cache line of its own, then the slots, each a header line (with its sequence
//             number) and the payload
//   pool      page-aligned memory the owner's memory space hands out (communicator scratch,
//             buffers a user allocates through comm.memory()); every peer maps it too
//
// So every FIFO lives in its receiver's memory: a sender writes a slot and publishes it by
// setting its sequence number last; the receiver reads it and frees it by raising tail. Sequence
// numbers and tail only grow, and no lock is ever held: a rank that dies mid-write has published
// nothing, and a survivor's later calls never see its half-written slot.
//
// A large message whose buffer lies in the sender's pool is lent instead of copied: one slot
// says where it is, the receiver copies it (or combines it, for recv_reduce) straight from its
// mapping of the sender's pool, then raises the sender's `given_back` count. One copy per byte.
// Where the host lets a rank read its peers' memory (process_vm_readv, "CMA"), a large message
// from anywhere else is lent by its address the same way.
#pragma once

#include "weft/error.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>

namespace weft::shm::detail {

inline constexpr std::size_t cache_line = 64;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "shared counters must be lock-free (address-free) atomics");

struct alignas(cache_line) shared_counter {
  std::atomic<std::uint64_t> value;
};

struct alignas(cache_line) control_block {
  std::atomic<std::uint32_t>
      doorbell;  // futex word: bumped by a change that finds the owner sleeping
  std::atomic<std::uint32_t> sleeping;  // the owner is about to sleep, or sleeps, on the doorbell
  std::atomic<std::uint32_t> closed;    // the owner closed its transport in order
  // Set before `closed`: 1 + the rank the owner had found lost when it closed (0: none), so that
  // a peer that sees it close names the rank the job lost, not the rank that gave up after it.
  std::atomic<std::uint32_t> closed_after_loss_of;
  std::uint64_t self_address;  // where the owner maps its region (a peer's probe reads it)
  // Set before `closed`: why the owner gave up (what it told the job, or heard from it), empty
  // for an orderly end, NUL-terminated, so that a peer that sees it close before the job's
  // notice reaches it can say.
  char close_reason[448];
};

// What concerns the messages a region's owner lends one peer (see above). Lent messages are
// numbered from 1 per pair; at most one is outstanding.
struct alignas(cache_line) lent_counters {
  std::atomic<std::uint64_t> given_back;    // the latest the peer finished reading, raised by it
  std::atomic<std::uint32_t> reads_memory;  // set by the peer: it may read the owner's memory (CMA)
  std::atomic<std::uint64_t> declined;  // one the peer gave back unread: send it through the slots
  alignas(cache_line) std::atomic<std::uint64_t> withdrawn;  // one the owner took back unread
};

// What precedes each slot's payload. The slot is published when `sequence` reads the number
// the receiver expects next (1 + how many slots the sender published before it), so a receiver
// waits on the very line it reads next; a piece of at most inline_bytes travels in that line too.
struct alignas(cache_line) slot_header {
  std::atomic<std::uint64_t> sequence;
  std::uint64_t tag;
  std::uint64_t total;   // the whole message's bytes
  std::uint64_t offset;  // where this piece starts in it
  std::uint64_t bytes;   // this piece's bytes
  std::byte inline_payload[cache_line - 5 * sizeof(std::uint64_t)];
};
inline constexpr std::size_t inline_bytes = sizeof(slot_header::inline_payload);
static_assert(sizeof(slot_header) == cache_line);

// A slot whose header has this `offset` lends the whole message: its inline payload holds a
// loan (where in the sender's pool, and the loan's number) and `bytes` is the message's size.
inline constexpr std::uint64_t lent_piece = ~std::uint64_t{0};
struct loan {
  std::uint64_t where;  // the offset in the sender's pool, or the address in its memory
  std::uint64_t number;
  std::uint64_t in_pool;  // 1: `where` is a pool offset; 0: an address, read by process_vm_readv
};
static_assert(sizeof(loan) <= inline_bytes);

inline constexpr std::size_t page_bytes = 4096;

// Where things are in a region of a world of `ranks`, with `slots` slots of `slot_bytes` each
// and a pool of `pool_bytes`.
struct layout {
  std::size_t ranks = 0;
  std::size_t slots = 0;
  std::size_t slot_bytes = 0;
  std::size_t pool_bytes = 0;

  std::size_t slot_stride() const { return sizeof(slot_header) + slot_bytes; }
  std::size_t fifo_bytes() const { return sizeof(shared_counter) + slots * slot_stride(); }
  std::size_t lent_offset(int peer) const {
    return sizeof(control_block) + static_cast<std::size_t>(peer) * sizeof(lent_counters);
  }
  std::size_t fifo_offset(int sender) const {
    return sizeof(control_block) + ranks * sizeof(lent_counters) +
           static_cast<std::size_t>(sender) * fifo_bytes();
  }
  std::size_t pool_offset() const {
    const std::size_t end = fifo_offset(static_cast<int>(ranks));
    return (end + page_bytes - 1) / page_bytes * page_bytes;
  }
  std::size_t total() const { return pool_offset() + pool_bytes; }
};

// One FIFO, seen from either end. The sender counts what it published itself.
struct fifo {
  shared_counter* tail = nullptr;  // slots the receiver consumed, raised by it
  std::byte* slots = nullptr;
  std::size_t count = 0;
  std::size_t stride = 0;

  slot_header* header(std::uint64_t sequence) const {
    return reinterpret_cast<slot_header*>(slots + (sequence % count) * stride);
  }
  std::byte* payload(std::uint64_t sequence, std::size_t bytes) const {
    return bytes <= inline_bytes ? header(sequence)->inline_payload
                                 : slots + (sequence % count) * stride + sizeof(slot_header);
  }
};

inline fifo fifo_in(std::byte* region, const layout& shape, int sender) {
  std::byte* base = region + shape.fifo_offset(sender);
  fifo result;
  result.tail = reinterpret_cast<shared_counter*>(base);
  result.slots = base + sizeof(shared_counter);
  result.count = shape.slots;
  result.stride = shape.slot_stride();
  return result;
}

inline control_block* control_of(std::byte* region) {
  return reinterpret_cast<control_block*>(region);
}

// The counters of what `region`'s owner lends `peer`.
inline lent_counters* lent_to(std::byte* region, const layout& shape, int peer) {
  return reinterpret_cast<lent_counters*>(region + shape.lent_offset(peer));
}

// A mapping of a region: this rank's own (it holds the descriptor to hand out) or a peer's.
class mapping {
 public:
  mapping() = default;
  mapping(std::byte* base, std::size_t bytes, int descriptor)
      : base_(base), bytes_(bytes), fd_(descriptor) {}
  mapping(mapping&& other) noexcept { *this = std::move(other); }
  mapping& operator=(mapping&& other) noexcept {
    if (this != &other) {
      reset();
      base_ = std::exchange(other.base_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~mapping() { reset(); }

  std::byte* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  int descriptor() const { return fd_; }
  // Closes the descriptor, keeping the mapping (once every peer has its own).
  void forget_descriptor() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void reset() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
    forget_descriptor();
    base_ = nullptr;
    bytes_ = 0;
  }

 private:
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  int fd_ = -1;
};

// Maps `bytes` of descriptor `fd` (owned by the result).
inline mapping map_region(int fd, std::size_t bytes, const std::string& whose) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int failure = errno;
    ::close(fd);
    throw error(errc::transport, "shm transport: cannot map " + whose + " (" +
                                     std::to_string(bytes) + " bytes): " + std::strerror(failure));
  }
  return mapping(static_cast<std::byte*>(base), bytes, fd);
}

// A new zeroed region of `bytes`, with no name left anywhere.
inline mapping create_region(std::size_t bytes) {
  int fd = static_cast<int>(::syscall(SYS_memfd_create, "weft-shm", MFD_CLOEXEC));
  if (fd < 0) {  // no memfd (an old kernel, a seccomp filter): a POSIX object, unlinked at once
    std::random_device entropy;
    const std::string name =
        "/weft-shm-" + std::to_string(::getpid()) + "-" + std::to_string(entropy());
    fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) ::shm_unlink(name.c_str());
  }
  if (fd < 0) {
    throw error(errc::transport, std::string("shm transport: cannot create a shared region: ") +
                                     std::strerror(errno));
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int failure = errno;
    ::close(fd);
    throw error(errc::transport, "shm transport: cannot size a shared region to " +
                                     std::to_string(bytes) + " bytes: " + std::strerror(failure));
  }
  return map_region(fd, bytes, "its own region");
}

// A message lent by address between ranks of one process is read at the address its sender
// wrote it, while the counters that order the two accesses are read and written through two
// mappings of one region, at two addresses: ThreadSanitizer, which pairs synchronization by
// address, cannot see that order. These tell it (both sides name the buffer's address); without
// ThreadSanitizer they are nothing.
#if defined(__SANITIZE_THREAD__)
#define WEFT_SHM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_SHM_TSAN 1
#endif
#endif
#ifdef WEFT_SHM_TSAN
}  // namespace weft::shm::detail
#include <sanitizer/tsan_interface.h>
namespace weft::shm::detail {
inline void handed_over(const void* address) { __tsan_release(const_cast<void*>(address)); }
inline void taken_over(const void* address) { __tsan_acquire(const_cast<void*>(address)); }
#else
inline void handed_over(const void*) {}
inline void taken_over(const void*) {}
#endif

// Sleeps on `word` while it holds `seen`, at most `limit` (shared futex: across processes).
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t seen,
                       std::chrono::nanoseconds limit) {
  if (limit <= std::chrono::nanoseconds::zero()) return;
  timespec timeout{};
  timeout.tv_sec = static_cast<time_t>(limit.count() / 1000000000);
  timeout.tv_nsec = static_cast<long>(limit.count() % 1000000000);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, seen, &timeout, nullptr,
            0);
}

// Wakes `control`'s owner if it sleeps, or is about to, after a change it may wait for (a
// store of a sequence number or tail, ordered before the flag's load by the fence below): bumps
// its doorbell and wakes the futex. An owner that is not sleeping
// costs one read of a line it rarely writes. No wake-up is lost: the owner raises `sleeping`,
// then looks for changes once more before it sleeps (a seq_cst fence between); so either this
// load sees `sleeping` raised, or the owner's look sees the change.
inline void ring(control_block* control) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (control->sleeping.load(std::memory_order_seq_cst) == 0) return;
  control->doorbell.fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&control->doorbell), FUTEX_WAKE, INT_MAX,
            nullptr, nullptr, 0);
}

}  // namespace weft::shm::detail
