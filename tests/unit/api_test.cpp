// The public API around the algorithms: reports and selection, WEFT_ALGO, non-commutative ops,
// bitwise-identical floats, bad arguments, check mode, timeouts, failures, split and dup,
// the 16-bit types and send/recv. (No allocation in the steady state: allocation_test.cpp.)
#include "../scoped_environment.hpp"
#include "../support.hpp"

#include <weft/detail/lists.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>

using namespace weft_test;
using Catch::Matchers::Contains;

namespace {

// x -> m*x + c over wrapping uint32: composition is associative but not commutative.
struct affine {
  std::uint32_t m;
  std::uint32_t c;
};
struct compose {
  affine operator()(affine f, affine g) const { return {f.m * g.m, f.m * g.c + f.c}; }
};
static_assert(weft::reduction<compose, affine>);
static_assert(!weft::is_commutative_v<compose>);

affine affine_value(int rank, std::size_t i) {
  return {static_cast<std::uint32_t>(rank * 2 + 3 + i), static_cast<std::uint32_t>(rank * 7 + i)};
}

using scoped_env = weft_test::scoped_environment;

// Runs fn on p ranks and returns each rank's exception message ("" if none).
template <class Function>
std::vector<std::string> errors_on_ranks(int p, Function fn, weft::options settings) {
  std::vector<std::string> messages(static_cast<std::size_t>(p));
  std::vector<int> codes(static_cast<std::size_t>(p), -1);
  weft::inproc::run(
      p,
      [&](comm_t& comm) {
        try {
          fn(comm);
        } catch (const weft::error& failure) {
          messages[static_cast<std::size_t>(comm.rank())] = failure.what();
        }
      },
      settings);
  return messages;
}

}  // namespace

TEST_CASE("non-commutative reductions keep rank order", "[api]") {
  for (int p : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{100}}) {
      failures sink;
      std::vector<affine> want(count);
      for (std::size_t i = 0; i < count; ++i) {
        want[i] = affine_value(0, i);
        for (int q = 1; q < p; ++q) want[i] = compose{}(want[i], affine_value(q, i));
      }
      weft::inproc::run(
          p,
          [&](comm_t& comm) {
            std::vector<affine> in(count);
            for (std::size_t i = 0; i < count; ++i) in[i] = affine_value(comm.rank(), i);
            auto check = [&](const std::string& what, const std::vector<affine>& got) {
              for (std::size_t i = 0; i < count; ++i) {
                if (got[i].m != want[i].m || got[i].c != want[i].c) {
                  sink.add(what + " p=" + std::to_string(p) + " count=" + std::to_string(count) +
                           " rank " + std::to_string(comm.rank()) + " index " + std::to_string(i));
                  return;
                }
              }
            };
            std::vector<affine> out(count);
            weft::allreduce(comm, std::span<const affine>(in), std::span<affine>(out), compose{},
                            weft::recursive_doubling{});
            check("allreduce recursive_doubling", out);
            weft::allreduce(comm, std::span<const affine>(in), std::span<affine>(out), compose{},
                            weft::direct{});
            check("allreduce direct", out);
            weft::allreduce(comm, std::span<const affine>(in), std::span<affine>(out), compose{});
            check("allreduce automatic", out);
            const int root = p - 1;
            std::vector<affine> at_root(comm.rank() == root ? count : 0);
            weft::reduce(comm, std::span<const affine>(in), std::span<affine>(at_root), compose{},
                         root, weft::binomial_tree{});
            if (comm.rank() == root) check("reduce binomial_tree", at_root);
            // reduce_scatter: rank r gets block r of the reduction of everyone's p*count vector
            std::vector<affine> all(count * static_cast<std::size_t>(p));
            for (std::size_t i = 0; i < all.size(); ++i)
              all[i] = affine_value(comm.rank(), i % count);
            std::vector<affine> mine(count);
            weft::reduce_scatter(comm, std::span<const affine>(all), std::span<affine>(mine),
                                 compose{}, weft::direct{});
            check("reduce_scatter direct", mine);
          },
          test_options(64));
      INFO(sink.summary());
      RANK_CHECK(sink.empty());
    }
  }
}

