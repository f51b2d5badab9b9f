// One rank of the recovery tests (recovery.py starts the ranks): a loop of collectives over tcp or
// shm in which ranks die, revoke, or die during a shrink; the survivors shrink and go on, and
// every result is checked against the ranks still there.
//
//   recovery_ranks TRANSPORT STEPS [EVENT...]
//     TRANSPORT   tcp or shm
//     kill:R@S    rank R (as the job numbered it at start) is SIGKILLed a moment into step S, while
//                 its calls are in flight (four nonblocking allreduces per step)
//     shrinkkill:R@U  rank R is SIGKILLed U microseconds after it enters its first shrink
//     revoke:R@S  rank R revokes the world instead of making step S (nobody is lost: the shrink
//                 keeps every rank)
//     split       a communicator split from the world (two colors) must fail at once after the
//                 world is revoked, and the old world must refuse calls after the shrink
//
// Prints "recovered: R ranks in T ms (kill to first result)" after each shrink that followed a
// kill, and "finished: STEPS steps on K ranks, results right" at the end. Exit 0 when every check
// held.
#include <weft/nonblocking.hpp>
#include <weft/recovery.hpp>
#include <weft/transport/shm.hpp>
#include <weft/transport/tcp.hpp>
#include <weft/weft.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

struct event {
  std::string kind;  // kill, shrinkkill, revoke
  int rank = -1;
  long long when = 0;  // step, or microseconds
};

