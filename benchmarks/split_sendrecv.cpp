// split_sendrecv: one ring exchange (every rank sends BYTES to r+1 and receives BYTES from
// r-1) posted three ways over the TCP transport, alternating in blocks of calls within one
// launch so the machine's drift hits all three alike:
//
//   one message   one receive and one send of BYTES
//   pieces        BYTES as messages of PIECE bytes, every receive and send posted at once
//   handshake     the receiver posts, then tells the sender (1 byte); the sender sends BYTES
//                 only once told — a rendezvous, as Open MPI's TCP path does for large messages
//
//   weft-run -n 4 build/benchmarks/split_sendrecv 4M 1M [ROUNDS]
//
// Per call: a barrier, the exchange, and the slowest rank's time (as weft-bench times). Rank 0
// prints each way's median and busbw (BYTES / time, as nccl-tests' sendrecv). A received byte
// that is not what its sender wrote is an error (exit status 1).
#include <weft/transport/tcp.hpp>
#include <weft/weft.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

namespace {

using comm_type = weft::communicator<weft::tcp::transport>;

std::size_t parse_bytes(const char* text) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  const std::string suffix(end);
  const std::size_t scale = suffix == "K"    ? 1u << 10
                            : suffix == "M"  ? 1u << 20
                            : suffix.empty() ? 1
                                             : 0;
  if (end == text || scale == 0 || value == 0) {
    std::fprintf(stderr, "split_sendrecv: '%s' is not a positive size (K and M suffixes allowed)\n",
                 text);
    std::exit(2);
  }
  return static_cast<std::size_t>(value) * scale;
}

// Byte i of what rank `sender` sends: differs between neighbours, so a message from the wrong
// rank or at the wrong offset is counted wrong.
std::byte pattern(std::size_t i, int sender) {
  return static_cast<std::byte>((i * 131 + static_cast<std::size_t>(sender)) & 0xff);
}

enum class way { one_message, pieces, handshake };
constexpr std::array<const char*, 3> way_names{"one message", "pieces", "handshake"};

void exchange(comm_type& comm, way how, std::span<const std::byte> out, std::span<std::byte> in,
              std::size_t piece) {
  const int p = comm.size();
  const int right = (comm.rank() + 1) % p;
  const int left = (comm.rank() + p - 1) % p;
  constexpr int data_tag = 1, ready_tag = 2;
  if (how == way::one_message) {
    auto receive = comm.recv_user(left, in, data_tag);
    auto send = comm.send_user(right, out, data_tag);
    comm.wait_all(receive, send);
  } else if (how == way::pieces) {
    std::vector<comm_type::pending> posted;
    for (std::size_t at = 0; at < in.size(); at += piece) {
      posted.push_back(
          comm.recv_user(left, in.subspan(at, std::min(piece, in.size() - at)), data_tag));
    }
    for (std::size_t at = 0; at < out.size(); at += piece) {
      posted.push_back(
          comm.send_user(right, out.subspan(at, std::min(piece, out.size() - at)), data_tag));
    }
    for (auto& operation : posted) comm.wait(operation);
  } else {
    const std::byte ready{1};
    std::byte told{0};
    auto receive = comm.recv_user(left, in, data_tag);
    auto tell = comm.send_user(left, std::span(&ready, 1), ready_tag);
    auto hear = comm.recv_user(right, std::span(&told, 1), ready_tag);
    comm.wait(hear);
    auto send = comm.send_user(right, out, data_tag);
    comm.wait_all(receive, send, tell);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(
        stderr,
        "usage: split_sendrecv BYTES PIECE_BYTES [ROUNDS] (under a launcher: weft-run -n 4 ...)\n");
    return 2;
  }
  const std::size_t bytes = parse_bytes(argv[1]);
  const std::size_t piece = parse_bytes(argv[2]);
  const int rounds = argc == 4 ? std::max(1, std::atoi(argv[3])) : 10;
  constexpr int calls_per_block = 20;
  try {
    auto job = weft::tcp::session::from_environment();
    auto& comm = job.comm();
    const int left = (comm.rank() + comm.size() - 1) % comm.size();
    std::vector<std::byte> out(bytes), in(bytes);
    for (std::size_t i = 0; i < bytes; ++i) out[i] = pattern(i, comm.rank());
    std::array<std::vector<double>, 3> times;
    long wrong = 0;
    auto timed = [&](way how, bool keep) {
      std::fill(in.begin(), in.end(), std::byte{0});
      weft::barrier(comm);
      const auto start = std::chrono::steady_clock::now();
      exchange(comm, how, out, in, piece);
      double slowest =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      weft::allreduce(comm, std::span(&slowest, 1), weft::max{});
      for (std::size_t i = 0; i < bytes; ++i) wrong += in[i] != pattern(i, left);
      if (keep) times[static_cast<std::size_t>(how)].push_back(slowest);
    };
    for (way how : {way::one_message, way::pieces, way::handshake}) timed(how, false);  // warm-up
    for (int round = 0; round < rounds; ++round) {
      std::array<way, 3> order{way::one_message, way::pieces, way::handshake};
      std::rotate(order.begin(), order.begin() + round % 3, order.end());
      for (way how : order) {
        for (int call = 0; call < calls_per_block; ++call) timed(how, true);
      }
    }
    weft::allreduce(comm, std::span(&wrong, 1), weft::sum{});
    if (comm.rank() == 0) {
      std::printf(
          "# split_sendrecv: %zu bytes, pieces of %zu, %d ranks, %d rounds of %d calls per way\n",
          bytes, piece, comm.size(), rounds, calls_per_block);
      for (std::size_t w = 0; w < times.size(); ++w) {
        auto& t = times[w];
        std::sort(t.begin(), t.end());
        const double median = t[t.size() / 2];
        std::printf("%-12s median %10.1f us  busbw %6.2f GB/s  [%.1f-%.1f us]\n", way_names[w],
                    median, static_cast<double>(bytes) / median / 1e3, t.front(), t.back());
      }
      std::printf("# wrong bytes: %ld\n", wrong);
    }
    return wrong == 0 ? 0 : 1;
  } catch (const weft::error& failure) {
    std::fprintf(stderr, "%s\n", failure.what());
    return 1;
  }
}