TEST_CASE("random floats give bitwise-identical results on every rank", "[api]") {
  for (int p : {2, 3, 5, 8, 13}) {
    const std::size_t count = 4099;
    std::vector<std::vector<std::vector<float>>> results(
        6, std::vector<std::vector<float>>(static_cast<std::size_t>(p)));
    weft::inproc::run(
        p,
        [&](comm_t& comm) {
          std::mt19937 random(static_cast<unsigned>(comm.rank() * 7919 + 1));
          std::uniform_real_distribution<float> spread(-1e3f, 1e3f);
          std::vector<float> in(count);
          for (auto& value : in)
            value = spread(random) * std::exp2(static_cast<float>(random() % 20) - 10.0f);
          auto run_one = [&](std::size_t slot, auto algorithm) {
            std::vector<float> out(count);
            weft::allreduce(comm, std::span<const float>(in), std::span<float>(out), weft::sum{},
                            algorithm);
            results[slot][static_cast<std::size_t>(comm.rank())] = out;
          };
          run_one(0, weft::ring{});
          run_one(1, weft::double_binary_tree{});
          run_one(2, weft::recursive_doubling{});
          run_one(3, weft::recursive_halving{});
          run_one(4, weft::direct{});
          run_one(5, weft::automatic{});
        },
        test_options(1024));
    for (std::size_t slot = 0; slot < results.size(); ++slot) {
      for (int q = 1; q < p; ++q) {
        INFO("algorithm slot " << slot << " p=" << p << " rank " << q);
        RANK_CHECK(std::memcmp(results[slot][0].data(),
                               results[slot][static_cast<std::size_t>(q)].data(),
                               count * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("each collective reports what ran", "[api]") {
  weft::inproc::run(4, [&](comm_t& comm) {
    std::vector<float> data(1000, 1.0f);
    const auto ring = weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
    if (comm.rank() == 0) {
      RANK_CHECK(ring.algorithm == "ring");
      RANK_CHECK(ring.collective == "allreduce");
      RANK_CHECK(ring.steps == 6);          // 2(p-1)
      RANK_CHECK(ring.bytes_sent == 6000);  // 2(p-1)/p * 4000 bytes
    }
    const auto tree = weft::broadcast(comm, std::span<float>(data), 0, weft::binomial_tree{});
    if (comm.rank() == 0) {
      RANK_CHECK(tree.steps == 2);  // the root sends to 2 children
      RANK_CHECK(tree.bytes_sent == 8000);
    }
    const auto barrier = weft::barrier(comm);
    if (comm.rank() == 0) RANK_CHECK(barrier.algorithm == "dissemination");
  });
}

TEST_CASE("automatic picks by message size and the same algorithm on every rank", "[api]") {
  std::vector<std::string> small(8), large(8);
  weft::inproc::run(8, [&](comm_t& comm) {
    std::vector<float> one(2, 1.0f);
    small[static_cast<std::size_t>(comm.rank())] =
        std::string(weft::allreduce(comm, std::span<float>(one)).algorithm);
    std::vector<float> big(std::size_t{1} << 21, 1.0f);
    large[static_cast<std::size_t>(comm.rank())] =
        std::string(weft::allreduce(comm, std::span<float>(big)).algorithm);
    RANK_CHECK(big[12345] == 8.0f);
  });
  for (int r = 1; r < 8; ++r) {
    RANK_CHECK(small[static_cast<std::size_t>(r)] == small[0]);
    RANK_CHECK(large[static_cast<std::size_t>(r)] == large[0]);
  }
  RANK_CHECK((small[0] == "direct" || small[0] == "recursive_doubling"));
  RANK_CHECK(
      (large[0] == "ring" || large[0] == "recursive_halving" || large[0] == "double_binary_tree"));
}

TEST_CASE("a reduction's pieces follow chunk_bytes where the transport measured none", "[api]") {
  REQUIRE(weft::tuning::constants_for("inproc").reduce_chunk_bytes == 0);
  auto settings = test_options(4096);
  settings.reduce_chunk_bytes = 0;
  weft::inproc::run(
      2,
      [&](comm_t& comm) {
        RANK_CHECK(comm.reduce_chunk_bytes(4) == 4096);
        RANK_CHECK(comm.pipeline_bytes(weft::collective::allreduce) == 4096);
      },
      settings);
  {
    scoped_env pieces("WEFT_REDUCE_CHUNK_BYTES", "65536");
    CHECK(weft::options::from_environment().reduce_chunk_bytes == 65536);
  }
  CHECK(weft::options::from_environment().reduce_chunk_bytes == 0);
}

TEST_CASE("a settings list gives its items in order and keeps the empty ones", "[api]") {
  std::string_view list = "allreduce=ring,,cubic";
  CHECK(weft::detail::next_item(list) == "allreduce=ring");
  CHECK(list == ",cubic");
  CHECK(weft::detail::next_item(list).empty());
  CHECK(weft::detail::next_item(list) == "cubic");
  CHECK(list.empty());
  std::string_view one = "reno";
  CHECK(weft::detail::next_item(one) == "reno");
  CHECK(one.empty());
}

TEST_CASE("WEFT_ALGO overrides automatic, and refuses what cannot run", "[api]") {
  {
    scoped_env env("WEFT_ALGO", "broadcast=ring,allreduce=recursive_halving");
    weft::inproc::run(3, [&](comm_t& comm) {
      std::vector<int> data(10, comm.rank());
      const auto reduced = weft::allreduce(comm, std::span<int>(data));
      RANK_CHECK(reduced.algorithm == "recursive_halving");
      RANK_CHECK(data[3] == 3);
      const auto broadcast = weft::broadcast(comm, std::span<int>(data), 1);
      RANK_CHECK(broadcast.algorithm == "ring");
    });
  }
  {
    scoped_env env("WEFT_ALGO", "allreduce=bruck");
    auto messages = errors_on_ranks(
        2,
        [](comm_t& comm) {
          std::vector<int> data(10, 1);
          weft::allreduce(comm, std::span<int>(data));
        },
        test_options());
    for (const auto& message : messages) {
      CHECK_THAT(message,
                 Contains("invalid_argument") && Contains("'bruck'") && Contains("choose one of"));
    }
  }
  {
    scoped_env env("WEFT_ALGO", "allreduce=ring");
    auto messages = errors_on_ranks(
        2,
        [](comm_t& comm) {
          std::vector<affine> data(3, affine{1, 1});
          weft::allreduce(comm, std::span<affine>(data), compose{});
        },
        test_options());
    for (const auto& message : messages) CHECK_THAT(message, Contains("non-commutative"));
  }
}

TEST_CASE("bad arguments throw invalid_argument before anything is sent", "[api][errors]") {
  auto expect_invalid = [](auto&& call, const char* fragment) {
    auto messages = errors_on_ranks(
        3, [&](comm_t& comm) { call(comm); }, test_options());
    for (const auto& message : messages) {
      CHECK_THAT(message, Contains("invalid_argument") && Contains(fragment) &&
                              Contains("nothing was sent"));
    }
  };
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> mine(4), all(11);
        weft::allgather(comm, std::span<const int>(mine), std::span<int>(all));
      },
      "allgather: the output has 11 elements but must have 12");
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> data(4);
        weft::broadcast(comm, std::span<int>(data), 3);
      },
      "root 3 is not a rank");
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> data(4);
        weft::reduce(comm, std::span<int>(data), weft::sum{}, -1);
      },
      "root -1");
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> buffer(12);
        weft::alltoall(comm, std::span<const int>(buffer).first(9),
                       std::span<int>(buffer).subspan(3));
      },
      "overlap");
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> in(10), out(10);
        weft::alltoall(comm, std::span<const int>(in), std::span<int>(out));
      },
      "not a multiple");
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> in(5), out(4);
        weft::allreduce(comm, std::span<const int>(in), std::span<int>(out));
      },
      "the output has 4 elements but must have 5");
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> in(6), out(2);
        std::vector<std::size_t> counts = {2, 2};
        weft::alltoallv(comm, std::span<const int>(in), std::span<const std::size_t>(counts),
                        std::span<int>(out), std::span<const std::size_t>(counts));
      },
      "in_counts has 2 elements but must have 3");
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> out(2);
        weft::send(comm, std::span<const int>(out), 3);
      },
      "send: peer 3 is not a rank");
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> in(2);
        weft::recv(comm, std::span<int>(in), -2);
      },
      "recv: peer -2 is not a rank");
  expect_invalid(
      [](comm_t& comm) {
        std::vector<int> out(2);
        weft::send(comm, std::span<const int>(out), (comm.rank() + 1) % 3, -1);
      },
      "send: tag -1 is negative");

  // After rejected calls on every rank, the communicator still works: nothing was sent.
  weft::inproc::run(
      3,
      [](comm_t& comm) {
        std::vector<int> mine(4, comm.rank()), all(11);
        bool rejected = false;
        try {
          weft::allgather(comm, std::span<const int>(mine), std::span<int>(all));
        } catch (const weft::error&) {
          rejected = true;
        }
        RANK_CHECK(rejected);
        std::vector<int> data(4, 1);
        weft::allreduce(comm, std::span<int>(data));
        RANK_CHECK(data[0] == 3);
      },
      test_options());
}

