#include "launcher/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

JobReport TwoRanks() {
  return {"running",
          "",
          {{0, "h1", "running",
            "hvd_collectives_total{op=\"allreduce\"} 3\n"
            "hvd_collective_bytes_total{op=\"allreduce\"} 4000000000\n"
            "hvd_data_movement_seconds_total 2\n"
            "hvd_stalled{what=\"tensor \\\"w\\\"\"} 1\n"
            "hvd_step_seconds 0.5\n"},
           {1, "h\"2", "starting", ""}}};
}

TEST(RenderPrometheus, LabelsEverySampleAndGroupsEachMetric) {
  JobReport job = TwoRanks();
  job.ranks[0].samples = "hvd_collectives_total{op=\"allreduce\"} 3\n"
                         "hvd_step_seconds 0.5\n";
  EXPECT_EQ(RenderPrometheus(job),
            "# TYPE hvd_collectives_total counter\n"
            "hvd_collectives_total{rank=\"0\",host=\"h1\",op=\"allreduce\"} 3\n"
            "# TYPE hvd_job_failed gauge\n"
            "hvd_job_failed 0\n"
            "# TYPE hvd_rank_reporting gauge\n"
            "hvd_rank_reporting{rank=\"0\",host=\"h1\"} 1\n"
            "hvd_rank_reporting{rank=\"1\",host=\"h\\\"2\"} 0\n"
            "# TYPE hvd_step_seconds gauge\n"
            "hvd_step_seconds{rank=\"0\",host=\"h1\"} 0.5\n");
}

TEST(StatusOf, WhatThePageShowsPerRank) {
  JobReport job = TwoRanks();
  job.failure = "hvdrun: rank 1 (host h2) exited with code 1";
  const metrics::JobStatus s = StatusOf(job);
  EXPECT_EQ(s.phase(), "running");
  EXPECT_EQ(s.failure(), job.failure);
  ASSERT_EQ(s.ranks_size(), 2);
  EXPECT_EQ(s.ranks(0).state(), "running");
  EXPECT_EQ(s.ranks(0).collectives(), 3u);
  EXPECT_DOUBLE_EQ(s.ranks(0).step_seconds(), 0.5);
  // 4 GB of allreduce in 2 s over 2 ranks: 2 * (2 - 1) / 2 * 2 GB/s.
  EXPECT_DOUBLE_EQ(s.ranks(0).busbw_gbps(), 2.0);
  EXPECT_EQ(s.ranks(0).stalled(), "tensor \"w\"");
  EXPECT_EQ(s.ranks(1).host(), "h\"2");
  EXPECT_EQ(s.ranks(1).state(), "starting");
  EXPECT_EQ(s.ranks(1).collectives(), 0u);
}

// One HTTP/1.1 exchange over a plain socket, as a scraper has it.
std::string Fetch(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(write(fd, request.data(), request.size()),
            static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

TEST(MetricsServer, ServesMetricsAndNothingElse) {
  int calls = 0;
  auto server = MetricsServer::Start(0, [&] {
    ++calls;
    return TwoRanks();
  });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const std::string got =
      Fetch(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(got, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(got, HasSubstr("Content-Type: text/plain; version=0.0.4\r\n"));
  EXPECT_THAT(got,
              HasSubstr("\r\n\r\n# TYPE hvd_collective_bytes_total counter\n"));
  EXPECT_EQ(calls, 1);  // one read of the source per request
  const std::string json =
      Fetch(port, "GET /status.json HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(json, HasSubstr("Content-Type: application/json\r\n"));
  EXPECT_THAT(json, HasSubstr("\"phase\":\"running\""));
  EXPECT_THAT(json, HasSubstr("\"host\":\"h\\\"2\""));
  EXPECT_THAT(Fetch(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
              HasSubstr("<tbody id=\"ranks\">"));
  EXPECT_THAT(Fetch(port, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n"),
              StartsWith("HTTP/1.1 404 Not Found\r\n"));
  EXPECT_THAT(Fetch(port, "POST /metrics HTTP/1.1\r\nHost: x\r\n"
                          "Content-Length: 0\r\n\r\n"),
              StartsWith("HTTP/1.1 405 Method Not Allowed\r\n"));
  // Bytes that are not HTTP: the connection is closed, the server goes on.
  EXPECT_EQ(Fetch(port, "\x16\x03\x01 not http\r\n\r\n"), "");
  EXPECT_THAT(Fetch(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
              StartsWith("HTTP/1.1 200 OK\r\n"));
}

TEST(MetricsServer, ATakenPortIsNamed) {
  auto first = MetricsServer::Start(0, [] { return JobReport{}; });
  ASSERT_TRUE(first.ok());
  auto second = MetricsServer::Start((*first)->port(),
                                     [] { return JobReport{}; });
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              StartsWith(absl::StrCat("--metrics-port ", (*first)->port(),
                                      ": cannot listen: ")));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
