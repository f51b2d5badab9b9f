// The bootstrap (bootstrap/tcp and include/weft/bootstrap): the TCP store rank 0 serves, its
// client, the file store, and the launch read from every launcher's environment variables.
#include "../scoped_environment.hpp"

#include <weft/bootstrap/environment.hpp>
#include <weft/bootstrap/failure_watch.hpp>
#include <weft/bootstrap/file_store.hpp>
#include <weft/bootstrap/pmi_meeting.hpp>
#include <weft/bootstrap/rendezvous.hpp>
#include <weft/bootstrap/secret.hpp>
#include <weft/bootstrap/tcp_meeting.hpp>
#include <weft/bootstrap/tcp_store.hpp>

#include <catch2/catch.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using environment = weft_test::clean_environment;

TEST_CASE("the tcp store serves set and get, times out, and drops bad clients",
          "[bootstrap][store]") {
  weft::bootstrap::tcp_store_server server("127.0.0.1", 0, "s");
  weft::bootstrap::tcp_store a("127.0.0.1", server.port(), "s", weft::deadline_clock::now() + 5s);
  weft::bootstrap::tcp_store b("127.0.0.1", server.port(), "s", weft::deadline_clock::now() + 5s);
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    a.set("key/with/slashes", std::string(100000, 'v'));
  });
  auto value = b.get("key/with/slashes", weft::deadline_clock::now() + 5s);
  later.join();
  REQUIRE(value);
  CHECK(value->size() == 100000);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(b.get("never", weft::deadline_clock::now() + 200ms));
  CHECK(std::chrono::steady_clock::now() - start < 2s);

  // Noise at the store: dropped, and the store still serves.
  boost::asio::io_context io;
  std::mt19937 random(7);
  for (int i = 0; i < 50; ++i) {
    boost::asio::ip::tcp::socket socket(io);
    boost::system::error_code ignored;
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()}, ignored);
    std::vector<unsigned char> noise(1 + random() % 100);
    for (auto& c : noise) c = static_cast<unsigned char>(random());
    if (i % 2 == 0) std::memcpy(noise.data(), "WEFTSTOR", std::min<std::size_t>(8, noise.size()));
    boost::asio::write(socket, boost::asio::buffer(noise), ignored);
  }
  CHECK_THROWS_WITH(weft::bootstrap::tcp_store("127.0.0.1", server.port(), "wrong",
                                               weft::deadline_clock::now() + 5s),
                    Catch::Contains("WEFT_SECRET"));
  a.set("after", "noise");
  CHECK(*b.get("after", weft::deadline_clock::now() + 5s) == "noise");
  CHECK(server.rejected() >= 1);
}

