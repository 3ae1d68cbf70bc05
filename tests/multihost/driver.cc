// The worker of the launcher's multi-host tests and of the launch-time
// benchmark: prints the identity hvdrun gave it and, with --allreduce, joins
// the job through libhvd's C ABI and checks a sum of ranks.
//
//   driver [--allreduce] [--loop N --bytes B [--started DIR]]
//          [--exit RANK:CODE]
//          [--sleep SECONDS]
//
// --loop N: after the check, N allreduces of B bytes of float32 (rank + 1
// in every element), each result checked, for the fault tests; with
// --started DIR, the first one done creates DIR/rank.<r>.
//
// identity_driver is the same program without libhvd (no --allreduce), for
// the tests that are about the launcher alone.
//
// Output lines (each one line, so hvdrun's prefixes keep them whole):
//   identity rank=R size=S local_rank=.. local_size=.. cross_rank=..
//            cross_size=.. hostname=H iface=A rendezvous=ADDR pid=P
//   initialized unix_time=T    (after hvd_init, CLOCK_REALTIME)
//   topology rank=R size=S local_rank=.. local_size=.. cross_rank=..
//                              (started without hvdrun: no HVD_RANK)
//   allreduce sum=X expected=Y ok|WRONG
//   loop started               (after the first of the N allreduces)
//   loop done iterations=N ok seconds=S  (S: from the first allreduce's end;
//                              or "loop failed at I: <error>")
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

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
int Loop(int, size_t, const std::string&) { return 1; }
void Shutdown() {}
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
  if (getenv("HVD_RANK") == nullptr) {
    // Started without hvdrun (srun, mpirun): the identity is the core's.
    printf("topology rank=%d size=%d local_rank=%d local_size=%d "
           "cross_rank=%d\n",
           rank, size, hvd_local_rank(), hvd_local_size(), hvd_cross_rank());
  } else if (rank != atoi(Env("HVD_RANK")) || size != atoi(Env("HVD_SIZE")) ||
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
  return value == expected ? 0 : 1;
}

DLTensor FloatTensor(std::vector<float>& data, int64_t* shape) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data.data();
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  shape[0] = static_cast<int64_t>(data.size());
  t.shape = shape;
  return t;
}

int Loop(int iterations, size_t bytes, const std::string& started) {
  const int rank = hvd_rank(), size = hvd_size();
  const float want = static_cast<float>(size) * (size + 1) / 2;
  std::vector<float> data(std::max<size_t>(bytes / sizeof(float), 1));
  int64_t shape[1];
  double first_done = 0;
  for (int i = 0; i < iterations; ++i) {
    std::fill(data.begin(), data.end(), static_cast<float>(rank + 1));
    DLTensor t = FloatTensor(data, shape);
    hvd_options options = hvd_default_options();
    options.name = "driver.loop";
    options.op = HVD_OP_SUM;
    hvd_handle h = hvd_allreduce_async(&t, nullptr, &options);
    if (hvd_wait(h, 600) != HVD_OK) {
      printf("loop failed at %d: %s\n", i, hvd_handle_error(h));
      return 1;
    }
    hvd_release(h);
    if (std::count(data.begin(), data.end(), want) !=
        static_cast<long>(data.size())) {
      printf("loop failed at %d: a WRONG sum\n", i);
      return 1;
    }
    if (i == 0) {
      first_done = UnixTime();
      printf("loop started\n");
      if (!started.empty()) {
        fclose(fopen((started + "/rank." + std::to_string(rank)).c_str(),
                     "w"));
      }
    }
    fflush(stdout);
  }
  printf("loop done iterations=%d ok seconds=%.6f\n", iterations,
         UnixTime() - first_done);
  return 0;
}

void Shutdown() { hvd_shutdown(); }
#endif  // HVD_DRIVER_NO_CORE

}  // namespace

int main(int argc, char** argv) {
  bool allreduce = false;
  int loop = 0;
  size_t loop_bytes = 4;
  std::string started;
  int exit_rank = -1, exit_code = 0;
  double sleep_s = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--allreduce") {
      allreduce = true;
    } else if (a == "--loop" && i + 1 < argc) {
      loop = atoi(argv[++i]);
    } else if (a == "--started" && i + 1 < argc) {
      started = argv[++i];
    } else if (a == "--bytes" && i + 1 < argc) {
      loop_bytes = strtoull(argv[++i], nullptr, 10);
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
    if (rc == 0 && loop > 0) rc = Loop(loop, loop_bytes, started);
    Shutdown();
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
