// A fresh file-store directory for one world of threads-as-ranks, removed afterwards.
#pragma once

#include <weft/bootstrap/file_store.hpp>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

namespace weft_test {

class meeting_place {
 public:
  // `name` tells the directories of one test program apart (weft-<name>-<pid>-<n>).
  explicit meeting_place(const std::string& name) {
    static std::atomic<int> counter{0};
    directory_ =
        std::filesystem::temp_directory_path() /
        ("weft-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(directory_);
    store_ = std::make_unique<weft::bootstrap::file_store>(directory_);
  }
  ~meeting_place() { std::filesystem::remove_all(directory_); }
  meeting_place(const meeting_place&) = delete;
  meeting_place& operator=(const meeting_place&) = delete;
  weft::bootstrap::store* store() { return store_.get(); }

 private:
  std::filesystem::path directory_;
  std::unique_ptr<weft::bootstrap::file_store> store_;
};

}  // namespace weft_test
