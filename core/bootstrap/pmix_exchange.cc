#include "core/bootstrap/pmix_exchange.h"

#include <dlfcn.h>
#include <pmix.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/common/annotate.h"
#include "core/common/logging.h"

namespace hvd::bootstrap {
namespace {

constexpr char kKey[] = "hvd.rendezvous";

// The few PMIx calls used, from the library loaded at run time.
struct Pmix {
  decltype(&PMIx_Init) init = nullptr;
  decltype(&PMIx_Finalize) finalize = nullptr;
  decltype(&PMIx_Put) put = nullptr;
  decltype(&PMIx_Commit) commit = nullptr;
  decltype(&PMIx_Fence) fence = nullptr;
  decltype(&PMIx_Get) get = nullptr;
  decltype(&PMIx_Value_destruct) destruct = nullptr;
  decltype(&PMIx_Error_string) error = nullptr;

  absl::Status Load() {
    void* lib = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "this job was started by Open MPI, whose ranks find rank 0's "
          "rendezvous through PMIx, but libpmix.so.2 cannot be loaded (",
          dlerror(), "): install libpmix2, or set HVD_RENDEZVOUS_ADDR"));
    }
    bool all = Sym(lib, "PMIx_Init", &init) &&
               Sym(lib, "PMIx_Finalize", &finalize) &&
               Sym(lib, "PMIx_Put", &put) &&
               Sym(lib, "PMIx_Commit", &commit) &&
               Sym(lib, "PMIx_Fence", &fence) && Sym(lib, "PMIx_Get", &get) &&
               Sym(lib, "PMIx_Value_destruct", &destruct) &&
               Sym(lib, "PMIx_Error_string", &error);
    if (!all) {
      return absl::FailedPreconditionError(
          "libpmix.so.2 lacks a PMIx call hvd needs");
    }
    return absl::OkStatus();
  }

  template <typename F>
  static bool Sym(void* lib, const char* name, F* out) {
    *out = reinterpret_cast<F>(dlsym(lib, name));
    return *out != nullptr;
  }

  absl::Status Check(pmix_status_t rc, const char* call) const {
    if (rc == PMIX_SUCCESS) return absl::OkStatus();
    if (rc == PMIX_ERR_TIMEOUT) {
      return absl::DeadlineExceededError(
          absl::StrCat(call,
                       " timed out (HVD_START_TIMEOUT): did every rank call "
                       "hvd.init()?"));
    }
    return absl::UnavailableError(
        absl::StrCat(call, " failed: ", error(rc),
                     " (was the job started by mpirun with PMIx?)"));
  }
};

absl::Status Publish(const Pmix& pmix, const std::string& record) {
  pmix_value_t value;
  std::memset(&value, 0, sizeof(value));
  value.type = PMIX_STRING;
  value.data.string = const_cast<char*>(record.c_str());
  if (absl::Status s = pmix.Check(pmix.put(PMIX_GLOBAL, kKey, &value),
                                  "PMIx_Put");
      !s.ok()) {
    return s;
  }
  return pmix.Check(pmix.commit(), "PMIx_Commit");
}

// PMIX_TIMEOUT: whole seconds, at least 1 (0 would be no timeout).
pmix_info_t TimeoutInfo(absl::Duration timeout) {
  pmix_info_t info;
  std::memset(&info, 0, sizeof(info));
  std::strncpy(info.key, PMIX_TIMEOUT, PMIX_MAX_KEYLEN);
  info.value.type = PMIX_INT;
  info.value.data.integer = static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Seconds(absl::Ceil(timeout, absl::Seconds(1))), 1,
      std::numeric_limits<int>::max()));
  return info;
}

absl::StatusOr<std::string> Read(const Pmix& pmix, const pmix_proc_t& me,
                                 pmix_info_t* timeout) {
  pmix_proc_t root;
  std::memset(&root, 0, sizeof(root));
  std::memcpy(root.nspace, me.nspace, sizeof(root.nspace));
  root.rank = 0;
  pmix_value_t* value = nullptr;
  if (absl::Status s =
          pmix.Check(pmix.get(&root, kKey, timeout, 1, &value), "PMIx_Get");
      !s.ok()) {
    return s;
  }
  std::string record;
  if (value->type == PMIX_STRING && value->data.string != nullptr) {
    record = value->data.string;
  }
  pmix.destruct(value);
  std::free(value);
  return record;
}

// Between PMIx_Init and PMIx_Finalize.
absl::Status Exchange(const Pmix& pmix, const pmix_proc_t& me,
                      runtime::Config* config) {
  if (config->rank == 0) {
    HVD_LOG(DEBUG) << "rank 0: publishing its rendezvous "
                   << config->rendezvous_addr << " over PMIx";
    if (absl::Status s =
            Publish(pmix, config->rendezvous_addr + "\n" + config->token);
        !s.ok()) {
      return s;
    }
  }
  // Every rank; afterwards rank 0's record is there to get. Neither call
  // waits longer than the start timeout.
  pmix_info_t timeout = TimeoutInfo(config->start_timeout);
  if (absl::Status s =
          pmix.Check(pmix.fence(nullptr, 0, &timeout, 1), "PMIx_Fence");
      !s.ok() || config->rank == 0) {
    return s;
  }
  absl::StatusOr<std::string> record = Read(pmix, me, &timeout);
  if (!record.ok()) return record.status();
  const size_t newline = record->find('\n');
  if (newline == std::string::npos) {
    return absl::DataLossError("rank 0's rendezvous record over PMIx is "
                               "malformed");
  }
  config->rendezvous_addr = record->substr(0, newline);
  HVD_LOG(DEBUG) << "rank " << config->rank << ": rank 0's rendezvous is at "
                 << config->rendezvous_addr << " (read over PMIx)";
  if (config->token.empty()) config->token = record->substr(newline + 1);
  return absl::OkStatus();
}

}  // namespace

absl::Status ExchangeOverPmix(runtime::Config* config) {
  Pmix pmix;
  if (absl::Status s = pmix.Load(); !s.ok()) return s;
  pmix_proc_t me;
  std::memset(&me, 0, sizeof(me));
  if (absl::Status s = pmix.Check(pmix.init(&me, nullptr, 0), "PMIx_Init");
      !s.ok()) {
    return s;
  }
  const absl::Status status = Exchange(pmix, me, config);
  // Finalized at once: the launcher counts a process that exits between
  // the two as failed.
  pmix.finalize(nullptr, 0);
  return Annotate(status, absl::StrCat("rank ", config->rank));
}

}  // namespace hvd::bootstrap
