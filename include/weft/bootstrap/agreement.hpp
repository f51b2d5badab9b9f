// weft/bootstrap/agreement.hpp — a fault-tolerant agreement among the ranks still running, decided
// in the job's bootstrap store: which ranks are lost, and the bitwise AND of a flag.
//
//   each member claims <round>/<id> = "in <flag>"          (its own word)
//   for a member whose word is missing and which is gone:  claim <round>/<id> = "gone <why>"
//   the result: the words of every member, read back      (the same on every rank)
//
// Every key of a round is claimed once, by its member or, where that member is gone, by whichever
// rank saw it first; a claim keeps the first value, so every rank reads the same words and
// computes the same result, however many members die during the round and whoever saw what. A
// rank that finds its own key claimed "gone" was counted lost by the others (it was stopped, or
// too slow) and is told so. The store must outlive the ranks that fail: a file store
// (WEFT_STORE_PATH) or a network store served by a process that does not fail (rank 0's TCP store
// goes with rank 0).
//
// A member is gone when any of these holds:
//   - its lifeline says so: a connection of its own to a store that has them (the TCP store)
//     claims <base>/gone/<id> when the process ends;
//   - it ran on this host (same boot, same PID namespace) and its process has ended (a pidfd of
//     it says so; or another process had its pid already when this rank first looked);
//   - it did not come within the round's deadline (stopped or stuck).
#pragma once

#include "weft/bootstrap/store.hpp"
#include "weft/detail/this_host.hpp"
#include "weft/error.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace weft::bootstrap {

// What this process is, so that a rank on the same host can tell when it has ended: boot id, PID
// namespace, pid and start time (the start time tells a reused pid from the same process).
inline std::string process_identity(pid_t pid = ::getpid()) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  // Field 22 (starttime) counts from the field after the command's closing parenthesis (3).
  std::string start = "0";
  if (const auto close = line.rfind(')'); close != std::string::npos) {
    std::istringstream fields(line.substr(close + 2));
    std::string field;
    for (int index = 3; index <= 22 && fields >> field; ++index) {
      if (index == 22) start = field;
    }
  }
  return weft::detail::boot_id() + " " + weft::detail::namespace_of("pid") + " " +
         std::to_string(pid) + " " + start;
}

// A process of this host named by its identity (process_identity's text), watched through a
// pidfd: ended() asks without reading its /proc files again (which can stall while a large
// process is torn down).
class process_watch {
 public:
  explicit process_watch(const std::string& identity) {
    std::istringstream fields(identity);
    std::string boot, space, start;
    pid_t pid = 0;
    if (!(fields >> boot >> space >> pid >> start) || pid <= 0) return;
    if (boot != weft::detail::boot_id() || space != weft::detail::namespace_of("pid")) return;
    here_ = true;
    pid_ = pid;
#ifdef SYS_pidfd_open
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#endif
    if (pidfd_ < 0 && errno == ESRCH) {
      ended_ = true;
      return;
    }
    // The same process, not another under its pid since (checked once, as the pidfd now holds it).
    const std::string now = process_identity(pid);
    if (now.substr(now.rfind(' ') + 1) != start) ended_ = true;
  }
  process_watch(const process_watch&) = delete;
  process_watch& operator=(const process_watch&) = delete;
  ~process_watch() {
    if (pidfd_ >= 0) ::close(pidfd_);
  }

  // False where this host cannot tell (another host, another PID namespace).
  bool ended() {
    if (ended_ || !here_) return ended_;
    if (pidfd_ >= 0) {
      pollfd asked{pidfd_, POLLIN, 0};
      ended_ = ::poll(&asked, 1, 0) > 0;  // readable once the process has exited
    } else {
      ended_ = ::kill(pid_, 0) != 0 && errno == ESRCH;
    }
    return ended_;
  }
  pid_t pid() const { return pid_; }

 private:
  bool here_ = false;
  bool ended_ = false;
  pid_t pid_ = 0;
  int pidfd_ = -1;
};