TEST_CASE("the store client gives up on an absent store with a timeout", "[bootstrap][store]") {
  unsigned short unused = 0;
  {
    weft::bootstrap::tcp_store_server probe("127.0.0.1", 0, "");
    unused = probe.port();
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    weft::bootstrap::tcp_store client("127.0.0.1", unused, "", weft::deadline_clock::now() + 500ms);
    FAIL("connected to nothing");
  } catch (const weft::error& failure) {
    CHECK(failure.code() == weft::errc::timeout);
    CHECK_THAT(failure.what(), Catch::Contains("could not reach the tcp store"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

TEST_CASE("a store host that does not resolve is said at once, not waited out",
          "[bootstrap][store]") {
  // .invalid never resolves (RFC 2606). Where the name service answers, that is known at once;
  // where it does not answer at all, the client retries and then says it could not resolve.
  const auto start = std::chrono::steady_clock::now();
  try {
    weft::bootstrap::tcp_store client("no-such-host.invalid", 29500, "",
                                      weft::deadline_clock::now() + 20s);
    FAIL("resolved no-such-host.invalid");
  } catch (const weft::error& failure) {
    INFO(failure.what());
    CHECK_THAT(failure.what(),
               Catch::Contains("no-such-host.invalid") && Catch::Contains("resolve"));
    if (failure.code() == weft::errc::invalid_argument) {
      CHECK(std::chrono::steady_clock::now() - start < 10s);
    } else {
      CHECK(failure.code() == weft::errc::timeout);
    }
  }
}

namespace {

// claim sets a key only once; a get waiting on the key is answered by the claim. (A store client
// serves one thread: the waiter has its own.)
void claims_once(weft::bootstrap::store& first, weft::bootstrap::store& second,
                 weft::bootstrap::store& third) {
  std::optional<std::string> seen;
  std::thread waiter([&] { seen = third.get("claimed", weft::deadline_clock::now() + 10s); });
  std::this_thread::sleep_for(50ms);
  CHECK(first.claim("claimed", "host-a pid 1") == "host-a pid 1");
  CHECK(second.claim("claimed", "host-b pid 2") == "host-a pid 1");
  CHECK(first.claim("claimed", "host-a pid 1") == "host-a pid 1");
  waiter.join();
  CHECK(seen == "host-a pid 1");
  // Two processes as one rank: the second is told, naming the first.
  first.set("job/tcp-rank/3", "host-a pid 1");
  try {
    weft::bootstrap::claim_rank(second, "job/tcp-rank/3", 3);
    FAIL("a second process took rank 3");
  } catch (const weft::error& failure) {
    CHECK(failure.code() == weft::errc::invalid_argument);
    CHECK_THAT(failure.what(), Catch::Contains("rank 3 is already taken by host-a pid 1") &&
                                   Catch::Contains(weft::bootstrap::this_process()));
  }
  weft::bootstrap::claim_rank(second, "job/tcp-rank/4", 4);  // free: taken
  weft::bootstrap::claim_rank(first, "job/tcp-rank/4", 4);   // by this process: still its own
}

}  // namespace

TEST_CASE("a claim sets a key once, and two processes cannot take one rank", "[bootstrap][store]") {
  SECTION("tcp store") {
    weft::bootstrap::tcp_store_server server("127.0.0.1", 0, "s");
    weft::bootstrap::tcp_store a("127.0.0.1", server.port(), "s", weft::deadline_clock::now() + 5s);
    weft::bootstrap::tcp_store b("127.0.0.1", server.port(), "s", weft::deadline_clock::now() + 5s);
    weft::bootstrap::tcp_store c("127.0.0.1", server.port(), "s", weft::deadline_clock::now() + 5s);
    claims_once(a, b, c);
  }
  SECTION("file store") {
    const auto directory =
        std::filesystem::temp_directory_path() / ("weft-claim-" + std::to_string(::getpid()));
    std::filesystem::remove_all(directory);
    {
      weft::bootstrap::file_store a(directory);
      weft::bootstrap::file_store b(directory);
      weft::bootstrap::file_store c(directory);
      claims_once(a, b, c);
    }
    std::filesystem::remove_all(directory);
  }
}

TEST_CASE("the file store", "[bootstrap][store]") {
  const auto directory =
      std::filesystem::temp_directory_path() / ("weft-file-store-" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  {
    weft::bootstrap::file_store a(directory), b(directory);
    std::thread later([&] {
      std::this_thread::sleep_for(30ms);
      a.set("weft/tcp/3", "10.0.0.1:4000");
    });
    auto value = b.get("weft/tcp/3", weft::deadline_clock::now() + 5s);
    later.join();
    REQUIRE(value);
    CHECK(*value == "10.0.0.1:4000");
    CHECK_FALSE(b.get("weft/tcp/4", weft::deadline_clock::now() + 50ms));
  }
  std::filesystem::remove_all(directory);
}

TEST_CASE("bootstrap reads every launcher's variables", "[bootstrap]") {
  {
    environment set({{"WEFT_RANK", "2"},
                     {"WEFT_SIZE", "4"},
                     {"WEFT_STORE", "127.0.0.1:5000"},
                     {"WEFT_SECRET", "k"}});
    auto launch = weft::bootstrap::from_environment();
    CHECK((launch.rank == 2 && launch.size == 4 && launch.launcher == "weft" &&
           launch.store == "127.0.0.1:5000" && launch.secret == "k"));
  }
  {
    environment set({{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "3"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"WEFT_STORE", "h:1"}});
    auto launch = weft::bootstrap::from_environment();
    CHECK((launch.rank == 1 && launch.size == 3 && launch.local_rank == 1 &&
           launch.launcher == "Open MPI"));
  }
  {
    environment set({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"WEFT_STORE_PATH", "/shared/job"}});
    auto launch = weft::bootstrap::from_environment();
    CHECK(
        (launch.launcher == "MPICH" && launch.store_path == "/shared/job" && launch.store.empty()));
  }
  {
    environment set({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"WEFT_STORE", "n1:29500"}});
    auto launch = weft::bootstrap::from_environment();
    CHECK((launch.launcher == "Slurm" && launch.rank == 5 && launch.size == 8));
  }
  {
    environment set({{"RANK", "3"},
                     {"WORLD_SIZE", "4"},
                     {"MASTER_ADDR", "10.1.2.3"},
                     {"MASTER_PORT", "29400"}});
    auto launch = weft::bootstrap::from_environment();
    CHECK((launch.launcher == "torchrun" && launch.store == "10.1.2.3:29400"));
  }
  {
    environment set({{"WEFT_RANK", "1"}, {"WEFT_SIZE", "2"}});
    CHECK_THROWS_WITH(weft::bootstrap::from_environment(), Catch::Contains("no rendezvous"));
  }
  {  // weft-run's pair: both are read (the rendezvous takes the one the program can use)
    environment set({{"WEFT_RANK", "0"},
                     {"WEFT_SIZE", "2"},
                     {"WEFT_STORE", "127.0.0.1:5000"},
                     {"WEFT_STORE_PATH", "/tmp/meet"},
                     {"MASTER_ADDR", "10.0.0.9"}});
    auto launch = weft::bootstrap::from_environment();
    CHECK((launch.store == "127.0.0.1:5000" && launch.store_path == "/tmp/meet"));
  }
  {  // a directory given by hand wins over torchrun's address
    environment set({{"RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"WEFT_STORE_PATH", "/tmp/meet"},
                     {"MASTER_ADDR", "10.0.0.9"},
                     {"MASTER_PORT", "29400"}});
    auto launch = weft::bootstrap::from_environment();
    CHECK((launch.store.empty() && launch.store_path == "/tmp/meet"));
  }
  {
    environment set({{"WEFT_RANK", "4"}, {"WEFT_SIZE", "4"}, {"WEFT_STORE", "h:1"}});
    CHECK_THROWS_WITH(weft::bootstrap::from_environment(), Catch::Contains("rank 4 of 4"));
  }
  {
    environment set({{"WEFT_RANK", "x"}, {"WEFT_SIZE", "4"}});
    CHECK_THROWS_WITH(weft::bootstrap::from_environment(), Catch::Contains("WEFT_RANK='x'"));
  }
  {
    environment set({});
    CHECK_THROWS_WITH(weft::bootstrap::from_environment(), Catch::Contains("weft-run"));
    CHECK_FALSE(weft::bootstrap::launcher_present());
  }
  {
    environment set({{"SLURM_PROCID", "0"}});  // launched, though the rest is missing
    CHECK(weft::bootstrap::launcher_present());
  }
  {
    environment set({{"RANK", ""}});  // an empty variable is no launcher
    CHECK_FALSE(weft::bootstrap::launcher_present());
  }
  CHECK_THROWS_WITH(weft::bootstrap::split_address("nohost"), Catch::Contains("host:port"));
  CHECK(weft::bootstrap::split_address("[::1]:80").first == "::1");
}

TEST_CASE("Slurm without WEFT_STORE: rank 0 serves on the step's first node, a port from the ids",
          "[bootstrap]") {
  using weft::bootstrap::detail::first_host;
  CHECK(first_host("node07") == "node07");
  CHECK(first_host("node[07-12,20],gpu3") == "node07");
  CHECK(first_host("gpu3,node[07-12]") == "gpu3");
  CHECK(first_host("node[3,1-2]") == "node3");
  CHECK(first_host("rack[1-2]-n[003-004]") == "rack1-n003");
  CHECK(first_host("n[1-4]-ib,login") == "n1-ib");
  CHECK(first_host("node[").empty());
  CHECK(first_host("node[a-b]").empty());
  {
    environment set({{"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "4"},
                     {"SLURM_JOB_ID", "4242"},
                     {"SLURM_STEP_ID", "3"},
                     {"SLURM_STEP_NODELIST", "cn[017-018]"},
                     {"SLURM_JOB_NODELIST", "cn[001-018]"}});
    const auto launch = weft::bootstrap::from_environment();
    CHECK(launch.store == "cn017:" + std::to_string(10000 + (4242 * 64 + 3) % 20000));
    CHECK(launch.store_derived);
    CHECK(launch.store_source.find("SLURM_STEP_NODELIST") != std::string::npos);
    CHECK(launch.store_path.empty());  // two nodes: no directory both see
  }
  {  // a batch script's srun-less step: the job's nodes; no step id: step 0
    environment set({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_JOB_ID", "7"},
                     {"SLURM_JOB_NODELIST", "a1"}});
    const auto launch = weft::bootstrap::from_environment();
    CHECK(launch.store == "a1:10448");
    CHECK((launch.store_path == "/dev/shm" || launch.store_path == "/tmp"));  // one node
  }
  {  // a step on two nodes meets at the store only
    environment set({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_JOB_ID", "7"},
                     {"SLURM_STEP_NUM_NODES", "2"},
                     {"SLURM_STEP_NODELIST", "a[1-2]"}});
    const auto launch = weft::bootstrap::from_environment();
    CHECK((launch.store == "a1:10448" && launch.store_path.empty()));
  }
  {  // WEFT_STORE and WEFT_STORE_PATH win; one rank meets nobody
    environment set({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_JOB_ID", "7"},
                     {"SLURM_STEP_NODELIST", "a1"},
                     {"WEFT_STORE", "b2:5000"}});
    const auto launch = weft::bootstrap::from_environment();
    CHECK((launch.store == "b2:5000" && !launch.store_derived));
  }
  {
    environment set({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_JOB_ID", "7"},
                     {"SLURM_STEP_NODELIST", "a1"},
                     {"WEFT_STORE_PATH", "/shared/meet"}});
    CHECK(weft::bootstrap::from_environment().store.empty());
  }
  {  // without the node list or the job id there is still nothing to derive
    environment set({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "7"}});
    CHECK_THROWS_WITH(weft::bootstrap::from_environment(), Catch::Contains("no rendezvous"));
  }
  {
    environment set({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_JOB_ID", "7"},
                     {"SLURM_STEP_NODELIST", "bad[list"}});
    CHECK_THROWS_WITH(weft::bootstrap::from_environment(),
                      Catch::Contains("SLURM_STEP_NODELIST='bad[list'"));
  }
  {  // another launcher's ranks never take Slurm's node list
    environment set({{"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"SLURM_JOB_ID", "7"},
                     {"SLURM_STEP_NODELIST", "a1"}});
    CHECK_THROWS_WITH(weft::bootstrap::from_environment(), Catch::Contains("no rendezvous"));
  }
}

TEST_CASE("the job's identity: WEFT_JOB, else the launcher's", "[bootstrap]") {
  const auto job_of = [](std::initializer_list<std::pair<const char*, const char*>> values) {
    environment set(values);
    const auto launch = weft::bootstrap::from_environment();
    return launch.job + " from " + launch.job_source;
  };
  CHECK(job_of({{"OMPI_COMM_WORLD_RANK", "0"},
                {"OMPI_COMM_WORLD_SIZE", "1"},
                {"PMIX_NAMESPACE", "1950023681"},
                {"OMPI_MCA_ess_base_jobid", "7"}}) == "1950023681 from PMIX_NAMESPACE");
  CHECK(job_of({{"OMPI_COMM_WORLD_RANK", "0"},
                {"OMPI_COMM_WORLD_SIZE", "1"},
                {"OMPI_MCA_ess_base_jobid", "7"}}) == "7 from OMPI_MCA_ess_base_jobid");
  CHECK(job_of({{"SLURM_PROCID", "0"},
                {"SLURM_NTASKS", "1"},
                {"SLURM_JOB_ID", "4242"},
                {"SLURM_STEP_ID", "3"}}) == "4242.3 from SLURM_JOB_ID.SLURM_STEP_ID");
  CHECK(job_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_ID", "4242"}}) ==
        "4242 from SLURM_JOB_ID");
  CHECK(job_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TORCHELASTIC_RUN_ID", "train-7"}}) ==
        "train-7 from TORCHELASTIC_RUN_ID");
  CHECK(job_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TORCHELASTIC_RUN_ID", "none"}}) == " from ");
  CHECK(job_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}}) == " from ");
  // Another launcher's identity is not this one's; WEFT_JOB wins over the launcher's.
  CHECK(job_of({{"WEFT_RANK", "0"}, {"WEFT_SIZE", "1"}, {"SLURM_JOB_ID", "4242"}}) == " from ");
  CHECK(job_of({{"SLURM_PROCID", "0"},
                {"SLURM_NTASKS", "1"},
                {"SLURM_JOB_ID", "4242"},
                {"WEFT_JOB", "mine"}}) == "mine from WEFT_JOB");
  environment set(
      {{"WEFT_RANK", "0"}, {"WEFT_SIZE", "1"}, {"WEFT_JOB", std::string(129, 'j').c_str()}});
  CHECK_THROWS_WITH(weft::bootstrap::from_environment(), Catch::Contains("WEFT_JOB"));
}

namespace {

// A port nobody listens on now (the kernel's choice for an ephemeral bind).
unsigned short unused_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor probe(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return probe.local_endpoint().port();
}

weft::bootstrap::launch job_rank(int rank, const std::string& store, const std::string& job) {
  weft::bootstrap::launch where;
  where.rank = rank;
  where.size = 2;
  where.launcher = "test";
  where.store = store;
  where.job = job;
  return where;
}

}  // namespace

TEST_CASE("two jobs at one store: the second job's ranks are refused at once",
          "[bootstrap][store]") {
  const std::string store = "127.0.0.1:" + std::to_string(unused_port());
  const auto deadline = [] { return weft::deadline_clock::now() + 20s; };
  weft::bootstrap::rendezvous first(job_rank(0, store, "slurm-1.0"), deadline());
  for (const std::string other : {"slurm-2.0", ""}) {
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(weft::bootstrap::rendezvous(job_rank(1, store, other), deadline()),
                      Catch::Contains("another job"));
    CHECK(std::chrono::steady_clock::now() - start < 5s);  // refused, not waited out
  }
  weft::bootstrap::rendezvous second(job_rank(1, store, "slurm-1.0"), deadline());
  CHECK(second.secret() == first.secret());  // the job's own rank meets it

  // A long identity is hashed into the hello's 256 bytes; a long secret is left for the store
  // to refuse.
  weft::bootstrap::launch long_job = job_rank(1, store, std::string(300, 'x'));
  long_job.secret = std::string(200, 's');
  CHECK(weft::bootstrap::presented_secret(long_job).size() <= 256);
  CHECK(weft::bootstrap::presented_secret(long_job).starts_with(std::string(200, 's')));
}

TEST_CASE("a program without a network store meets through the file store, or says what to include",
          "[bootstrap][store]") {
  // What a program that does not include weft/bootstrap/tcp_meeting.hpp sees.
  struct unplugged {
    weft::bootstrap::store_opener saved =
        std::exchange(weft::bootstrap::network_store_opener(), nullptr);
    ~unplugged() { weft::bootstrap::network_store_opener() = saved; }
  } without_tcp;
  const std::string store = "127.0.0.1:" + std::to_string(unused_port());
  CHECK_THROWS_WITH(
      weft::bootstrap::rendezvous(job_rank(0, store, ""), weft::deadline_clock::now() + 1s),
      Catch::Contains("is to meet at the store " + store) &&
          Catch::Contains("weft/bootstrap/tcp_meeting.hpp") && Catch::Contains("WEFT_STORE_PATH"));
  weft::bootstrap::launch nowhere = job_rank(0, "", "");
  CHECK_THROWS_WITH(weft::bootstrap::rendezvous(nowhere, weft::deadline_clock::now() + 1s),
                    Catch::Contains("has no rendezvous"));

  // weft-run names both: the TCP store (not served here) and a directory, which is where it meets.
  const auto directory =
      std::filesystem::temp_directory_path() / ("weft-unplugged-" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  auto both = [&](int rank) {
    auto where = job_rank(rank, store, "");
    where.store_path = directory.string();
    return where;
  };
  std::optional<weft::bootstrap::rendezvous> zero(std::in_place, both(0),
                                                  weft::deadline_clock::now() + 5s);
  weft::bootstrap::rendezvous one(both(1), weft::deadline_clock::now() + 5s);
  CHECK(zero->get()->describe() == "file store in " + (directory / "job").string());
  CHECK(one.secret() == zero->secret());
  CHECK(zero->get()->local_address().empty());
  zero.reset();
  std::filesystem::remove_all(directory);
}

TEST_CASE("the TCP store, when plugged in, is the meeting point at an address",
          "[bootstrap][store]") {
  const std::string store = "127.0.0.1:" + std::to_string(unused_port());
  auto where = [&](int rank) {
    auto launch = job_rank(rank, store, "");
    launch.store_path = "/nonexistent/never-used";  // the network store wins
    return launch;
  };
  weft::bootstrap::rendezvous zero(where(0), weft::deadline_clock::now() + 10s);
  weft::bootstrap::rendezvous one(where(1), weft::deadline_clock::now() + 10s);
  CHECK(zero.get()->describe() == "tcp store at " + store);
  CHECK(one.get()->local_address() == "127.0.0.1");
  CHECK(one.secret() == zero.secret());
}

TEST_CASE("two jobs in one store directory meet apart", "[bootstrap][store]") {
  const auto directory =
      std::filesystem::temp_directory_path() / ("weft-jobs-" + std::to_string(::getpid()));
  auto where = [&](int rank, const std::string& job) {
    auto launch = job_rank(rank, "", job);
    launch.store_path = directory.string();
    return launch;
  };
  {
    weft::bootstrap::rendezvous first(where(0, "4242.0"), weft::deadline_clock::now() + 5s);
    CHECK(std::filesystem::is_directory(directory / "job-4242.0"));
    // Another job's rank 1 does not read the first job's secret: it waits for its own rank 0.
    CHECK_THROWS_WITH(
        weft::bootstrap::rendezvous(where(1, "4343.0"), weft::deadline_clock::now() + 300ms),
        Catch::Contains("timed out"));
    weft::bootstrap::rendezvous second(where(1, "4242.0"), weft::deadline_clock::now() + 5s);
    CHECK(second.secret() == first.secret());
    // An identity that is no file name still gets a directory of its own, inside the store's.
    const auto odd = weft::bootstrap::rendezvous::job_directory(where(0, "../a/b"));
    CHECK(odd.parent_path() == directory);
    CHECK(odd.filename().string().starts_with("job-.._a_b-"));
  }
  std::filesystem::remove_all(directory);
}

namespace {

// The permission bits of `path`.
unsigned mode_of(const std::filesystem::path& path) {
  struct stat status {};
  REQUIRE(::stat(path.c_str(), &status) == 0);
  return status.st_mode & 07777;
}

// "host pid N" for a process of this host that has ended.
std::string ended_process() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string mine = weft::bootstrap::this_process();
  return mine.substr(0, mine.rfind(" pid ")) + " pid " + std::to_string(child);
}

weft::bootstrap::launch file_rank(int rank, const std::filesystem::path& directory) {
  auto where = job_rank(rank, "", "");
  where.store_path = directory.string();
  return where;
}

}  // namespace

TEST_CASE("the file store keeps its files to their owner", "[bootstrap][store]") {
  const auto directory =
      std::filesystem::temp_directory_path() / ("weft-private-" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  {
    weft::bootstrap::file_store files(directory / "job");
    files.set("weft/secret", "0123456789abcdef");
    CHECK(mode_of(directory / "job") == 0700u);
    CHECK(mode_of(directory / "job" / "weft%2Fsecret") == 0600u);
    CHECK(files.claim("weft/tcp-rank/0", "me") == "me");
    CHECK(mode_of(directory / "job" / "weft%2Ftcp-rank%2F0") == 0600u);
  }
  std::filesystem::remove_all(directory);
}

TEST_CASE(
    "a job that meets through a directory removes it at a normal end, and a finished job's "
    "directory is taken over",
    "[bootstrap][store]") {
  const auto directory =
      std::filesystem::temp_directory_path() / ("weft-job-life-" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  const auto job = directory / "job";  // WEFT_STORE_PATH without an identity
  auto meet = [&](int rank) {
    return weft::bootstrap::rendezvous(file_rank(rank, directory),
                                       weft::deadline_clock::now() + 10s);
  };

  SECTION("the last rank to leave removes the job's directory, not WEFT_STORE_PATH") {
    for (int run = 0; run < 2; ++run) {  // the same directory twice: the second job starts clean
      std::optional<weft::bootstrap::rendezvous> zero, one;
      std::thread second([&] { one.emplace(meet(1)); });
      zero.emplace(meet(0));
      second.join();
      CHECK(zero->secret() == one->secret());
      CHECK(std::filesystem::is_directory(job));
      CHECK(mode_of(job) == 0700u);
      zero.reset();
      CHECK(std::filesystem::is_directory(job));  // rank 1 is still there
      one.reset();
      CHECK_FALSE(std::filesystem::exists(job));
      CHECK(std::filesystem::is_directory(directory));
    }
  }
  SECTION(
      "a directory left by a job whose rank 0 ended is taken over; rank 1 waits for the new rank "
      "0") {
    {
      weft::bootstrap::file_store left(job);
      left.set("weft/opened", ended_process());
      left.set("weft/secret", "stale-secret");
      left.set("weft/tcp-rank/0", ended_process());
    }
    std::optional<weft::bootstrap::rendezvous> one;
    std::thread second([&] { one.emplace(meet(1)); });  // starts first, sees only the old job
    std::this_thread::sleep_for(200ms);
    auto zero = meet(0);
    second.join();
    CHECK(zero.secret() != "stale-secret");
    CHECK(one->secret() == zero.secret());
    weft::bootstrap::file_store files(job);
    CHECK(files.claim("weft/tcp-rank/0", weft::bootstrap::this_process()) ==
          weft::bootstrap::this_process());
  }
  SECTION("a directory a running job holds is refused, naming it") {
    {
      weft::bootstrap::file_store held(job);
      const std::string mine = weft::bootstrap::this_process();
      held.set("weft/opened",
               mine.substr(0, mine.rfind(" pid ")) + " pid " + std::to_string(::getppid()));
    }
    CHECK_THROWS_WITH(meet(0), Catch::Contains("in use by a running job") &&
                                   Catch::Contains("pid " + std::to_string(::getppid())));
  }
  SECTION("a directory a job of another host left cannot be checked: the error says to remove it") {
    {
      weft::bootstrap::file_store held(job);
      held.set("weft/opened", "some-other-host pid 1");
    }
    CHECK_THROWS_WITH(meet(0),
                      Catch::Contains("another host") && Catch::Contains("remove the directory"));
  }
  std::filesystem::remove_all(directory);
}

namespace {

// A store that breaks as a crashed rank 0's does: it greets its clients and acknowledges their
// requests, and ends a connection without a word when it is asked to wait for a key.
class breaking_store {
 public:
  breaking_store() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] { serve(); });
  }
  ~breaking_store() {
    stopping_ = true;
    boost::system::error_code ignored;
    boost::asio::ip::tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ignored);  // wakes the accept
    thread_.join();
    for (auto& client : clients_) client.join();
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }

 private:
  void serve() {
    while (!stopping_) {
      auto socket = std::make_shared<boost::asio::ip::tcp::socket>(io_);
      boost::system::error_code failure;
      acceptor_.accept(*socket, failure);
      if (failure || stopping_) return;
      clients_.emplace_back([socket] { answer(*socket); });
    }
  }
  static std::uint32_t u32(const unsigned char* bytes) {
    return std::uint32_t{bytes[0]} | std::uint32_t{bytes[1]} << 8 | std::uint32_t{bytes[2]} << 16 |
           std::uint32_t{bytes[3]} << 24;
  }
  static void answer(boost::asio::ip::tcp::socket& socket) {
    boost::system::error_code failure;
    unsigned char hello[16];
    // A connection that ends early leaves the buffers unread: sizes are read only from what came.
    boost::asio::read(socket, boost::asio::buffer(hello), failure);
    const std::uint32_t secret_bytes = u32(hello + 12);
    if (failure || secret_bytes > weft::bootstrap::max_secret_bytes) return;
    std::vector<unsigned char> secret(secret_bytes);
    boost::asio::read(socket, boost::asio::buffer(secret), failure);
    const unsigned char yes = 1;
    boost::asio::write(socket, boost::asio::buffer(&yes, 1), failure);
    while (!failure) {
      unsigned char head[9];
      boost::asio::read(socket, boost::asio::buffer(head), failure);
      if (failure) break;
      std::vector<unsigned char> body(std::size_t{u32(head + 1)} + u32(head + 5));
      boost::asio::read(socket, boost::asio::buffer(body), failure);
      if (failure || head[0] == 2) break;  // a get: the store "crashes"
      boost::asio::write(socket, boost::asio::buffer(&yes, 1), failure);
    }
    socket.close(failure);
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> clients_;  // the serving thread's
  std::thread thread_;
};

// The rank a watch reports lost within 5 s, -1 when none.
int heard_lost(const weft::bootstrap::failure_watch& watch) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (watch.lost() < 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  return watch.lost();
}

}  // namespace

TEST_CASE(
    "a store that closes in order tells its waiting ranks, which do not take it for a failure",
    "[bootstrap][store]") {
  auto server = std::make_unique<weft::bootstrap::tcp_store_server>("127.0.0.1", 0, "s");
  weft::bootstrap::tcp_store waiting("127.0.0.1", server->port(), "s",
                                     weft::deadline_clock::now() + 5s);
  weft::bootstrap::tcp_store meeting("127.0.0.1", server->port(), "s",
                                     weft::deadline_clock::now() + 5s);
  // Rank 1 of a job whose store rank 0 serves, and rank 0 of a node-local tier that rank 0 is
  // not part of (it would otherwise name its own rank 0).
  weft::bootstrap::failure_watch job(meeting, "job", 1, 0);
  weft::bootstrap::failure_watch local(meeting, "job/host-1", 0, -1);
  std::optional<std::string> answer;
  std::string failure;
  std::thread get([&] {
    try {
      answer = waiting.get("never", weft::deadline_clock::now() + 30s);
    } catch (const weft::error& e) {
      failure = e.what();
    }
  });
  std::this_thread::sleep_for(100ms);  // parked
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  get.join();
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK_FALSE(answer);
  CHECK_THAT(failure, Catch::Contains("closed: the job ended"));
  CHECK(waiting.closed_in_order());
  std::this_thread::sleep_for(300ms);
  CHECK(job.lost() == -1);
  CHECK(local.lost() == -1);
}

TEST_CASE("a store that breaks is rank 0 lost, named as the watching transport numbers it",
          "[bootstrap][store]") {
  breaking_store broken;
  auto connect = [&] {
    return weft::bootstrap::tcp_store("127.0.0.1", broken.port(), "s",
                                      weft::deadline_clock::now() + 5s);
  };
  SECTION("the job's transport: rank 0") {
    auto meeting = connect();
    weft::bootstrap::failure_watch watch(meeting, "job", 1, 0);
    CHECK(heard_lost(watch) == 0);
    CHECK_THAT(watch.why(), Catch::Contains("went away") &&
                                Catch::Contains("rank 0 exited, crashed or was killed"));
  }
  SECTION("a node-local tier where the job's rank 0 is its rank 2") {
    auto meeting = connect();
    weft::bootstrap::failure_watch watch(meeting, "job/host-0", 1, 2);
    CHECK(heard_lost(watch) == 2);
  }
  SECTION("a node-local tier without the job's rank 0: left to the other tier") {
    auto meeting = connect();
    weft::bootstrap::failure_watch watch(meeting, "job/host-1", 0, -1);
    std::this_thread::sleep_for(300ms);
    CHECK(watch.lost() == -1);
    CHECK(watch.active());
  }
}

TEST_CASE("a launcher's own key-value service is the rendezvous where none is given",
          "[bootstrap]") {
  {  // mpirun with nothing set: PMIx
    environment set({{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"PMIX_NAMESPACE", "prterun-vm-123@1"},
                     {"PMIX_RANK", "1"}});
    const auto launch = weft::bootstrap::from_environment();
    CHECK((launch.service == "PMIx" && launch.store.empty() && launch.store_path.empty()));
  }
  {  // srun --mpi=pmix: PMIx first, the derived address kept for a program without a client
    environment set({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_JOB_ID", "7"},
                     {"SLURM_STEP_NODELIST", "a[1-2]"},
                     {"SLURM_STEP_NUM_NODES", "2"},
                     {"PMIX_NAMESPACE", "slurm.pmix.7.0"},
                     {"PMIX_RANK", "0"}});
    const auto launch = weft::bootstrap::from_environment();
    CHECK((launch.service == "PMIx" && launch.store == "a1:10448" && launch.store_derived));
  }
  {  // MPICH's mpiexec: PMI-1 on PMI_FD
    environment set(
        {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"PMI_FD", "6"}, {"MPI_LOCALNRANKS", "4"}});
    const auto launch = weft::bootstrap::from_environment();
    CHECK((launch.launcher == "MPICH" && launch.service == "PMI" && launch.local_size == 4));
  }
  {  // srun --mpi=pmi2 sets PMI_RANK as well as SLURM_PROCID: Slurm's, with its PMI-1
    environment set({{"PMI_RANK", "1"},
                     {"PMI_SIZE", "2"},
                     {"PMI_FD", "5"},
                     {"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_LOCALID", "1"},
                     {"SLURM_JOB_ID", "9"},
                     {"SLURM_STEP_ID", "0"},
                     {"SLURM_STEP_NODELIST", "a1"}});
    const auto launch = weft::bootstrap::from_environment();
    CHECK((launch.launcher == "Slurm" && launch.service == "PMI" && launch.job == "9.0" &&
           launch.local_rank == 1));
  }
  {  // a given rendezvous wins
    environment set({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"PMI_FD", "6"}, {"WEFT_STORE", "h:1"}});
    const auto launch = weft::bootstrap::from_environment();
    CHECK((launch.service.empty() && launch.store == "h:1"));
  }
  {  // a service whose rank is not ours (another job's variables) is not used
    environment set({{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"PMIX_NAMESPACE", "x"},
                     {"PMIX_RANK", "0"}});
    CHECK_THROWS_WITH(weft::bootstrap::from_environment(), Catch::Contains("no rendezvous"));
  }
  {  // weft-run's and torchrun's ranks never take a launcher's service
    environment set({{"WEFT_RANK", "0"}, {"WEFT_SIZE", "2"}, {"PMI_FD", "6"}, {"PMI_RANK", "0"}});
    CHECK_THROWS_WITH(weft::bootstrap::from_environment(), Catch::Contains("no rendezvous"));
  }
  {  // a program without the client says what to build with
    weft::bootstrap::launch where;
    where.rank = 0;
    where.size = 2;
    where.launcher = "Open MPI";
    where.service = "nothing-here";
    CHECK_THROWS_WITH(
        weft::bootstrap::rendezvous(where, weft::deadline_clock::now() + 1s),
        Catch::Contains("the launcher serves nothing-here") && Catch::Contains("WEFT_STORE"));
  }
}

