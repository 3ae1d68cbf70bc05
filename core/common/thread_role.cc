#include "core/common/thread_role.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/common/logging.h"

namespace hvd {

void NameThisThread(const char* name) {
  // pthread_setname_np refuses a name over 15 characters: cut it instead.
  const std::string cut = std::string(name).substr(0, 15);
  pthread_setname_np(pthread_self(), cut.c_str());
}

void StandByWithoutPreempting() {
  const sched_param param{};  // priority 0, the only one SCHED_BATCH has
  const int error = pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
  if (error != 0) {
    HVD_LOG(DEBUG) << "cannot put a standby thread under SCHED_BATCH ("
                   << std::strerror(error) << "); it may preempt busy ones";
  }
}

}  // namespace hvd
