// weft/bootstrap/rendezvous.hpp — where a job's ranks meet, from the launcher's environment.
//
// Two meeting points, over the one store interface (weft/bootstrap/store.hpp):
//   - a store at a network address (launch.store: WEFT_STORE, or torchrun's MASTER_ADDR and
//     MASTER_PORT), which rank 0 serves and every rank connects to. The TCP store is that store;
//     a program has it when it includes weft/bootstrap/tcp_meeting.hpp (Boost.Asio; Meson
//     dependency('weft-bootstrap-tcp')), as weft/transport/tcp.hpp does. Nothing here needs Asio.
//   - a file store in a directory every rank can write (launch.store_path: WEFT_STORE_PATH).
//   - the network store at an address rank 0 chooses and hands out through the launcher's own
//     key-value service (launch.service), with the job's secret: PMIx under Open MPI's mpirun and
//     srun --mpi=pmix, in a program built with PMIx (weft/bootstrap/pmix_meeting.hpp, which
//     weft/bootstrap/tcp_meeting.hpp includes then); PMI-1 under MPICH's mpiexec and srun
//     --mpi=pmi2, in every program (weft/bootstrap/pmi_meeting.hpp).
// An address given is used first; then the launcher's service, where the program has both the
// exchange and a network store; then an address derived from the launcher's variables; then the
// file store where there is a directory; otherwise the rendezvous says what to set or include.
//
// A job with an identity (launch.job: WEFT_JOB or the launcher's) meets apart from any other:
// the network store's hello carries the identity with WEFT_SECRET (presented_secret), so a rank
// of another job that reaches this job's store is refused at once, and a file store keeps each
// job's keys in a directory of its own (job-<identity> under WEFT_STORE_PATH; "job" there
// without an identity), which the last rank removes at a normal end and a later job takes over
// once the job that left it has ended (weft/bootstrap/file_store.hpp).
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/file_store.hpp"
#include "weft/bootstrap/pmi_meeting.hpp"
#include "weft/bootstrap/secret.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/error.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace weft::bootstrap {

// A store at a network address, as opened for one rank: the connection, and on the rank that
// serves it (rank 0) the service, kept until after the connection closes.
struct opened_store {
  std::shared_ptr<void> service;
  std::unique_ptr<store> connection;
  std::string address;  // host:port the store is at (the port rank 0 chose where given 0)
};

// Opens the store at where.store for where.rank (serving it on rank 0; port 0: on a free port
// it chooses, then named in opened_store::address), presenting `secret`, trying until `deadline`.
using store_opener = opened_store (*)(const launch& where, const std::string& secret,
                                      deadline_clock::time_point deadline);

// The opener of stores at a network address this program has: none until one is plugged in
// (weft/bootstrap/tcp_meeting.hpp plugs in the TCP store; a program may plug in its own).
inline store_opener& network_store_opener() {
  static store_opener opener = nullptr;
  return opener;
}

// Hands `value` from rank 0 to every rank of the job through the launcher's key-value service
// (launch.service), waiting until `deadline`; every rank calls it once per rendezvous, in the same
// order, and gets rank 0's value. Throws weft::error where the service fails or times out.
using value_exchange = std::string (*)(const launch& where, const std::string& value,
                                       deadline_clock::time_point deadline);

// The exchange through the launcher's service `service` (launch.service) this program has: PMI-1
// always (weft/bootstrap/pmi_meeting.hpp: a protocol of text lines, no library); PMIx once
// plugged in (weft/bootstrap/pmix_meeting.hpp); nullptr for any other.
inline value_exchange& launcher_exchange(std::string_view service) {
  static value_exchange pmix = nullptr;
  static value_exchange pmi = &pmi_exchange;
  static value_exchange other = nullptr;
  if (service == "PMIx") return pmix;
  if (service == "PMI") return pmi;
  other = nullptr;
  return other;
}

