#include "launcher/metrics_server.h"

#include <map>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "core/common/prometheus_label.h"
#include "google/protobuf/util/json_util.h"
#include "launcher/metrics_page.h"

namespace hvd {
namespace launcher {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

// "name{a=\"b\"} 1" -> name, and the sample with `labels` put first.
std::pair<std::string, std::string> Labelled(absl::string_view line,
                                             absl::string_view labels) {
  const size_t brace = line.find('{');
  const size_t space = line.find(' ');
  if (brace != absl::string_view::npos && brace < space) {
    return {std::string(line.substr(0, brace)),
            absl::StrCat(line.substr(0, brace + 1), labels, ",",
                         line.substr(brace + 1))};
  }
  const absl::string_view name = line.substr(0, space);
  return {std::string(name),
          absl::StrCat(name, "{", labels, "}", line.substr(name.size()))};
}

// A report's samples by name with labels ("hvd_step_seconds",
// "hvd_collectives_total{op=\"allreduce\"}") -> value.
std::map<std::string, double> Samples(absl::string_view text) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const size_t space = line.rfind(' ');
    double v = 0;
    if (space == absl::string_view::npos ||
        !absl::SimpleAtod(line.substr(space + 1), &v)) {
      continue;
    }
    out[std::string(line.substr(0, space))] = v;
  }
  return out;
}

// The stall label of "hvd_stalled{what=\"...\"} 1", unescaped.
std::string StallOf(absl::string_view text) {
  constexpr absl::string_view kStalled = "hvd_stalled{what=\"";
  const size_t at = text.find(kStalled);
  if (at == absl::string_view::npos) return "";
  return UnescapeLabelValue(text.substr(at + kStalled.size()));
}

std::string Json(const metrics::JobStatus& status) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  // A message without Any fields always prints.
  (void)google::protobuf::util::MessageToJsonString(status, &out, options);
  return out;
}

http::response<http::string_body> Respond(
    const http::request<http::string_body>& req,
    const MetricsServer::Source& source) {
  http::response<http::string_body> res;
  res.version(req.version());
  res.keep_alive(false);
  if (req.method() != http::verb::get && req.method() != http::verb::head) {
    res.result(http::status::method_not_allowed);
    res.set(http::field::allow, "GET, HEAD");
    res.body() = "hvd: GET /metrics\n";
  } else if (req.target() == "/metrics") {
    res.result(http::status::ok);
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.body() = RenderPrometheus(source());
  } else if (req.target() == "/status.json") {
    res.result(http::status::ok);
    res.set(http::field::content_type, "application/json");
    res.set(http::field::cache_control, "no-store");
    res.body() = Json(StatusOf(source()));
  } else if (req.target() == "/") {
    res.result(http::status::ok);
    res.set(http::field::content_type, "text/html; charset=utf-8");
    res.body() = kMetricsPage;
  } else {
    res.result(http::status::not_found);
    res.set(http::field::content_type, "text/plain");
    res.body() = "hvd: not found; Prometheus metrics are at /metrics\n";
  }
  if (req.method() == http::verb::head) {
    res.content_length(res.body().size());
    res.body().clear();
  } else {
    res.prepare_payload();
  }
  return res;
}

// One connection: one request, one answer, closed. A client gets 10 s for
// the whole exchange.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const MetricsServer::Source* source)
      : stream_(std::move(socket)), source_(source) {}

  void Start() {
    stream_.expires_after(std::chrono::seconds(10));
    http::async_read(stream_, buffer_, req_,
                     [self = shared_from_this()](beast::error_code ec,
                                                 size_t) {
                       if (!ec) self->Answer();
                     });
  }

 private:
  void Answer() {
    res_ = Respond(req_, *source_);
    http::async_write(stream_, res_,
                      [self = shared_from_this()](beast::error_code, size_t) {
                        beast::error_code ignored;
                        self->stream_.socket().shutdown(
                            tcp::socket::shutdown_send, ignored);
                      });
  }

  beast::tcp_stream stream_;
  const MetricsServer::Source* source_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
};

}  // namespace

std::string RenderPrometheus(const JobReport& job) {
  std::map<std::string, std::vector<std::string>> families;
  families["hvd_job_failed"].push_back(
      absl::StrCat("hvd_job_failed ", job.failure.empty() ? 0 : 1));
  for (const RankReport& r : job.ranks) {
    const std::string labels = absl::StrCat("rank=\"", r.rank, "\",host=\"",
                                            EscapeLabelValue(r.host), "\"");
    families["hvd_rank_reporting"].push_back(absl::StrCat(
        "hvd_rank_reporting{", labels, "} ", r.samples.empty() ? 0 : 1));
    for (absl::string_view line :
         absl::StrSplit(r.samples, '\n', absl::SkipEmpty())) {
      auto [name, sample] = Labelled(line, labels);
      families[name].push_back(std::move(sample));
    }
  }
  std::string out;
  for (const auto& [name, samples] : families) {
    absl::StrAppend(&out, "# TYPE ", name, " ",
                    absl::EndsWith(name, "_total") ? "counter" : "gauge",
                    "\n");
    for (const std::string& s : samples) absl::StrAppend(&out, s, "\n");
  }
  return out;
}

metrics::JobStatus StatusOf(const JobReport& job) {
  metrics::JobStatus status;
  status.set_phase(job.phase);
  status.set_failure(job.failure);
  const double n = static_cast<double>(job.ranks.size());
  for (const RankReport& r : job.ranks) {
    metrics::RankStatus* s = status.add_ranks();
    s->set_rank(r.rank);
    s->set_host(r.host);
    s->set_state(r.state);
    const std::map<std::string, double> v = Samples(r.samples);
    auto get = [&v](const std::string& name) {
      auto it = v.find(name);
      return it == v.end() ? 0.0 : it->second;
    };
    s->set_step_seconds(get("hvd_step_seconds"));
    const double bytes = get("hvd_collective_bytes_total{op=\"allreduce\"}");
    const double seconds = get("hvd_data_movement_seconds_total");
    if (seconds > 0 && n > 1) {
      s->set_busbw_gbps(bytes * 2 * (n - 1) / n / seconds / 1e9);
    }
    s->set_stalled(StallOf(r.samples));
    double collectives = 0;
    for (const auto& [name, value] : v) {
      if (absl::StartsWith(name, "hvd_collectives_total{")) {
        collectives += value;
      }
    }
    s->set_collectives(static_cast<uint64_t>(collectives));
    s->set_resident_bytes(
        static_cast<uint64_t>(get("hvd_resident_memory_bytes")));
  }
  return status;
}

struct MetricsServer::Impl {
  boost::asio::io_context io;
  tcp::acceptor acceptor{io};
  Source source;
  std::thread thread;

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == boost::asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Session>(std::move(socket), &source)->Start();
      Accept();
    });
  }
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    int port, Source source) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::move(source);
  beast::error_code ec;
  const tcp::endpoint at(tcp::v4(), static_cast<uint16_t>(port));
  impl->acceptor.open(at.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(at, ec);
  if (!ec) impl->acceptor.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat(
        "--metrics-port ", port, ": cannot listen: ", ec.message()));
  }
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MetricsServer::port() const { return impl_->acceptor.local_endpoint().port(); }

}  // namespace launcher
}  // namespace hvd
