// The elastic client against a real gRPC server: the rendezvous server
// hosting a small launcher-side Elastic service whose answers and events
// each test scripts.
#include "core/bootstrap/elastic_client.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/rendezvous/rendezvous_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/elastic.grpc.pb.h"

namespace hvd::bootstrap {
namespace {

namespace pb = ::hvd::elastic;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kToken[] = "elastic-client-test-token-0123456789";

// The launcher's side, scripted: Join pops the next answer (PENDING when
// none is left, after a short wait); Watch streams what Send queues until
// the caller cancels or Close ends the streams.
class FakeElastic final : public pb::Elastic::Service {
 public:
  void Answer(pb::JoinResponse response) {
    absl::MutexLock lock(&mu_);
    answers_.push_back(std::move(response));
  }
  void Send(pb::RoundEvent event) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  std::vector<pb::JoinRequest> joins() {
    absl::MutexLock lock(&mu_);
    return joins_;
  }
  pb::WatchRequest last_watch() {
    absl::MutexLock lock(&mu_);
    return last_watch_;
  }
  // Waits until `count` Watch calls are being served.
  bool WaitForWatching(int count) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return watching_ == count;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(10));
  }

  grpc::Status Join(grpc::ServerContext*, const pb::JoinRequest* request,
                    pb::JoinResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      joins_.push_back(*request);
      if (!answers_.empty()) {
        *response = answers_.front();
        answers_.pop_front();
        return grpc::Status::OK;
      }
    }
    absl::SleepFor(absl::Milliseconds(50));  // as if the round were forming
    response->set_outcome(pb::JoinResponse::PENDING);
    return grpc::Status::OK;
  }

  grpc::Status Watch(grpc::ServerContext* context,
                     const pb::WatchRequest* request,
                     grpc::ServerWriter<pb::RoundEvent>* writer) override {
    absl::MutexLock lock(&mu_);
    last_watch_ = *request;
    ++watching_;
    auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !events_.empty() || closed_;
    };
    grpc::Status status = grpc::Status::OK;
    while (true) {
      while (!events_.empty()) {
        writer->Write(events_.front());
        events_.pop_front();
      }
      if (closed_) break;
      if (context->IsCancelled()) {
        status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
        break;
      }
      mu_.AwaitWithTimeout(absl::Condition(&wake), absl::Milliseconds(20));
    }
    --watching_;
    return status;
  }

 private:
  absl::Mutex mu_;
  std::deque<pb::JoinResponse> answers_ ABSL_GUARDED_BY(mu_);
  std::deque<pb::RoundEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<pb::JoinRequest> joins_ ABSL_GUARDED_BY(mu_);
  pb::WatchRequest last_watch_ ABSL_GUARDED_BY(mu_);
  int watching_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// What a watcher reported.
class Recorder {
 public:
  RoundEvents Events() {
    RoundEvents events;
    events.on_abort = [this](const std::string& reason) {
      absl::MutexLock lock(&mu_);
      seen_.push_back(absl::StrCat("abort: ", reason));
    };
    events.on_hosts_updated = [this](int64_t seq, bool added, bool removed) {
      absl::MutexLock lock(&mu_);
      seen_.push_back(absl::StrCat("hosts ", seq, added ? " added" : "",
                                   removed ? " removed" : ""));
    };
    return events;
  }
  // What was seen once `count` reports were (or 10 s passed).
  std::vector<std::string> Await(size_t count) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return seen_.size() >= count;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return seen_;
  }
  std::vector<std::string> Seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

pb::JoinResponse Assigned(int round, int rank, int size) {
  pb::JoinResponse r;
  r.set_outcome(pb::JoinResponse::ASSIGNED);
  r.set_round(round);
  r.set_rank(rank);
  r.set_size(size);
  r.set_local_rank(rank % 2);
  r.set_local_size(2);
  r.set_cross_rank(rank / 2);
  r.set_cross_size(size / 2);
  return r;
}

class ElasticClientTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer({&elastic_}); }
  // The server goes before the service it hosts.
  void TearDown() override { server_.reset(); }

  void StartServer(std::vector<grpc::Service*> services) {
    RendezvousServerOptions options;
    options.address = "127.0.0.1:0";
    options.token = kToken;
    options.extra_services = std::move(services);
    server_ = std::make_unique<RendezvousServer>(options);
    ASSERT_TRUE(server_->Start().ok());
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }

  runtime::Config WorkerConfig() {
    runtime::Config config;
    config.rendezvous_addr = address_;
    config.token = kToken;
    config.elastic_worker_id = "h1:0";
    config.start_timeout = absl::Seconds(5);
    return config;
  }

  FakeElastic elastic_;
  std::unique_ptr<RendezvousServer> server_;
  std::string address_;
};

TEST_F(ElasticClientTest, JoinAsksAgainWhilePendingThenReturnsThePlace) {
  pb::JoinResponse pending;
  pending.set_outcome(pb::JoinResponse::PENDING);
  elastic_.Answer(pending);
  elastic_.Answer(pending);
  elastic_.Answer(Assigned(3, 1, 4));
  ElasticClientOptions options;
  options.join_wait_per_rpc = absl::Seconds(2);
  options.retry_pause = absl::Milliseconds(100);
  const absl::Time start = absl::Now();
  absl::StatusOr<RoundAssignment> a = JoinRound(WorkerConfig(), 2, options);
  ASSERT_TRUE(a.ok()) << a.status();
  // PENDING at once, not after the wait asked for: not asked again at once.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_EQ(a->round, 3);
  EXPECT_EQ(a->rank, 1);
  EXPECT_EQ(a->size, 4);
  EXPECT_EQ(a->local_rank, 1);
  EXPECT_EQ(a->local_size, 2);
  EXPECT_EQ(a->cross_rank, 0);
  EXPECT_EQ(a->cross_size, 2);
  const std::vector<pb::JoinRequest> joins = elastic_.joins();
  ASSERT_EQ(joins.size(), 3u);
  EXPECT_EQ(joins[2].worker_id(), "h1:0");
  EXPECT_EQ(joins[2].last_round(), 2);
  EXPECT_EQ(joins[2].pid(), getpid());
  EXPECT_EQ(joins[2].wait_ms(), 2000);
}

TEST_F(ElasticClientTest, ExitIsCancelledRemovedFromTheJob) {
  pb::JoinResponse exit;
  exit.set_outcome(pb::JoinResponse::EXIT);
  exit.set_reason("host h1 was removed by the discovery script");
  elastic_.Answer(exit);
  absl::StatusOr<RoundAssignment> a = JoinRound(WorkerConfig(), -1);
  EXPECT_EQ(a.status(), absl::CancelledError(
                            "removed from the elastic job: host h1 was "
                            "removed by the discovery script"));
}

TEST_F(ElasticClientTest, AnAssignmentOutsideItsSizeIsRefused) {
  elastic_.Answer(Assigned(0, 4, 4));
  absl::StatusOr<RoundAssignment> a = JoinRound(WorkerConfig(), -1);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("round 0 assigned rank 4 of 4"));
}

TEST_F(ElasticClientTest, WrongTokenIsUnauthenticatedNamingTheServer) {
  runtime::Config config = WorkerConfig();
  config.token = "not-the-job-token-0123456789";
  absl::StatusOr<RoundAssignment> a = JoinRound(config, -1);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.status().message(),
            absl::StrCat("rendezvous ", address_,
                         ": Join: missing or wrong job token"));
  EXPECT_TRUE(elastic_.joins().empty());
}

TEST_F(ElasticClientTest, ServerWithoutTheElasticServiceSaysHowToStartOne) {
  server_.reset();
  StartServer({});
  absl::StatusOr<RoundAssignment> a = JoinRound(WorkerConfig(), -1);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("the server has no elastic service, but "
                        "HVD_ELASTIC_WORKER_ID is set"));
}

