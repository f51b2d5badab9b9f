// weft/bootstrap/rendezvous.hpp — where a job's ranks meet, from the launcher's environment.
//
// rank 0 serves the TCP store at launch.store and every rank (rank 0 too) connects to it; or,
// with launch.store_path, the ranks meet through a file store. Every transport that meets its
// peers through a store takes its store from here (weft::basic_session does).
//
// A job with an identity (launch.job: WEFT_JOB or the launcher's) meets apart from any other:
// the TCP store's hello carries the identity with WEFT_SECRET, so a rank of another job that
// reaches this job's store is refused at once, and a file store keeps each job's keys in a
// directory of its own (job-<identity> under WEFT_STORE_PATH; "job" there without an identity),
// which the last rank removes at a normal end and a later job takes over once the job that left
// it has ended (weft/bootstrap/file_store.hpp).
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/file_store.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/bootstrap/tcp_store.hpp"
#include "weft/error.hpp"

#include <boost/asio/ip/address.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace weft::bootstrap {

// The meeting point of a job, from its launch: rank 0 serves the TCP store at launch.store and
// every rank (rank 0 too) connects to it; or, with launch.store_path, a file store. Also settles
// the job's secret: WEFT_SECRET, or one rank 0 draws and hands out through the store.
class rendezvous {
 public:
  rendezvous(const launch& where, deadline_clock::time_point deadline)
      : launch_(where), secret_(where.secret) {
    if (where.size == 1) return;  // one rank meets nobody
    if (!where.store.empty()) {
      auto [host, port] = split_address(where.store);
      if (where.rank == 0) {
        // Serve on the address the others are told to use; a host name: every interface.
        boost::system::error_code failure;
        const auto ip = boost::asio::ip::make_address(host, failure);
        const std::string listen = host == "localhost" ? "127.0.0.1"
                                   : failure           ? "0.0.0.0"
                                                       : ip.to_string();
        server_ = std::make_unique<tcp_store_server>(listen, port, store_secret(where));
      }
      store_ = std::make_unique<tcp_store>(host, port, store_secret(where), deadline);
    } else {
      auto files = std::make_unique<file_store>(job_directory(where));
      files->open(where.rank, deadline);
      departure_.watch(files.get(), where.rank, where.size);
      store_ = std::move(files);
    }
    if (secret_.empty()) secret_ = shared_secret(*store_, where.rank, deadline);
  }

  store* get() { return store_.get(); }
  const store* get() const { return store_.get(); }
  const bootstrap::launch& launched() const { return launch_; }
  const std::string& secret() const { return secret_; }

  // What a connection to the job's TCP store presents: WEFT_SECRET and the job's identity (an
  // identity that would make it longer than a hello takes is replaced by its hash).
  static std::string store_secret(const launch& where) {
    if (where.job.empty() || where.secret.size() > store_detail::max_secret_bytes) return where.secret;
    std::string presented = where.secret + "\njob " + where.job;
    if (presented.size() > store_detail::max_secret_bytes) {
      presented = where.secret.substr(0, store_detail::max_secret_bytes - 24) + "\njob#" + hashed(where.job);
    }
    return presented;
  }

  // The directory a job meets in under WEFT_STORE_PATH: its own when it has an identity.
  static std::filesystem::path job_directory(const launch& where) {
    if (where.job.empty()) return std::filesystem::path(where.store_path) / "job";
    std::string name = "job-";
    for (const char c : where.job) {
      const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                         c == '.' || c == '-' || c == '_';
      name += plain ? c : '_';
    }
    if (name.size() > 64 || name != "job-" + where.job) name = name.substr(0, 40) + "-" + hashed(where.job);
    return std::filesystem::path(where.store_path) / name;
  }

 private:
  // 64-bit FNV-1a, in hex: a short stand-in for an identity too long, or not a file name.
  static std::string hashed(std::string_view text) {
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    for (const char c : text) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ULL;
    }
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
    return out;
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
  std::unique_ptr<tcp_store_server> server_;  // rank 0 only; declared first, destroyed last
  std::unique_ptr<store> store_;
  departure departure_;  // declared after the store: leaves before it closes
};

}  // namespace weft::bootstrap