long long now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Dies now, saying when through `meeting` (the same steady clock on every process of this host:
// the survivors time the recovery from it).
[[noreturn]] void die(weft::bootstrap::store& meeting, int me) {
  meeting.set("test/killed-at/" + std::to_string(me), std::to_string(now_us()));
  std::raise(SIGKILL);
  std::abort();
}

// Dies `delay` from now, on a thread with a store connection of its own (the session's serves
// only the thread that uses the session).
void die_after(weft::bootstrap::store& meeting, int me, std::chrono::microseconds delay) {
  std::shared_ptr<weft::bootstrap::store> own =
      meeting.connector()(weft::deadline_clock::now() + 5s);
  std::thread([=] {
    std::this_thread::sleep_for(delay);
    die(*own, me);
  }).detach();
}

template <class Session>
int run(int steps, const std::vector<event>& events, bool split) {
  auto job = Session::from_environment();
  using comm_type = typename Session::communicator_type;
  const int me = job.comm().rank();
  comm_type* world = &job.comm();
  std::optional<comm_type> half;
  if (split) half.emplace(world->split(me % 2, me));
  comm_type* old_world = nullptr;
  bool right = true;
  long long killed_at = -1;  // of the last kill seen, until the first result after it (-1: none)
  int done = 0;
  bool shrunk_once = false, revoked_once = false;
  while (done < steps) {
    bool revoking = false, dying = false;
    for (const event& e : events) {
      if (e.rank != me || e.when != done) continue;
      dying = dying || e.kind == "kill";
      revoking = revoking || (e.kind == "revoke" && !revoked_once);
    }
    revoked_once = revoked_once || revoking;
    std::array<std::vector<float>, 4> values;
    for (std::size_t k = 0; k < values.size(); ++k)
      values[k].assign(4096 << k, static_cast<float>((me + 1) * (k + 1)));
    try {
      if (revoking) {
        std::printf("rank %d revokes the world at step %d\n", me, done);
        world->revoke();  // the others' calls end; this rank goes to shrink with them
        throw weft::error(weft::errc::revoked, "this rank revoked it");
      }
      std::vector<weft::request<typename Session::transport_type>> in_flight;
      for (auto& v : values)
        in_flight.push_back(weft::iallreduce(*world, std::span<float>(v), weft::sum{}));
      if (dying) {  // with its calls in flight, the first of them done
        in_flight.front().wait();
        die(*job.meeting(), me);
      }
      for (auto& request : in_flight) request.wait();
    } catch (const weft::error& failure) {
      std::printf("rank %d: step %d failed (%s): %s\n", me, done,
                  std::string(weft::to_string(failure.code())).c_str(), failure.what());
      std::fflush(stdout);
      const auto code = failure.code();
      if (code != weft::errc::peer_lost && code != weft::errc::revoked) right = false;
      world->revoke();
      if (half) {  // split from the world: revoked with it, at once
        const auto start = std::chrono::steady_clock::now();
        std::vector<float> probe(1000, 1.0f);
        try {
          weft::allreduce(*half, std::span<float>(probe), weft::sum{});
          std::printf("rank %d: the split communicator completed a call after the revoke\n", me);
          right = false;
        } catch (const weft::error& refused) {
          const auto took = std::chrono::steady_clock::now() - start;
          if (took > 1s) {
            std::printf("rank %d: the split communicator took %lld ms to fail\n", me,
                        static_cast<long long>(
                            std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
            right = false;
          }
        }
        half.reset();
      }
      for (const event& e : events) {
        if (e.kind == "shrinkkill" && e.rank == me && !shrunk_once)
          die_after(*job.meeting(), me, std::chrono::microseconds(e.when));
      }
      shrunk_once = true;
      const int before = world->size();
      old_world = world;
      world = &weft::shrink(*world);
      std::printf("rank %d: shrunk from %d to %d ranks (job ranks", me, before, world->size());
      for (const int member : job.members()) std::printf(" %d", member);
      std::printf(")\n");
      // The step is redone by every survivor: agree on the fewest done.
      int agreed = done;
      weft::allreduce(*world, std::span<int>(&agreed, 1), weft::min{});
      done = agreed;
      for (const event& e : events) {
        if (e.kind != "kill" && e.kind != "shrinkkill") continue;
        if (auto at = job.meeting()->look("test/killed-at/" + std::to_string(e.rank)))
          killed_at = std::max(killed_at, std::stoll(*at));
      }
      if (old_world != nullptr && split) {  // the old world stays revoked
        std::vector<float> probe(10, 1.0f);
        try {
          weft::allreduce(*old_world, std::span<float>(probe), weft::sum{});
          std::printf("rank %d: the old world completed a call after the shrink\n", me);
          right = false;
        } catch (const weft::error& refused) {
          if (refused.code() != weft::errc::revoked) {
            std::printf("rank %d: the old world refused with %s\n", me,
                        std::string(weft::to_string(refused.code())).c_str());
            right = false;
          }
        }
      }
      continue;
    }
    float members_sum = 0;
    for (const int member : job.members()) members_sum += static_cast<float>(member + 1);
    for (std::size_t k = 0; k < values.size(); ++k) {
      const float expected = members_sum * static_cast<float>(k + 1);
      for (const float x : values[k]) {
        if (x == expected) continue;
        std::printf("rank %d: step %d, call %zu: %g where %g was due\n", me, done, k,
                    static_cast<double>(x), static_cast<double>(expected));
        right = false;
        break;
      }
    }
    if (killed_at >= 0) {
      std::printf("recovered: %d ranks in %.1f ms (kill to first result)\n", world->size(),
                  static_cast<double>(now_us() - killed_at) / 1000.0);
      job.meeting()->set("test/recovered-by/" + std::to_string(me), "1");
      killed_at = -1;
    }
    ++done;
  }
  const weft::agreement verdict = weft::agree(*world, right ? 1 : 0);
  if (verdict.flag != 1) {
    std::printf("rank %d: results WRONG on some survivor\n", me);
    return 1;
  }
  std::printf("finished: %d steps on %d ranks, results right\n", done, world->size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: recovery_ranks tcp|shm STEPS [EVENT...]\n");
    return 2;
  }
  const std::string transport = argv[1];
  const int steps = std::atoi(argv[2]);
  std::vector<event> events;
  bool split = false;
  for (int i = 3; i < argc; ++i) {
    const std::string text = argv[i];
    if (text == "split") {
      split = true;
      continue;
    }
    const auto colon = text.find(':');
    const auto at = text.find('@');
    if (colon == std::string::npos || at == std::string::npos) {
      std::fprintf(stderr, "cannot read event %s\n", text.c_str());
      return 2;
    }
    events.push_back({text.substr(0, colon), std::atoi(text.substr(colon + 1, at).c_str()),
                      std::atoll(text.substr(at + 1).c_str())});
  }
  try {
    if (transport == "tcp") return run<weft::tcp::session>(steps, events, split);
    if (transport == "shm") return run<weft::shm::session>(steps, events, split);
    std::fprintf(stderr, "unknown transport %s\n", transport.c_str());
    return 2;
  } catch (const weft::error& failure) {
    std::printf("failed: %s\n", failure.what());
    return 1;
  }
}
