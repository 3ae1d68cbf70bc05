// The shape of ring plans: what each member sends and receives, in which
// chunks, and which receives must wait for an earlier send of the same bytes.
#include "core/collectives/ring_pipeline.h"

#include <vector>

#include "gtest/gtest.h"

namespace hvd::collectives::internal {
namespace {

size_t SentBytes(const RingPlan& plan) {
  size_t bytes = 0;
  for (const Span& s : plan.initial_sends) bytes += s.bytes;
  for (const RingRecv& r : plan.recvs) bytes += r.forward ? r.span.bytes : 0;
  return bytes;
}

RingPlan AllreducePlan(size_t count, int n, int index, size_t chunk_bytes,
                       size_t elem_size) {
  const std::vector<Span> blocks = EvenBlocks(count, n, elem_size);
  std::vector<RingStep> steps = ReduceScatterSteps(blocks, index);
  for (const RingStep& s : AllgatherSteps(blocks, index)) steps.push_back(s);
  return BuildRingPlan(ReduceScatterFirstSend(blocks, index), steps, false,
                       chunk_bytes, elem_size);
}

TEST(Chunks, WholeElementsOfAtMostChunkBytes) {
  const std::vector<Span> chunks = Chunks({100, 40}, 15, 4);  // 3 elements.
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].offset, 100u);
  EXPECT_EQ(chunks[0].bytes, 12u);
  EXPECT_EQ(chunks[3].offset, 136u);
  EXPECT_EQ(chunks[3].bytes, 4u);
}

TEST(Chunks, EmptySpanHasNoChunksAndTinyChunkIsOneElement) {
  EXPECT_TRUE(Chunks({8, 0}, 1024, 8).empty());
  EXPECT_EQ(Chunks({0, 24}, 1, 8).size(), 3u);
}

TEST(Chunks, ChunksBetweenCutsNeverCrossOne) {
  const std::vector<Span> chunks = ChunksBetween({0, 40}, 16, 4, {8, 12, 36});
  const std::vector<std::pair<size_t, size_t>> want = {
      {0, 8}, {8, 4}, {12, 16}, {28, 8}, {36, 4}};
  ASSERT_EQ(chunks.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(chunks[i].offset, want[i].first) << i;
    EXPECT_EQ(chunks[i].bytes, want[i].second) << i;
  }
}

TEST(DataView, PiecesAddressedAsOneBuffer) {
  char a[8], b[4], c[12];
  const DataView view({{a, 8}, {nullptr, 0}, {b, 4}, {c, 12}});
  EXPECT_EQ(view.cuts(), (std::vector<size_t>{8, 12}));
  EXPECT_EQ(view.At(0), a);
  EXPECT_EQ(view.At(9), b + 1);
  EXPECT_EQ(view.At(20), c + 8);
  EXPECT_EQ(view.Contiguous(12, 12), c);
  EXPECT_EQ(view.Contiguous(6, 4), nullptr);
  const auto ranges = view.Ranges(6, 10);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0], std::make_pair(a + 6, size_t{2}));
  EXPECT_EQ(ranges[1], std::make_pair(b, size_t{4}));
  EXPECT_EQ(ranges[2], std::make_pair(c, size_t{4}));
  const DataView tail = view.Slice(10);
  EXPECT_EQ(tail.At(0), b + 2);
  EXPECT_EQ(tail.cuts(), (std::vector<size_t>{2}));
  EXPECT_EQ(tail.At(5), c + 3);
}

TEST(EvenBlocks, FirstBlocksTakeTheRemainder) {
  const std::vector<Span> blocks = EvenBlocks(10, 4, 2);
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0].bytes, 6u);
  EXPECT_EQ(blocks[1].bytes, 6u);
  EXPECT_EQ(blocks[2].bytes, 4u);
  EXPECT_EQ(blocks[3].offset, 16u);
  EXPECT_EQ(blocks[3].bytes, 4u);
}

