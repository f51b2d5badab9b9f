// weft/detail/write_whole.hpp — writing all of a text to a file descriptor, through short
// writes and interruptions.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string_view>

namespace weft::detail {

// Writes all of `text` to `descriptor`; false (errno set) when a write fails.
inline bool write_whole(int descriptor, std::string_view text) {
  for (std::size_t done = 0; done < text.size();) {
    const auto wrote = ::write(descriptor, text.data() + done, text.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      if (wrote == 0) errno = EIO;
      return false;
    }
    done += static_cast<std::size_t>(wrote);
  }
  return true;
}

}  // namespace weft::detail
