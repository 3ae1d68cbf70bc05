// Fuzzes the TCP data plane past the handshake: a real rank 0 context whose
// peer, rank 1, is played by this harness. It completes the hello with the
// job's token, then writes the input as rank 1's byte stream and hangs up.
// Rank 0 receives a message of any length and one of 64 bytes: whatever the
// bytes, it must fail or succeed cleanly (no crash, no unbounded
// allocation, no hang past the deadline).
#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "core/rendezvous/store.h"
#include "core/transport/tcp/address.h"
#include "core/transport/tcp/handshake.h"
#include "core/transport/tcp/tcp_context.h"

namespace {

namespace asio = boost::asio;
namespace tcp = hvd::transport::tcp_internal;
constexpr char kToken[] = "stream-fuzzer-token-0123456789ab";

// libFuzzer's SIGALRM (its -timeout watch) interrupts blocking socket calls:
// these retry the rest of the transfer.
void WriteAll(asio::ip::tcp::socket& socket, const void* data, size_t size,
              boost::system::error_code& ec) {
  size_t done = 0;
  do {
    ec.clear();
    done += asio::write(
        socket,
        asio::buffer(static_cast<const char*>(data) + done, size - done), ec);
  } while (ec == asio::error::interrupted);
}

void ReadAll(asio::ip::tcp::socket& socket, void* data, size_t size,
             boost::system::error_code& ec) {
  size_t done = 0;
  do {
    ec.clear();
    done += asio::read(
        socket, asio::buffer(static_cast<char*>(data) + done, size - done), ec);
  } while (ec == asio::error::interrupted);
}

// Dials rank 0 as rank 1 and completes the hello; says which step failed,
// or returns an empty string.
std::string Handshake(hvd::Store& store, asio::ip::tcp::socket& socket) {
  // Rank 1's address, never dialled (rank 0 would look it up only to ask
  // for a call-back).
  tcp::PeerRecord mine{
      "fuzz", {asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 1)}};
  if (!store.Set("tcp/1", tcp::EncodePeerRecord(mine)).ok()) {
    return "cannot publish rank 1's address";
  }
  auto published = store.Get("tcp/0", absl::Seconds(5));
  if (!published.ok()) return "rank 0 published no address";
  auto record = tcp::DecodePeerRecord(*published);
  if (!record.ok() || record->endpoints.empty()) return "no endpoint";
  boost::system::error_code ec;
  const auto endpoint = tcp::DialCandidates(*record, record->hostname).front();
  do {
    socket.close(ec);
    socket.connect(endpoint, ec);
  } while (ec == asio::error::interrupted);
  if (ec) return "connect: " + ec.message();
  const std::string hello =
      tcp::EncodeHello(1, 2, tcp::HelloProof(kToken, 1, 0, 2));
  WriteAll(socket, hello.data(), hello.size(), ec);
  if (ec) return "hello: " + ec.message();
  unsigned char reply = 0xff;
  ReadAll(socket, &reply, 1, ec);
  if (ec) return "reply: " + ec.message();
  if (reply != 0) return "rank 0 refused the hello: " + std::to_string(reply);
  const unsigned char confirm = tcp::kHelloConfirm;
  WriteAll(socket, &confirm, 1, ec);
  return ec ? "confirm: " + ec.message() : "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<hvd::Store> store = hvd::NewInMemoryStore();
  hvd::transport::TcpOptions options;
  options.iface = "127.0.0.1";
  options.hostname = "fuzz";
  options.token = kToken;
  options.connect_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<hvd::transport::Context>> rank0;
  std::thread accept([&] {
    rank0 = hvd::transport::CreateTcpContext(0, 2, store, options);
  });
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  const std::string failed = Handshake(*store, socket);
  accept.join();
  if (!failed.empty() || !rank0.ok()) {
    // Not a finding about the input: the harness could not set up the job.
    std::fprintf(stderr,
                 "stream_fuzzer: set-up failed (rank 1: %s; rank 0: %s)\n",
                 failed.empty() ? "connected" : failed.c_str(),
                 rank0.ok() ? "connected"
                            : std::string(rank0.status().message()).c_str());
    std::abort();
  }
  boost::system::error_code ec;
  WriteAll(socket, data, size, ec);
  socket.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket.close(ec);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  std::string any;
  (*rank0)->RecvAny(1, &any)->Wait(deadline).IgnoreError();
  char fixed[64];
  (*rank0)->Recv(1, fixed, sizeof(fixed))->Wait(deadline).IgnoreError();
  return 0;
}
