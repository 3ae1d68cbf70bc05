#include "core/rendezvous/grpc_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/rendezvous/rendezvous_server.h"

namespace hvd {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "f00dfeed-grpc-store-test";

// A loopback port nothing listens on (bound, then released).
int UnusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

class GrpcStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RendezvousServerOptions options;
    options.address = "127.0.0.1:0";
    options.token = kToken;
    options.size = 4;
    server_ = std::make_unique<RendezvousServer>(options);
    ASSERT_TRUE(server_->Start().ok());
    address_ = absl::StrCat("127.0.0.1:", server_->port());
    store_ = Connect();
    ASSERT_NE(store_, nullptr);
  }

  std::unique_ptr<GrpcStore> Connect(const std::string& token = kToken,
                                     GrpcStoreOptions options = {}) {
    auto store = GrpcStore::Connect(address_, token, absl::Seconds(20), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::unique_ptr<RendezvousServer> server_;
  std::string address_;
  std::unique_ptr<GrpcStore> store_;
};

TEST_F(GrpcStoreTest, GetReturnsWhatSetStored) {
  ASSERT_TRUE(store_->Set("core/addr/0", "10.0.0.1:4000").ok());
  absl::StatusOr<std::string> value = store_->Get("core/addr/0", absl::Seconds(5));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "10.0.0.1:4000");
}

TEST_F(GrpcStoreTest, BinaryKeysAndValuesRoundTrip) {
  const std::string key("k\0\xff", 3);
  const std::string value("\0\x01\x80\xfe", 4);
  ASSERT_TRUE(store_->Set(key, value).ok());
  absl::StatusOr<std::string> got = store_->Get(key, absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
}

TEST_F(GrpcStoreTest, GetBlocksUntilALaterSetFromAnotherThread) {
  absl::StatusOr<std::string> value;
  std::thread getter([&] { value = store_->Get("nccl_id", absl::Seconds(60)); });
  ASSERT_TRUE(server_->WaitForBlockedCalls(1, absl::Seconds(20)));
  std::unique_ptr<GrpcStore> setter = Connect();
  ASSERT_TRUE(setter->Set("nccl_id", "id-bytes").ok());
  getter.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "id-bytes");
}

TEST_F(GrpcStoreTest, GetTimeoutIsDeadlineExceededNamingKeyAndAddress) {
  absl::StatusOr<std::string> value = store_->Get("never-set", absl::Milliseconds(50));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(value.status().message(),
            absl::StrCat("rendezvous ", address_,
                         ": key 'never-set' not set within 50ms"));
}

TEST_F(GrpcStoreTest, GetLongerThanOneRpcSliceStillSucceeds) {
  GrpcStoreOptions options;
  options.max_wait_per_rpc = absl::Milliseconds(20);
  std::unique_ptr<GrpcStore> store = Connect(kToken, options);
  absl::StatusOr<std::string> value;
  std::thread getter([&] { value = store->Get("late", absl::Seconds(60)); });
  absl::SleepFor(absl::Milliseconds(200));  // several slices go by
  ASSERT_TRUE(store_->Set("late", "finally").ok());
  getter.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "finally");
}

TEST_F(GrpcStoreTest, TimeoutSpanningSeveralSlicesNamesTheWholeTimeout) {
  GrpcStoreOptions options;
  options.max_wait_per_rpc = absl::Milliseconds(20);
  std::unique_ptr<GrpcStore> store = Connect(kToken, options);
  absl::StatusOr<std::string> value = store->Get("never", absl::Milliseconds(90));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(value.status().message(), HasSubstr("not set within 90ms"));
}

TEST_F(GrpcStoreTest, GetManyReturnsTheValuesOnceTheLastIsSet) {
  ASSERT_TRUE(store_->Set("host/0", "a").ok());
  absl::StatusOr<std::vector<std::string>> values;
  std::thread getter([&] {
    values = store_->GetMany({"host/1", "host/0"}, absl::Seconds(60));
  });
  ASSERT_TRUE(server_->WaitForBlockedCalls(1, absl::Seconds(20)));
  ASSERT_TRUE(Connect()->Set("host/1", "b").ok());
  getter.join();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"b", "a"}));
}

