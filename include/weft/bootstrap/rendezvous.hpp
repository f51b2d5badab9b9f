// weft/bootstrap/rendezvous.hpp — where a job's ranks meet, from the launcher's environment.
//
// Two meeting points, over the one store interface (weft/bootstrap/store.hpp):
//   - a store at a network address (launch.store: WEFT_STORE, or torchrun's MASTER_ADDR and
//     MASTER_PORT), which rank 0 serves and every rank connects to. The TCP store is that store;
//     a program has it when it includes weft/bootstrap/tcp_meeting.hpp (Boost.Asio; Meson
//     dependency('weft-bootstrap-tcp')), as weft/transport/tcp.hpp does. Nothing here needs Asio.
//   - a file store in a directory every rank can write (launch.store_path: WEFT_STORE_PATH).
// The network store is used when there is an address and the program has one; otherwise the file
// store where there is a directory; otherwise the rendezvous says what to set or include.
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
#include "weft/bootstrap/secret.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/error.hpp"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

namespace weft::bootstrap {

// A store at a network address, as opened for one rank: the connection, and on the rank that
// serves it (rank 0) the service, kept until after the connection closes.
struct opened_store {
  std::shared_ptr<void> service;
  std::unique_ptr<store> connection;
};

// Opens the store at where.store for where.rank (serving it on rank 0), presenting `secret`,
// trying until `deadline`.
using store_opener = opened_store (*)(const launch& where, const std::string& secret,
                                      deadline_clock::time_point deadline);

// The opener of stores at a network address this program has: none until one is plugged in
// (weft/bootstrap/tcp_meeting.hpp plugs in the TCP store; a program may plug in its own).
inline store_opener& network_store_opener() {
  static store_opener opener = nullptr;
  return opener;
}

// The meeting point of a job, from its launch (see the top of this file). Also settles the job's
// secret: WEFT_SECRET, or one rank 0 draws and hands out through the store.
class rendezvous {
 public:
  rendezvous(const launch& where, deadline_clock::time_point deadline)
      : launch_(where), secret_(where.secret) {
    if (where.size == 1) return;  // one rank meets nobody
    const store_opener open = network_store_opener();
    if (where.store_derived && where.rank == 0) {  // said once, by rank 0
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
    if (!where.store.empty() && open != nullptr) {
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
  static std::string no_meeting(const launch& where) {
    const std::string who = "rank " + std::to_string(where.rank) +
                            (where.launcher.empty() ? std::string() : " (" + where.launcher + ")");
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
