// Transports under the algorithms: the conformance suite on the in-process transport, an
// archetype that offers only what the concept requires, a mock that delays and reorders
// deliveries, and a memory space whose bytes the CPU cannot read outside its own operations.
#include "../collective_cases.hpp"
#include "../transport_conformance.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <random>

using namespace weft_test;

namespace {

// ---- archetype: exactly the concept, nothing more ------------------------------------------

template <class Inner>
class archetype {
 public:
  class request {
   public:
    request(request&&) noexcept = default;
    request& operator=(request&&) noexcept = default;

   private:
    friend class archetype;
    explicit request(typename Inner::request inner) : inner_(std::move(inner)) {}
    typename Inner::request inner_;
  };

  explicit archetype(Inner inner) : inner_(std::move(inner)) {}
  archetype(archetype&&) noexcept = default;
  archetype& operator=(archetype&&) noexcept = default;

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  request send(int peer, std::span<const std::byte> data, weft::tag_t tag) {
    return request(inner_.send(peer, data, tag));
  }
  request recv(int peer, std::span<std::byte> data, weft::tag_t tag) {
    return request(inner_.recv(peer, data, tag));
  }
  bool wait(request& operation, weft::deadline_clock::time_point deadline) {
    return inner_.wait(operation.inner_, deadline);
  }
  bool test(request& operation) { return inner_.test(operation.inner_); }
  auto& memory() { return inner_.memory(); }

 private:
  Inner inner_;
};
static_assert(weft::transport<archetype<weft::inproc::transport>>);
static_assert(!std::is_default_constructible_v<archetype<weft::inproc::transport>::request>);

// ---- mock: sends are held back and released in random order ----------------------------------
// Only the order of one pair and tag is kept (all the concept promises); each release also
// yields or sleeps a little, so thread timing shuffles too.

template <class Inner>
class delaying_mock {
  struct state {
    bool is_send = false;
    bool released = false;
    int peer = 0;
    weft::tag_t tag = 0;
    std::span<const std::byte> data;
    std::optional<typename Inner::request> inner;
  };

 public:
  // Destroying a request withdraws a send that was never released.
  struct withdraw {
    std::deque<state*>* held;
    void operator()(state* s) const {
      if (auto it = std::find(held->begin(), held->end(), s); it != held->end()) held->erase(it);
      delete s;
    }
  };
  using request = std::unique_ptr<state, withdraw>;

  delaying_mock(Inner inner, unsigned seed)
      : inner_(std::move(inner)), random_(seed), held_(std::make_unique<std::deque<state*>>()) {}
  delaying_mock(delaying_mock&&) noexcept = default;
  delaying_mock& operator=(delaying_mock&&) noexcept = default;

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  auto& memory() { return inner_.memory(); }

  request send(int peer, std::span<const std::byte> data, weft::tag_t tag) {
    auto* held = new state{true, false, peer, tag, data, std::nullopt};
    held_->push_back(held);
    return request(held, withdraw{held_.get()});
  }
  request recv(int peer, std::span<std::byte> data, weft::tag_t tag) {
    auto* posted = new state{false, true, peer, tag, {}, std::nullopt};
    posted->inner.emplace(inner_.recv(peer, data, tag));
    return request(posted, withdraw{held_.get()});
  }
  bool test(request& operation) {
    release_some();
    return operation->released && inner_.test(*operation->inner);
  }
  bool wait(request& operation, weft::deadline_clock::time_point deadline) {
    while (true) {
      release_some();
      if (operation->released) {
        const auto slice =
            std::min(deadline, weft::deadline_clock::now() + std::chrono::milliseconds(2));
        if (inner_.wait(*operation->inner, slice)) return true;
      }
      if (weft::deadline_clock::now() >= deadline) return false;
    }
  }

 private:
  // Releases one held send chosen at random — the oldest of its (peer, tag) stream.
  void release_some() {
    auto& held = *held_;
    if (held.empty()) return;
    std::size_t pick = random_() % held.size();
    for (std::size_t i = 0; i < pick; ++i) {
      if (held[i]->peer == held[pick]->peer && held[i]->tag == held[pick]->tag) {
        pick = i;
        break;
      }
    }
    state* chosen = held[pick];
    held.erase(held.begin() + static_cast<std::ptrdiff_t>(pick));
    chosen->inner.emplace(inner_.send(chosen->peer, chosen->data, chosen->tag));
    chosen->released = true;
    if (random_() % 4 == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(random_() % 200));
    else
      std::this_thread::yield();
  }