TEST_F(GrpcStoreTest, GetManyTimeoutNamesTheFirstMissingKeyAndTheAddress) {
  ASSERT_TRUE(store_->Set("k0", "v").ok());
  absl::StatusOr<std::vector<std::string>> values =
      store_->GetMany({"k0", "k1", "k2"}, absl::Milliseconds(50));
  EXPECT_EQ(values.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(values.status().message(),
              HasSubstr(absl::StrCat("rendezvous ", address_,
                                     ": key 'k1' and 1 other(s) of 3")));
  EXPECT_THAT(values.status().message(), HasSubstr("50ms in all"));
}

// 5000 keys take two calls of the server's at most 4096; 4 values of 1 MiB
// take two answers of at most 3 MiB. What the caller sees is one list.
TEST_F(GrpcStoreTest, GetManySplitsLongListsAndLargeAnswers) {
  std::vector<std::string> keys;
  for (int i = 0; i < 5000; ++i) {
    keys.push_back(absl::StrCat("many/", i));
    ASSERT_TRUE(store_->Set(keys.back(), absl::StrCat(i)).ok());
  }
  absl::StatusOr<std::vector<std::string>> values =
      store_->GetMany(keys, absl::Seconds(20));
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 5000u);
  EXPECT_EQ((*values)[0], "0");
  EXPECT_EQ((*values)[4999], "4999");
  ASSERT_TRUE(store_->Set("mib", std::string(1 << 20, 'm')).ok());
  values = store_->GetMany({"mib", "mib", "mib", "mib"}, absl::Seconds(20));
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 4u);
  EXPECT_EQ((*values)[3].size(), size_t{1} << 20);
}

TEST_F(GrpcStoreTest, BarrierReleasesFourThreadsTogether) {
  std::vector<std::unique_ptr<GrpcStore>> stores;
  for (int i = 0; i < 2; ++i) stores.push_back(Connect());
  std::vector<absl::Status> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    // Two threads share a store: each call is its own participant.
    threads.emplace_back([&, i] {
      results[i] = stores[i % 2]->Barrier("init", 4, absl::Seconds(60));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
}

TEST_F(GrpcStoreTest, BarrierAcrossSeveralSlicesCountsEachCallerOnce) {
  GrpcStoreOptions options;
  options.max_wait_per_rpc = absl::Milliseconds(10);
  std::unique_ptr<GrpcStore> slow = Connect(kToken, options);
  absl::Status first;
  std::thread early([&] { first = slow->Barrier("b", 2, absl::Seconds(60)); });
  absl::SleepFor(absl::Milliseconds(100));  // the early caller re-sends a few times
  EXPECT_TRUE(store_->Barrier("b", 2, absl::Seconds(60)).ok());
  early.join();
  EXPECT_TRUE(first.ok()) << first;
}

TEST_F(GrpcStoreTest, BarrierTimeoutSaysHowManyArrived) {
  absl::Status status = store_->Barrier("lonely", 3, absl::Milliseconds(50));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            absl::StrCat("rendezvous ", address_,
                         ": barrier 'lonely': 1 of 3 arrived within 50ms"));
}

TEST_F(GrpcStoreTest, RegisterIsObservableByTheServer) {
  absl::StatusOr<Registration> reg =
      store_->Register(2, "host-b", 31337, {"10.0.0.2:5000", "10.0.1.2:5000"});
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_EQ(reg->rank, 2);
  EXPECT_EQ(reg->size, 4);
  std::vector<WorkerInfo> workers = server_->Workers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].rank, 2);
  EXPECT_EQ(workers[0].hostname, "host-b");
  EXPECT_EQ(workers[0].pid, 31337);
  EXPECT_THAT(workers[0].addresses,
              ::testing::ElementsAre("10.0.0.2:5000", "10.0.1.2:5000"));
  EXPECT_THAT(server_->WaitForRanks(4, absl::ZeroDuration()),
              ::testing::ElementsAre(0, 1, 3));
}

TEST_F(GrpcStoreTest, RegisterErrorKeepsTheCodeAndNamesTheAddress) {
  absl::StatusOr<Registration> reg = store_->Register(9, "host-b", 1, {});
  EXPECT_EQ(reg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(reg.status().message(),
              HasSubstr(absl::StrCat("rendezvous ", address_, ": Register: rank 9")));
}

TEST_F(GrpcStoreTest, WrongTokenIsUnauthenticatedForEveryCall) {
  std::unique_ptr<GrpcStore> intruder = Connect("not-the-job-token");
  auto check = [&](const absl::Status& status, absl::string_view call) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << call;
    EXPECT_EQ(status.message(),
              absl::StrCat("rendezvous ", address_, ": ", call,
                           ": missing or wrong job token"));
  };
  check(intruder->Register(0, "host-x", 1, {}).status(), "Register");
  check(intruder->Set("k", "v"), "Set 'k'");
  check(intruder->Get("k", absl::Seconds(5)).status(), "Get 'k'");
  check(intruder->Barrier("b", 2, absl::Seconds(5)), "Barrier 'b'");
  EXPECT_TRUE(server_->Workers().empty());
}

