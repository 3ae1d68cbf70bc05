// The worker of the launcher's multi-host tests and of the launch-time
// benchmark: prints the identity hvdrun gave it and, with --allreduce, joins
// the job through libhvd's C ABI and checks a sum of ranks.
//
//   driver [--allreduce] [--exit RANK:CODE] [--sleep SECONDS]
//
// identity_driver is the same program without libhvd (no --allreduce), for
// the tests that are about the launcher alone.
//
// Output lines (each one line, so hvdrun's prefixes keep them whole):
//   identity rank=R size=S local_rank=.. local_size=.. cross_rank=..
//            cross_size=.. hostname=H iface=A rendezvous=ADDR pid=P
//   initialized unix_time=T    (after hvd_init, CLOCK_REALTIME)
//   allreduce sum=X expected=Y ok|WRONG
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>

#ifndef HVD_DRIVER_NO_CORE
#include "core/c_api.h"
#endif

namespace {

const char* Env(const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? v : "";
}

#ifdef HVD_DRIVER_NO_CORE
int AllreduceCheck() {
  printf("allreduce: this driver is built without libhvd\n");
  return 1;
}
#else
double UnixTime() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int AllreduceCheck() {
  if (hvd_init() != HVD_OK) {
    printf("init failed: %s\n", hvd_last_error());
    return 1;
  }
  printf("initialized unix_time=%.6f\n", UnixTime());
  fflush(stdout);
  const int rank = hvd_rank(), size = hvd_size();
  if (rank != atoi(Env("HVD_RANK")) || size != atoi(Env("HVD_SIZE")) ||
      hvd_local_rank() != atoi(Env("HVD_LOCAL_RANK")) ||
      hvd_cross_rank() != atoi(Env("HVD_CROSS_RANK"))) {
    printf("topology WRONG: rank %d size %d local_rank %d cross_rank %d\n",
           rank, size, hvd_local_rank(), hvd_cross_rank());
    return 1;
  }
  int64_t value = rank;
  int64_t shape[1] = {1};
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = &value;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLInt;
  t.dtype.bits = 64;
  t.dtype.lanes = 1;
  t.shape = shape;
  hvd_options options = hvd_default_options();
  options.name = "driver.sum_of_ranks";
  options.op = HVD_OP_SUM;
  hvd_handle h = hvd_allreduce_async(&t, nullptr, &options);
  int r = hvd_wait(h, 60);
  if (r != HVD_OK) {
    printf("allreduce failed (%d): %s\n", r, hvd_handle_error(h));
    return 1;
  }
  hvd_release(h);
  const int64_t expected = static_cast<int64_t>(size) * (size - 1) / 2;
  printf("allreduce sum=%lld expected=%lld %s\n",
         static_cast<long long>(value), static_cast<long long>(expected),
         value == expected ? "ok" : "WRONG");
  fflush(stdout);
  hvd_shutdown();
  return value == expected ? 0 : 1;
}
#endif  // HVD_DRIVER_NO_CORE

}  // namespace

int main(int argc, char** argv) {
  bool allreduce = false;
  int exit_rank = -1, exit_code = 0;
  double sleep_s = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--allreduce") {
      allreduce = true;
    } else if (a == "--exit" && i + 1 < argc) {
      if (sscanf(argv[++i], "%d:%d", &exit_rank, &exit_code) != 2) return 2;
    } else if (a == "--sleep" && i + 1 < argc) {
      sleep_s = atof(argv[++i]);
    } else {
      fprintf(stderr, "driver: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  printf("identity rank=%s size=%s local_rank=%s local_size=%s cross_rank=%s "
         "cross_size=%s hostname=%s iface=%s rendezvous=%s pid=%d\n",
         Env("HVD_RANK"), Env("HVD_SIZE"), Env("HVD_LOCAL_RANK"),
         Env("HVD_LOCAL_SIZE"), Env("HVD_CROSS_RANK"), Env("HVD_CROSS_SIZE"),
         Env("HVD_HOSTNAME"), Env("HVD_IFACE"), Env("HVD_RENDEZVOUS_ADDR"),
         getpid());
  fflush(stdout);
  if (allreduce) {
    int rc = AllreduceCheck();
    if (rc != 0) return rc;
  }
  if (sleep_s > 0) usleep(static_cast<useconds_t>(sleep_s * 1e6));
  if (atoi(Env("HVD_RANK")) == exit_rank) {
    fprintf(stderr, "driver: rank %d exits with code %d as asked\n", exit_rank,
            exit_code);
    return exit_code;
  }
  return 0;
}
