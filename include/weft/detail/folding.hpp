// weft/detail/folding.hpp — fitting p ranks onto the largest power of two p2 <= p.
//
// The first 2 * rem ranks (rem = p - p2) pair up: even rank 2i hands its data to odd rank
// 2i+1 and sits out; the odd one becomes virtual rank i. Ranks from 2 * rem on become virtual
// rank r - rem. Each virtual rank stands for a contiguous range of real ranks, in order, so
// algorithms that combine virtual ranks in order also combine real ranks in order.
#pragma once

namespace weft::detail {

struct folding {
  int p2;   // largest power of two <= p
  int rem;  // p - p2

  explicit folding(int p) : p2(1), rem(0) {
    while (p2 * 2 <= p) p2 *= 2;
    rem = p - p2;
  }
  bool sits_out(int rank) const { return rank < 2 * rem && rank % 2 == 0; }
  bool absorbs(int rank) const { return rank < 2 * rem && rank % 2 == 1; }
  int virtual_rank(int rank) const { return rank < 2 * rem ? rank / 2 : rank - rem; }
  int real_rank(int vrank) const { return vrank < rem ? 2 * vrank + 1 : vrank + rem; }
  // Real ranks [first_rank(v), end_rank(v)) are the ones virtual rank v stands for.
  int first_rank(int vrank) const { return vrank < rem ? 2 * vrank : vrank + rem; }
  int end_rank(int vrank) const { return vrank < rem ? 2 * vrank + 2 : vrank + rem + 1; }
};

}  // namespace weft::detail
