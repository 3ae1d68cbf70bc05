// Allreduces over shared memory reduce received bytes straight out of the
// transport's ring (Context::RecvReduce) instead of receiving them into
// scratch first: the ring's chunks, and the direct algorithm's buffer when
// a pair allreduces out of place. Which receives take that path, and that
// the results are bit for bit those of receiving first, in place and out
// of place, for every element type, with and without scaling.
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/collectives/collectives.h"
#include "core/collectives/test_mesh.h"
#include "core/collectives/test_values.h"
#include "absl/strings/str_cat.h"
#include "core/transport/forwarding_context.h"
#include "gtest/gtest.h"

namespace hvd::collectives {
namespace {

constexpr int kWorld = 3;

// A mesh's context that reduces on receive where it does (`reduce`) or
// never (the ring then uses its slots), counting the bytes of each way.
class CountingContext : public transport::ForwardingContext {
 public:
  CountingContext(transport::Context& inner, bool reduce)
      : ForwardingContext(inner), reduce_(reduce) {}

  bool ReducesOnReceive(int peer) const override {
    return reduce_ && inner().ReducesOnReceive(peer);
  }
  std::unique_ptr<transport::Request> RecvReduce(
      int peer, size_t len, transport::ReceiveReducer reducer) override {
    reduced_bytes += len;
    return inner().RecvReduce(peer, len, std::move(reducer));
  }
  std::unique_ptr<transport::Request> Recv(int peer, void* data,
                                           size_t len) override {
    received_bytes += len;
    return inner().Recv(peer, data, len);
  }

  std::atomic<size_t> reduced_bytes{0};
  std::atomic<size_t> received_bytes{0};

