// weft/bootstrap/environment.hpp — who am I, how many are we, and where do we meet.
//
// Reads the rank, the world size and the rendezvous address that a launcher put in the
// environment, so one binary runs unchanged under weft-run, mpirun, srun and torchrun:
//
//   launcher          rank / size                              rendezvous
//   weft-run, weft    WEFT_RANK / WEFT_SIZE                    WEFT_STORE (host:port) and
//                                                              WEFT_STORE_PATH (a directory)
//   Open MPI mpirun   OMPI_COMM_WORLD_RANK / _SIZE             WEFT_STORE (pass it with -x), else
//                                                              PMIx (PMIX_NAMESPACE, PMIX_RANK)
//   MPICH (Hydra)     PMI_RANK / PMI_SIZE                      WEFT_STORE (pass it with -genv),
//                                                              else PMI-1 (PMI_FD)
//   Slurm srun        SLURM_PROCID / SLURM_NTASKS              WEFT_STORE (exported), else PMIx
//                                                              (srun --mpi=pmix), else the first
//                                                              host of SLURM_STEP_NODELIST and a
//                                                              port from the job's ids
//   torchrun          RANK / WORLD_SIZE                        MASTER_ADDR:MASTER_PORT
//
// Where the launcher serves PMIx (PMIX_NAMESPACE and PMIX_RANK set: Open MPI's mpirun, srun
// --mpi=pmix) or PMI-1 (PMI_FD: MPICH's mpiexec, srun --mpi=pmi2) and no rendezvous is given,
// rank 0 serves the store on a port it chooses and hands its address and the job's secret to
// every rank through it (weft/bootstrap/pmix_meeting.hpp in programs built with PMIx;
// weft/bootstrap/pmi_meeting.hpp in every program).
//
// Under Slurm without WEFT_STORE or PMIx, rank 0 (which Slurm places on the step's first node)
// serves the store on that node, at port 10000 + (SLURM_JOB_ID * 64 + SLURM_STEP_ID) mod 20000:
// below Linux's ephemeral ports, distinct for the steps of a job and for jobs that share a node
// unless their ids collide modulo 20000 (then set WEFT_STORE). A step on one node also meets, where
// the program has no TCP store, in /dev/shm/job-<job>.<step> (the file store's directory for the
// job, removed by its last rank). Rank 0 says so once on stderr.
//
// weft's own variables win over a launcher's. WEFT_STORE_PATH names a directory on a shared
// filesystem to meet through: a program without a network store meets there, and where only it
// is set, every program does (weft/bootstrap/rendezvous.hpp). WEFT_SECRET is the per-job secret
// every connection must present; WEFT_BIND_ADDRESS the address this rank listens on.
//
// The job's identity keeps two jobs that meet at one WEFT_STORE or WEFT_STORE_PATH apart (a
// rank of the second is refused by the first's store at once): WEFT_JOB, else the launcher's
//
//   Open MPI   PMIX_NAMESPACE (else OMPI_MCA_ess_base_jobid)
//   Slurm      SLURM_JOB_ID.SLURM_STEP_ID
//   torchrun   TORCHELASTIC_RUN_ID (its default, "none", is no identity)
//
// weft-run and MPICH give none: weft-run draws a fresh WEFT_SECRET per job, which does the same.
#pragma once

#include "weft/detail/env.hpp"
#include "weft/error.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace weft::bootstrap {

struct launch {
  int rank = -1;
  int size = -1;
  int local_rank = -1;  // rank among the ranks of this machine, -1 when the launcher says not
  int local_size = -1;
  std::string
      launcher;       // which variables were read: "weft", "Open MPI", "MPICH", "Slurm", "torchrun"
  std::string store;  // host:port of the network store rank 0 serves (rendezvous.hpp)
  std::string
      store_source;  // where `store` came from: "WEFT_STORE", "MASTER_ADDR:MASTER_PORT", ...
  bool store_derived = false;  // chosen by weft from the launcher's variables (Slurm), not given
  // The launcher's key-value service rank 0 hands the store's address out through, where no
  // rendezvous is given: "PMIx" (PMIX_NAMESPACE and PMIX_RANK set), "PMI" (PMI-1: PMI_FD and
  // PMI_RANK set), else empty. Where the program has no PMIx client, `store` (derived from
  // Slurm's variables) is the way left.
  std::string service;
  std::string store_path;    // directory of a file store on a shared filesystem
  std::string secret;        // the per-job secret, empty when none was given
  std::string bind_address;  // where this rank listens; empty: chosen from the store's route
  std::string job;  // the job's identity, empty when neither WEFT_JOB nor the launcher gives one
  std::string job_source;  // the variables it was read from, e.g. "SLURM_JOB_ID.SLURM_STEP_ID"
};

