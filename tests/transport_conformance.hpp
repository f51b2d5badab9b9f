// The semantics every weft transport keeps (weft/transport.hpp, requirement 7), checked on
// three ranks: per-tag ordering, receive before or after send, self-send, zero bytes, many
// outstanding requests posted out of order, cancellation by destruction, and wait deadlines.
// transport_conformance_ranks takes `make(rank)`, which builds rank's transport (on that rank's
// thread, so transports that connect at construction meet); transport_conformance takes
// `make(endpoint)`, which turns a rank's in-process endpoint into the transport under test.
#pragma once

#include "support.hpp"

#include <chrono>
#include <optional>
#include <thread>

namespace weft_test {

template <class Transport>
bool wait_for(Transport& transport, typename Transport::request& request,
              std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  return transport.wait(request, weft::deadline_clock::now() + limit);
}

template <class MakeRank>
void transport_conformance_ranks(failures& sink, MakeRank make) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto transport = make(rank);
        using request_t = typename decltype(transport)::request;
        auto expect = [&](bool ok, const std::string& what) {
          if (!ok) sink.add("rank " + std::to_string(rank) + ": " + what);
        };
        auto bytes_of = [](auto& value) { return std::as_writable_bytes(std::span(&value, 1)); };
        try {
          expect(transport.rank() == rank && transport.size() == 3, "rank and size");

          // 1. Messages of one pair and tag arrive in posting order.
          if (rank == 0) {
            int values[5] = {10, 11, 12, 13, 14};
            std::vector<request_t> sends;
            for (int& value : values)
              sends.push_back(transport.send(1, std::as_bytes(std::span(&value, 1)), 1));
            for (auto& send : sends) expect(wait_for(transport, send), "ordered send completes");
          } else if (rank == 1) {
            for (int i = 0; i < 5; ++i) {
              int value = -1;
              auto receive = transport.recv(0, bytes_of(value), 1);
              expect(wait_for(transport, receive) && value == 10 + i, "per-tag order");
            }
          }

          // 2. A receive posted long before its send; 3. a send to self; 4. zero bytes.
          if (rank == 2) {
            double value = 0;
            auto receive = transport.recv(1, bytes_of(value), 2);
            expect(!transport.test(receive), "receive pending before the send");
            expect(wait_for(transport, receive) && value == 2.5, "receive posted first");
          } else if (rank == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            double value = 2.5;
            auto send = transport.send(2, std::as_bytes(std::span(&value, 1)), 2);
            expect(wait_for(transport, send), "send after the receive");
          }
          {
            long mine = 1000 + rank, back = 0;
            auto send = transport.send(rank, std::as_bytes(std::span(&mine, 1)), 3);
            auto receive = transport.recv(rank, bytes_of(back), 3);
            expect(wait_for(transport, receive) && wait_for(transport, send) && back == mine,
                   "self-send");
            auto empty_send = transport.send((rank + 1) % 3, std::span<const std::byte>{}, 4);
            auto empty_receive = transport.recv((rank + 2) % 3, std::span<std::byte>{}, 4);
            expect(wait_for(transport, empty_send) && wait_for(transport, empty_receive),
                   "zero bytes");
          }

          // 5. Many outstanding requests, receives posted in the reverse order of the sends.
          {
            constexpr int many = 200;
            std::vector<int> out(many), in(many, -1);
            std::vector<request_t> requests;
            const int to = (rank + 1) % 3;
            const int from = (rank + 2) % 3;
            for (int i = many - 1; i >= 0; --i) {
              requests.push_back(transport.recv(from, bytes_of(in[static_cast<std::size_t>(i)]),
                                                100 + static_cast<weft::tag_t>(i)));
            }
            for (int i = 0; i < many; ++i) {
              out[static_cast<std::size_t>(i)] = rank * 1000 + i;
              requests.push_back(
                  transport.send(to, std::as_bytes(std::span(&out[static_cast<std::size_t>(i)], 1)),
                                 100 + static_cast<weft::tag_t>(i)));
            }
            bool all = true;
            for (auto& request : requests) all = wait_for(transport, request) && all;
            bool right = true;
            for (int i = 0; i < many; ++i)
              right = right && in[static_cast<std::size_t>(i)] == from * 1000 + i;
            expect(all && right, "many outstanding, out of order");
          }

          // 6. A destroyed receive is withdrawn: the message goes to the next receive.
          // 7. A wait with a passed deadline returns false and leaves the request pending.
          if (rank == 0) {
            int lost = -1, kept = -1;
            {
              auto abandoned = transport.recv(2, bytes_of(lost), 5);
              expect(!transport.wait(abandoned,
                                     weft::deadline_clock::now() + std::chrono::milliseconds(10)),
                     "deadline passes while nothing was sent");
            }
            int ready = 1;
            auto go = transport.send(2, std::as_bytes(std::span(&ready, 1)), 6);
            expect(wait_for(transport, go), "go signal");
            auto receive = transport.recv(2, bytes_of(kept), 5);
            expect(wait_for(transport, receive) && kept == 77 && lost == -1,
                   "cancel by destruction");
          } else if (rank == 2) {
            int ready = 0, value = 77;
            auto go = transport.recv(0, bytes_of(ready), 6);
            expect(wait_for(transport, go), "go signal received");
            auto send = transport.send(0, std::as_bytes(std::span(&value, 1)), 5);
            expect(wait_for(transport, send), "send after a cancelled receive");
          }
        } catch (const std::exception& failure) {
          sink.add("rank " + std::to_string(rank) + " threw: " + failure.what());
        }
      } catch (const std::exception& failure) {
        sink.add("rank " + std::to_string(rank) +
                 " could not build its transport: " + failure.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

template <class Make>
void transport_conformance(failures& sink, Make make) {
  weft::inproc::world<> world(3);
  transport_conformance_ranks(sink, [&](int rank) {
    auto endpoint = world.endpoint(rank);
    return make(endpoint);
  });
}

}  // namespace weft_test
