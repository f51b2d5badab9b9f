// weft/transport/ofi/shm_region.hpp — what a survivor does with the shared region of a peer
// that died on libfabric's shm provider.
//
// The shm provider names an endpoint "fi_shm://<region>" and keeps its queues, and the spin lock
// that guards them, in the file /dev/shm/<region>, which every peer maps. A process killed while
// holding that lock leaves it held, and libfabric 1.17 then spins forever in the next send to the
// dead process. retire_shm_region replaces this process's mapping of the region with a private
// copy of it whose lock is released: a send that was spinning takes the lock and posts into the
// copy, where nobody will ever read it, and weft's wait reports the death. It then removes the
// file, which the dead process can no longer remove itself.
//
// The lock is found by the region header libfabric 1.17 writes (layout version 4: the version
// byte, the owner's pid at offset 4, the lock at offset 24). A region with another header is
// left as it is: later libfabric versions keep no lock in the region.
#pragma once

#include "weft/transport/ofi/peer_watch.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace weft::ofi::detail {

// The file behind an shm endpoint name ("fi_shm://4583:0:0" -> "/dev/shm/4583:0:0"), or empty
// when the name is not one the shm provider made.
inline std::string shm_region_path(std::string_view endpoint_name) {
  constexpr std::string_view scheme = "fi_shm://";
  const auto end = endpoint_name.find('\0');
  if (end != std::string_view::npos) endpoint_name = endpoint_name.substr(0, end);
  if (!endpoint_name.starts_with(scheme)) return {};
  const auto region = endpoint_name.substr(scheme.size());
  if (region.empty() || region.find('/') != std::string_view::npos || region == "." ||
      region == "..")
    return {};
  return "/dev/shm/" + std::string(region);
}

struct shm_region_layout {
  static constexpr std::uint8_t version = 4;
  static constexpr std::size_t pid_offset = 4;
  static constexpr std::size_t lock_offset = 24;
};

// Replaces this process's mappings of the dead peer's region (whose owner was `pid`) by private
// copies with the lock released, and removes the file; returns how many mappings were replaced.
inline int retire_shm_region(std::string_view endpoint_name, pid_t pid) {
  const std::string path = shm_region_path(endpoint_name);
  if (path.empty()) return 0;
  pthread_spinlock_t probe;
  pthread_spin_init(&probe, PTHREAD_PROCESS_SHARED);
  const std::remove_volatile_t<pthread_spinlock_t> unlocked = probe;  // the released lock's bytes
  pthread_spin_destroy(&probe);
  int replaced = 0;
  {
    std::lock_guard guard(mapping_lock());
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      // "start-end perms offset dev inode   path[ (deleted)]"
      const auto at = line.find(path);
      if (at == std::string::npos) continue;
      const std::string_view rest = std::string_view(line).substr(at + path.size());
      if (!rest.empty() && rest != " (deleted)") continue;
      std::uintptr_t start = 0, end = 0;
      char dash = 0;
      std::istringstream range(line);
      range >> std::hex >> start >> dash >> end;
      const std::size_t length = end - start;
      if (!range || dash != '-' || end <= start ||
          length < shm_region_layout::lock_offset + sizeof unlocked)
        continue;
      auto* shared = reinterpret_cast<std::byte*>(start);
      pid_t owner = 0;
      std::memcpy(&owner, shared + shm_region_layout::pid_offset, sizeof owner);
      if (std::to_integer<std::uint8_t>(shared[0]) != shm_region_layout::version || owner != pid)
        continue;
      void* copy =
          ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (copy == MAP_FAILED) continue;
      std::memcpy(copy, shared, length);
      std::memcpy(static_cast<std::byte*>(copy) + shm_region_layout::lock_offset, &unlocked,
                  sizeof unlocked);
      // Moves the copy over the shared mapping in one step: a thread spinning on the lock sees
      // either the dead process's lock or the released one, never an unmapped page.
      if (::mremap(copy, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, shared) == MAP_FAILED) {
        ::munmap(copy, length);
        continue;
      }
      ++replaced;
    }
  }
  ::unlink(path.c_str());
  return replaced;
}

}  // namespace weft::ofi::detail
