// Stream-ordered ranks of one process (weft/stream/local_ranks.hpp) on host streams: the protocol
// of weft's GPU path (collectives that only enqueue, transfers matched on the host and run on
// carriers, flags, timed synchronize, abort) checked on CPU threads, so it is tested on every
// machine.
#include "../collective_cases.hpp"

#include <weft/stream/host_streams.hpp>
#include <weft/stream/local_ranks.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

using namespace weft_test;
using namespace std::chrono_literals;

namespace {

using backend = weft::stream::host_streams;
using ranks_t = weft::stream::local_ranks<backend>;
using stream_comm = weft::communicator<weft::stream::local_transport<backend>>;

std::vector<stream_comm> communicators_of(ranks_t& ranks, weft::options settings = test_options()) {
  std::vector<stream_comm> comms;
  for (int i = 0; i < ranks.size(); ++i) comms.emplace_back(ranks.endpoint(i), settings);
  return comms;
}

void synchronize_all(ranks_t& ranks) {
  for (int i = 0; i < ranks.size(); ++i) ranks.synchronize(i, 60s);
}

// NCCL's single-process loop: one host thread issues the allreduce on every rank in turn, and
// nothing is finished until each rank's stream is synchronized.
template <class T, class Op, class Algorithm>
void one_thread_allreduce(int p, std::size_t count, Op op, failures& sink) {
  ranks_t ranks({}, std::vector<int>(static_cast<std::size_t>(p), 0));
  auto comms = communicators_of(ranks);
  auto generate = [](int rank, std::size_t i) { return from_int<T>(small_value(rank, i)); };
  std::vector<std::vector<T>> send(static_cast<std::size_t>(p)), recv(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    send[static_cast<std::size_t>(r)] = values<T>(r, count);
    recv[static_cast<std::size_t>(r)].assign(count, T{});
  }
  for (int r = 0; r < p; ++r) {
    auto i = static_cast<std::size_t>(r);
    weft::allreduce(comms[i], std::span<const T>(send[i]), std::span<T>(recv[i]), op, Algorithm{});
  }
  synchronize_all(ranks);
  const auto want = reference<T>(p, count, op, generate);
  for (int r = 0; r < p; ++r) {
    check_bits<T>(
        sink,
        label<T>("one-thread allreduce", Algorithm::name, p, count, false, weft::op_name<Op>()), r,
        recv[static_cast<std::size_t>(r)], want);
  }
}

// Issues allreduce (Algorithm) on every rank of `comms` but `missing`, and returns what rank 0's
// synchronize says when it times out.
template <class Algorithm>
std::string timeout_without(std::vector<stream_comm>& comms, std::vector<std::vector<float>>& data,
                            int missing) {
  for (std::size_t r = 0; r < comms.size(); ++r) {
    if (static_cast<int>(r) != missing)
      weft::allreduce(comms[r], std::span<float>(data[r]), weft::sum{}, Algorithm{});
  }
  std::string said;
  try {
    weft::stream::synchronize(comms[0], 300ms);
  } catch (const weft::error& failure) {
    CHECK(failure.code() == weft::errc::timeout);
    said = failure.what();
  }
  return said;
}

}  // namespace