 private:
  const bool reduce_;
};

struct Outcome {
  std::vector<std::vector<char>> outputs;  // Per rank.
  std::vector<size_t> reduced_bytes;       // Per rank.
  std::vector<size_t> received_bytes;      // Per rank.
};

using InputOf = std::function<std::vector<char>(int rank)>;

// An allreduce of `count` elements (rank r's: input(r)) on `world`
// shared-memory ranks, by `options.algorithm`.
Outcome Run(int world, const CollectiveOptions& options, DataType dtype,
            ReduceOp op, size_t count, bool reduce, bool out_of_place,
            const InputOf& input_of) {
  Outcome outcome{std::vector<std::vector<char>>(world),
                  std::vector<size_t>(world), std::vector<size_t>(world)};
  TestMesh* mesh = TestMesh::Shared(world, MeshTransport::kShm);
  if (mesh == nullptr) return outcome;
  auto statuses = mesh->RunAll([&](int rank, transport::Context& context) {
    CountingContext counting(context, reduce);
    const std::vector<char> input = input_of(rank);
    std::vector<char> data = input;
    std::vector<char> output(data.size());
    char* out = out_of_place ? output.data() : data.data();
    absl::Status status =
        AllreduceMany(counting, Group::All(counting), {{data.data(), out, count}},
                      dtype, op, options);
    if (out_of_place) EXPECT_TRUE(data == input) << "rank " << rank;
    outcome.outputs[rank].assign(out, out + input.size());
    outcome.reduced_bytes[rank] = counting.reduced_bytes.load();
    outcome.received_bytes[rank] = counting.received_bytes.load();
    return status;
  });
  std::vector<int> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  EXPECT_EQ(FailedRanks(ranks, statuses), "");
  return outcome;
}

// A ring allreduce of `count` elements on kWorld shared-memory ranks, in
// chunks several shared-memory pieces long and in several segments.
Outcome RunRing(DataType dtype, ReduceOp op, size_t count, bool reduce,
                bool out_of_place, const CollectiveOptions& scaling = {}) {
  CollectiveOptions options = scaling;
  options.algorithm = AllreduceAlgorithm::kRing;
  options.chunk_bytes = 150000;         // Past a 64 KiB piece.
  options.ring_segment_bytes = 900000;  // Several segments.
  options.streaming_store_bytes = 0;
  return Run(kWorld, options, dtype, op, count, reduce, out_of_place,
             [&](int rank) { return MakeInput(dtype, op, rank, count); });
}

// A direct allreduce of `count` elements on `world` shared-memory ranks.
Outcome RunDirect(int world, DataType dtype, ReduceOp op, size_t count,
                  bool reduce, bool out_of_place,
                  const CollectiveOptions& scaling = {},
                  const InputOf& input_of = nullptr) {
  CollectiveOptions options = scaling;
  options.algorithm = AllreduceAlgorithm::kDirect;
  return Run(world, options, dtype, op, count, reduce, out_of_place,
             input_of ? input_of : [&](int rank) {
               return MakeInput(dtype, op, rank, count);
             });
}

TEST(AllreduceReduceOnReceive, EveryReducedChunkComesStraightOutOfTheRing) {
  const DataType dtype = DataType::kFloat32;
  const size_t count = 1000003;  // Blocks not a multiple of the alignment.
  const size_t bytes = count * sizeof(float);
  const std::vector<char> want =
      Expected(dtype, ReduceOp::kSum, {0, 1, 2}, count);
  for (bool out_of_place : {false, true}) {
    const Outcome got =
        RunRing(dtype, ReduceOp::kSum, count, /*reduce=*/true, out_of_place);
    for (int rank = 0; rank < kWorld; ++rank) {
      EXPECT_EQ(Mismatch(absl::StrCat("rank ", rank), dtype,
                         got.outputs[rank].data(), want.data(), count),
                "");
      // Each rank reduces two blocks of three and stores one: of the bytes
      // it receives, all it reduces came out of the ring, no slot.
      const size_t total = got.reduced_bytes[rank] + got.received_bytes[rank];
      EXPECT_NEAR(static_cast<double>(total), 2.0 * bytes * 2 / 3, 64)
          << "rank " << rank;
      EXPECT_NEAR(static_cast<double>(got.reduced_bytes[rank]),
                  2.0 * bytes / 3, 64)
          << "rank " << rank;
    }
  }
}

TEST(AllreduceReduceOnReceive, ATransportThatCannotIsReducedFromSlots) {
  const Outcome got = RunRing(DataType::kFloat32, ReduceOp::kSum, 300000,
                              /*reduce=*/false, /*out_of_place=*/false);
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(got.reduced_bytes[rank], 0u) << "rank " << rank;
    EXPECT_GT(got.received_bytes[rank], 0u) << "rank " << rank;
  }
}

// Calls check(dtype, op, out_of_place, scaling, what) for every element
// type and op, in place and out of place; Sum with a postscale of 0.5 and
// `divisor` (an Average's).
void ForEveryCase(int divisor,
                  const std::function<void(DataType, ReduceOp, bool,
                                           const CollectiveOptions&,
                                           const std::string&)>& check) {
  CollectiveOptions average;
  average.postscale = 0.5;
  average.divisor = divisor;
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16,
                         DataType::kFloat32, DataType::kFloat64,
                         DataType::kInt32, DataType::kInt64,
                         DataType::kUint8, DataType::kBool}) {
    for (ReduceOp op : kAllOps) {
      for (bool out_of_place : {false, true}) {
        check(dtype, op, out_of_place,
              op == ReduceOp::kSum ? average : CollectiveOptions{},
              absl::StrCat(DataTypeName(dtype), " op ", static_cast<int>(op),
                           out_of_place ? " out of place" : " in place"));
      }
    }
  }
}

TEST(AllreduceReduceOnReceive, ResultsAreBitForBitThoseOfTheSlots) {
  ForEveryCase(kWorld, [](DataType dtype, ReduceOp op, bool out_of_place,
                          const CollectiveOptions& scaling,
                          const std::string& what) {
    const size_t count = 200001;
    const Outcome slots =
        RunRing(dtype, op, count, /*reduce=*/false, out_of_place, scaling);
    const Outcome ring =
        RunRing(dtype, op, count, /*reduce=*/true, out_of_place, scaling);
    for (int rank = 0; rank < kWorld; ++rank) {
      EXPECT_TRUE(ring.outputs[rank] == slots.outputs[rank])
          << what << " rank " << rank;
      EXPECT_GT(ring.reduced_bytes[rank], 0u);
    }
  });
}

