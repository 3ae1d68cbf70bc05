#include "launcher/job_addresses.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

JobHost Host(const std::string& name,
             std::vector<std::pair<std::string, std::string>> interfaces,
             const std::string& peer_ip = "") {
  JobHost h;
  h.name = name;
  h.peer_ip = peer_ip;
  h.hello.set_probe_port(7000);
  h.hello.set_probe_nonce("nonce-" + name);
  for (const auto& [ifname, address] : interfaces) {
    Interface* i = h.hello.add_interfaces();
    i->set_name(ifname);
    i->set_address(address);
  }
  return h;
}

TEST(NamedInterfaceAddress, FirstWantedNameOrAddressWins) {
  JobHost h = Host("a", {{"eth0", "10.0.0.1"}, {"ib0", "192.168.0.1"}});
  EXPECT_EQ(*NamedInterfaceAddress(h, {"ib0", "eth0"}), "192.168.0.1");
  EXPECT_EQ(*NamedInterfaceAddress(h, {"nope", "10.0.0.1"}), "10.0.0.1");
}

TEST(NamedInterfaceAddress, NoneNamedSaysWhatTheHostHas) {
  JobHost h = Host("a", {{"eth0", "10.0.0.1"}});
  absl::StatusOr<std::string> a = NamedInterfaceAddress(h, {"ib0", "ib1"});
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a.status().message(),
            "host a has none of the interfaces ib0,ib1 (it has: eth0 "
            "10.0.0.1)");
  EXPECT_THAT(NamedInterfaceAddress(Host("b", {}), {"ib0"}).status().message(),
              HasSubstr("(it has: none)"));
}

TEST(ProbeCandidates, TheAddressTheAgentCameFromGoesFirst) {
  JobHost h = Host("a", {{"docker0", "172.17.0.1"}, {"eth0", "10.0.0.1"}},
                   /*peer_ip=*/"10.0.0.1");
  EXPECT_THAT(ProbeCandidates(h), ElementsAre("10.0.0.1", "172.17.0.1"));
}

TEST(ProbeCandidates, APeerAddressNotOfItsInterfacesIsNotACandidate) {
  JobHost h = Host("a", {{"eth0", "10.0.0.1"}}, /*peer_ip=*/"203.0.113.9");
  EXPECT_THAT(ProbeCandidates(h), ElementsAre("10.0.0.1"));
}

TEST(MakeProbeRequest, TargetsEveryCandidateOfTheOtherHostsInTheJob) {
  std::vector<JobHost> hosts = {Host("a", {}), Host("b", {}), Host("c", {})};
  hosts[0].candidates = {"10.0.0.1"};
  hosts[1].candidates = {"10.0.0.2"};  // not in the job
  hosts[2].candidates = {"10.0.0.3", "172.17.0.1"};
  ProbeRequest r = MakeProbeRequest(hosts, {0, 2}, /*from=*/0,
                                    absl::Milliseconds(1500));
  EXPECT_EQ(r.timeout_ms(), 1500);
  ASSERT_EQ(r.targets_size(), 2);
  EXPECT_EQ(r.targets(0).host_index(), 2);
  EXPECT_EQ(r.targets(0).address(), "10.0.0.3");
  EXPECT_EQ(r.targets(0).port(), 7000);
  EXPECT_EQ(r.targets(0).nonce(), "nonce-c");
  EXPECT_EQ(r.targets(1).address(), "172.17.0.1");
}

TEST(ChooseFromProbes, HostsOutsideTheJobDoNotCount) {
  std::vector<JobHost> hosts = {Host("a", {}), Host("gone", {}),
                                Host("c", {})};
  hosts[0].candidates = {"10.0.0.1"};
  hosts[2].candidates = {"10.0.0.3"};
  EXPECT_FALSE(ChooseFromProbes(hosts, {0, 2}, /*final=*/false)->has_value());
  hosts[0].reached[2]["10.0.0.3"] = true;
  hosts[0].reached[1]["10.0.0.2"] = false;  // host 1 is not in the job
  hosts[2].reached[0]["10.0.0.1"] = true;
  auto chosen = ChooseFromProbes(hosts, {0, 2}, /*final=*/false);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  ASSERT_TRUE(chosen->has_value());
  EXPECT_THAT(**chosen, ElementsAre("10.0.0.1", "10.0.0.3"));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