// How this rank tells that another member of the job is gone (see the top of this file). Made once
// per member process, before the first agreement: it leaves the process's identity and lifeline in
// the store. Its connection (where the store makes them) is the agreements' own: a transport
// meeting its peers over the session's connection may interrupt that one.
class liveness {
 public:
  liveness(store& meeting, std::string base, int id) : meeting_(&meeting), base_(std::move(base)) {
    meeting.set(base_ + "/process/" + std::to_string(id), process_identity());
    if (const auto connect = meeting.connector()) {
      try {
        lifeline_ = connect(deadline_clock::now() + std::chrono::seconds(5));
        lifeline_->set_on_close(
            gone_key(id), "the process of rank " + std::to_string(id) +
                              " ended (its connection to the bootstrap store closed): it exited, "
                              "crashed or was killed");
      } catch (const error&) {  // no lifeline: the other signs still tell
        lifeline_.reset();
      }
    }
  }

  // The connection agreements go through.
  store& line() { return lifeline_ ? *lifeline_ : *meeting_; }

  // Why member `id` is gone, or nullopt while nothing says so; asked through `meeting` (the store
  // this was made with, or another connection to it).
  std::optional<std::string> gone(int id) { return gone(line(), id); }
  std::optional<std::string> gone(store& meeting, int id) {
    if (auto said = meeting.look(gone_key(id))) return said;
    auto known = processes_.find(id);
    if (known == processes_.end()) {
      auto identity = meeting.look(base_ + "/process/" + std::to_string(id));
      if (!identity) return std::nullopt;
      known = processes_.emplace(id, std::make_unique<process_watch>(*identity)).first;
    }
    if (known->second->ended()) {
      return "the process of rank " + std::to_string(id) + " (pid " +
             std::to_string(known->second->pid()) +
             " on this host) ended: it exited, crashed or was killed";
    }
    return std::nullopt;
  }

 private:
  std::string gone_key(int id) const { return base_ + "/gone/" + std::to_string(id); }

  store* meeting_;
  std::string base_;
  std::unique_ptr<store> lifeline_;  // closes (and so claims gone_key) when this process ends
  std::map<int, std::unique_ptr<process_watch>> processes_;
};

// What a round decided: the AND of the flags of the members that took part, and the members
// counted lost (their ids, ascending) with why.
struct store_agreement {
  std::uint64_t flag = ~std::uint64_t{0};
  std::vector<int> lost;
  std::vector<std::string> why;  // one per lost member
};

// One round of agreement under the key `round` among `members` (ids; `me` among them), with this
// rank's `flag`, through alive's connection. Members that did not come by `deadline` are counted
// lost. Throws peer_lost when the others counted this rank lost before it came.
inline store_agreement agree_in_store(liveness& alive, const std::string& round,
                                      const std::vector<int>& members, int me, std::uint64_t flag,
                                      deadline_clock::time_point deadline) {
  store& meeting = alive.line();
  auto key = [&](int id) { return round + "/" + std::to_string(id); };
  const std::string mine = "in " + std::to_string(flag);
  if (const std::string held = meeting.claim(key(me), mine); held != mine) {
    throw error(errc::peer_lost,
                "rank " + std::to_string(me) + " came to an agreement too late: the other ranks " +
                    "count it as lost (" + held.substr(std::min<std::size_t>(5, held.size())) +
                    "); it was stopped or slower than their timeout",
                me);
  }
  std::map<int, std::string> words;
  words[me] = mine;
  auto pause = std::chrono::microseconds(50);
  while (words.size() < members.size()) {
    const bool late = deadline_clock::now() >= deadline;
    for (const int id : members) {
      if (words.count(id) != 0) continue;
      if (auto word = meeting.look(key(id))) {
        words[id] = *word;
        continue;
      }
      std::optional<std::string> why = alive.gone(id);
      if (!why && late)
        why = "rank " + std::to_string(id) +
              " did not come to the agreement within the timeout: it is stopped or stuck";
      if (why) words[id] = meeting.claim(key(id), "gone " + *why);
    }
    if (words.size() < members.size()) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(5000));
    }
  }
  store_agreement result;
  for (const auto& [id, word] : words) {
    if (word.starts_with("gone ")) {
      result.lost.push_back(id);
      result.why.push_back(word.substr(5));
      continue;
    }
    std::uint64_t theirs = 0;
    const char* first = word.data() + std::min<std::size_t>(3, word.size());
    if (std::from_chars(first, word.data() + word.size(), theirs).ec != std::errc{}) theirs = 0;
    result.flag &= theirs;
  }
  return result;
}

}  // namespace weft::bootstrap