TEST_CASE("check mode turns mismatched calls into mismatch errors on every rank", "[api][errors]") {
  auto settings = test_options();
  settings.check = true;
  settings.timeout = std::chrono::seconds(10);
  auto expect_mismatch = [&](auto&& call, const char* fragment) {
    auto messages = errors_on_ranks(
        3, [&](comm_t& comm) { call(comm); }, settings);
    for (const auto& message : messages) {
      INFO(message);
      CHECK_THAT(message, Contains("mismatch") && Contains(fragment));
    }
    for (const auto& message : messages) RANK_CHECK(message == messages[0]);
  };
  expect_mismatch(
      [](comm_t& comm) {  // different collectives
        std::vector<float> data(8, 1.0f);
        if (comm.rank() == 2)
          weft::broadcast(comm, std::span<float>(data), 0);
        else
          weft::allreduce(comm, std::span<float>(data));
      },
      "rank 2 called broadcast(count 8, float32, root 0");
  expect_mismatch(
      [](comm_t& comm) {  // different counts
        std::vector<float> data(comm.rank() == 1 ? 9 : 8, 1.0f);
        weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
      },
      "count 9");
  expect_mismatch(
      [](comm_t& comm) {  // different types
        std::vector<double> wide(8, 1.0);
        std::vector<float> narrow(8, 1.0f);
        if (comm.rank() == 1)
          weft::allreduce(comm, std::span<double>(wide), weft::sum{}, weft::ring{});
        else
          weft::allreduce(comm, std::span<float>(narrow), weft::sum{}, weft::ring{});
      },
      "float64");
  expect_mismatch(
      [](comm_t& comm) {  // different ops
        std::vector<int> data(8, 1);
        if (comm.rank() == 2)
          weft::allreduce(comm, std::span<int>(data), weft::max{}, weft::ring{});
        else
          weft::allreduce(comm, std::span<int>(data), weft::sum{}, weft::ring{});
      },
      "max");
  expect_mismatch(
      [](comm_t& comm) {  // different roots
        std::vector<int> data(8, 1);
        weft::broadcast(comm, std::span<int>(data), comm.rank() == 0 ? 1 : 0,
                        weft::binomial_tree{});
      },
      "root 1");
  expect_mismatch(
      [](comm_t& comm) {  // alltoallv counts that do not pair up
        const std::size_t p = 3;
        std::vector<std::size_t> in_counts(p, 2), out_counts(p, 2);
        if (comm.rank() == 1) out_counts[0] = 3;
        std::vector<int> in(6), out(comm.rank() == 1 ? 7 : 6);
        weft::alltoallv(comm, std::span<const int>(in), std::span<const std::size_t>(in_counts),
                        std::span<int>(out), std::span<const std::size_t>(out_counts));
      },
      "rank 0 sends 2 elements to rank 1, which expects 3");

  expect_mismatch(
      [](comm_t& comm) {  // allgatherv counts that disagree
        std::vector<std::size_t> counts = {1, 2, 3};
        if (comm.rank() == 2) counts = {4, 2, 0};  // same total, different split
        std::vector<int> mine(counts[static_cast<std::size_t>(comm.rank())]), all(6);
        weft::allgatherv(comm, std::span<const int>(mine), std::span<int>(all),
                         std::span<const std::size_t>(counts), weft::ring{});
      },
      "rank 2 sends 0 elements to rank 0, which expects 3");

  // Matching calls pass the check and run.
  weft::inproc::run(
      3,
      [](comm_t& comm) {
        std::vector<int> data(5, 2);
        weft::allreduce(comm, std::span<int>(data));
        RANK_CHECK(data[4] == 6);
        std::vector<std::size_t> counts = {1, 2, 3};
        std::vector<int> mine(counts[static_cast<std::size_t>(comm.rank())], comm.rank()), all(6);
        weft::allgatherv(comm, std::span<const int>(mine), std::span<int>(all),
                         std::span<const std::size_t>(counts), weft::ring{});
        RANK_CHECK((all == std::vector<int>{0, 1, 1, 2, 2, 2}));
      },
      settings);
}

