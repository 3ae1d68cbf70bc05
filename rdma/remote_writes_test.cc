// Remote writes land where the receiver's advert says, in the addressing the
// domain really uses, in a test linked a shared object per library (which
// once bound libfabric's 1.0 ABI; libfabric.h now binds the versions
// whatever the link).
//
// Over libfabric 1.17's tcp;ofi_rxm, fi_getinfo reports mr_mode 0: a
// remote address is an offset into the region and the key is the one the
// application asked for. A program bound to libfabric's 1.0 ABI instead
// (unversioned fi_* references, as a shared library linked without
// -lfabric had) gets a domain that addresses regions by virtual address and
// picks its own keys, while fi_getinfo still says mr_mode 0. The transport
// once took the 1.0 behaviour for the tcp provider's own; then every write
// of the benchmark (linked whole) was refused by the receiving provider.
#include <rdma/fi_domain.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/transport/context_contract.h"
#include "gtest/gtest.h"
#include "rdma/fabric.h"
#include "rdma/rdma_context.h"

namespace hvd::rdma {
namespace {

using transport::Context;
using transport::testing::ConnectRanks;
using transport::testing::Pattern;
using transport::testing::RunRanks;

// Shorter than the contract's deadline: a refused write never completes.
absl::Time SoonDeadline() { return absl::Now() + absl::Seconds(10); }

RdmaOptions TcpOptions(size_t max_registration_bytes) {
  RdmaOptions options;
  options.provider = "tcp";
  options.hostname = "testhost";
  options.token = "job-secret";
  options.connect_timeout = absl::Seconds(20);
  options.tuning.max_registration_bytes = max_registration_bytes;
  return options;
}

std::vector<std::unique_ptr<Context>> ConnectTwo(std::shared_ptr<Store> store,
                                                 size_t max_registration) {
  return ConnectRanks(2, [&](int rank) {
    return CreateRdmaContext(rank, 2, store, TcpOptions(max_registration));
  });
}

// Each rank receives `len` bytes into `buffer + offset` and sends as much.
void ExchangeAt(std::vector<std::unique_ptr<Context>>& contexts, size_t len,
                size_t offset) {
  RunRanks(contexts, [&](Context& c) {
    const int peer = 1 - c.rank();
    const std::string out = Pattern(len, c.rank());
    std::vector<char> buffer(offset + len + 64, '\0');
    auto recv = c.Recv(peer, buffer.data() + offset, len);
    auto send = c.Send(peer, out.data(), out.size());
    ASSERT_TRUE(send->Wait(SoonDeadline()).ok()) << len << " bytes";
    ASSERT_TRUE(recv->Wait(SoonDeadline()).ok()) << len << " bytes";
    EXPECT_TRUE(std::string(buffer.data() + offset, len) == Pattern(len, peer))
        << len << " bytes at offset " << offset;
  });
}

// rdma_bench's first failure: the ring allreduce of 1 MiB over two ranks
// receives a 512 KiB chunk into a buffer that does not start a page.
TEST(RemoteWritesTest, HalfMebibyteRingChunkLandsInAnUnalignedReceiveBuffer) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  auto contexts = ConnectTwo(store, size_t{64} << 20);
  ExchangeAt(contexts, size_t{512} << 10, 0x150);
}

TEST(RemoteWritesTest, WritesOfEverySizeLandFromTheFirstByteOfTheirRegion) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  auto contexts = ConnectTwo(store, size_t{64} << 20);
  for (size_t len : {size_t{4096}, size_t{128} << 10, size_t{256} << 10,
                     size_t{1} << 20, size_t{16} << 20}) {
    ExchangeAt(contexts, len, 8);
  }
}

// Several registrations per receive, each its own region (offset 0 each).
TEST(RemoteWritesTest, AReceiveSplitIntoRegistrationsTakesEveryPiece) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  auto contexts = ConnectTwo(store, size_t{1} << 20);
  ExchangeAt(contexts, (size_t{5} << 20) + 3, 0x150);
}

// What the transport relies on: a domain whose fi_getinfo reported no
// FI_MR_PROV_KEY keeps the key it is asked for (under the 1.0 ABI it picks
// its own, and addresses regions by virtual address too).
TEST(RemoteWritesTest, TheDomainKeepsTheKeyItWasAskedForUnlessItSaidOtherwise) {
  auto fabric = Fabric::Open("tcp", 64);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  if ((*fabric)->prov_key()) GTEST_SKIP() << "provider chooses keys";
  std::vector<char> buf(4096);
  constexpr uint64_t kAsked = 4242;
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg((*fabric)->domain(), buf.data(), buf.size(),
                      FI_REMOTE_WRITE, 0, kAsked, 0, &mr, nullptr),
            0);
  EXPECT_EQ(fi_mr_key(mr), kAsked);
  fi_close(&mr->fid);
}

}  // namespace
}  // namespace hvd::rdma

// The contract's typed suite comes with its header; rdma_context_test runs it.
namespace hvd::transport::testing {
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ContextContractTest);
}  // namespace hvd::transport::testing
