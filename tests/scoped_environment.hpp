// Environment variables set (or unset) for one scope of a test, and put back as they were after.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace weft_test {

class scoped_environment {
 public:
  // Sets each (name, value); a null value unsets the name. `cleared` are unset too.
  explicit scoped_environment(std::initializer_list<std::pair<const char*, const char*>> values,
                              std::initializer_list<const char*> cleared = {}) {
    for (const char* name : cleared) change(name, nullptr);
    for (const auto& [name, value] : values) change(name, value);
  }
  scoped_environment(const char* name, const char* value)
      : scoped_environment({std::pair<const char*, const char*>(name, value)}) {}
  ~scoped_environment() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }
  scoped_environment(const scoped_environment&) = delete;
  scoped_environment& operator=(const scoped_environment&) = delete;

 private:
  void change(const char* name, const char* value) {
    const char* before = std::getenv(name);
    saved_.emplace_back(name, before ? std::optional<std::string>(before) : std::nullopt);
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Sets the given variables with every launcher variable and TCP setting unset around them.
class clean_environment : public scoped_environment {
 public:
  explicit clean_environment(std::initializer_list<std::pair<const char*, const char*>> values)
      : scoped_environment(values, {"WEFT_RANK",
                                    "WEFT_SIZE",
                                    "WEFT_LOCAL_RANK",
                                    "WEFT_LOCAL_SIZE",
                                    "WEFT_STORE",
                                    "WEFT_STORE_PATH",
                                    "WEFT_SECRET",
                                    "WEFT_BIND_ADDRESS",
                                    "WEFT_TCP_SPIN_US",
                                    "WEFT_TCP_CROWDED_SPIN_US",
                                    "WEFT_TCP_SMALL_SPIN_US",
                                    "OMPI_COMM_WORLD_RANK",
                                    "OMPI_COMM_WORLD_SIZE",
                                    "OMPI_COMM_WORLD_LOCAL_RANK",
                                    "OMPI_COMM_WORLD_LOCAL_SIZE",
                                    "PMI_RANK",
                                    "PMI_SIZE",
                                    "MPI_LOCALRANKID",
                                    "MPI_LOCALNRANKS",
                                    "SLURM_PROCID",
                                    "SLURM_NTASKS",
                                    "SLURM_LOCALID",
                                    "RANK",
                                    "WORLD_SIZE",
                                    "LOCAL_RANK",
                                    "LOCAL_WORLD_SIZE",
                                    "MASTER_ADDR",
                                    "MASTER_PORT",
                                    "WEFT_JOB",
                                    "PMIX_NAMESPACE",
                                    "OMPI_MCA_ess_base_jobid",
                                    "SLURM_JOB_ID",
                                    "SLURM_STEP_ID",
                                    "SLURM_STEP_NODELIST",
                                    "SLURM_JOB_NODELIST",
                                    "SLURM_STEP_NUM_NODES",
                                    "TORCHELASTIC_RUN_ID"}) {}
};

}  // namespace weft_test