TEST_CASE("a rank that never calls makes the others time out, naming everything", "[api][errors]") {
  auto settings = test_options();
  settings.timeout = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> after(3);
  auto messages = errors_on_ranks(
      3,
      [&](comm_t& comm) {
        if (comm.rank() == 2) return;  // never calls
        std::vector<float> data(100, 1.0f);
        try {
          weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
        } catch (const weft::error&) {
          try {  // the communicator now refuses further calls
            weft::barrier(comm);
          } catch (const weft::error& refused) {
            after[static_cast<std::size_t>(comm.rank())] = refused.what();
          }
          throw;
        }
      },
      settings);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  RANK_CHECK(elapsed < std::chrono::seconds(5));
  for (int r = 0; r < 2; ++r) {
    const auto& message = messages[static_cast<std::size_t>(r)];
    INFO(message);
    // (the rank that timed out first tells the other, which names it: "timed out waiting for")
    CHECK_THAT(message, (Contains("timeout") || Contains("timed out")) &&
                            Contains("rank " + std::to_string(r)) && Contains("rank 2") &&
                            Contains("allreduce") && Contains("algorithm ring") &&
                            Contains("step"));
    CHECK_THAT(after[static_cast<std::size_t>(r)],
               Contains("refuses barrier") && Contains("build a new communicator"));
  }
  RANK_CHECK(messages[2].empty());
}

