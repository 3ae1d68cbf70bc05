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

std::vector<RankReport> TwoRanks() {
  return {{0, "h1",
           "hvd_collectives_total{op=\"allreduce\"} 3\nhvd_step_seconds 0.5\n"},
          {1, "h\"2", ""}};
}

TEST(RenderPrometheus, LabelsEverySampleAndGroupsEachMetric) {
  EXPECT_EQ(RenderPrometheus(TwoRanks()),
            "# TYPE hvd_collectives_total counter\n"
            "hvd_collectives_total{rank=\"0\",host=\"h1\",op=\"allreduce\"} 3\n"
            "# TYPE hvd_rank_reporting gauge\n"
            "hvd_rank_reporting{rank=\"0\",host=\"h1\"} 1\n"
            "hvd_rank_reporting{rank=\"1\",host=\"h\\\"2\"} 0\n"
            "# TYPE hvd_step_seconds gauge\n"
            "hvd_step_seconds{rank=\"0\",host=\"h1\"} 0.5\n");
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
  EXPECT_THAT(got, HasSubstr("\r\n\r\n# TYPE hvd_collectives_total counter\n"));
  EXPECT_EQ(calls, 1);
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
  auto first = MetricsServer::Start(0, [] { return std::vector<RankReport>{}; });
  ASSERT_TRUE(first.ok());
  auto second = MetricsServer::Start((*first)->port(),
                                     [] { return std::vector<RankReport>{}; });
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              StartsWith(absl::StrCat("--metrics-port ", (*first)->port(),
                                      ": cannot listen: ")));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