namespace detail {

// The variable's value, nullptr when it is unset or empty.
inline const char* variable(const char* name) {
  const auto value = weft::detail::env::text(name);
  return value ? value->data() : nullptr;
}

inline int parse_int(const char* name, const char* text) {
  const auto value = weft::detail::env::parse_count(text, 1 << 24);
  if (!value) weft::detail::env::refuse(name, text, "a rank or a size");
  return static_cast<int>(*value);
}

// The launchers whose variables are read, in the order they are tried: weft's own first.
struct launcher_variables {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;  // nullptr when the launcher has none
  const char* local_size;
};

inline constexpr launcher_variables launchers[] = {
    {"weft", "WEFT_RANK", "WEFT_SIZE", "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

// Reads one launcher's variables; true when its rank and size were both present.
inline bool read_launcher(launch& out, const launcher_variables& names) {
  const char* r = variable(names.rank);
  const char* s = variable(names.size);
  if (r == nullptr || s == nullptr) return false;
  out.launcher = names.name;
  out.rank = parse_int(names.rank, r);
  out.size = parse_int(names.size, s);
  if (const char* lr = names.local_rank ? variable(names.local_rank) : nullptr)
    out.local_rank = parse_int(names.local_rank, lr);
  if (const char* ls = names.local_size ? variable(names.local_size) : nullptr)
    out.local_size = parse_int(names.local_size, ls);
  return true;
}

// The longest WEFT_JOB taken (a launcher's own identity may be longer: it is hashed).
inline constexpr std::size_t max_job_bytes = 128;

// Reads the job's identity: WEFT_JOB, else the variables of the launcher `out` was read from.
inline void read_job(launch& out) {
  if (const auto given = weft::detail::env::text("WEFT_JOB")) {
    if (given->size() > max_job_bytes)
      weft::detail::env::refuse("WEFT_JOB", *given, "a job name of at most 128 bytes");
    out.job = *given;
    out.job_source = "WEFT_JOB";
    return;
  }
  struct source {
    std::string_view launcher;
    const char* id;
    const char* step;  // appended after a dot when set
  };
  static constexpr source sources[] = {
      {"Open MPI", "PMIX_NAMESPACE", nullptr},
      {"Open MPI", "OMPI_MCA_ess_base_jobid", nullptr},
      {"Slurm", "SLURM_JOB_ID", "SLURM_STEP_ID"},
      {"torchrun", "TORCHELASTIC_RUN_ID", nullptr},
  };
  for (const auto& each : sources) {
    if (out.launcher != each.launcher) continue;
    const char* id = variable(each.id);
    if (id == nullptr || std::string_view(id) == "none") continue;
    out.job = id;
    out.job_source = each.id;
    if (const char* step = each.step ? variable(each.step) : nullptr) {
      out.job += std::string(".") + step;
      out.job_source += std::string(".") + each.step;
    }
    return;
  }
}

// The first host of a Slurm hostlist ("node[07-12,20],gpu3" -> "node07"; "rack[1-2]-n[3-4]" ->
// "rack1-n3"), zero padding kept; empty when the list is malformed.
inline std::string first_host(std::string_view list) {
  std::string host;
  std::size_t i = 0;
  while (i < list.size() && list[i] != ',') {
    if (list[i] != '[') {
      host += list[i++];
      continue;
    }
    const auto close = list.find(']', i);
    if (close == std::string_view::npos) return {};
    const std::string_view inside = list.substr(i + 1, close - i - 1);
    const std::string_view first = inside.substr(0, inside.find_first_of(",-"));
    if (first.empty() || first.find_first_not_of("0123456789") != std::string_view::npos) return {};
    host += first;
    i = close + 1;
  }
  return host;
}

// Under Slurm without a rendezvous given: rank 0 serves the store on the step's first node.
inline bool read_slurm_meeting(launch& out) {
  const char* nodes = variable("SLURM_STEP_NODELIST");
  const char* nodes_name = "SLURM_STEP_NODELIST";
  if (nodes == nullptr) {
    nodes = variable("SLURM_JOB_NODELIST");
    nodes_name = "SLURM_JOB_NODELIST";
  }
  const char* job = variable("SLURM_JOB_ID");
  if (nodes == nullptr || job == nullptr) return false;
  const std::string host = first_host(nodes);
  if (host.empty())
    weft::detail::env::refuse(nodes_name, nodes, "a Slurm hostlist such as node[01-04],gpu7");
  const auto job_id = weft::detail::env::parse_count(job, ~std::uint64_t{0} >> 8);
  if (!job_id) weft::detail::env::refuse("SLURM_JOB_ID", job, "a job id");
  std::uint64_t step = 0;  // the batch and interactive steps' ids are large: any number serves
  if (const char* text = variable("SLURM_STEP_ID")) {
    const auto value = weft::detail::env::parse_count(text, ~std::uint64_t{0} >> 8);
    if (!value) weft::detail::env::refuse("SLURM_STEP_ID", text, "a step id");
    step = *value;
  }
  const auto port = 10000 + (*job_id * 64 + step) % 20000;
  out.store = host + ":" + std::to_string(port);
  out.store_source = std::string("the first host of ") + nodes_name +
                     ", port 10000 + (SLURM_JOB_ID * 64 + SLURM_STEP_ID) mod 20000";
  out.store_derived = true;
  // A step on one node can also meet in a directory of that node (a program without the TCP
  // store, over shm say, has no other way).
  const char* count = variable("SLURM_STEP_NUM_NODES");
  const bool one_node = count != nullptr
                            ? std::string_view(count) == "1"
                            : std::string_view(nodes).find_first_of(",[") == std::string_view::npos;
  if (one_node)  // the file store meets in job-<SLURM_JOB_ID.SLURM_STEP_ID> there
    out.store_path = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
  return true;
}

// Where the launcher serves PMIx (PMIX_NAMESPACE, and PMIX_RANK equal to the rank read: Open MPI's
// mpirun, srun --mpi=pmix) or PMI-1 (PMI_FD, and PMI_RANK equal to it: MPICH's mpiexec, srun
// --mpi=pmi2) to this rank: the rendezvous may go through it.
inline bool read_service(launch& out) {
  const auto same_rank = [&](const char* name) {
    const char* text = variable(name);
    const auto value = text ? weft::detail::env::parse_count(text, 1 << 24) : std::nullopt;
    return value && static_cast<int>(*value) == out.rank;  // else another job's service
  };
  if (out.launcher == "weft" || out.launcher == "torchrun") return false;
  if (out.launcher != "MPICH" && variable("PMIX_NAMESPACE") != nullptr && same_rank("PMIX_RANK")) {
    out.service = "PMIx";
  } else if (out.launcher != "Open MPI" && variable("PMI_FD") != nullptr && same_rank("PMI_RANK")) {
    out.service = "PMI";
  }
  return !out.service.empty();
}

}  // namespace detail

// True when a launcher put a rank in the environment (whether or not the rest is complete):
// a program that can run alone or launched asks this before choosing how to start.
inline bool launcher_present() {
  for (const auto& names : detail::launchers) {
    if (detail::variable(names.rank) != nullptr) return true;
  }
  return false;
}

// Reads the launch from the environment; throws errc::invalid_argument saying what is missing.
inline launch from_environment() {
  launch out;
  bool found = false;
  for (const auto& names : detail::launchers) {
    if ((found = detail::read_launcher(out, names))) break;
  }
  if (found &&
      out.launcher == "MPICH") {  // srun --mpi=pmi2 sets PMI_RANK too: Slurm's, if they agree
    static_assert(std::string_view(detail::launchers[3].name) == "Slurm");
    launch slurm;
    if (detail::read_launcher(slurm, detail::launchers[3]) && slurm.rank == out.rank &&
        slurm.size == out.size)
      out = slurm;
  }
  if (!found) {
    throw error(errc::invalid_argument,
                "no rank and size in the environment: start the program with weft-run -n N, "
                "mpirun, srun or torchrun, or set WEFT_RANK and WEFT_SIZE");
  }
  if (out.size < 1 || out.rank >= out.size) {
    throw error(errc::invalid_argument, "the environment (" + out.launcher + ") gives rank " +
                                            std::to_string(out.rank) + " of " +
                                            std::to_string(out.size) + " ranks");
  }
  if (const char* path = detail::variable("WEFT_STORE_PATH")) out.store_path = path;
  if (const char* store = detail::variable("WEFT_STORE")) {
    out.store = store;
    out.store_source = "WEFT_STORE";
  } else if (const char* host = detail::variable("MASTER_ADDR"); host && out.store_path.empty()) {
    // torchrun's address, unless WEFT_STORE_PATH alone names the meeting
    const char* port = detail::variable("MASTER_PORT");
    out.store = std::string(host) + ":" + (port ? port : "29500");
    out.store_source = "MASTER_ADDR:MASTER_PORT";
  } else if (out.store_path.empty() && out.size > 1 && detail::read_service(out)) {
    // the launcher's PMIx or PMI hands rank 0's address out; under Slurm, the derived address
    // too, for a program without a PMIx client
    if (out.launcher == "Slurm") detail::read_slurm_meeting(out);
  } else if (out.launcher == "Slurm" && out.store_path.empty() && out.size > 1 &&
             detail::read_slurm_meeting(out)) {
    // the step's first node, where Slurm places rank 0
  } else if (out.store_path.empty() && out.size > 1) {
    throw error(errc::invalid_argument,
                "rank " + std::to_string(out.rank) + " (" + out.launcher +
                    ") has no rendezvous: set WEFT_STORE=host:port (the address rank 0 serves "
                    "its store on) or WEFT_STORE_PATH=<shared directory>");
  }
  if (const char* secret = detail::variable("WEFT_SECRET")) out.secret = secret;
  if (const char* bind = detail::variable("WEFT_BIND_ADDRESS")) out.bind_address = bind;
  detail::read_job(out);
  return out;
}

// Splits "host:port" (or "[v6]:port"); throws errc::invalid_argument when malformed.
inline std::pair<std::string, unsigned short> split_address(std::string_view address) {
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == address.size()) {
    throw error(errc::invalid_argument, "address '" + std::string(address) + "' is not host:port");
  }
  std::string host(address.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto port = weft::detail::env::parse_count(address.substr(colon + 1), 65535);
  if (!port) {
    throw error(errc::invalid_argument, "address '" + std::string(address) + "' has no valid port");
  }
  return {host, static_cast<unsigned short>(*port)};
}

}  // namespace weft::bootstrap
