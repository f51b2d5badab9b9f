// weft/bootstrap/pmix_meeting.hpp — rank 0's store address handed out through the launcher's
// PMIx server (Open MPI's mpirun, srun --mpi=pmix): PMIx_Put, PMIx_Commit, PMIx_Fence, PMIx_Get.
//
// Included, this header plugs PMIx in as the launcher's exchange (weft/bootstrap/rendezvous.hpp):
// a job launched with PMIx and given no rendezvous meets with nothing set. Rank 0 puts its value
// under "weft.meet.<n>" (n counts this process's rendezvous, so a second session does not read
// the first's), every rank fences (collecting the data, PMIX_TIMEOUT from the deadline), and
// reads rank 0's value. The PMIx client is initialised on first use and finalised when the
// process exits, as the launcher expects of a process that connected to it.
// Meson: dependency('weft-bootstrap-pmix') (Debian libpmix-dev); dependency('weft-tcp') brings it
// where it is found, defining WEFT_HAVE_PMIX.
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/rendezvous.hpp"
#include "weft/error.hpp"

#include <pmix.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

namespace weft::bootstrap {

namespace pmix_detail {

// This process's PMIx client: initialised once, finalised at exit.
class client {
 public:
  static client& get() {
    static client the_client;
    return the_client;
  }
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // This process as PMIx names it; throws where the launcher's server cannot be reached.
  const pmix_proc_t& self() {
    std::lock_guard<std::mutex> hold(mutex_);
    if (!initialised_) {
      const pmix_status_t status = PMIx_Init(&self_, nullptr, 0);
      if (status != PMIX_SUCCESS) {
        throw error(errc::transport,
                    std::string("PMIx_Init failed (") + PMIx_Error_string(status) +
                        "): the launcher's PMIx server (PMIX_NAMESPACE is set) cannot be reached; "
                        "set WEFT_STORE=host:port to meet without it");
      }
      initialised_ = true;
    }
    return self_;
  }
  std::mutex& mutex() { return mutex_; }
  unsigned next_meeting() { return meetings_++; }

 private:
  client() = default;
  ~client() {
    if (initialised_) PMIx_Finalize(nullptr, 0);
  }
  std::mutex mutex_;
  bool initialised_ = false;
  pmix_proc_t self_{};
  unsigned meetings_ = 0;
};

inline void check(pmix_status_t status, const launch& where, const std::string& what) {
  if (status == PMIX_SUCCESS) return;
  const errc code = status == PMIX_ERR_TIMEOUT ? errc::timeout : errc::transport;
  throw error(code, "rank " + std::to_string(where.rank) + ": " + what + " failed (" +
                        PMIx_Error_string(status) + ")" +
                        (code == errc::timeout ? ": a rank did not reach the rendezvous in time"
                                               : std::string()));
}

}  // namespace pmix_detail

// Hands rank 0's `value` to every rank through PMIx (see the top of this file).
inline std::string pmix_exchange(const launch& where, const std::string& value,
                                 deadline_clock::time_point deadline) {
  auto& pmix = pmix_detail::client::get();
  const pmix_proc_t self = pmix.self();
  std::lock_guard<std::mutex> hold(pmix.mutex());
  const std::string key = "weft.meet." + std::to_string(pmix.next_meeting());
  if (self.rank != static_cast<pmix_rank_t>(where.rank)) {
    throw error(errc::invalid_argument,
                "rank " + std::to_string(where.rank) + " (" + where.launcher + ") is rank " +
                    std::to_string(self.rank) + " of PMIx namespace " + self.nspace +
                    ": the launcher's variables and its PMIx server disagree");
  }
  if (where.rank == 0) {
    pmix_value_t put{};
    put.type = PMIX_STRING;
    put.data.string = const_cast<char*>(value.c_str());
    pmix_detail::check(PMIx_Put(PMIX_GLOBAL, key.c_str(), &put), where, "PMIx_Put of " + key);
    pmix_detail::check(PMIx_Commit(), where, "PMIx_Commit");
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::seconds>(deadline - deadline_clock::now());
  int seconds = static_cast<int>(std::max<std::chrono::seconds::rep>(1, left.count()));
  bool collect = true;
  pmix_info_t fence_info[2];
  PMIX_INFO_CONSTRUCT(&fence_info[0]);
  PMIX_INFO_CONSTRUCT(&fence_info[1]);
  PMIX_INFO_LOAD(&fence_info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&fence_info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
  pmix_proc_t everyone;
  PMIX_PROC_CONSTRUCT(&everyone);
  PMIX_LOAD_PROCID(&everyone, self.nspace, PMIX_RANK_WILDCARD);
  const pmix_status_t fenced = PMIx_Fence(&everyone, 1, fence_info, 2);
  PMIX_INFO_DESTRUCT(&fence_info[0]);
  PMIX_INFO_DESTRUCT(&fence_info[1]);
  pmix_detail::check(fenced, where, "PMIx_Fence of namespace " + std::string(self.nspace));
  if (where.rank == 0) return value;
  pmix_proc_t zero;
  PMIX_PROC_CONSTRUCT(&zero);
  PMIX_LOAD_PROCID(&zero, self.nspace, 0);
  pmix_value_t* got = nullptr;
  pmix_detail::check(PMIx_Get(&zero, key.c_str(), nullptr, 0, &got), where,
                     "PMIx_Get of rank 0's " + key);
  std::string handed;
  if (got != nullptr && got->type == PMIX_STRING && got->data.string != nullptr)
    handed = got->data.string;
  if (got != nullptr) PMIX_VALUE_RELEASE(got);
  return handed;
}

// Makes PMIx the launcher's exchange (done when this header is included).
inline void use_pmix() { launcher_exchange("PMIx") = &pmix_exchange; }

namespace detail {
inline const bool pmix_plugged_in = (use_pmix(), true);
}  // namespace detail

}  // namespace weft::bootstrap