TEST_CASE("a rank that fails makes the others fail at once with peer_lost", "[api][errors]") {
  auto settings = test_options();
  settings.timeout = std::chrono::seconds(30);
  std::vector<std::string> messages(4);
  const auto start = std::chrono::steady_clock::now();
  try {
    weft::inproc::run(
        4,
        [&](comm_t& comm) {
          if (comm.rank() == 3) throw std::runtime_error("rank 3 ran out of memory");
          std::vector<float> data(100, 1.0f);
          try {
            weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
          } catch (const weft::error& failure) {
            messages[static_cast<std::size_t>(comm.rank())] = failure.what();
            throw;
          }
        },
        settings);
    FAIL("run should rethrow the failing rank's exception");
  } catch (const std::runtime_error& first) {
    CHECK_THAT(std::string(first.what()), Contains("rank 3 ran out of memory"));
  }
  RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  for (int r = 0; r < 3; ++r) {
    CHECK_THAT(messages[static_cast<std::size_t>(r)],
               Contains("peer_lost") && Contains("rank 3 failed"));
  }
}

TEST_CASE("split groups run collectives concurrently without mixing messages", "[api]") {
  failures sink;
  weft::inproc::run(8, [&](comm_t& world) {
    const int r = world.rank();
    // 8 ranks as tensor-parallel groups of 4 x pipeline-parallel groups of 2
    auto tensor = world.split(r / 4, r);
    auto pipeline = world.split(r % 4, -r);  // keys reverse the order
    if (tensor.size() != 4 || tensor.rank() != r % 4) sink.add("tensor group shape");
    if (pipeline.size() != 2 || pipeline.rank() != (r < 4 ? 1 : 0))
      sink.add("pipeline group shape");
    for (int round = 0; round < 20; ++round) {
      std::vector<int> a(37, r + round), b(37, r * 10);
      weft::allreduce(tensor, std::span<int>(a), weft::sum{}, weft::ring{});
      weft::allreduce(pipeline, std::span<int>(b), weft::sum{}, weft::recursive_doubling{});
      const int base = (r / 4) * 4;
      const int want_a = 4 * base + 6 + 4 * round;
      const int want_b = 10 * (r % 4) + 10 * (r % 4 + 4);
      if (a[36] != want_a) sink.add("tensor allreduce round " + std::to_string(round));
      if (b[0] != want_b) sink.add("pipeline allreduce round " + std::to_string(round));
    }
    auto copy = world.dup();
    std::vector<int> x(3, 1);
    weft::allreduce(copy, std::span<int>(x));
    weft::allreduce(world, std::span<int>(x));
    if (x[0] != 64) sink.add("dup");
  });
  INFO(sink.summary());
  RANK_CHECK(sink.empty());
}

