#include "host/worker_environment.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace host {
namespace {

using ::testing::Contains;
using ::testing::Not;

TEST(WorkerEnvironment, IdentityOverridesBaseAndOverlay) {
  WorkerIdentity id;
  id.rank = 5;
  id.size = 8;
  id.local_rank = 1;
  id.local_size = 4;
  id.cross_rank = 1;
  id.cross_size = 2;
  id.hostname = "h2";
  id.rendezvous_addr = "10.0.0.1:4000";
  id.job_token = "secret";
  id.iface = "10.0.0.3";
  auto env = WorkerEnvironment({"PATH=/agent", "HVD_RANK=0", "KEEP=1"},
                               {{"PATH", "/submit"}, {"HOROVOD_RANK", "7"}},
                               id);
  EXPECT_THAT(env, Contains("PATH=/submit"));
  EXPECT_THAT(env, Contains("KEEP=1"));
  EXPECT_THAT(env, Contains("HVD_RANK=5"));
  EXPECT_THAT(env, Contains("HOROVOD_RANK=5"));
  EXPECT_THAT(env, Contains("HVD_SIZE=8"));
  EXPECT_THAT(env, Contains("HVD_LOCAL_RANK=1"));
  EXPECT_THAT(env, Contains("HVD_LOCAL_SIZE=4"));
  EXPECT_THAT(env, Contains("HVD_CROSS_RANK=1"));
  EXPECT_THAT(env, Contains("HOROVOD_CROSS_SIZE=2"));
  EXPECT_THAT(env, Contains("HVD_HOSTNAME=h2"));
  EXPECT_THAT(env, Contains("HVD_RENDEZVOUS_ADDR=10.0.0.1:4000"));
  EXPECT_THAT(env, Contains("HVD_JOB_TOKEN=secret"));
  EXPECT_THAT(env, Contains("HVD_IFACE=10.0.0.3"));
  EXPECT_THAT(env, Not(Contains("HVD_RANK=0")));
}

TEST(WorkerEnvironment, InheritedIfaceDoesNotLeak) {
  WorkerIdentity id;
  auto env = WorkerEnvironment({"HVD_IFACE=eth9"}, {}, id);
  EXPECT_THAT(env, Not(Contains("HVD_IFACE=eth9")));
}

TEST(WorkerEnvironment, TheJobsCaReplacesAnInheritedOneAndNoneLeaks) {
  WorkerIdentity id;
  auto plain = WorkerEnvironment({"HVD_RENDEZVOUS_CA=/old/ca.pem"}, {}, id);
  EXPECT_THAT(plain, Not(Contains("HVD_RENDEZVOUS_CA=/old/ca.pem")));
  id.rendezvous_ca_pem = "-----BEGIN CERTIFICATE-----\nX\n";
  id.rendezvous_tls_name = "hvd-rendezvous";
  auto tls = WorkerEnvironment({"HVD_RENDEZVOUS_CA=/old/ca.pem"}, {}, id);
  EXPECT_THAT(tls, Contains("HVD_RENDEZVOUS_CA=-----BEGIN CERTIFICATE-----\nX\n"));
  EXPECT_THAT(tls, Contains("HVD_RENDEZVOUS_TLS_NAME=hvd-rendezvous"));
}

TEST(IsIdentityVariable, BothSpellingsOfTheIdentityOnly) {
  EXPECT_TRUE(IsIdentityVariable("HVD_RANK"));
  EXPECT_TRUE(IsIdentityVariable("HOROVOD_JOB_TOKEN"));
  EXPECT_FALSE(IsIdentityVariable("HVD_FUSION_THRESHOLD"));
  EXPECT_FALSE(IsIdentityVariable("RANK"));
}

}  // namespace
}  // namespace host
}  // namespace hvd