  Inner inner_;
  std::minstd_rand random_;
  std::unique_ptr<std::deque<state*>> held_;
};
static_assert(weft::transport<delaying_mock<weft::inproc::transport>>);

// ---- a memory space the CPU cannot read directly ---------------------------------------------
// Every byte is stored XOR 0x5a; only copy/combine/finalize know the encoding. An algorithm
// that looked at element values any other way would compute garbage and fail the check.

struct opaque_memory {
  static constexpr unsigned char key = 0x5a;

  template <class T>
  static T decode(const T& stored) {
    T value;
    auto* out = reinterpret_cast<unsigned char*>(&value);
    const auto* in = reinterpret_cast<const unsigned char*>(&stored);
    for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<unsigned char>(in[i] ^ key);
    return value;
  }
  template <class T>
  static T encode(const T& value) {
    return decode(value);
  }

  void copy(std::span<std::byte> dst, std::span<const std::byte> src) const {
    if (!src.empty()) std::memmove(dst.data(), src.data(), src.size());
  }
  template <class T, class Op>
  void combine(std::span<T> dst, std::span<const T> a, std::span<const T> b, const Op& op) const {
    for (std::size_t i = 0; i < dst.size(); ++i) {
      dst[i] = encode(static_cast<T>(op(decode(a[i]), decode(b[i]))));
    }
  }
  template <class T, class Op>
  void finalize(std::span<T> data, const Op& op, int ranks) const {
    for (auto& value : data) value = encode(weft::finalize(op, decode(value), ranks));
  }
  std::byte* allocate(std::size_t bytes) const { return new std::byte[bytes == 0 ? 1 : bytes]; }
  void deallocate(std::byte* pointer, std::size_t) const { delete[] pointer; }
};
static_assert(weft::memory_space<opaque_memory>);

// Every algorithm of the main reductions and movements, over any communicator type.
template <class Comm, class Encode, class Decode>
void algorithm_slice(Comm& comm, failures& sink, const std::string& name, Encode encode,
                     Decode decode) {
  const int p = comm.size();
  const int r = comm.rank();
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{300}}) {
    std::vector<int> want(count);
    for (std::size_t i = 0; i < count; ++i) {
      int total = 0;
      for (int q = 0; q < p; ++q) total += static_cast<int>(small_value(q, i));
      want[i] = total;
    }
    auto input = [&] {
      std::vector<int> in(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = encode(static_cast<int>(small_value(r, i)));
      return in;
    };
    auto verify = [&](const std::string& what, const std::vector<int>& got) {
      for (std::size_t i = 0; i < count; ++i) {
        if (decode(got[i]) != want[i]) {
          sink.add(name + " " + what + " p=" + std::to_string(p) +
                   " count=" + std::to_string(count) + " rank " + std::to_string(r) + " index " +
                   std::to_string(i));
          return;
        }
      }
    };
    auto each_allreduce = [&](auto algorithm) {
      auto in = input();
      std::vector<int> out(count);
      weft::allreduce(comm, std::span<const int>(in), std::span<int>(out), weft::sum{}, algorithm);
      verify(std::string("allreduce ") + std::string(decltype(algorithm)::name), out);
    };
    each_allreduce(weft::ring{});
    each_allreduce(weft::double_binary_tree{});
    each_allreduce(weft::recursive_doubling{});
    each_allreduce(weft::recursive_halving{});
    each_allreduce(weft::direct{});

    std::vector<int> data = r == 1 % p ? input() : std::vector<int>(count, encode(99));
    weft::broadcast(comm, std::span<int>(data), 1 % p, weft::ring{});
    weft::broadcast(comm, std::span<int>(data), 1 % p, weft::binomial_tree{});
    for (std::size_t i = 0; i < count; ++i) {
      if (decode(data[i]) != small_value(1 % p, i)) {
        sink.add(name + " broadcast rank " + std::to_string(r));
        break;
      }
    }
    std::vector<int> in = input(), all(count * static_cast<std::size_t>(p));
    weft::allgather(comm, std::span<const int>(in), std::span<int>(all), weft::bruck{});
    std::vector<int> swapped(all.size());
    weft::alltoall(comm, std::span<const int>(all), std::span<int>(swapped), weft::bruck{});
    weft::alltoall(comm, std::span<const int>(all), std::span<int>(swapped), weft::pairwise{});
    // after the allgather every rank holds the same `all`; alltoall hands rank r block r of
    // every rank, i.e. p copies of rank r's own input
    for (int q = 0; q < p; ++q) {
      for (std::size_t i = 0; i < count; ++i) {
        if (decode(swapped[static_cast<std::size_t>(q) * count + i]) != small_value(r, i)) {
          sink.add(name + " allgather+alltoall rank " + std::to_string(r));
          q = p;
          break;
        }
      }
    }
    std::vector<int> mine(count);
    std::vector<int> everyone(count * static_cast<std::size_t>(p));
    for (std::size_t i = 0; i < everyone.size(); ++i)
      everyone[i] = encode(static_cast<int>(small_value(r, i % count)));
    weft::reduce_scatter(comm, std::span<const int>(everyone), std::span<int>(mine), weft::sum{},
                         weft::recursive_halving{});
    verify("reduce_scatter recursive_halving", mine);
    weft::reduce_scatter(comm, std::span<const int>(everyone), std::span<int>(mine), weft::sum{},
                         weft::ring{});
    verify("reduce_scatter ring", mine);
    weft::barrier(comm);
  }
}