TEST_CASE("send and recv with user tags, including to self", "[api]") {
  weft::inproc::run(
      3,
      [](comm_t& comm) {
        const int r = comm.rank();
        const int next = (r + 1) % 3;
        const int previous = (r + 2) % 3;
        std::vector<int> out = {r, r * 2}, in(2);
        if (r % 2 == 0) {
          weft::send(comm, std::span<const int>(out), next, 7);
          weft::recv(comm, std::span<int>(in), previous, 7);
        } else {
          weft::recv(comm, std::span<int>(in), previous, 7);
          weft::send(comm, std::span<const int>(out), next, 7);
        }
        RANK_CHECK(in[0] == previous);
        RANK_CHECK(in[1] == previous * 2);
      },
      test_options());
}

TEST_CASE("send and recv between two ranks leave the others' collectives in step", "[api]") {
  // Only ranks 0 and 1 make the point-to-point calls; the collectives after them must still
  // pair every rank's calls, and the flight records number the collectives alike everywhere.
  weft::inproc::run(
      3,
      [](comm_t& comm) {
        const int r = comm.rank();
        std::vector<int> data(4, r + 1);
        weft::allreduce(comm, std::span<int>(data), weft::sum{}, weft::ring{});
        if (r == 0) weft::send(comm, std::span<const int>(data), 1, 5);
        if (r == 1) weft::recv(comm, std::span<int>(data), 0, 5);
        std::vector<int> swapped(data.size(), -1);
        if (r == 1)
          weft::sendrecv(comm, std::span<const int>(data), 0, std::span<int>(swapped), 0, 6);
        if (r == 0)
          weft::sendrecv(comm, std::span<const int>(data), 1, std::span<int>(swapped), 1, 6);
        if (r < 2) RANK_CHECK(swapped[0] == 6);
        weft::allreduce(comm, std::span<int>(data), weft::sum{}, weft::ring{});
        RANK_CHECK(data[0] == 18);
        weft::broadcast(comm, std::span<int>(data), 2);
        RANK_CHECK(data[3] == 18);
        const auto kept = comm.recorder()->calls();
        RANK_CHECK(kept.back().number == 3);
        RANK_CHECK(kept.back().signature.kind == weft::collective::broadcast);
      },
      test_options());
}

