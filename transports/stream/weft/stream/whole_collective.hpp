// weft/stream/whole_collective.hpp — a collective stream-ordered ranks run whole
// (weft::fused): every rank's part, and the work each device does once all have posted.
//
// The work is cut by device, not by rank: one carrier of each device waits for every
// rank's post, runs that device's share in as few kernels as it can (one, for an allreduce)
// and writes one done flag, and each rank's stream waits for one flag per device. Ranks
// sharing a GPU then cost one stream and one kernel per call, not one per rank.
//   allreduce       the vector is cut into one share per device (none under 1 MiB, so a small
//                   vector is one share); a share is reduced from every input into every output;
//   reduce_scatter  each rank's block, reduced from every input into that rank's output, by the
//                   rank's device;
//   allgather       each rank's input copied into every output at its block, by its device.
#pragma once

#include "weft/call.hpp"
#include "weft/stream/flags.hpp"
#include "weft/transport.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft::stream::detail {

struct whole_call {
  struct part {
    const std::byte* in = nullptr;
    std::byte* out = nullptr;
    std::size_t in_size = 0;
    std::size_t out_size = 0;
    std::uint32_t posted = 0;  // the value the rank's "posted" flag takes at this post
    bool arrived = false;
  };
  tag_t tag = 0;
  collective kind = collective::allreduce;
  std::vector<part> parts;        // by rank
  std::vector<flag_ticket> done;  // by device (the ranks' order of distinct devices)
  int arrived = 0;
  int released = 0;
  bool enqueued = false;
};

// Why rank `rank`'s part (kind, in and out bytes) cannot join `g`, or nothing: another kind,
// a second part from the rank, or sizes that differ from the parts already there. `note_kind`
// and `step` name the call the rank is in.
inline std::optional<std::string> conflict(const whole_call& g, int rank, collective kind,
                                           std::size_t in, std::size_t out, collective note_kind,
                                           int step) {
  const auto first =
      std::find_if(g.parts.begin(), g.parts.end(), [](const auto& part) { return part.arrived; });
  const bool sizes_differ =
      first != g.parts.end() && (first->in_size != in || first->out_size != out);
  if (g.kind == kind && !g.parts[static_cast<std::size_t>(rank)].arrived && !sizes_differ)
    return std::nullopt;
  std::string message = "rank " + std::to_string(rank) + ": " + std::string(to_string(kind)) +
                        " of " + std::to_string(in) + " bytes";
  if (first != g.parts.end()) {
    message += ", but rank " + std::to_string(first - g.parts.begin()) + " posted " +
               std::string(to_string(g.kind)) + " of " + std::to_string(first->in_size) + " bytes";
  }
  return message + " to the same call (" + std::string(to_string(note_kind)) + ", step " +
         std::to_string(step) + "); the ranks made different calls, or with different counts";
}

// What a stream waiting on whole collective `g` waits for: the ranks that have not posted.
inline std::string missing_parts(const whole_call& g) {
  std::string missing;
  for (std::size_t i = 0; i < g.parts.size(); ++i) {
    if (!g.parts[i].arrived) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  }
  return ": it waits for rank(s) " + missing + " to issue " + std::string(to_string(g.kind)) +
         " (algorithm fused), which they have not; abort() releases the streams";
}

// One pass of a device's share: outs[k] = ins[0] op ins[1] op ... (a copy, with one input).
struct pass {
  std::vector<const std::byte*> ins;
  std::vector<std::byte*> outs;
  std::size_t bytes = 0;
};

// An allreduce is spread over the devices only in shares of at least this many bytes (each
// more share costs every rank a stream wait).
inline constexpr std::size_t least_share_bytes = std::size_t{1} << 20;

// The passes of device `device` (of `devices` in all; `ranks` are the ranks on it), for a
// group every rank has posted to. Passes of no bytes are left out.
inline std::vector<pass> share_of(const whole_call& g, std::size_t device, std::size_t devices,
                                  std::span<const int> ranks, std::size_t element_size) {
  std::vector<pass> passes;
  if (g.kind == collective::allreduce) {
    const std::size_t n = g.parts.front().in_size;
    const std::size_t unit = std::lcm(element_size, std::size_t{64});
    const std::size_t each = std::max(least_share_bytes, (n / devices + unit) / unit * unit);
    const std::size_t begin = std::min(n, device * each);
    pass share{{}, {}, std::min(n, begin + each) - begin};
    for (const auto& part : g.parts) {
      share.ins.push_back(part.in + begin);
      share.outs.push_back(part.out + begin);
    }
    if (share.bytes != 0) passes.push_back(std::move(share));
    return passes;
  }
  for (const int rank : ranks) {
    const auto& mine = g.parts[static_cast<std::size_t>(rank)];
    const auto j = static_cast<std::size_t>(rank);
    pass block;
    if (g.kind == collective::reduce_scatter) {
      block.bytes = mine.out_size;
      for (const auto& part : g.parts) block.ins.push_back(part.in + j * block.bytes);
      block.outs.push_back(mine.out);
    } else {  // allgather
      block.bytes = mine.in_size;
      block.ins.push_back(mine.in);
      for (const auto& part : g.parts) block.outs.push_back(part.out + j * block.bytes);
    }
    if (block.bytes != 0) passes.push_back(std::move(block));
  }
  return passes;
}

}  // namespace weft::stream::detail
