// Starts N hvd_driver processes against an in-process rendezvous server and
// collects their exit status and output: the real-process harness of the
// runtime tests.
#ifndef HVD_CORE_TESTING_JOB_RUNNER_H_
#define HVD_CORE_TESTING_JOB_RUNNER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace hvd::testing {

struct WorkerResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

struct JobSpec {
  int size = 2;
  std::string driver = "tests/runtime/hvd_driver";  // runfiles-relative
  std::vector<std::string> args;            // after the driver path
  std::map<std::string, std::string> env;   // extra HVD_* for every rank
  std::map<int, std::map<std::string, std::string>> rank_env;  // per rank
  absl::Duration timeout = absl::Seconds(60);
  // No HVD_* but those in env and rank_env: a plain process (a job of size
  // 1), or one another launcher's variables place in a job.
  bool bare = false;
  // Hosted on the rendezvous server beside it, e.g. a launcher's elastic
  // service (not owned; each outlives the job).
  std::vector<grpc::Service*> services;
  // The job size the server knows; -1: `size`. 0 leaves ranks unbounded.
  int server_size = -1;
};

// Runs the job to completion. Workers still alive at the timeout are
// SIGKILLed and reported with signal 9 (the test then fails on them).
std::vector<WorkerResult> RunJob(const JobSpec& spec);

// Text for a failure message: every rank's status and output.
std::string Describe(const std::vector<WorkerResult>& results);

}  // namespace hvd::testing

#endif  // HVD_CORE_TESTING_JOB_RUNNER_H_
