// weft/bootstrap/file_store.hpp — a store in a directory of a shared filesystem.
//
// Each key is one file, written under a temporary name and renamed into place, so a reader
// sees either nothing or the whole value. get polls with a growing pause (1 ms to 50 ms).
// Use it where every rank mounts the same directory (NFS, Lustre, GPFS) and no rank can serve
// a TCP port. The files hold the job's secret: they are made 0600, in a directory made 0700.
//
// A job's life in a directory (what weft::bootstrap::rendezvous does with WEFT_STORE_PATH):
// open(rank) before anything else is read or written, leave(rank, size) at a normal end. The
// last rank to leave removes the directory. A directory left behind by a job that did not end
// normally is taken over by the next job's rank 0 once that job's rank 0 is no longer running
// (checked on this host; a job whose rank 0 ran on another host cannot be checked, and the
// directory must then be removed by hand, as the error says).
#pragma once

#include "weft/bootstrap/store.hpp"
#include "weft/detail/write_whole.hpp"
#include "weft/error.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>

namespace weft::bootstrap {

class file_store final : public store {
 public:
  explicit file_store(std::filesystem::path directory) : directory_(std::move(directory)) {
    std::error_code failure;
    if (directory_.has_parent_path())
      std::filesystem::create_directories(directory_.parent_path(), failure);
    if (!failure && ::mkdir(directory_.c_str(), 0700) != 0 && errno != EEXIST) {
      failure = std::error_code(errno, std::generic_category());
    }
    if (!failure && !std::filesystem::is_directory(directory_, failure) && !failure) {
      failure = std::make_error_code(std::errc::not_a_directory);
    }
    if (failure) {
      throw error(errc::invalid_argument, "file store: cannot create directory " +
                                              directory_.string() + ": " + failure.message());
    }
  }

