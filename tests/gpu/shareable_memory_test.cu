// Device memory shared between two processes, both ways (VMM descriptors where the GPU exports
// them, legacy IPC handles always): a child process started from this binary maps the parent's
// allocation, checks what the parent wrote, writes its own pattern, and the parent reads it.
// The descriptor travels with SCM_RIGHTS over a Unix socket pair, as between ranks.
#include "checks.hpp"

#include "weft/transport/cuda.hpp"

#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

using namespace weft_gpu_test;

namespace {

constexpr std::size_t words = (std::size_t{3} << 20) / 4 + 7;  // not a multiple of the granularity

__global__ void fill(std::uint32_t* data, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    data[i] = static_cast<std::uint32_t>(i) * 2654435761u + seed;
}

std::size_t wrong_words(const std::byte* device_data, std::uint32_t seed) {
  std::vector<std::uint32_t> host(words);
  weft::cuda::check(cudaMemcpy(host.data(), device_data, words * 4, cudaMemcpyDeviceToHost),
                    "cudaMemcpy to host");
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < words; ++i)
    wrong += host[i] != static_cast<std::uint32_t>(i) * 2654435761u + seed;
  return wrong;
}

void write_pattern(std::byte* device_data, std::uint32_t seed) {
  fill<<<64, 256>>>(reinterpret_cast<std::uint32_t*>(device_data), words, seed);
  weft::cuda::check(cudaDeviceSynchronize(), "the fill kernel");
}

// What the parent hands the child: the way, the size, the legacy handle (the descriptor rides
// along for vmm).
struct offer {
  std::uint32_t way = 0;
  std::uint64_t bytes = 0;
  cudaIpcMemHandle_t handle{};
};

bool send_offer(int socket, const offer& what, int descriptor) {
  iovec payload{const_cast<offer*>(&what), sizeof what};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &payload;
  message.msg_iovlen = 1;
  if (descriptor >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &descriptor, sizeof(int));
  }
  return ::sendmsg(socket, &message, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof what);
}

bool receive_offer(int socket, offer& what, int& descriptor) {
  iovec payload{&what, sizeof what};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &payload;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  if (::recvmsg(socket, &message, MSG_CMSG_CLOEXEC | MSG_WAITALL) !=
      static_cast<ssize_t>(sizeof what))
    return false;
  descriptor = -1;
  if (const cmsghdr* header = CMSG_FIRSTHDR(&message);
      header != nullptr && header->cmsg_type == SCM_RIGHTS)
    std::memcpy(&descriptor, CMSG_DATA(header), sizeof(int));
  return true;
}

// The child: maps the offer, checks the parent's pattern, writes its own, answers one byte
// (1: the parent's pattern was there, 0: it was not).
int child(int socket) {
  offer what;
  int descriptor = -1;
  if (!receive_offer(socket, what, descriptor)) return 3;
  const auto way = static_cast<weft::cuda::sharing>(what.way);
  char answer = 0;
  {
    weft::cuda::imported_allocation theirs =
        way == weft::cuda::sharing::vmm
            ? weft::cuda::imported_allocation(0, descriptor, what.bytes)
            : weft::cuda::imported_allocation(0, what.handle, what.bytes);
    answer = wrong_words(theirs.data(), 11) == 0 ? 1 : 0;
    write_pattern(theirs.data(), 29);
  }
  return ::send(socket, &answer, 1, MSG_NOSIGNAL) == 1 ? 0 : 4;
}

void share(weft::cuda::sharing way) {
  const std::string name(to_string(way));
  int pair[2];
  GPU_CHECK(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0, "socketpair");
  const std::string self = "/proc/self/exe";
  const std::string end = std::to_string(pair[1]);
  char* argv[] = {const_cast<char*>(self.c_str()), const_cast<char*>("--child"),
                  const_cast<char*>(end.c_str()), nullptr};
  pid_t pid = 0;
  GPU_CHECK(::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, environ) == 0,
            "posix_spawn " + name);
  ::close(pair[1]);

  weft::cuda::shareable_allocation mine(0, words * 4, way);
  GPU_CHECK(mine.way() == way, name);
  GPU_CHECK(mine.size() >= words * 4, name + ": " + std::to_string(mine.size()) + " bytes mapped");
  write_pattern(mine.data(), 11);
  offer what;
  what.way = static_cast<std::uint32_t>(way);
  what.bytes = mine.size();
  int descriptor = -1;
  if (way == weft::cuda::sharing::vmm)
    descriptor = mine.export_descriptor();
  else
    what.handle = mine.ipc_handle();
  GPU_CHECK(send_offer(pair[0], what, descriptor), name + ": the offer was sent");
  if (descriptor >= 0) ::close(descriptor);
  char answer = 0;
  GPU_CHECK(::recv(pair[0], &answer, 1, MSG_WAITALL) == 1, name + ": the child answered");
  GPU_CHECK(answer == 1, name + ": the child read the parent's pattern");
  int status = 0;
  ::waitpid(pid, &status, 0);
  GPU_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            name + ": the child's exit status " + std::to_string(status));
  GPU_CHECK(wrong_words(mine.data(), 29) == 0, name + ": the parent read the child's pattern");
  ::close(pair[0]);
  std::printf("%s: %zu bytes shared both ways\n", name.c_str(), mine.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--child") return child(std::atoi(argv[2]));
  if (const std::string why = weft::cuda::why_no_device(); !why.empty()) {
    std::printf("skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  const weft::cuda::sharing found = weft::cuda::sharing_for(0);
  std::printf("device 0 shares memory by %s\n", std::string(to_string(found)).c_str());
  if (found == weft::cuda::sharing::vmm) share(weft::cuda::sharing::vmm);
  share(weft::cuda::sharing::legacy);
  setenv("WEFT_CUDA_IPC", "legacy", 1);
  GPU_CHECK(weft::cuda::sharing_for(0) == weft::cuda::sharing::legacy, "WEFT_CUDA_IPC=legacy");
  unsetenv("WEFT_CUDA_IPC");
  return finish("shareable memory");
}
