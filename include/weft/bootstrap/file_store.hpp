// weft/bootstrap/file_store.hpp — a store in a directory of a shared filesystem.
//
// Each key is one file, written under a temporary name and renamed into place, so a reader
// sees either nothing or the whole value. get polls with a growing pause (1 ms to 50 ms).
// Use it where every rank mounts the same directory (NFS, Lustre, GPFS) and no rank can serve
// a TCP port; remove the directory after the job.
#pragma once

#include "weft/bootstrap/store.hpp"
#include "weft/error.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
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
    std::filesystem::create_directories(directory_, failure);
    if (failure) {
      throw error(errc::invalid_argument, "file store: cannot create directory " +
                                              directory_.string() + ": " + failure.message());
    }
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
      if (deadline_clock::now() >= deadline || interrupted_) return std::nullopt;
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
      throw error(errc::transport, "file store: cannot link " + final_path.string() + ": " + failure.message());
    }
    return *get(key, deadline_clock::now() + std::chrono::seconds(10));
  }

  std::string describe() const override { return "file store in " + directory_.string(); }

  connector_type connector() const override {
    return [directory = directory_](deadline_clock::time_point) { return std::make_unique<file_store>(directory); };
  }
  void interrupt() override { interrupted_ = true; }

 private:
  // Writes `value` to a new file next to `final_path` (which it then replaces or is linked to,
  // so that no reader sees half a value); returns its path.
  static std::filesystem::path write_beside(const std::filesystem::path& final_path, std::string_view value) {
    auto temporary = final_path;
    temporary += ".tmp" + std::to_string(std::random_device{}());
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    out.close();
    if (!out) throw error(errc::transport, "file store: cannot write " + temporary.string());
    return temporary;
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