TEST_CASE("sendrecv shifts around a ring in one call and checks its arguments", "[api]") {
  for (int p : {1, 2, 5}) {
    weft::inproc::run(
        p,
        [p](comm_t& comm) {
          const int r = comm.rank();
          const int next = (r + 1) % p;
          const int previous = (r + p - 1) % p;
          std::vector<double> out(1000), in(1000, -1.0);
          for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = r * 10000.0 + static_cast<double>(i);
          const auto done = weft::sendrecv(comm, std::span<const double>(out), next,
                                           std::span<double>(in), previous, 3);
          RANK_CHECK(done.algorithm == "direct");
          for (std::size_t i = 0; i < in.size(); ++i)
            RANK_CHECK(in[i] == previous * 10000.0 + static_cast<double>(i));
          // Bad peers and overlapping buffers are refused before anything is posted.
          auto refused = [&](auto&& call) {
            try {
              call();
            } catch (const weft::error& failure) {
              return failure.code() == weft::errc::invalid_argument &&
                     std::string(failure.what()).find("sendrecv") != std::string::npos;
            }
            return false;
          };
          RANK_CHECK(refused([&] {
            weft::sendrecv(comm, std::span<const double>(out), p, std::span<double>(in), previous);
          }));
          RANK_CHECK(refused([&] {
            weft::sendrecv(comm, std::span<const double>(out), next, std::span<double>(in), -1);
          }));
          RANK_CHECK(refused([&] {
            weft::sendrecv(comm, std::span<const double>(out), next, std::span<double>(out),
                           previous);
          }));
          // The world is still usable after the refusals.
          std::vector<int> one(1, 1);
          weft::allreduce(comm, std::span<int>(one));
          RANK_CHECK(one[0] == p);
        },
        test_options());
  }
}

TEST_CASE("bfloat16 and half round to nearest even", "[types]") {
  CHECK(weft::bfloat16(1.0f).bits == 0x3f80);
  CHECK(weft::bfloat16(-2.0f).bits == 0xc000);
  CHECK(float(weft::bfloat16::from_bits(0x3f81)) == 1.0078125f);
  CHECK(weft::bfloat16(1.00390625f).bits == 0x3f80);  // halfway, rounds to even
  CHECK(weft::bfloat16(1.01171875f).bits == 0x3f82);  // halfway, rounds to even (up)
  CHECK(weft::half(1.0f).bits == 0x3c00);
  CHECK(weft::half(0.1f).bits == 0x2e66);
  CHECK(weft::half(65504.0f).bits == 0x7bff);
  CHECK(weft::half(65520.0f).bits == 0x7c00);            // rounds up to infinity
  CHECK(weft::half(0x1p-24f).bits == 0x0001);            // smallest subnormal
  CHECK(weft::half(0x1p-25f).bits == 0x0000);            // halfway to zero, rounds to even
  CHECK(weft::half(-0x1p-14f).bits == 0x8400);           // smallest normal
  for (std::uint32_t bits = 0; bits < 0x7c00; ++bits) {  // every finite half survives a round trip
    const auto value = weft::half::from_bits(static_cast<std::uint16_t>(bits));
    REQUIRE(weft::half(float(value)).bits == bits);
  }
  weft::inproc::run(5, [](comm_t& comm) {
    std::vector<weft::half> data(33, weft::half(0.5f * static_cast<float>(comm.rank())));
    weft::allreduce(comm, std::span<weft::half>(data), weft::sum{}, weft::ring{});
    RANK_CHECK(float(data[32]) == 5.0f);
  });
}

TEST_CASE("double binary tree: two valid trees, leaves of one are inner nodes of the other",
          "[api]") {
  for (int p = 1; p <= 64; ++p) {
    for (int which = 0; which < 2; ++which) {
      int roots = 0;
      for (int r = 0; r < p; ++r) {
        const auto node = weft::double_binary_tree::tree(which, p, r);
        if (node.parent < 0) {
          ++roots;
          continue;
        }
        REQUIRE(node.parent < p);
        const auto parent = weft::double_binary_tree::tree(which, p, node.parent);
        INFO("p=" << p << " tree " << which << " rank " << r);
        RANK_CHECK((parent.children[0] == r || parent.children[1] == r));
      }
      RANK_CHECK(roots == 1);
    }
  }
}
