// weft/stream/processes.hpp — ranks as processes of one host whose collectives only
// enqueue work on streams: the shape of weft::cuda::ipc_transport (weft/transport/cuda/ipc.hpp),
// written once over a backend that shares device memory between processes, and here on host
// threads (weft::stream::host_process_transport) for tests and for GPU programs on a host without
// one.
//
//   auto job = weft::stream::host_process_session::from_environment();  // weft-run, mpirun,
//   torchrun auto& memory = job.comm().memory();                 // the rank's pool: peers read it
//   in place weft::allreduce(job.comm(), data, weft::sum{});     // enqueues on the rank's stream,
//   returns weft::stream::synchronize(job.comm(), 10s);         // the result is there, or a
//   timeout
//
// Wiring: each rank makes a region of host memory (envelopes and flags, registered with the
// device) and a device pool, and hands both to the ranks of its host over a Unix socket
// (SCM_RIGHTS; the job's secret checked), as the shm transport hands over its region. The
// protocol (weft/stream/processes/process_rank.hpp): a send announces itself in an envelope in
// the receiver's region; the receiver's host matches it and enqueues the transfer, one copy (or
// one combine, for a reducing receive) from the sender's pool into the receive buffer, ordered
// by flags the streams wait on and write. Buffers from comm.memory() (the pool) are read in
// place; any other buffer is first copied into the sender's pool (by its stream, or, past
// stage_piece_bytes, in pieces through two areas the receiver empties in turn).
//
// Faults: a peer whose process ends, or that aborts, releases every stream of every survivor
// within a few milliseconds; their next synchronize throws peer_lost naming it.
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/session.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/env.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/stream/processes/meeting.hpp"
#include "weft/stream/processes/messages.hpp"
#include "weft/stream/processes/process_rank.hpp"
#include "weft/stream/processes/sharing.hpp"
#include "weft/stream/processes/watch.hpp"
#include "weft/stream/processes/whole.hpp"
#include "weft/transport.hpp"

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace weft::stream {

// What a stream-ordered rank is made with, and the variables that set it (docs/tuning.md).
struct process_config : process_settings {
  int device = -1;      // the rank's device; -1: the launcher's local rank modulo the devices seen
  int local_rank = -1;  // the rank among those of its host, when the launcher says

  // WEFT_TIMEOUT_MS (start-up, and how long a full FIFO or pool may stall a send),
  // WEFT_SHM_POOL_BYTES (the pool: default 256 MiB here) and WEFT_SHM_STAGE_BYTES (the pieces a
  // send from outside the pool is staged in); a value that cannot be read is refused.
  static process_config from_environment() {
    namespace env = weft::detail::env;
    process_config result;
    if (const auto value = env::timeout()) {
      result.connect_timeout = *value;
      result.stall_timeout = *value;
    }
    if (const auto value = env::bytes("WEFT_SHM_POOL_BYTES", std::uint64_t{1} << 40)) {
      result.pool_bytes = static_cast<std::size_t>(*value);
    }
    result.read_stage_bytes("WEFT_SHM_STAGE_BYTES");
    return result;
  }
  // A staging piece's size from `variable` (at least 64 bytes, rounded down to 64).
  void read_stage_bytes(const char* variable) {
    namespace env = weft::detail::env;
    if (const auto value = env::bytes(variable, std::uint64_t{1} << 40)) {
      if (*value < 64) env::refuse(variable, std::to_string(*value), "at least 64 bytes");
      stage_piece_bytes = static_cast<std::size_t>(*value) / 64 * 64;
    }
  }
  // What the launch settled (weft::basic_session calls it): the job's secret and the local rank.
  void adopt(const bootstrap::launch& where, const std::string& job_secret) {
    secret = job_secret;
    local_rank = where.local_rank;
  }
};

// The device a rank uses: `config.device` when set, else its local rank (or, when the launcher
// does not say, its rank) modulo the devices this process sees.
inline int device_for(const process_config& config, int rank, int devices) {
  if (config.device >= 0) return config.device;
  const int local = config.local_rank >= 0 ? config.local_rank : rank;
  return devices > 0 ? local % devices : 0;
}

// One rank (weft::transport, weft::reducing_transport), stream-ordered over `Backend`.
template <sharing_backend Backend, class Config = process_config>
class process_transport {
 public:
  using process_rank_type = process_rank<Backend>;
  using memory_type = typename process_rank_type::memory_type;
  using operation = weft::stream::detail::operation;
  using request = weft::detail::request_handle<process_transport, operation>;
  using config_type = Config;
  static constexpr bool stream_ordered = true;
  static constexpr std::string_view tuning_key = Backend::tuning_key;

  // Makes this rank's region and pool and meets the other ranks of its host through `meeting`
  // (not needed for one rank).
  process_transport(int rank, int size, bootstrap::store* meeting,
                    const Config& config = Config::from_environment(),
                    Backend backend = Backend{}) {
    const int device = device_for(config, rank, backend.devices());
    process_ = std::make_unique<process_rank_type>(std::move(backend), rank, size, device, meeting,
                                                   config);
  }

  int rank() const { return process_->rank(); }
  int size() const { return process_->size(); }
  int device() const { return process_->device(); }
  typename Backend::stream_type stream() const { return process_->stream(); }
  // The rank's memory: copies and combines on its stream, allocations from its pool.
  memory_type& memory() { return process_->memory(); }
  process_rank_type& shared() { return *process_; }

  request send(int peer, std::span<const std::byte> data, tag_t tag) {
    weft::detail::check_peer(rank(), size(), peer, "send to");
    return request(process_->post_send(peer, tag, data.data(), data.size()), this);
  }
  request recv(int peer, std::span<std::byte> data, tag_t tag) {
    weft::detail::check_peer(rank(), size(), peer, "receive from");
    return request(process_->post_recv(peer, tag, data.data(), data.size(), nullptr, nullptr),
                   this);
  }
  // target = combine(own, incoming), run by the transfer straight from the sender's pool.
  request recv_reduce(int peer, std::span<std::byte> target, std::span<const std::byte> own,
                      tag_t tag, const weft::detail::reducer& combine) {
    weft::detail::check_peer(rank(), size(), peer, "receive from");
    return request(
        process_->post_recv(peer, tag, target.data(), target.size(), &combine, own.data()), this);
  }
  // This rank's part of a whole collective (weft::collective_transport, the algorithm fused):
  // once every rank has posted, each rank's device runs its share straight from every rank's
  // pool into every rank's pool (buffers outside the pool are staged there).
  request post_collective(collective kind, std::span<const std::byte> in, std::span<std::byte> out,
                          const weft::detail::reducer* combine, tag_t tag) {
    return request(process_->post_collective(kind, in, out, combine, tag), this);
  }
  bool runs_collectives() const { return true; }

  // Orders this rank's stream after the transfer and returns true at once.
  bool wait(request& r, deadline_clock::time_point) {
    return process_->enqueue_wait(r.operation());
  }
  bool test(request& r) { return process_->enqueue_wait(r.operation()); }
  void note_call(collective kind, std::string_view algorithm, int step) {
    process_->note_call({kind, algorithm, step});
  }
  // weft::communicator's tell_others: a rank that gave up aborts every rank of the job.
  void abort(int culprit, std::string_view reason) {
    process_->report_lost(culprit, std::string(reason));
  }

  // Waits for this rank's stream (see process_rank::synchronize).
  void synchronize(std::chrono::milliseconds timeout) { process_->synchronize(rank(), timeout); }

  std::string describe() const {
    return "stream-ordered, " + std::to_string(size()) + " processes, device " +
           std::to_string(device()) + ", pool of " + std::to_string(process_->pool_bytes() >> 20) +
           " MiB shared by " + std::string(process_->pool_way()) + ", " +
           std::to_string(process_->watched()) + " peer processes watched";
  }

 private:
  friend request;
  void cancel(operation* op) { process_->release(op); }

  std::unique_ptr<process_rank_type> process_;
};

// Waits for `comm`'s stream; throws errc::timeout naming what it waits for, or what aborted it.
template <class Backend, class Config>
void synchronize(communicator<process_transport<Backend, Config>>& comm,
                 std::chrono::milliseconds timeout) {
  comm.underlying_transport().synchronize(timeout);
}
// Aborts `comm`'s rank and, through it, every rank of the job.
template <class Backend, class Config>
void abort(communicator<process_transport<Backend, Config>>& comm,
           const std::string& reason = "aborted by the caller") {
  comm.underlying_transport().shared().abort(reason);
}

// The protocol on host threads and memfd pools.
using host_process_transport = process_transport<host_sharing>;
static_assert(weft::transport<host_process_transport>);
static_assert(weft::reducing_transport<host_process_transport>);
static_assert(weft::collective_transport<host_process_transport>);
using host_process_session = basic_session<host_process_transport, process_config>;

}  // namespace weft::stream