template <class Transport>
void run_slice(int p, failures& sink, const std::string& name,
               std::function<Transport(weft::inproc::transport&, int)> make) {
  weft::inproc::world<> world(p);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p; ++rank) {
    threads.emplace_back([&, rank] {
      auto endpoint = world.endpoint(rank);
      auto transport = make(endpoint, rank);
      weft::communicator<Transport> comm(transport, test_options(64));
      try {
        algorithm_slice(
            comm, sink, name, [](int v) { return v; }, [](int v) { return v; });
      } catch (const std::exception& failure) {
        sink.add(name + " rank " + std::to_string(rank) + " threw " + failure.what());
        world.abort(rank, failure.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

}  // namespace

TEST_CASE("conformance: the in-process transport", "[transport]") {
  failures sink;
  transport_conformance(sink, [](weft::inproc::transport& endpoint) { return endpoint; });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("conformance: the archetype and the delaying mock", "[transport]") {
  failures sink;
  transport_conformance(sink,
                        [](weft::inproc::transport& endpoint) { return archetype(endpoint); });
  transport_conformance(sink, [](weft::inproc::transport& endpoint) {
    return delaying_mock(endpoint, static_cast<unsigned>(endpoint.rank() + 1));
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("a size mismatch between send and receive is an error, not corruption", "[transport]") {
  weft::inproc::world<> world(2);
  std::string message;
  std::thread other([&] {
    auto endpoint = world.endpoint(1);
    int value = 5;
    auto send = endpoint.send(0, std::as_bytes(std::span(&value, 1)), 9);
    try {
      wait_for(endpoint, send);
    } catch (const weft::error&) {
    }
  });
  auto endpoint = world.endpoint(0);
  long wide = 0;
  auto receive = endpoint.recv(1, std::as_writable_bytes(std::span(&wide, 1)), 9);
  try {
    wait_for(endpoint, receive);
  } catch (const weft::error& failure) {
    message = failure.what();
  }
  other.join();
  CHECK_THAT(message, Catch::Matchers::Contains("expected 8 bytes from rank 1") &&
                          Catch::Matchers::Contains("has 4 bytes"));
  CHECK(wide == 0);
}

TEST_CASE("the algorithms run unchanged over the archetype transport", "[transport]") {
  for (int p : {1, 2, 3, 5, 8}) {
    failures sink;
    run_slice<archetype<weft::inproc::transport>>(
        p, sink, "archetype",
        [](weft::inproc::transport& endpoint, int) { return archetype(endpoint); });
    INFO(sink.summary());
    CHECK(sink.empty());
  }
}

TEST_CASE("the algorithms survive delayed and reordered deliveries", "[transport]") {
  for (int p : {2, 3, 4, 5, 7}) {
    failures sink;
    run_slice<delaying_mock<weft::inproc::transport>>(
        p, sink, "mock", [p](weft::inproc::transport& endpoint, int rank) {
          return delaying_mock(endpoint, static_cast<unsigned>(p * 31 + rank));
        });
    INFO(sink.summary());
    CHECK(sink.empty());
  }
}

TEST_CASE("algorithms reach element data only through the memory space", "[transport]") {
  for (int p : {1, 2, 3, 4, 6, 9}) {
    failures sink;
    weft::inproc::world<opaque_memory> world(p);
    weft::inproc::run(
        world,
        [&](weft::communicator<weft::inproc::basic_transport<opaque_memory>>& comm) {
          algorithm_slice(comm, sink, "opaque", opaque_memory::encode<int>,
                          opaque_memory::decode<int>);
          // avg's finalize also runs in the memory space
          std::vector<int> data(10, opaque_memory::encode(4 * comm.rank()));
          weft::allreduce(comm, std::span<int>(data), weft::avg{}, weft::ring{});
          if (opaque_memory::decode(data[9]) != 2 * (comm.size() - 1)) sink.add("opaque avg");
        },
        test_options(64));
    INFO(sink.summary());
    CHECK(sink.empty());
  }
}

// ---- recording: the order in which an algorithm posts its operations ----------------------------

namespace {

// The archetype, keeping each posted operation's direction (true: a send) and peer.
template <class Inner>
class recording : public archetype<Inner> {
 public:
  using post = std::pair<bool, int>;
  recording(Inner inner, std::vector<post>* log) : archetype<Inner>(std::move(inner)), log_(log) {}

  typename archetype<Inner>::request send(int peer, std::span<const std::byte> data,
                                          weft::tag_t tag) {
    log_->push_back({true, peer});
    return archetype<Inner>::send(peer, data, tag);
  }
  typename archetype<Inner>::request recv(int peer, std::span<std::byte> data, weft::tag_t tag) {
    log_->push_back({false, peer});
    return archetype<Inner>::recv(peer, data, tag);
  }

 private:
  std::vector<post>* log_;
};
static_assert(weft::transport<recording<weft::inproc::transport>>);

}  // namespace

TEST_CASE("direct's exchanges with everyone post in shifted order: rank r's k-th to r+k, from r-k",
          "[transport]") {
  using post = recording<weft::inproc::transport>::post;
  for (int p : {3, 4, 5}) {
    weft::inproc::world<> world(p);
    std::vector<std::vector<post>> logs(static_cast<std::size_t>(p));
    failures sink;
    std::vector<std::thread> threads;
    for (int rank = 0; rank < p; ++rank) {
      threads.emplace_back([&, rank] {
        auto& log = logs[static_cast<std::size_t>(rank)];
        recording<weft::inproc::transport> transport(world.endpoint(rank), &log);
        weft::communicator<recording<weft::inproc::transport>> comm(transport, test_options(64));
        // rank r's expected posts: receive from r-k, send to r+k, for k = 1 .. p-1
        std::vector<post> want;
        for (int k = 1; k < p; ++k) {
          want.emplace_back(false, (rank - k + p) % p);
          want.emplace_back(true, (rank + k) % p);
        }
        auto check = [&](const std::string& name) {
          if (log != want) {
            std::string text;
            for (const auto& [is_send, peer] : log)
              text += (is_send ? " send " : " recv ") + std::to_string(peer);
            sink.add(name + ": rank " + std::to_string(rank) + " posted" + text);
          }
          log.clear();
        };
        try {
          const std::size_t n = 6;
          std::vector<int> in(n * static_cast<std::size_t>(p));
          for (std::size_t i = 0; i < in.size(); ++i) in[i] = rank * 1000 + static_cast<int>(i);
          std::vector<int> out(in.size());
          weft::alltoall(comm, std::span<const int>(in), std::span<int>(out), weft::direct{});
          check("alltoall");
          for (int from = 0; from < p;
               ++from) {  // block `from` of out is block `rank` of rank from's in
            for (std::size_t i = 0; i < n; ++i) {
              const int expected =
                  from * 1000 + static_cast<int>(static_cast<std::size_t>(rank) * n + i);
              if (out[static_cast<std::size_t>(from) * n + i] != expected)
                sink.add("alltoall value");
            }
          }
          std::vector<int> mine(n, rank + 1);
          weft::allgather(comm, std::span<const int>(mine), std::span<int>(out), weft::direct{});
          check("allgather");
          for (std::size_t i = 0; i < out.size(); ++i) {
            if (out[i] != static_cast<int>(i / n) + 1) sink.add("allgather value");
          }
          weft::reduce_scatter(comm, std::span<const int>(in), std::span<int>(mine), weft::sum{},
                               weft::direct{});
          check("reduce_scatter");
          for (std::size_t i = 0; i < n; ++i) {
            if (mine[i] !=
                1000 * p * (p - 1) / 2 + p * (rank * static_cast<int>(n) + static_cast<int>(i)))
              sink.add("reduce_scatter value");
          }
          std::vector<int> sums(n);
          weft::allreduce(comm, std::span<const int>(mine), std::span<int>(sums), weft::sum{},
                          weft::direct{});
          check("allreduce");
          // the sum over ranks b of their reduce_scatter results: 1000 * p(p-1)/2 + p * (b * n + i)
          for (std::size_t i = 0; i < n; ++i) {
            long expected = 0;
            for (int block = 0; block < p; ++block) {
              expected += 1000L * p * (p - 1) / 2 +
                          static_cast<long>(p) * (static_cast<long>(block) * n + i);
            }
            if (sums[i] != expected) sink.add("allreduce value");
          }
        } catch (const std::exception& failure) {
          sink.add("rank " + std::to_string(rank) + " threw " + failure.what());
          world.abort(rank, failure.what());
        }
      });
    }
    for (auto& thread : threads) thread.join();
    INFO("p = " << p << ": " << sink.summary());
    CHECK(sink.empty());
  }
}

// ---- counting: the requests an algorithm leaves alive -------------------------------------------

namespace {

// The archetype, counting its live requests: posted and neither finished (the communicator drops
// a request once its wait returns) nor cancelled.
template <class Inner>
class counting {
 public:
  class request {
   public:
    request(request&& other) noexcept
        : inner_(std::move(other.inner_)), live_(std::exchange(other.live_, nullptr)) {}
    request& operator=(request&& other) noexcept {
      if (this != &other) {
        drop();
        inner_ = std::move(other.inner_);
        live_ = std::exchange(other.live_, nullptr);
      }
      return *this;
    }
    ~request() { drop(); }

   private:
    friend class counting;
    request(typename Inner::request inner, int* live) : inner_(std::move(inner)), live_(live) {
      ++*live_;
    }
    void drop() {
      if (live_ != nullptr) --*live_;
      live_ = nullptr;
    }
    typename Inner::request inner_;
    int* live_ = nullptr;
  };

  explicit counting(Inner inner) : inner_(std::move(inner)) {}
  counting(counting&&) noexcept = default;
  counting& operator=(counting&&) noexcept = default;

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  request send(int peer, std::span<const std::byte> data, weft::tag_t tag) {
    return request(inner_.send(peer, data, tag), live_.get());
  }
  request recv(int peer, std::span<std::byte> data, weft::tag_t tag) {
    return request(inner_.recv(peer, data, tag), live_.get());
  }
  bool wait(request& operation, weft::deadline_clock::time_point deadline) {
    return inner_.wait(operation.inner_, deadline);
  }
  bool test(request& operation) { return inner_.test(operation.inner_); }
  auto& memory() { return inner_.memory(); }
  int live() const { return *live_; }

 private:
  Inner inner_;
  std::unique_ptr<int> live_ = std::make_unique<int>(0);
};
static_assert(weft::transport<counting<weft::inproc::transport>>);

}  // namespace

// Algorithms that post many operations at once keep them in the communicator's pool of
// requests, which outlives the call. A call that throws must cancel them before its buffers go
// away: a receive left posted into a freed buffer would be written by the next bytes to arrive.
TEST_CASE("a call that fails leaves no request of its own pending", "[transport][errors]") {
  using counted = counting<weft::inproc::transport>;
  auto alltoall_direct = [](weft::communicator<counted>& comm, std::span<const int> in,
                            std::span<int> out) { weft::alltoall(comm, in, out, weft::direct{}); };
  auto alltoall_pairwise = [](weft::communicator<counted>& comm, std::span<const int> in,
                              std::span<int> out) {
    weft::alltoall(comm, in, out, weft::pairwise{});
  };
  auto gather_tree = [](weft::communicator<counted>& comm, std::span<const int> in,
                        std::span<int> out) {
    weft::gather(comm, in.first(in.size() / 3), out, /*root=*/0, weft::binomial_tree{});
  };
  auto alltoall_handshake = [](weft::communicator<counted>& comm, std::span<const int> in,
                               std::span<int> out) {
    auto settings = comm.settings();
    settings.handshake_bytes = 1;  // every block waits for its receiver's word
    comm.set_settings(settings);
    weft::alltoall(comm, in, out, weft::direct{});
  };
  const std::vector<std::pair<
      std::string,
      std::function<void(weft::communicator<counted>&, std::span<const int>, std::span<int>)>>>
      calls{{"direct alltoall", alltoall_direct},
            {"direct alltoall with the handshake", alltoall_handshake},
            {"pairwise alltoall", alltoall_pairwise},
            {"binomial-tree gather", gather_tree}};
  for (const auto& [name, call] : calls) {
    SECTION(name) {
      constexpr int p = 3;
      weft::inproc::world<> world(p);
      failures sink;
      std::vector<std::thread> threads;
      for (int rank = 0; rank < p; ++rank) {
        threads.emplace_back([&, rank] {
          counted transport(world.endpoint(rank));
          auto settings = test_options(64);
          settings.timeout = std::chrono::milliseconds(300);
          weft::communicator<counted> comm(transport, settings);
          if (rank == p - 1) {  // never calls: the others time out waiting for it
            std::this_thread::sleep_for(std::chrono::milliseconds(900));
            return;
          }
          std::vector<int> in(3 * 1000, rank + 1);
          std::vector<int> out(3 * 1000);
          try {
            call(comm, in, out);
            // the tree's leaf may finish; rank 0 (every call's root or partner) may not
            if (rank == 0) sink.add(name + ": rank 0 returned without the last rank");
          } catch (const weft::error& failure) {
            if (failure.code() != weft::errc::timeout && failure.code() != weft::errc::peer_lost) {
              sink.add(name + ": rank " + std::to_string(rank) + " threw " + failure.what());
            }
            if (transport.live() != 0) {
              sink.add(name + ": rank " + std::to_string(rank) + " left " +
                       std::to_string(transport.live()) + " requests pending after it threw");
            }
          }
        });
      }
      for (auto& thread : threads) thread.join();
      INFO(sink.summary());
      CHECK(sink.empty());
    }
  }
}

// The handshake path of direct's exchanges with everyone (off by default in process): every
// block of at least handshake_bytes waits for its receiver's zero-byte word. With 4 bytes, int32
// blocks of one element or more wait and empty ones (count 0, alltoallv's zero blocks) do not,
// so one call mixes both; the results must be those of every other path.
TEST_CASE("direct with the handshake on every block gives the same results", "[transport]") {
  for (int p : {3, 4, 5, 7}) {
    failures sink;
    auto settings = test_options(64);
    settings.handshake_bytes = 4;
    weft::inproc::run(
        p,
        [&](weft::communicator<weft::inproc::transport>& comm) {
          for (const std::size_t count : {std::size_t{0}, std::size_t{1},
                                          static_cast<std::size_t>(p + 1), std::size_t{1000}}) {
            allreduce_case<std::int32_t, weft::sum, weft::direct>(comm, sink, count, false,
                                                                  weft::sum{}, false);
            allreduce_case<std::int32_t, weft::sum, weft::direct>(comm, sink, count, true,
                                                                  weft::sum{}, false);
            reduce_scatter_case<std::int32_t, weft::direct>(comm, sink, count);
            allgather_case<std::int32_t, weft::direct>(comm, sink, count, false);
            allgather_case<std::int32_t, weft::direct>(comm, sink, count, true);
            allgatherv_case<std::int32_t, weft::direct>(comm, sink, count);
            alltoall_case<std::int32_t, weft::direct>(comm, sink, count);
            alltoallv_case<std::int32_t, weft::direct>(comm, sink, count);
          }
          if (comm.handshake_bytes() != 4) sink.add("handshake_bytes() is not the option's 4");
        },
        settings);
    INFO("ranks " << p << ": " << sink.summary());
    CHECK(sink.empty());
  }
}

TEST_CASE("the handshake's size: the option, else the transport's row, 0 meaning never",
          "[transport]") {
  weft::inproc::run(
      1,
      [](weft::communicator<weft::inproc::transport>& comm) {
        RANK_CHECK(comm.handshake_bytes() == weft::tuning::constants_for("inproc").handshake_bytes);
        auto settings = comm.settings();
        settings.handshake_bytes = 0;
        comm.set_settings(settings);
        RANK_CHECK(comm.handshake_bytes() == 0);
      },
      test_options());
  CHECK(weft::tuning::constants_for("tcp").handshake_bytes == std::size_t{64} << 10);
  CHECK(weft::tuning::constants_for("inproc").handshake_bytes == 0);
}
