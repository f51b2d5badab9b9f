// weft/communicator.hpp — a group of ranks over a transport: the only thing algorithms talk to.
//
// The communicator owns what every collective needs besides the algorithm itself:
//   - the rank map (group rank -> transport rank), so split groups reuse one transport;
//   - the tag space: a 32-bit context id (distinct for every communicator derived by split or
//     dup) and a per-call sequence number, so back-to-back and concurrent communicators never
//     match each other's messages;
//   - scratch memory in the transport's memory space, allocated on first need and reused;
//   - options (timeout, chunk size, check mode) and error context: every wait has a deadline,
//     and a timeout names this rank, the peer, the collective, the algorithm and the step;
//   - the host layout (weft/hosts.hpp) and the groups derived from it: the ranks of this host,
//     the rails across hosts, and the cached groups hierarchical algorithms run their phases on.
//
// The class is declared in weft/communicator/declaration.hpp; its members are defined by concern
// in the files beside it:
//   calls.hpp        starting and ending a call: numbering, the flight record, the report
//   consistency.hpp  what the ranks check of each other's calls (tag digests, early messages)
//   groups.hpp       split, dup, and the host and rail groups
//   posts.hpp        posting sends and receives under the call's tag
//   waits.hpp        waiting with a deadline, and the errors a wait turns into
#pragma once

#include "weft/communicator/calls.hpp"
#include "weft/communicator/consistency.hpp"
#include "weft/communicator/declaration.hpp"
#include "weft/communicator/groups.hpp"
#include "weft/communicator/posts.hpp"
#include "weft/communicator/waits.hpp"