TEST_CASE(
    "stream: one thread issues allreduce on every rank in turn (NCCL's single-process loop)") {
  failures sink;
  for (int p = 1; p <= 5; ++p) {
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{65539}}) {
      for_each_algorithm<weft::ring, weft::double_binary_tree, weft::recursive_doubling,
                         weft::recursive_halving, weft::direct, weft::fused, weft::automatic>(
          [&](auto algorithm) {
            using A = typename decltype(algorithm)::type;
            one_thread_allreduce<float, weft::sum, A>(p, count, weft::sum{}, sink);
          });
    }
  }
  for_each_type<std::int8_t, std::uint16_t, std::int32_t, std::int64_t, double, weft::half,
                weft::bfloat16>([&](auto type) {
    using T = typename decltype(type)::type;
    one_thread_allreduce<T, weft::max, weft::ring>(4, 777, weft::max{}, sink);
    one_thread_allreduce<T, weft::min, weft::recursive_halving>(3, 777, weft::min{}, sink);
    one_thread_allreduce<T, weft::sum, weft::direct>(4, 777, weft::sum{}, sink);
    one_thread_allreduce<T, weft::prod, weft::fused>(5, 777, weft::prod{}, sink);
  });
  // Shares of at least 1 MiB: 2.8 MB on 3 ranks is three shares, the last one shorter.
  one_thread_allreduce<float, weft::sum, weft::fused>(3, 700001, weft::sum{}, sink);
  one_thread_allreduce<float, weft::avg, weft::fused>(4, 300000, weft::avg{}, sink);
  one_thread_allreduce<std::int16_t, weft::band, weft::fused>(2, 1048577, weft::band{}, sink);
  one_thread_allreduce<float, weft::avg, weft::ring>(4, 999, weft::avg{}, sink);
  one_thread_allreduce<std::uint32_t, weft::bxor, weft::double_binary_tree>(5, 999, weft::bxor{},
                                                                            sink);
  one_thread_allreduce<std::int64_t, weft::prod, weft::recursive_doubling>(3, 999, weft::prod{},
                                                                           sink);
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("stream: every collective and algorithm, a host thread per rank") {
  failures sink;
  for (int p = 1; p <= 5; ++p) {
    ranks_t ranks({}, std::vector<int>(static_cast<std::size_t>(p), 0));
    auto comms = communicators_of(ranks);
    const std::vector<std::size_t> counts = {0, 1, static_cast<std::size_t>(p + 1), 1000};
    std::vector<std::thread> threads;
    for (int r = 0; r < p; ++r) {
      threads.emplace_back(
          [&, r] { collective_slice(comms[static_cast<std::size_t>(r)], sink, counts); });
    }
    for (auto& thread : threads) thread.join();
    synchronize_all(ranks);
  }
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("stream: sends matched out of posting order do not deadlock the streams") {
  // Rank 1 posts its receives x then y; rank 0 sends y, waits for it, then sends x. Issued from
  // one thread, rank 0 first: every wait is enqueued before the other side has posted.
  ranks_t ranks({}, {0, 0});
  auto& t0 = ranks.endpoint(0);
  auto& t1 = ranks.endpoint(1);
  std::vector<int> x_out(1000, 7), y_out(1000, 9), x_in(1000, 0), y_in(1000, 0);
  {
    auto send_y = t0.send(1, std::as_bytes(std::span(y_out)), 2);
    t0.wait(send_y, weft::deadline_clock::now());
    auto send_x = t0.send(1, std::as_bytes(std::span(x_out)), 1);
    t0.wait(send_x, weft::deadline_clock::now());
    auto recv_x = t1.recv(0, std::as_writable_bytes(std::span(x_in)), 1);
    auto recv_y = t1.recv(0, std::as_writable_bytes(std::span(y_in)), 2);
    t1.wait(recv_x, weft::deadline_clock::now());
    t1.wait(recv_y, weft::deadline_clock::now());
  }
  ranks.synchronize(0, 10s);
  ranks.synchronize(1, 10s);
  CHECK(x_in == x_out);
  CHECK(y_in == y_out);
}

TEST_CASE(
    "stream: a rank that never issues its call is named by synchronize's timeout; abort releases "
    "the streams") {
  ranks_t ranks({}, {0, 0, 0});
  auto comms = communicators_of(ranks);
  std::vector<std::vector<float>> data(3, std::vector<float>(4096, 1.0f));
  const std::string said =
      timeout_without<weft::ring>(comms, data, 2);  // rank 2 never issues its allreduce
  INFO(said);
  CHECK(said.find("rank 0") != std::string::npos);
  CHECK(said.find("waits for rank") != std::string::npos);
  CHECK(said.find("allreduce") != std::string::npos);
  CHECK(said.find("algorithm ring") != std::string::npos);
  CHECK(said.find("step") != std::string::npos);

  weft::stream::abort(comms[1], "the job gave up on rank 2");
  for (int r = 0; r < 3; ++r) {
    std::string after;
    try {
      ranks.synchronize(r, 5s);  // drains (the flags were written) and reports the abort
    } catch (const weft::error& failure) {
      after = failure.what();
      CHECK(failure.code() == weft::errc::transport);
    }
    INFO(after);
    CHECK(after.find("aborted") != std::string::npos);
    CHECK(after.find("the job gave up on rank 2") != std::string::npos);
  }
  CHECK_THROWS_AS(weft::allreduce(comms[2], std::span<float>(data[2]), weft::sum{}), weft::error);
}

TEST_CASE("stream: sizes that differ are a mismatch error, and the waiting side is released") {
  ranks_t ranks({}, {0, 0});
  auto& t0 = ranks.endpoint(0);
  auto& t1 = ranks.endpoint(1);
  std::vector<std::byte> small(8), large(16);
  auto sent = t0.send(1, small, 5);
  t0.wait(sent, weft::deadline_clock::now());
  try {
    auto received = t1.recv(0, large, 5);
    FAIL("a receive of 16 bytes matched a send of 8");
  } catch (const weft::error& failure) {
    CHECK(failure.code() == weft::errc::mismatch);
    CHECK(std::string(failure.what()).find("sends 8 bytes to rank 1") != std::string::npos);
  }
  CHECK_THROWS_AS(ranks.synchronize(0, 5s), weft::error);  // released, and told why
}

TEST_CASE("stream: split and check mode say they need a host-completing transport") {
  ranks_t ranks({}, {0});
  auto comms = communicators_of(ranks);
  try {
    auto half = comms[0].split(0, 0);
    FAIL("split was made");
  } catch (const weft::error& failure) {
    CHECK(failure.code() == weft::errc::invalid_argument);
    CHECK(std::string(failure.what()).find("completes on the host") != std::string::npos);
  }
  weft::options checking = test_options();
  checking.check = true;
  comms[0].set_settings(checking);
  std::vector<float> data(4, 1.0f);
  CHECK_THROWS_AS(weft::allreduce(comms[0], std::span<float>(data), weft::sum{}), weft::error);
}

TEST_CASE(
    "stream: ranks destroyed with a call still waiting end (bounded), and free their streams") {
  const auto start = std::chrono::steady_clock::now();
  {
    ranks_t ranks({}, {0, 0});
    auto comms = communicators_of(ranks);
    std::vector<int> data(16, 1);
    weft::allreduce(comms[0], std::span<int>(data), weft::sum{},
                    weft::ring{});  // rank 1 never comes
    comms.clear();
  }
  CHECK(std::chrono::steady_clock::now() - start < 60s);
}

namespace {

// A non-commutative reduction: composing affine maps x -> m x + c in rank order.
struct affine {
  std::int64_t m = 1;
  std::int64_t c = 0;
};
struct compose {
  affine operator()(affine f, affine g) const { return {f.m * g.m, f.m * g.c + f.c}; }
};

}  // namespace

TEST_CASE(
    "stream: fused reduces in rank order, spread over shares, in place, for a non-commutative op") {
  for (int p : {1, 2, 5}) {
    ranks_t ranks({}, std::vector<int>(static_cast<std::size_t>(p), 0));
    auto comms = communicators_of(ranks);
    const std::size_t count = 200000;  // 3.2 MB: shares on every rank
    auto value = [](int rank, std::size_t i) {
      return affine{static_cast<std::int64_t>(rank % 3 + 1),
                    static_cast<std::int64_t>((i + 7 * rank) % 11)};
    };
    std::vector<std::vector<affine>> data(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      for (std::size_t i = 0; i < count; ++i)
        data[static_cast<std::size_t>(r)].push_back(value(r, i));
    }
    std::vector<weft::report> reports;
    for (int r = 0; r < p; ++r) {
      reports.push_back(weft::allreduce(comms[static_cast<std::size_t>(r)],
                                        std::span<affine>(data[static_cast<std::size_t>(r)]),
                                        compose{}, weft::fused{}));
    }
    synchronize_all(ranks);
    for (int r = 0; r < p; ++r) {
      INFO("p " << p << " rank " << r);
      CHECK(reports[static_cast<std::size_t>(r)].algorithm == "fused");
      CHECK(reports[static_cast<std::size_t>(r)].steps == 1);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i) {
        affine want = value(0, i);
        for (int q = 1; q < p; ++q) want = compose{}(want, value(q, i));
        const affine got = data[static_cast<std::size_t>(r)][i];
        wrong += (got.m != want.m || got.c != want.c) ? 1 : 0;
      }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("stream: automatic picks fused where the ranks run collectives whole") {
  ranks_t ranks({}, {0, 0, 0});
  auto comms = communicators_of(ranks);
  std::vector<std::vector<float>> data(3, std::vector<float>(1 << 20, 1.0f));
  for (int r = 0; r < 3; ++r) {
    for (std::size_t bytes : {std::size_t{8}, std::size_t{4} << 20}) {
      const auto report = weft::allreduce(
          comms[static_cast<std::size_t>(r)],
          std::span<float>(data[static_cast<std::size_t>(r)]).first(bytes / 4), weft::sum{});
      CHECK(report.algorithm == "fused");
    }
  }
  synchronize_all(ranks);
  CHECK(data[1][0] == 9.0f);  // the first 8 bytes took part in both calls: (1 * 3) * 3
  CHECK(data[2][100] == 3.0f);
}

TEST_CASE(
    "stream: fused names the rank that never issued its part; sizes that differ are a mismatch") {
  {
    ranks_t ranks({}, {0, 0, 0});
    auto comms = communicators_of(ranks);
    std::vector<std::vector<float>> data(3, std::vector<float>(1000, 1.0f));
    const std::string said = timeout_without<weft::fused>(comms, data, 1);
    INFO(said);
    CHECK(said.find("waits for rank(s) 1 to issue allreduce (algorithm fused)") !=
          std::string::npos);
    weft::stream::abort(comms[0], "rank 1 is gone");
    for (int r = 0; r < 3; ++r) CHECK_THROWS_AS(ranks.synchronize(r, 5s), weft::error);
  }
  {
    ranks_t ranks({}, {0, 0});
    auto comms = communicators_of(ranks);
    std::vector<float> small(10, 1.0f), large(12, 1.0f);
    weft::allreduce(comms[0], std::span<float>(small), weft::sum{}, weft::fused{});
    try {
      weft::allreduce(comms[1], std::span<float>(large), weft::sum{}, weft::fused{});
      FAIL("allreduce of 48 bytes met one of 40");
    } catch (const weft::error& failure) {
      CHECK(failure.code() == weft::errc::mismatch);
      CHECK(std::string(failure.what()).find("rank 0 posted allreduce of 40 bytes") !=
            std::string::npos);
    }
    CHECK_THROWS_AS(ranks.synchronize(0, 5s), weft::error);  // released, and told why
  }
}