namespace {

// Hydra's side of PMI-1 for two ranks, one socket each: init, get_my_kvsname, get_maxes, put,
// barrier_in (answered once both entered), get, finalize.
class fake_hydra {
 public:
  explicit fake_hydra(std::vector<int> sockets) : sockets_(std::move(sockets)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_hydra() {
    stop_ = true;
    thread_.join();
    for (const int fd : sockets_) ::close(fd);
  }
  std::vector<std::string> heard() {
    std::lock_guard<std::mutex> hold(mutex_);
    return heard_;
  }

 private:
  static void say(int fd, const std::string& line) {
    const std::string out = line + "\n";
    (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
  }
  void answer(int fd, const std::string& line) {
    {
      std::lock_guard<std::mutex> hold(mutex_);
      heard_.push_back(line);
    }
    using weft::bootstrap::pmi_detail::client;
    const std::string cmd = client::field(line, "cmd");
    if (cmd == "init") {
      say(fd, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
    } else if (cmd == "get_my_kvsname") {
      say(fd, "cmd=my_kvsname kvsname=kvs_test_0");
    } else if (cmd == "get_maxes") {
      say(fd, "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024");
    } else if (cmd == "put") {
      values_[client::field(line, "key")] = client::field(line, "value");
      say(fd, "cmd=put_result rc=0 msg=success");
    } else if (cmd == "barrier_in") {
      waiting_.push_back(fd);
      if (waiting_.size() == sockets_.size()) {
        for (const int each : waiting_) say(each, "cmd=barrier_out");
        waiting_.clear();
      }
    } else if (cmd == "get") {
      const auto found = values_.find(client::field(line, "key"));
      say(fd, found == values_.end() ? "cmd=get_result rc=-1 msg=key_not_found"
                                     : "cmd=get_result rc=0 msg=success value=" + found->second);
    } else if (cmd == "finalize") {
      say(fd, "cmd=finalize_ack");
    }
  }
  void serve() {
    std::map<int, std::string> partial;
    while (!stop_) {
      std::vector<pollfd> watched;
      for (const int fd : sockets_) watched.push_back({fd, POLLIN, 0});
      if (::poll(watched.data(), watched.size(), 50) <= 0) continue;
      for (const auto& each : watched) {
        if ((each.revents & POLLIN) == 0) continue;
        char c = 0;
        if (::read(each.fd, &c, 1) != 1) continue;
        if (c != '\n') {
          partial[each.fd] += c;
          continue;
        }
        answer(each.fd, std::exchange(partial[each.fd], {}));
      }
    }
  }
  std::vector<int> sockets_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::string> heard_;
  std::map<std::string, std::string> values_;
  std::vector<int> waiting_;
};

weft::bootstrap::launch pmi_rank(int rank) {
  weft::bootstrap::launch where;
  where.rank = rank;
  where.size = 2;
  where.local_size = 2;
  where.launcher = "MPICH";
  where.service = "PMI";
  where.bind_address = "127.0.0.1";
  return where;
}

}  // namespace

TEST_CASE("PMI-1: rank 0 hands its store's address and the secret out through the launcher",
          "[bootstrap][store]") {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer stops a child that starts threads after a fork from a process that has run
  // threads (the TCP store's): this case runs in the other builds.
  WARN("skipped under ThreadSanitizer: the forked rank 1 would start threads");
  return;
#endif
  int zero_pair[2];
  int one_pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, zero_pair) == 0);
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, one_pair) == 0);
  const pid_t child = ::fork();
  if (child == 0) {  // rank 1: meets, says its secret, reads rank 0's key
    ::close(zero_pair[0]);
    ::close(zero_pair[1]);
    ::close(one_pair[0]);
    ::setenv("PMI_FD", std::to_string(one_pair[1]).c_str(), 1);
    int code = 1;
    try {
      weft::bootstrap::rendezvous one(pmi_rank(1), weft::deadline_clock::now() + 20s);
      one.get()->set("secret of rank 1", one.secret());
      const auto said = one.get()->get("from rank 0", weft::deadline_clock::now() + 20s);
      one.get()->set("done", "1");
      code = said == std::optional<std::string>("hello") ? 0 : 2;
    } catch (const std::exception& failure) {
      std::fprintf(stderr, "rank 1: %s\n", failure.what());
    }
    ::_exit(code);
  }
  ::close(one_pair[1]);
  fake_hydra hydra({zero_pair[0], one_pair[0]});
  const std::string zero_fd = std::to_string(zero_pair[1]);
  environment set({{"PMI_FD", zero_fd.c_str()}});
  {
    weft::bootstrap::rendezvous zero(pmi_rank(0), weft::deadline_clock::now() + 20s);
    CHECK_THAT(zero.get()->describe(), Catch::StartsWith("tcp store at 127.0.0.1:"));
    CHECK_THAT(zero.launched().store_source, Catch::Contains("handed out through PMI"));
    zero.get()->set("from rank 0", "hello");
    CHECK(zero.get()->get("secret of rank 1", weft::deadline_clock::now() + 20s) ==
          std::optional<std::string>(zero.secret()));
    CHECK(zero.get()->get("done", weft::deadline_clock::now() + 20s).has_value());
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  const auto heard = hydra.heard();
  CHECK(std::count_if(heard.begin(), heard.end(), [](const std::string& line) {
          return line.rfind("cmd=init pmi_version=1 pmi_subversion=1", 0) == 0;
        }) == 2);
  CHECK(std::count(heard.begin(), heard.end(), std::string("cmd=barrier_in")) == 2);
  // What rank 0 put is hex, so no space or newline breaks the protocol's fields.
  const auto put = std::find_if(heard.begin(), heard.end(), [](const std::string& line) {
    return line.rfind("cmd=put ", 0) == 0;
  });
  REQUIRE(put != heard.end());
  const std::string value = weft::bootstrap::pmi_detail::client::field(*put, "value");
  CHECK((!value.empty() && value.find_first_not_of("0123456789abcdef") == std::string::npos));
  CHECK_THAT(weft::bootstrap::pmi_detail::from_hex(value), Catch::StartsWith("tcp\n127.0.0.1:"));
}
