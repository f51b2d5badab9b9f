// weft/dispatch/check_mode.hpp — check mode (WEFT_CHECK=1, options::check): before a collective
// runs, every rank states its call, each compares the statements, and all ranks throw the same
// errc::mismatch when anything differs.
#pragma once

#include "weft/call.hpp"
#include "weft/error.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace weft::detail {

// Check mode: every rank states its call; each compares with the others, and all ranks throw
// the same errc::mismatch when anything differs. For v-collectives, send_counts[j] (what this
// rank sends to j) must equal rank j's recv_counts[this rank].
template <class Comm>
void check_call(Comm& comm, const call_signature& mine,
                std::span<const std::size_t> send_counts = {},
                std::span<const std::size_t> recv_counts = {}) {
  struct statement {
    call_signature signature;
    std::uint64_t count_for_you;
  };
  const auto p = static_cast<std::size_t>(comm.size());
  std::vector<statement> told(p);
  std::vector<statement> mine_to(p);
  for (std::size_t j = 0; j < p; ++j) {
    mine_to[j] = {mine, send_counts.empty() ? 0 : send_counts[j]};
  }
  comm.exchange_statements(std::as_bytes(std::span(mine_to)),
                           std::as_writable_bytes(std::span(told)), sizeof(statement));

  std::string verdict;
  for (std::size_t i = 1; i < p && verdict.empty(); ++i) {
    if (!told[i].signature.same_call(told[0].signature)) {
      verdict = "rank 0 called " + told[0].signature.describe() + " but rank " + std::to_string(i) +
                " called " + told[i].signature.describe();
    }
  }
  for (std::size_t i = 0; i < p && verdict.empty() && !recv_counts.empty(); ++i) {
    if (told[i].count_for_you != recv_counts[i]) {
      verdict = "in " + std::string(to_string(mine.kind)) + " rank " + std::to_string(i) +
                " sends " + std::to_string(told[i].count_for_you) + " elements to rank " +
                std::to_string(comm.rank()) + ", which expects " + std::to_string(recv_counts[i]);
    }
  }
  // Second round: share verdicts so every rank throws the same message.
  struct finding {
    std::array<char, 256> text;
  };
  std::vector<finding> found(p);
  std::vector<finding> mine_found(p);
  for (auto& entry : mine_found) call_signature::copy_text(entry.text.data(), 256, verdict);
  comm.exchange_statements(std::as_bytes(std::span(mine_found)),
                           std::as_writable_bytes(std::span(found)), sizeof(finding));
  for (const auto& entry : found) {
    if (entry.text[0] != '\0') {
      throw error(errc::mismatch, std::string(entry.text.data()) +
                                      "; every rank must make the same collective calls, in the "
                                      "same order, with matching arguments");
    }
  }
}

}  // namespace weft::detail