  // Opens the directory for a job, as its rank `rank`, before the job reads or writes anything
  // in it. Rank 0 takes over a directory a finished job left behind (its rank 0 no longer runs;
  // says so on stderr), refuses one a running job holds, and marks the directory as its job's;
  // the others wait, until `deadline`, for a mark by a rank 0 that runs (a mark left by a
  // finished job is not theirs). Returns without a mark at the deadline: the caller's next wait
  // names what is missing.
  void open(int rank, deadline_clock::time_point deadline) {
    const std::string mine = this_process();
    if (rank == 0) {
      if (const auto holder = get(opened_key, deadline_clock::now()); holder && *holder != mine) {
        switch (state_of(*holder)) {
          case process_state::running:
            throw error(errc::invalid_argument,
                        "file store: " + directory_.string() +
                            " is in use by a running job (its rank 0 is " + *holder + "; this is " +
                            mine +
                            "): give each job a directory of its own (WEFT_STORE_PATH) "
                            "or an identity (WEFT_JOB)");
          case process_state::elsewhere:
            throw error(
                errc::invalid_argument,
                "file store: " + directory_.string() +
                    " holds the files of a job whose rank 0 is " + *holder +
                    ", on another host, which this host cannot check: if that job has ended, "
                    "remove the "
                    "directory; else give this job a directory of its own (WEFT_STORE_PATH)");
          case process_state::ended:
            std::fprintf(stderr,
                         "weft: file store: %s holds the files of a job that did not end normally "
                         "(its rank 0, "
                         "%s, no longer runs); taking it over\n",
                         directory_.c_str(), holder->c_str());
            empty_directory();
            break;
        }
      }
      set(opened_key, mine);
      return;
    }
    auto pause = std::chrono::milliseconds(1);
    while (const auto holder = get(opened_key, deadline)) {
      if (state_of(*holder) != process_state::ended) return;
      if (deadline_clock::now() >= deadline || interrupted_) return;
      std::this_thread::sleep_for(pause);  // a finished job's mark: wait for this job's rank 0
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }

  // At a normal end: marks rank `rank` as gone; the last of `size` ranks to leave removes the
  // directory and everything in it.
  void leave(int rank, int size) {
    set(left_key(rank), this_process());
    for (int other = 0; other < size; ++other) {
      std::error_code failure;
      if (!std::filesystem::exists(path_of(left_key(other)), failure)) return;
    }
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  void set(std::string_view key, std::string_view value) override {
    check(key, value.size());
    const auto final_path = path_of(key);
    const auto temporary = write_beside(final_path, value);
    std::error_code failure;
    std::filesystem::rename(temporary, final_path, failure);
    if (failure) {
      throw error(errc::transport, "file store: cannot rename " + temporary.string() + " to " +
                                       final_path.string() + ": " + failure.message());
    }
  }

  std::optional<std::string> get(std::string_view key,
                                 deadline_clock::time_point deadline) override {
    check(key, 0);
    const auto path = path_of(key);
    auto pause = std::chrono::milliseconds(1);
    while (true) {
      std::ifstream in(path, std::ios::binary);
      if (in) {
        std::string value((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (value.size() > max_value_bytes) {
          throw error(errc::transport, "file store: " + path.string() + " holds more than 1 MiB");
        }
        return value;
      }
      // (an interrupt ends this wait only: the next call waits again, as the TCP store's does)
      if (interrupted_.exchange(false) || deadline_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }

  // Atomic where the filesystem's link(2) is (local filesystems, NFS): the value is written to a
  // file of its own, then linked to the key's name, which fails when the name exists.
  std::string claim(std::string_view key, std::string_view value) override {
    check(key, value.size());
    const auto final_path = path_of(key);
    const auto temporary = write_beside(final_path, value);
    std::error_code failure;
    std::filesystem::create_hard_link(temporary, final_path, failure);
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    if (!failure) return std::string(value);
    if (failure != std::errc::file_exists) {
      throw error(errc::transport,
                  "file store: cannot link " + final_path.string() + ": " + failure.message());
    }
    return *get(key, deadline_clock::now() + std::chrono::seconds(10));
  }

  std::string describe() const override { return "file store in " + directory_.string(); }

  connector_type connector() const override {
    return [directory = directory_](deadline_clock::time_point) {
      return std::make_unique<file_store>(directory);
    };
  }
  void interrupt() override { interrupted_ = true; }

 private:
  // Writes `value` to a new file next to `final_path` (which it then replaces or is linked to,
  // so that no reader sees half a value); returns its path.
  // The file is readable by its owner only (0600): values include the job's secret.
  static std::filesystem::path write_beside(const std::filesystem::path& final_path,
                                            std::string_view value) {
    auto temporary = final_path;
    temporary += ".tmp" + std::to_string(std::random_device{}());
    const int descriptor = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    bool written = descriptor >= 0 && weft::detail::write_whole(descriptor, value);
    const int error_number = written ? 0 : errno;
    if (descriptor >= 0 && ::close(descriptor) != 0 && written) written = false;
    if (!written) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw error(errc::transport, "file store: cannot write " + temporary.string() + ": " +
                                       std::strerror(error_number != 0 ? error_number : EIO));
    }
    return temporary;
  }

  static constexpr std::string_view opened_key = "weft/opened";
  static std::string left_key(int rank) { return "weft/left/" + std::to_string(rank); }

  // Whether the process a mark names ("host pid N", as this_process() writes it) still runs.
  enum class process_state { running, ended, elsewhere };
  static process_state state_of(const std::string& holder) {
    const std::string here = this_process();
    const auto here_pid = here.rfind(" pid ");
    const auto pid_at = holder.rfind(" pid ");
    if (pid_at == std::string::npos || holder.substr(0, pid_at) != here.substr(0, here_pid)) {
      return process_state::elsewhere;
    }
    const auto pid = std::strtol(holder.c_str() + pid_at + 5, nullptr, 10);
    if (pid <= 0) return process_state::elsewhere;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM ? process_state::running
                                                                     : process_state::ended;
  }

  // Removes what a finished job left in the directory, keeping the directory.
  void empty_directory() {
    std::error_code failure;
    for (const auto& entry : std::filesystem::directory_iterator(directory_, failure)) {
      std::error_code ignored;
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }

  static void check(std::string_view key, std::size_t value_bytes) {
    if (key.empty() || key.size() > max_key_bytes || value_bytes > max_value_bytes) {
      throw error(errc::invalid_argument,
                  "file store: keys take 1 to 1024 bytes, values up to 1 MiB");
    }
  }

  // Keys may hold any byte: the file name is the key with every byte outside [A-Za-z0-9._-]
  // written as %XX, so distinct keys never share a file.
  std::filesystem::path path_of(std::string_view key) const {
    std::ostringstream name;
    for (const char c : key) {
      const auto byte = static_cast<unsigned char>(c);
      if (std::isalnum(byte) || c == '.' || c == '_' || c == '-') {
        name << c;
      } else {
        static constexpr char hex[] = "0123456789ABCDEF";
        name << '%' << hex[byte >> 4] << hex[byte & 15];
      }
    }
    return directory_ / name.str();
  }

  std::filesystem::path directory_;
  std::atomic<bool> interrupted_{false};
};

}  // namespace weft::bootstrap
