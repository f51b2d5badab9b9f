// Survive a lost rank: a loop of allreduces over TCP in which ranks are killed (SIGKILL, in the
// middle of a step); the survivors revoke the communicator, shrink it to themselves, agree on
// where to go on from, and finish. Every step's result is checked.
//
//   weft-run -n 4 --keep-going ./resilient_loop                   # rank 3 is killed at step 20
//   weft-run -n 8 --keep-going ./resilient_loop 60 0@10 5@20 6@20 # rank 0 at step 10, 5 and 6 at
//   20
//
// (weft-run --keep-going lets the others go on when a rank is killed, and has the ranks meet
// through its file store, which outlives any rank; rank 0's TCP store would go with rank 0.)
//
// In each step every rank adds (its rank when the job started + 1) times a pattern into a vector,
// so every element holds a known sum over the ranks still there (job.members() says which). The
// model's state is the running total of those sums. A step that failed on some ranks may have
// completed on others (a rank that had every piece it needed when the victim died): after the
// shrink the survivors take the smallest number of steps done (an allreduce on the new world) and
// the ranks ahead roll back one step.
#include <weft/recovery.hpp>
#include <weft/transport/tcp.hpp>
#include <weft/weft.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

struct death {
  int rank = -1;  // as the job numbered it at start
  int step = -1;
};

// "R@S": rank R dies during step S.
std::vector<death> deaths_from(int argc, char** argv) {
  std::vector<death> out;
  for (int i = 2; i < argc; ++i) {
    const std::string text = argv[i];
    const auto at = text.find('@');
    if (at == std::string::npos) continue;
    out.push_back({std::atoi(text.substr(0, at).c_str()), std::atoi(text.substr(at + 1).c_str())});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto job = weft::tcp::session::from_environment();
    const int steps = argc > 1 ? std::atoi(argv[1]) : 40;
    std::vector<death> deaths = deaths_from(argc, argv);
    if (argc <= 2 && job.comm().size() > 1) deaths.push_back({job.comm().size() - 1, 20});
    const int me = job.members()[static_cast<std::size_t>(job.comm().rank())];

    weft::communicator<weft::tcp::transport>* world = &job.comm();
    std::vector<float> values(1 << 16);
    double total = 0, before = 0;  // the state, and the state one step back
    int done = 0;
    bool right = true;
    while (done < steps) {
      for (const death& d : deaths) {
        if (d.rank == me && d.step == done) {  // this rank dies a moment into the step
          std::thread([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            std::raise(SIGKILL);
          }).detach();
        }
      }
      for (std::size_t i = 0; i < values.size(); ++i)
        values[i] = static_cast<float>((me + 1) * (1 + i % 5));
      try {
        weft::allreduce(*world, std::span<float>(values), weft::sum{});
      } catch (const weft::error& failure) {  // peer_lost, revoked, or timeout
        std::printf("rank %d (job rank %d): step %d failed: %s\n", world->rank(), me, done,
                    failure.what());
        std::fflush(stdout);
        world->revoke();  // every rank's calls end, whether or not it saw the failure
        const auto start = std::chrono::steady_clock::now();
        world = &weft::shrink(*world);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        // Where to go on from: the fewest steps any survivor completed.
        int agreed = done;
        weft::allreduce(*world, std::span<int>(&agreed, 1), weft::min{});
        if (done > agreed) {
          total = before;
          done = agreed;
        }
        std::printf("rank %d (job rank %d): shrunk to %d ranks in %.1f ms; going on from step %d\n",
                    world->rank(), me, world->size(), ms, done);
        continue;
      }
      float members_sum = 0;  // what every element holds: the sum over the ranks still here
      for (const int member : job.members()) members_sum += static_cast<float>(member + 1);
      for (std::size_t i = 0; i < values.size(); ++i)
        right = right && values[i] == members_sum * static_cast<float>(1 + i % 5);
      before = total;
      total += values.front();
      ++done;
    }
    // A fault-tolerant verdict: the AND of every survivor's checks, the same on each.
    const weft::agreement verdict = weft::agree(*world, right ? 1 : 0);
    std::printf("rank %d of %d (job rank %d): %d steps, total %.0f, every survivor's results %s\n",
                world->rank(), world->size(), me, done, total,
                verdict.flag == 1 ? "right" : "WRONG");
    return verdict.flag == 1 ? 0 : 1;
  } catch (const weft::error& failure) {
    std::fprintf(stderr, "%s\n", failure.what());
    return 1;
  }
}