TEST_F(GrpcStoreTest, ShutdownWhileGetIsBlockedReturnsPromptly) {
  absl::StatusOr<std::string> value;
  std::thread getter([&] { value = store_->Get("k", absl::Seconds(60)); });
  ASSERT_TRUE(server_->WaitForBlockedCalls(1, absl::Seconds(20)));
  server_->Shutdown();
  getter.join();
  // Not DeadlineExceeded: the wait ended because the server went away.
  EXPECT_EQ(value.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(value.status().message(),
              HasSubstr(absl::StrCat("rendezvous ", address_, ": Get 'k': ")));
}

// A rank 0 that serves the rendezvous itself does so at one port at every
// init, with one token: a rank already at its second init while rank 0 is
// still shutting down its first reaches the first's server. Its Register
// waits for the second's, and its keys land there.
TEST(GrpcStoreNextInit, RegisterForTheNextInitWaitsForRankZerosNextServer) {
  auto serve = [](const std::string& address, int init_count) {
    RendezvousServerOptions options;
    options.address = address;
    options.token = kToken;
    options.size = 3;
    options.init_count = init_count;
    auto server = std::make_unique<RendezvousServer>(options);
    EXPECT_TRUE(server->Start().ok());
    return server;
  };
  std::unique_ptr<RendezvousServer> first = serve("127.0.0.1:0", 1);
  const std::string address = absl::StrCat("127.0.0.1:", first->port());
  auto store = GrpcStore::Connect(address, kToken, absl::Seconds(20));
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<Registration> reg;
  std::thread early([&] {
    reg = (*store)->Register(2, "host-c", 77, {}, 2, absl::Seconds(20));
  });
  absl::SleepFor(absl::Milliseconds(300));  // several refused tries
  EXPECT_TRUE(first->Workers().empty());
  first->Shutdown();
  std::unique_ptr<RendezvousServer> second = serve(address, 2);
  early.join();
  ASSERT_TRUE(reg.ok()) << reg.status();
  ASSERT_EQ(second->Workers().size(), 1u);
  EXPECT_EQ(second->Workers()[0].rank, 2);
  ASSERT_TRUE((*store)->Set("core/2/layout/2", "mine").ok());
  EXPECT_EQ(second->Value("core/2/layout/2"), "mine");
}

TEST(GrpcStoreNextInit, ARankAtAnotherInitIsRefusedNamingBothAfterTheTimeout) {
  RendezvousServerOptions options;
  options.address = "127.0.0.1:0";
  options.token = kToken;
  options.size = 2;
  options.init_count = 3;
  RendezvousServer server(options);
  ASSERT_TRUE(server.Start().ok());
  auto store = GrpcStore::Connect(absl::StrCat("127.0.0.1:", server.port()),
                                  kToken, absl::Seconds(20));
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<Registration> reg =
      (*store)->Register(1, "host-b", 5, {}, 1, absl::Milliseconds(400));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_EQ(reg.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(reg.status().message(),
              HasSubstr("rank 0 serves this rendezvous for its hvd.init() "
                        "number 3; rank 1 on host-b pid 5"));
  EXPECT_THAT(reg.status().message(),
              HasSubstr("is at its number 1 (every rank calls hvd.init() as "
                        "often as rank 0)"));
  EXPECT_TRUE(server.Workers().empty());
  // The same init registers at once.
  EXPECT_TRUE((*store)->Register(1, "host-b", 5, {}, 3).ok());
}

TEST(GrpcStoreConnect, NothingListeningFailsWithinTheTimeoutNamingTheAddress) {
  const int port = UnusedPort();
  ASSERT_NE(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto store = GrpcStore::Connect(address, kToken, absl::Milliseconds(300));
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(store.status().message(),
              HasSubstr(absl::StrCat("rendezvous ", address,
                                     ": not reachable within 300ms")));
}

TEST(GrpcStoreConnect, EmptyTokenIsInvalidArgument) {
  auto store = GrpcStore::Connect("127.0.0.1:1", "", absl::Seconds(1));
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("job token is empty"));
}

TEST(GrpcStoreConnect, EmptyAddressIsInvalidArgument) {
  auto store = GrpcStore::Connect("", kToken, absl::Seconds(1));
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hvd
