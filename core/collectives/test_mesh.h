// Test support: N ranks in one process, one thread each, connected by the
// real transports through an in-memory store: TCP over loopback, shared
// memory, or a mix (a composite context: shared memory among the ranks of a
// pretend host, TCP between hosts).
#ifndef HVD_CORE_COLLECTIVES_TEST_MESH_H_
#define HVD_CORE_COLLECTIVES_TEST_MESH_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/collectives/collectives.h"
#include "core/rendezvous/store.h"
#include "core/transport/transport.h"

namespace hvd::collectives {

enum class MeshTransport {
  kTcp,    // every rank its own host
  kShm,    // one host
  kMixed,  // hosts of two consecutive ranks (the last may hold one)
  kRdma,   // every rank its own host, over libfabric RMA (tcp provider)
};
std::string MeshTransportName(MeshTransport transport);
// "Ring", "Direct", ...: for test names.
std::string AlgorithmName(AllreduceAlgorithm algorithm);

class TestMesh {
 public:
  // Connects `size` contexts (one thread per rank). The error of the first
  // rank that failed, if any.
  static absl::StatusOr<std::unique_ptr<TestMesh>> Create(
      int size, MeshTransport transport = MeshTransport::kTcp);
  // Rank r on host hosts[r]: shared memory within a host, TCP between.
  static absl::StatusOr<std::unique_ptr<TestMesh>> CreateOnHosts(
      const std::vector<int>& hosts);

  // A mesh shared by every test of the binary that asks for it: connecting
  // 8 ranks costs 28 connections, so tests reuse meshes. Fails the calling
  // test (and returns null) if the mesh cannot be made.
  static TestMesh* Shared(int size,
                          MeshTransport transport = MeshTransport::kTcp);

  TestMesh(const TestMesh&) = delete;
  TestMesh& operator=(const TestMesh&) = delete;

  int size() const { return static_cast<int>(contexts_.size()); }
  transport::Context& context(int rank) { return *contexts_[rank]; }
  // Hands rank `rank`'s context to a caller that owns it from now on (a
  // runtime); the mesh keeps the store. Not for shared meshes.
  std::unique_ptr<transport::Context> TakeContext(int rank) {
    return std::move(contexts_[rank]);
  }
  // Host of each rank, for CollectiveOptions::hosts.
  const std::vector<int>& hosts() const { return hosts_; }

  // Runs fn(rank, context) for every rank in `ranks`, each on its own
  // thread, and returns their results in the order of `ranks`.
  using RankFn = std::function<absl::Status(int rank, transport::Context&)>;
  std::vector<absl::Status> Run(const std::vector<int>& ranks,
                                const RankFn& fn);
  std::vector<absl::Status> RunAll(const RankFn& fn);

 private:
  TestMesh() = default;
  // Connects every rank of `hosts` at once, one thread each, with connect().
  static absl::StatusOr<std::unique_ptr<TestMesh>> Build(
      const std::vector<int>& hosts,
      const std::function<absl::StatusOr<std::unique_ptr<transport::Context>>(
          int rank, const std::shared_ptr<Store>& store)>& connect);

  std::shared_ptr<Store> store_;
  std::vector<std::unique_ptr<transport::Context>> contexts_;
  std::vector<int> hosts_;
};

// The group of context ranks `ranks` as seen by member `rank`.
Group GroupOf(const std::vector<int>& ranks, int rank);

// Every rank's status; empty if all are OK, else "rank r: message" lines.
std::string FailedRanks(const std::vector<int>& ranks,
                        const std::vector<absl::Status>& statuses);

}  // namespace hvd::collectives

#endif  // HVD_CORE_COLLECTIVES_TEST_MESH_H_
