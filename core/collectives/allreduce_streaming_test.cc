// A large out-of-place ring allreduce receives its last step past the caches
// (CollectiveOptions::streaming_store_bytes): which receives ask the
// transport for it, and that the result is the same either way.
#include <atomic>
#include <memory>
#include <vector>

#include "core/collectives/collectives.h"
#include "core/collectives/test_mesh.h"
#include "core/collectives/test_values.h"
#include "core/transport/forwarding_context.h"
#include "gtest/gtest.h"

namespace hvd::collectives {
namespace {

// A mesh's context, counting the streamed receives.
class CountingContext : public transport::ForwardingContext {
 public:
  using ForwardingContext::ForwardingContext;
  std::unique_ptr<transport::Request> RecvStreaming(int peer, void* data,
                                                    size_t len) override {
    streamed_bytes += len;
    return inner().RecvStreaming(peer, data, len);
  }

  std::atomic<size_t> streamed_bytes{0};
};

// Runs a float32 Sum ring allreduce of `count` elements on 3 shared-memory
// ranks with `streaming_store_bytes`, out of place or not; expects the
// exact sum on every rank (and the input unchanged out of place) and
// returns the bytes each rank received streamed.
std::vector<size_t> StreamedBytes(size_t count, size_t streaming_store_bytes,
                                  bool out_of_place = true) {
  constexpr int kWorld = 3;
  TestMesh* mesh = TestMesh::Shared(kWorld, MeshTransport::kShm);
  if (mesh == nullptr) return {};
  CollectiveOptions options;
  options.algorithm = AllreduceAlgorithm::kRing;
  options.chunk_bytes = 4000;
  options.ring_segment_bytes = 24000;  // Several segments.
  options.streaming_store_bytes = streaming_store_bytes;
  const DataType dtype = DataType::kFloat32;
  const std::vector<char> want =
      Expected(dtype, ReduceOp::kSum, {0, 1, 2}, count);
  std::vector<size_t> streamed(kWorld);
  auto statuses = mesh->RunAll([&](int rank, transport::Context& context) {
    CountingContext counting(context);
    const std::vector<char> input =
        MakeInput(dtype, ReduceOp::kSum, rank, count);
    std::vector<char> data = input;
    std::vector<char> output(data.size());
    char* out = out_of_place ? output.data() : data.data();
    absl::Status status = AllreduceMany(counting, Group::All(counting),
                                        {{data.data(), out, count}}, dtype,
                                        ReduceOp::kSum, options);
    EXPECT_EQ(
        Mismatch(absl::StrCat("rank ", rank), dtype, out, want.data(), count),
        "");
    if (out_of_place) EXPECT_TRUE(data == input) << "rank " << rank;
    streamed[rank] = counting.streamed_bytes.load();
    return status;
  });
  EXPECT_EQ(FailedRanks({0, 1, 2}, statuses), "");
  return streamed;
}

TEST(AllreduceStreaming, FromTheThresholdOutOfPlaceEachRankStreamsItsLastStep) {
  // 30000 floats = 120000 bytes: 5 segments of 24000 bytes (2000 elements
  // a block), each ending with one block received and not forwarded.
  const size_t count = 30000;
  const size_t bytes = count * sizeof(float);
  for (size_t got : StreamedBytes(count, bytes)) {
    EXPECT_EQ(got, bytes / 3) << "one block of every segment";
  }
  for (size_t got : StreamedBytes(count, bytes + 1)) EXPECT_EQ(got, 0u);
  for (size_t got : StreamedBytes(count, 0)) EXPECT_EQ(got, 0u);
}

TEST(AllreduceStreaming, InPlaceNeverStreams) {
  // Its output lines were just read by the first sends: still cached.
  for (size_t got : StreamedBytes(30000, 1, /*out_of_place=*/false)) {
    EXPECT_EQ(got, 0u);
  }
}

}  // namespace
}  // namespace hvd::collectives
