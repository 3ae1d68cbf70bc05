// A worker for elastic_test: one process of a two-worker elastic job whose
// launcher (the test's) aborts round 0, announces added hosts in round 1,
// and removes both workers from the job after it. Its argument says where
// round 0 ends: "abort-in-collective" (both workers wait in one) or
// "abort-while-connecting" (round 0 has a third member that never comes).
// Uses only the C ABI. Prints "worker: ..." lines; exits 0 when every check
// held.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tests/runtime/driver_util.h"

namespace hvd::driver {
namespace {

constexpr int kAborted = 10;   // absl::StatusCode::kAborted
constexpr int kCancelled = 1;  // absl::StatusCode::kCancelled

void AllreduceOfRanks(Checker& c, const char* name) {
  Tensor<float> t({5}, hvd_rank() + 1.0f);
  hvd_options o = hvd_default_options();
  o.name = name;
  const hvd_handle h = hvd_allreduce_async(&t.dl, nullptr, &o);
  c.Ok(name, Wait(h));
  hvd_release(h);
  c.Equal(name, t.data[4], 3.0f);  // ranks 0 and 1 give 1 + 2
}

// Round 0: each rank waits on a tensor the other never submits, until the
// launcher ends the round; then every later op fails at once too.
void RoundZero(Checker& c) {
  c.Equal("round", hvd_elastic_round(), 0);
  c.Equal("elastic", hvd_elastic_enabled(), 1);
  AllreduceOfRanks(c, "round0");
  Tensor<float> t({3}, 1.0f);
  hvd_options o = hvd_default_options();
  const std::string name = "only_on_rank" + std::to_string(hvd_rank());
  o.name = name.c_str();
  hvd_handle h = hvd_allreduce_async(&t.dl, nullptr, &o);
  c.Equal("wait ended by the abort", hvd_wait(h, 30.0), int{HVD_ERROR});
  c.Equal("aborted code", hvd_handle_error_code(h), kAborted);
  const std::string error = hvd_handle_error(h);
  std::printf("worker: round 0 ended: %s\n", error.c_str());
  if (error.find("rank 1 on host h2 exited with status 1") ==
      std::string::npos) {
    c.Fail("the abort does not name what was lost: " + error);
  }
  hvd_release(h);
  o.name = "after_abort";
  h = hvd_allreduce_async(&t.dl, nullptr, &o);
  c.Equal("later op fails at once", hvd_wait(h, 1.0), int{HVD_ERROR});
  c.Equal("later op aborted", hvd_handle_error_code(h), kAborted);
  hvd_release(h);
}

// Round 1: ranks swapped; the added hosts are announced.
void RoundOne(Checker& c, int rank_in_round_zero) {
  std::printf("worker: round 1, rank %d of %d\n", hvd_rank(), hvd_size());
  c.Equal("round", hvd_elastic_round(), 1);
  c.Equal("rank moved", hvd_rank(), 1 - rank_in_round_zero);
  AllreduceOfRanks(c, "round1");
  int64_t seq = 0;
  int added = 0, removed = 0;
  for (int i = 0; i < 1000 && seq == 0; ++i) {
    hvd_elastic_host_updates(0, &seq, &added, &removed);
    if (seq == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  c.Equal("update seq", seq, int64_t{7});
  c.Equal("hosts added", added, 1);
  c.Equal("hosts removed", removed, 0);
  hvd_elastic_host_updates(7, &seq, &added, &removed);
  c.Equal("nothing added after 7", added, 0);
}

// Round 0 waits for a member that never connects; the launcher's abort
// ends the init well before HVD_START_TIMEOUT (60 s here).
void RoundZeroNeverConnects(Checker& c) {
  const auto start = std::chrono::steady_clock::now();
  c.Equal("init fails", hvd_init(), int{HVD_ERROR});
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  c.Equal("init aborted", hvd_last_error_code(), kAborted);
  const std::string error = hvd_last_error();
  std::printf("worker: round 0 init failed after %.1f s: %s\n", seconds,
              error.c_str());
  if (error.find("elastic round 0 ended while connecting: rank 1 on host "
                 "h2 exited with status 1") == std::string::npos) {
    c.Fail("the init error does not name the round and the loss: " + error);
  }
  if (seconds > 30) c.Fail("init waited for HVD_START_TIMEOUT");
  c.Equal("round", hvd_elastic_round(), 0);
}

int Main(const std::string& scenario) {
  Checker c;
  c.Equal("round before init", hvd_elastic_round(), -1);
  if (scenario == "abort-while-connecting") {
    RoundZeroNeverConnects(c);
    c.rank = std::stoi(std::getenv("HVD_ELASTIC_WORKER_ID") + 3);  // "h1:<r>"
  } else {
    if (hvd_init() != HVD_OK) {
      c.Fail(std::string("init: ") + hvd_last_error());
      return 1;
    }
    c.rank = hvd_rank();
    RoundZero(c);
    hvd_shutdown();
  }
  if (hvd_init() != HVD_OK) {
    c.Fail(std::string("init: ") + hvd_last_error());
    return 1;
  }
  RoundOne(c, c.rank);
  hvd_shutdown();
  c.Equal("removed: init fails", hvd_init(), int{HVD_ERROR});
  c.Equal("removed: cancelled", hvd_last_error_code(), kCancelled);
  const std::string error = hvd_last_error();
  if (error != "removed from the elastic job: the test is over") {
    c.Fail("removal: " + error);
  }
  if (c.failures == 0) std::printf("worker: PASS\n");
  return c.failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace hvd::driver

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return hvd::driver::Main(argc > 1 ? argv[1] : "abort-in-collective");
}