// The round may take long to form; a server gone for longer than the start
// timeout ends the wait.
TEST_F(ElasticClientTest, JoinGivesUpOnceTheServerIsGoneForTheStartTimeout) {
  runtime::Config config = WorkerConfig();
  config.start_timeout = absl::Seconds(1);
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(300));
    server_->Shutdown();
  });
  ElasticClientOptions options;
  options.retry_pause = absl::Milliseconds(20);
  const absl::Time start = absl::Now();
  absl::StatusOr<RoundAssignment> a = JoinRound(config, -1, options);
  stopper.join();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(a.status().message()),
              StartsWith(absl::StrCat("rendezvous ", address_,
                                      ": Join: no answer for ")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
  EXPECT_GE(elastic_.joins().size(), 2u);  // it did ask while pending
}

TEST_F(ElasticClientTest, WatcherReportsHostUpdatesAndTheAbortInOrder) {
  Recorder recorder;
  auto watcher = RoundWatcher::Start(WorkerConfig(), 3, recorder.Events());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  ASSERT_TRUE(elastic_.WaitForWatching(1));
  EXPECT_EQ(elastic_.last_watch().worker_id(), "h1:0");
  EXPECT_EQ(elastic_.last_watch().round(), 3);
  pb::RoundEvent hosts;
  hosts.set_kind(pb::RoundEvent::HOSTS_UPDATED);
  hosts.set_seq(5);
  hosts.set_added(true);
  elastic_.Send(hosts);
  pb::RoundEvent abort;
  abort.set_kind(pb::RoundEvent::ABORT);
  abort.set_reason("rank 2 on host h3 exited with status 1");
  elastic_.Send(abort);
  elastic_.Send(abort);  // a second abort is not reported again
  elastic_.Close();
  EXPECT_THAT(recorder.Await(2),
              ::testing::ElementsAre(
                  "hosts 5 added",
                  "abort: rank 2 on host h3 exited with status 1"));
  (*watcher)->Stop();
  EXPECT_EQ(recorder.Seen().size(), 2u);
}

TEST_F(ElasticClientTest, StopCancelsTheWatchAtOnceAndReportsNothing) {
  Recorder recorder;
  auto watcher = RoundWatcher::Start(WorkerConfig(), 0, recorder.Events());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  ASSERT_TRUE(elastic_.WaitForWatching(1));
  const absl::Time start = absl::Now();
  watcher->reset();  // the destructor stops it
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_TRUE(elastic_.WaitForWatching(0));  // the server saw the cancel
  EXPECT_TRUE(recorder.Seen().empty());
}

TEST_F(ElasticClientTest, ServerShutdownMidWatchIsLosingTheLauncher) {
  Recorder recorder;
  auto watcher = RoundWatcher::Start(WorkerConfig(), 2, recorder.Events());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  ASSERT_TRUE(elastic_.WaitForWatching(1));
  server_->Shutdown();
  const std::vector<std::string> seen = recorder.Await(1);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_THAT(seen[0], StartsWith(absl::StrCat("abort: lost the launcher: "
                                               "rendezvous ",
                                               address_, ": Watch round 2: ")));
}

TEST_F(ElasticClientTest, StreamEndedByTheServerEndsTheRound) {
  Recorder recorder;
  auto watcher = RoundWatcher::Start(WorkerConfig(), 4, recorder.Events());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  ASSERT_TRUE(elastic_.WaitForWatching(1));
  elastic_.Close();
  EXPECT_THAT(recorder.Await(1),
              ::testing::ElementsAre("abort: the launcher ended round 4"));
}

TEST_F(ElasticClientTest, WatcherRefusesATokenMetadataCannotCarry) {
  runtime::Config config = WorkerConfig();
  config.token = "has a space";
  Recorder recorder;
  auto watcher = RoundWatcher::Start(config, 0, recorder.Events());
  EXPECT_EQ(watcher.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hvd::bootstrap