namespace detail {

// The first IPv4 address of an interface that is up and not loopback; empty when none is.
inline std::string first_interface_address() {
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return {};
  std::string found;
  for (const ifaddrs* each = interfaces; each != nullptr && found.empty(); each = each->ifa_next) {
    if (each->ifa_addr == nullptr || each->ifa_addr->sa_family != AF_INET) continue;
    if ((each->ifa_flags & IFF_UP) == 0 || (each->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(each->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  ::freeifaddrs(interfaces);
  return found;
}

// The name other hosts reach this one by: WEFT_BIND_ADDRESS, else the host name where it resolves
// to an address other than loopback, else the first such address of an interface (a host whose
// name resolves to 127.0.1.1, as Debian's /etc/hosts has it), else the host name.
inline std::string reachable_name(const launch& where) {
  if (!where.bind_address.empty()) return where.bind_address;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  bool routable = false;
  if (::getaddrinfo(host, nullptr, &hints, &found) == 0) {
    for (const addrinfo* each = found; each != nullptr; each = each->ai_next) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(each->ai_addr);
      if ((ntohl(in->sin_addr.s_addr) >> 24) != 127) routable = true;
    }
    ::freeaddrinfo(found);
  }
  if (routable) return host;
  const std::string other = first_interface_address();
  return other.empty() ? std::string(host) : other;
}

}  // namespace detail

// The meeting point of a job, from its launch (see the top of this file). Also settles the job's
// secret: WEFT_SECRET, or one rank 0 draws and hands out through the store.
class rendezvous {
 public:
  rendezvous(const launch& where, deadline_clock::time_point deadline)
      : launch_(where), secret_(where.secret) {
    if (where.size == 1) return;  // one rank meets nobody
    const store_opener open = network_store_opener();
    const bool through_service =
        !where.service.empty() && launcher_exchange(where.service) != nullptr;
    if (where.store_derived && where.rank == 0 && !(through_service && open != nullptr)) {
      if (!where.store.empty() && open != nullptr) {
        std::fprintf(stderr,
                     "weft: %s gives no rendezvous; rank 0 serves the store on %s (%s); set "
                     "WEFT_STORE=host:port to choose another\n",
                     where.launcher.c_str(), where.store.c_str(), where.store_source.c_str());
      } else if (!where.store_path.empty()) {
        std::fprintf(stderr,
                     "weft: %s gives no rendezvous; the ranks of this one-node step meet in %s; "
                     "set WEFT_STORE_PATH=<directory> to choose another\n",
                     where.launcher.c_str(), job_directory(where).c_str());
      }
    }
    if (through_service && (open != nullptr || (where.store_path.empty() && one_host(where)))) {
      meet_through_service(open, deadline);
    } else if (!where.store.empty() && open != nullptr) {
      opened_store opened = open(where, presented_secret(where), deadline);
      service_ = std::move(opened.service);
      store_ = std::move(opened.connection);
    } else if (!where.store_path.empty()) {
      auto files = std::make_unique<file_store>(job_directory(where));
      files->open(where.rank, deadline);
      departure_.watch(files.get(), where.rank, where.size);
      store_ = std::move(files);
    } else {
      throw error(errc::invalid_argument, no_meeting(where));
    }
    if (secret_.empty()) secret_ = shared_secret(*store_, where.rank, deadline);
  }

  store* get() { return store_.get(); }
  const store* get() const { return store_.get(); }
  const bootstrap::launch& launched() const { return launch_; }
  const std::string& secret() const { return secret_; }

  // The directory a job meets in under WEFT_STORE_PATH: its own when it has an identity.
  static std::filesystem::path job_directory(const launch& where) {
    if (where.job.empty()) return std::filesystem::path(where.store_path) / "job";
    std::string name = "job-";
    for (const char c : where.job) {
      const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
      name += plain ? c : '_';
    }
    if (name.size() > 64 || name != "job-" + where.job)
      name = name.substr(0, 40) + "-" + short_hash(where.job);
    return std::filesystem::path(where.store_path) / name;
  }

 private:
  // Through the launcher's service (launch.service), rank 0 hands every rank the job's secret and
  // where to meet: with a network store, the address it serves it on (a port it chose); without
  // one, on one host, a file store directory of its naming under /dev/shm. A failure to serve is
  // handed out too, so no rank waits for a store that is not coming. What is handed out is three
  // lines: "tcp" or "file", the address or the job's name, the secret (or "!" and the failure).
  void meet_through_service(store_opener open, deadline_clock::time_point deadline) {
    const value_exchange exchange = launcher_exchange(launch_.service);
    launch at = launch_;
    opened_store opened;
    std::string kind = open != nullptr ? "tcp" : "file";
    if (at.rank == 0) {
      if (secret_.empty()) secret_ = drawn_secret();
      at.secret = secret_;
      std::exception_ptr failure;
      std::string what;
      if (open != nullptr) {
        at.store = detail::reachable_name(at) + ":0";
        try {
          opened = open(at, presented_secret(at), deadline);
          at.store = opened.address;
        } catch (const std::exception& e) {
          failure = std::current_exception();
          what = e.what();
        }
      } else if (at.job.empty()) {
        at.job = at.service + "-" + drawn_secret().substr(0, 16);
      }
      exchange(at, failure ? "!" + what : kind + "\n" + (open ? at.store : at.job) + "\n" + secret_,
               deadline);
      if (failure) std::rethrow_exception(failure);
    } else {
      const std::string handed = exchange(at, {}, deadline);
      const std::string who = "rank " + std::to_string(at.rank) + ": ";
      if (!handed.empty() && handed.front() == '!')
        throw error(errc::transport,
                    who + "rank 0 could not serve the job's store (" + handed.substr(1) + ")");
      const auto first = handed.find('\n');
      const auto second = first == std::string::npos ? first : handed.find('\n', first + 1);
      if (second == std::string::npos || handed.substr(0, first) != kind) {
        throw error(errc::transport, who + "the " + at.service + " exchange handed out '" + handed +
                                         "', not where to meet by " + kind +
                                         " (do all ranks run the same program?)");
      }
      (open ? at.store : at.job) = handed.substr(first + 1, second - first - 1);
      secret_ = at.secret = handed.substr(second + 1);
      if (open != nullptr) opened = open(at, presented_secret(at), deadline);
    }
    if (open == nullptr) {
      at.store_path = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
      auto files = std::make_unique<file_store>(job_directory(at));
      files->open(at.rank, deadline);
      departure_.watch(files.get(), at.rank, at.size);
      opened.connection = std::move(files);
    }
    at.store_source = "rank 0's choice, handed out through " + at.service;
    at.store_derived = false;
    launch_ = at;
    service_ = std::move(opened.service);
    store_ = std::move(opened.connection);
  }

  // Whether the launcher says every rank runs on this host.
  static bool one_host(const launch& where) { return where.local_size == where.size; }

  static std::string no_meeting(const launch& where) {
    const std::string who = "rank " + std::to_string(where.rank) +
                            (where.launcher.empty() ? std::string() : " (" + where.launcher + ")");
    if (where.store.empty() && !where.service.empty()) {
      return who + " has no rendezvous: the launcher serves " + where.service +
             ", but this program " +
             (launcher_exchange(where.service) == nullptr
                  ? "was built without it (Meson: dependency('weft-bootstrap-pmix'), which "
                    "dependency('weft-tcp') brings where libpmix-dev is installed)"
                  : "has no network store (include <weft/bootstrap/tcp_meeting.hpp>) and its ranks "
                    "are not all on one host") +
             "; or set WEFT_STORE=host:port or WEFT_STORE_PATH=<shared directory>";
    }
    if (where.store.empty()) {
      return who +
             " has no rendezvous: set WEFT_STORE=host:port (the address rank 0 serves its "
             "store on) or WEFT_STORE_PATH=<shared directory>";
    }
    return who + " is to meet at the store " + where.store +
           ", but this program has no network store: "
           "include <weft/bootstrap/tcp_meeting.hpp> (the TCP store; Boost.Asio, Meson "
           "dependency('weft-bootstrap-tcp')), or meet through a file store: "
           "WEFT_STORE_PATH=<a directory every rank can write>";
  }

  // A file store's job leaves it at a normal end (not while an exception unwinds the rank: the
  // directory then stays for the next job to take over).
  class departure {
   public:
    departure() = default;
    departure(departure&& other) noexcept
        : files_(std::exchange(other.files_, nullptr)), rank_(other.rank_), size_(other.size_) {}
    departure& operator=(departure&&) = delete;  // the store it names would go first
    void watch(file_store* files, int rank, int size) {
      files_ = files;
      rank_ = rank;
      size_ = size;
    }
    ~departure() {
      if (files_ == nullptr || std::uncaught_exceptions() > 0) return;
      try {
        files_->leave(rank_, size_);
      } catch (const std::exception&) {  // a directory that cannot be written: nothing to tidy
      }
    }

   private:
    file_store* files_ = nullptr;
    int rank_ = 0;
    int size_ = 0;
  };

  bootstrap::launch launch_;
  std::string secret_;
  std::shared_ptr<void> service_;  // rank 0's network store; declared first, destroyed last
  std::unique_ptr<store> store_;
  departure departure_;  // declared after the store: leaves before it closes
};

}  // namespace weft::bootstrap
