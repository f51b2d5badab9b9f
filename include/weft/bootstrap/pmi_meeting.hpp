// weft/bootstrap/pmi_meeting.hpp — rank 0's store address handed out through the PMI-1 service
// of MPICH's mpiexec (Hydra) and of srun --mpi=pmi2: the simple PMI wire protocol on the socket
// the launcher passes in PMI_FD.
//
// Every rank sends "cmd=init pmi_version=1 pmi_subversion=1" once, learns the job's key-value
// space (get_my_kvsname); at each rendezvous rank 0 puts its value (in hex: the protocol's fields
// are separated by spaces) under "weft.meet.<n>", every rank enters the barrier (barrier_in,
// barrier_out) and reads rank 0's value (get). "cmd=finalize" is sent when the process exits. The
// protocol needs no library: these are lines of text on a socket, so every program has it.
// A program that also initialises MPICH's MPI talks PMI on the same socket: give it WEFT_STORE.
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/detail/env.hpp"
#include "weft/detail/hex.hpp"
#include "weft/error.hpp"
#include "weft/transport.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace weft::bootstrap {

namespace pmi_detail {

// This process's side of the PMI-1 socket: initialised on first use, finalised at exit.
class client {
 public:
  static client& get() {
    static client the_client;
    return the_client;
  }
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  std::mutex& mutex() { return mutex_; }
  unsigned next_meeting() { return meetings_++; }

  // The key-value space of the job, initialising the protocol on first use.
  const std::string& space(const launch& where, deadline_clock::time_point deadline) {
    if (!space_.empty()) return space_;
    const auto text = weft::detail::env::text("PMI_FD");
    const auto fd = text ? weft::detail::env::parse_count(*text, 1 << 20) : std::nullopt;
    if (!fd) weft::detail::env::refuse("PMI_FD", text.value_or(""), "a file descriptor");
    fd_ = static_cast<int>(*fd);
    const std::string init = ask(where, "cmd=init pmi_version=1 pmi_subversion=1", deadline);
    if (field(init, "cmd") != "response_to_init" || field(init, "rc") != "0")
      refused(where, "init", init);
    const std::string named = ask(where, "cmd=get_my_kvsname", deadline);
    space_ = field(named, "kvsname");
    if (space_.empty()) refused(where, "get_my_kvsname", named);
    const std::string maxes = ask(where, "cmd=get_maxes", deadline);
    const auto most = weft::detail::env::parse_count(field(maxes, "vallen_max"), 1 << 30);
    value_max_ = most ? static_cast<std::size_t>(*most) : 256;
    return space_;
  }
  std::size_t value_max() const { return value_max_; }

  // Sends one command line and returns the launcher's one-line answer (without its newline).
  std::string ask(const launch& where, std::string_view command,
                  deadline_clock::time_point deadline) {
    std::string line(command);
    line += '\n';
    for (std::size_t sent = 0; sent < line.size();) {
      // send: a launcher gone is an error here, not SIGPIPE; write where PMI_FD is no socket
      ssize_t n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == ENOTSOCK) n = ::write(fd_, line.data() + sent, line.size() - sent);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) broken(where, command, "cannot write to PMI_FD");
      sent += static_cast<std::size_t>(n);
    }
    std::string answer;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - deadline_clock::now());
      if (left.count() <= 0) {
        throw error(errc::timeout, "rank " + std::to_string(where.rank) +
                                       ": the launcher's PMI "
                                       "did not answer '" +
                                       std::string(command) +
                                       "' in time: a rank did not reach the rendezvous");
      }
      pollfd readable{fd_, POLLIN, 0};
      const int ready =
          ::poll(&readable, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
      if (ready < 0 && errno != EINTR) broken(where, command, "poll on PMI_FD failed");
      if (ready <= 0) continue;
      char c = 0;
      const ssize_t n = ::read(fd_, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) broken(where, command, "the launcher closed PMI_FD");
      if (c == '\n') return answer;
      answer += c;
    }
  }

  // The value of `name` in an answer's "name=value" fields; empty when absent.
  static std::string field(std::string_view answer, std::string_view name) {
    std::size_t at = 0;
    while (at < answer.size()) {
      const std::size_t end = std::min(answer.find(' ', at), answer.size());
      const std::string_view word = answer.substr(at, end - at);
      if (word.size() > name.size() && word.substr(0, name.size()) == name &&
          word[name.size()] == '=')
        return std::string(word.substr(name.size() + 1));
      at = end + 1;
    }
    return {};
  }

  [[noreturn]] static void refused(const launch& where, std::string_view what,
                                   std::string_view answer) {
    throw error(errc::transport, "rank " + std::to_string(where.rank) + ": the launcher's PMI " +
                                     "refused " + std::string(what) + " ('" + std::string(answer) +
                                     "')");
  }

 private:
  client() = default;
  ~client() {
    if (space_.empty()) return;
    try {  // the launcher counts a process that initialised PMI as ended once it finalises
      launch nobody;
      ask(nobody, "cmd=finalize", deadline_clock::now() + std::chrono::seconds(2));
    } catch (const std::exception&) {  // the launcher has gone: nothing to tell it
    }
  }
  [[noreturn]] static void broken(const launch& where, std::string_view command,
                                  std::string_view why) {
    throw error(errc::transport, "rank " + std::to_string(where.rank) + ": " + std::string(why) +
                                     " during '" + std::string(command) + "'");
  }

  std::mutex mutex_;
  int fd_ = -1;
  std::string space_;
  std::size_t value_max_ = 256;
  unsigned meetings_ = 0;
};

using weft::detail::from_hex;
using weft::detail::to_hex;

}  // namespace pmi_detail

// Hands rank 0's `value` to every rank through PMI-1 (see the top of this file).
inline std::string pmi_exchange(const launch& where, const std::string& value,
                                deadline_clock::time_point deadline) {
  auto& pmi = pmi_detail::client::get();
  std::lock_guard<std::mutex> hold(pmi.mutex());
  const std::string space = pmi.space(where, deadline);
  const std::string key = "weft.meet." + std::to_string(pmi.next_meeting());
  if (where.rank == 0) {
    const std::string hex = pmi_detail::to_hex(value);
    if (hex.size() > pmi.value_max()) {
      throw error(errc::invalid_argument,
                  "rank 0: the store's address (" + std::to_string(value.size()) +
                      " bytes) is too long for the launcher's PMI values (" +
                      std::to_string(pmi.value_max() / 2) + " bytes); set WEFT_STORE");
    }
    const std::string put =
        pmi.ask(where, "cmd=put kvsname=" + space + " key=" + key + " value=" + hex, deadline);
    if (pmi_detail::client::field(put, "rc") != "0") pmi_detail::client::refused(where, "put", put);
  }
  const std::string barrier = pmi.ask(where, "cmd=barrier_in", deadline);
  if (pmi_detail::client::field(barrier, "cmd") != "barrier_out")
    pmi_detail::client::refused(where, "barrier_in", barrier);
  if (where.rank == 0) return value;
  const std::string got = pmi.ask(where, "cmd=get kvsname=" + space + " key=" + key, deadline);
  if (pmi_detail::client::field(got, "rc") != "0") pmi_detail::client::refused(where, "get", got);
  return pmi_detail::from_hex(pmi_detail::client::field(got, "value"));
}

}  // namespace weft::bootstrap