TEST(AllreduceReduceOnReceive,
     APairOutOfPlaceReducesTheDirectBufferStraightOutOfTheRing) {
  const DataType dtype = DataType::kFloat32;
  const size_t count = 40003;  // Past a 64 KiB piece, not a multiple of it.
  const size_t bytes = count * sizeof(float);
  const std::vector<char> want = Expected(dtype, ReduceOp::kSum, {0, 1}, count);
  for (bool out_of_place : {false, true}) {
    const Outcome got = RunDirect(2, dtype, ReduceOp::kSum, count,
                                  /*reduce=*/true, out_of_place);
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(Mismatch(absl::StrCat("rank ", rank), dtype,
                         got.outputs[rank].data(), want.data(), count),
                "");
      // In place the buffer is received first, as before.
      EXPECT_EQ(got.reduced_bytes[rank], out_of_place ? bytes : 0u);
      EXPECT_EQ(got.received_bytes[rank], out_of_place ? 0u : bytes);
    }
  }
}

TEST(AllreduceReduceOnReceive, ADirectAllreduceOfMoreThanTwoReceivesFirst) {
  const Outcome got = RunDirect(3, DataType::kFloat32, ReduceOp::kSum, 1000,
                                /*reduce=*/true, /*out_of_place=*/false);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(got.reduced_bytes[rank], 0u) << "rank " << rank;
    EXPECT_EQ(got.received_bytes[rank], 2 * 1000 * sizeof(float));
  }
}

TEST(AllreduceReduceOnReceive, APairsResultsAreBitForBitThoseOfReceivingFirst) {
  ForEveryCase(2, [](DataType dtype, ReduceOp op, bool out_of_place,
                     const CollectiveOptions& scaling,
                     const std::string& what) {
    const size_t count = 20001;
    const Outcome first = RunDirect(2, dtype, op, count, /*reduce=*/false,
                                    out_of_place, scaling);
    const Outcome pair = RunDirect(2, dtype, op, count, /*reduce=*/true,
                                   out_of_place, scaling);
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(pair.outputs[rank] == first.outputs[rank])
          << what << " rank " << rank;
      EXPECT_EQ(pair.reduced_bytes[rank] > 0, out_of_place) << what;
    }
  });
}

// Min and Max of a NaN and a number, and of zeros of either sign, depend
// on the order of the operands: out of place, both members still end with
// the same bytes, those of receiving first (member 0's operand first).
TEST(AllreduceReduceOnReceive, APairKeepsTheOperandOrderWhereItMatters) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> values = {{nan, 1.0f, -0.0f, 0.0f},
                                                  {1.0f, nan, 0.0f, -0.0f}};
  auto input_of = [&](int rank) {
    std::vector<char> bytes(values[rank].size() * sizeof(float));
    std::memcpy(bytes.data(), values[rank].data(), bytes.size());
    return bytes;
  };
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kSum}) {
    const Outcome first = RunDirect(2, DataType::kFloat32, op, 4,
                                    /*reduce=*/false, /*out_of_place=*/true,
                                    {}, input_of);
    const Outcome pair = RunDirect(2, DataType::kFloat32, op, 4,
                                   /*reduce=*/true, /*out_of_place=*/true, {},
                                   input_of);
    EXPECT_GT(pair.reduced_bytes[0], 0u);
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(pair.outputs[rank] == first.outputs[rank])
          << "op " << static_cast<int>(op) << " rank " << rank;
    }
    EXPECT_TRUE(pair.outputs[0] == pair.outputs[1])
        << "op " << static_cast<int>(op);
  }
}

}  // namespace
}  // namespace hvd::collectives