TEST(RingPlan, AllreduceSendsTwiceNMinusOneOverNOfTheBuffer) {
  for (int n : {2, 3, 4, 8}) {
    for (int index = 0; index < n; ++index) {
      const RingPlan plan = AllreducePlan(24000, n, index, 1000, 4);
      EXPECT_EQ(SentBytes(plan), 2u * (n - 1) * 96000 / n) << n << " " << index;
      size_t received = 0;
      for (const RingRecv& r : plan.recvs) received += r.span.bytes;
      EXPECT_EQ(received, SentBytes(plan));
    }
  }
}

TEST(RingPlan, AllreduceReducesFirstThenStoresAndForwardsAllButLastStep) {
  const RingPlan plan = AllreducePlan(400, 4, 1, 40, 4);  // 10 chunks/block.
  ASSERT_EQ(plan.initial_sends.size(), 10u);
  ASSERT_EQ(plan.recvs.size(), 60u);
  for (size_t i = 0; i < 60; ++i) {
    EXPECT_EQ(plan.recvs[i].reduce, i < 30) << i;
    EXPECT_EQ(plan.recvs[i].forward, i < 50) << i;
  }
  EXPECT_EQ(plan.num_slots, kPipelineDepth);
  EXPECT_EQ(plan.slot_bytes, 40u);
}

TEST(RingPlan, OnlyStoredChunksThatNoLaterStepReadsAreStreamed) {
  // Every step asks to stream: only the last step's stored, unforwarded
  // chunks may, never a reduced chunk (its slot is read right after) nor a
  // forwarded one (sent on from the buffer).
  const std::vector<Span> blocks = EvenBlocks(400, 4, 4);
  std::vector<RingStep> steps = ReduceScatterSteps(blocks, 1);
  for (const RingStep& s : AllgatherSteps(blocks, 1)) steps.push_back(s);
  for (RingStep& s : steps) s.stream = true;
  const RingPlan plan =
      BuildRingPlan(ReduceScatterFirstSend(blocks, 1), steps, false, 40, 4);
  ASSERT_EQ(plan.recvs.size(), 60u);
  for (size_t i = 0; i < 60; ++i) EXPECT_EQ(plan.recvs[i].stream, i >= 50) << i;
  // Unasked, nothing is.
  for (const RingRecv& r : AllreducePlan(400, 4, 1, 40, 4).recvs) {
    EXPECT_FALSE(r.stream);
  }
}

TEST(RingPlan, AllgatherPhaseWaitsForTheReduceScatterSendOfTheSameBytes) {
  const RingPlan plan = AllreducePlan(400, 4, 1, 40, 4);
  // Sends in order: 10 initial, then the forward of each received chunk.
  std::vector<Span> sends = plan.initial_sends;
  for (const RingRecv& r : plan.recvs) {
    if (r.reduce) {
      EXPECT_EQ(r.wait_send, -1);
    } else {
      ASSERT_GE(r.wait_send, 0);
      ASSERT_LT(static_cast<size_t>(r.wait_send), sends.size());
      EXPECT_EQ(sends[r.wait_send].offset, r.span.offset);
      EXPECT_EQ(sends[r.wait_send].bytes, r.span.bytes);
    }
    if (r.forward) sends.push_back(r.span);
  }
}

TEST(RingPlan, ReduceScatterEndsWithOwnBlockAndEmptyBlocksMoveNothing) {
  const std::vector<Span> blocks = {{0, 8}, {8, 0}, {8, 12}};
  const RingPlan plan =
      BuildRingPlan(ReduceScatterFirstSend(blocks, 2),
                    ReduceScatterSteps(blocks, 2), false, 1024, 4);
  ASSERT_EQ(plan.initial_sends.size(), 0u);  // Block 1 is empty.
  ASSERT_EQ(plan.recvs.size(), 2u);
  EXPECT_EQ(plan.recvs[0].span.offset, 0u);  // Block 0, reduced, forwarded.
  EXPECT_TRUE(plan.recvs[0].forward);
  EXPECT_EQ(plan.recvs[1].span.offset, 8u);  // Own block 2, last.
  EXPECT_FALSE(plan.recvs[1].forward);
}

}  // namespace
}  // namespace hvd::collectives::internal
