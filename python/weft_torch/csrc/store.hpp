// weft_torch/csrc/store.hpp — the c10d store torch.distributed hands a backend, as the store
// weft's transports meet their peers through (weft/bootstrap/store.hpp).
//
// init_process_group gives each process group a store of its own (a c10d::PrefixStore over the
// job's TCPStore or FileStore), so two weft process groups never read each other's keys.
#pragma once

#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "weft/bootstrap/store.hpp"
#include "weft/error.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft_torch {

class c10d_store final : public weft::bootstrap::store {
 public:
  explicit c10d_store(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(std::string_view key, std::string_view value) override {
    store_->set(std::string(key), bytes_of(value));
  }

  std::optional<std::string> get(std::string_view key,
                                 weft::deadline_clock::time_point deadline) override {
    const std::vector<std::string> keys{std::string(key)};
    try {
      // c10d reads a zero timeout as "forever": a deadline that has passed asks check() instead.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - weft::deadline_clock::now());
      if (left <= std::chrono::milliseconds(0)) {
        if (!store_->check(keys)) return std::nullopt;
      } else {
        store_->wait(keys, std::max(left, std::chrono::milliseconds(1)));
      }
      const auto value = store_->get(keys.front());
      return std::string(value.begin(), value.end());
    } catch (const std::exception& failure) {
      if (weft::deadline_clock::now() >= deadline) return std::nullopt;  // the wait timed out
      throw weft::error(weft::errc::transport, "the torch.distributed store failed reading '" +
                                                   std::string(key) + "': " + failure.what());
    }
  }

  // compareSet with an empty expected value sets a key only when it is unset, atomically, in
  // the TCPStore and FileStore; a store without compareSet gets weft's read-then-set.
  std::string claim(std::string_view key, std::string_view value) override {
    try {
      const auto held = store_->compareSet(std::string(key), {}, bytes_of(value));
      return std::string(held.begin(), held.end());
    } catch (const std::exception&) {
      return store::claim(key, value);
    }
  }

  std::string describe() const override { return "torch.distributed store"; }

 private:
  static std::vector<std::uint8_t> bytes_of(std::string_view text) {
    return {text.begin(), text.end()};
  }

  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace weft_torch
