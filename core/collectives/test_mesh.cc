#include "core/collectives/test_mesh.h"

#include <functional>
#include <map>
#include <numeric>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/transport/composite/composite_context.h"
#include "core/transport/shm/shm_context.h"
#include "core/transport/tcp/tcp_context.h"
#include "gtest/gtest.h"
#include "rdma/rdma_context.h"

namespace hvd::collectives {
namespace {

absl::Mutex shared_mu(absl::kConstInit);
std::map<std::pair<int, MeshTransport>, std::unique_ptr<TestMesh>>*
    shared_meshes ABSL_GUARDED_BY(shared_mu) = nullptr;

// Closes the shared meshes after the last test, while the process is still
// whole (not during static destruction, with transport threads running).
class SharedMeshes : public ::testing::Environment {
 public:
  void TearDown() override {
    absl::MutexLock lock(&shared_mu);
    delete shared_meshes;
    shared_meshes = nullptr;
  }
};

[[maybe_unused]] ::testing::Environment* const shared_meshes_environment =
    ::testing::AddGlobalTestEnvironment(new SharedMeshes);

}  // namespace

std::string MeshTransportName(MeshTransport transport) {
  switch (transport) {
    case MeshTransport::kTcp:
      return "Tcp";
    case MeshTransport::kShm:
      return "Shm";
    case MeshTransport::kMixed:
      return "Mixed";
    case MeshTransport::kRdma:
      return "Rdma";
  }
  return "?";
}

std::string AlgorithmName(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kAuto:
      return "Auto";
    case AllreduceAlgorithm::kRing:
      return "Ring";
    case AllreduceAlgorithm::kDirect:
      return "Direct";
    case AllreduceAlgorithm::kHierarchical:
      return "Hierarchical";
    case AllreduceAlgorithm::kRecursiveDoubling:
      return "RecursiveDoubling";
  }
  return "?";
}

namespace {

// Rank `rank`'s context: TCP to other hosts (skipped when there are none),
// shared memory to its own host's ranks, composed when both are needed.
absl::StatusOr<std::unique_ptr<transport::Context>> Connect(
    int rank, const std::vector<int>& hosts,
    const std::shared_ptr<Store>& store) {
  const int size = static_cast<int>(hosts.size());
  std::vector<int> local;
  for (int r = 0; r < size; ++r) {
    if (hosts[r] == hosts[rank]) local.push_back(r);
  }
  std::unique_ptr<transport::Context> tcp;
  if (local.size() < hosts.size() || size == 1) {
    transport::TcpOptions options;
    options.iface = "127.0.0.1";
    options.hostname = "localhost";
    options.token = "collectives-test";
    auto context = transport::CreateTcpContext(rank, size, store, options);
    if (!context.ok()) return context.status();
    tcp = *std::move(context);
  }
  if (local.size() == 1) return tcp;
  auto mesh = transport::CreateShmContext(rank, size, local, store.get(), {});
  if (!mesh.ok()) return mesh.status();
  if (mesh->peers.size() + 1 != local.size()) {
    return absl::InternalError(
        "shared memory did not connect every local rank");
  }
  if (tcp == nullptr) return std::move(mesh->context);
  std::vector<int> route(size, 0);
  for (int peer : mesh->peers) route[peer] = 1;
  std::vector<std::unique_ptr<transport::Context>> children;
  children.push_back(std::move(tcp));
  children.push_back(std::move(mesh->context));
  return transport::NewCompositeContext(std::move(children), std::move(route));
}

absl::StatusOr<std::unique_ptr<transport::Context>> ConnectRdma(
    int rank, int size, const std::shared_ptr<Store>& store) {
  rdma::RdmaOptions options;
  options.provider = "tcp";
  options.hostname = "localhost";
  options.token = "collectives-test";
  return rdma::CreateRdmaContext(rank, size, store, options);
}

std::vector<int> HostsOf(int size, MeshTransport transport) {
  std::vector<int> hosts(size);
  for (int r = 0; r < size; ++r) {
    hosts[r] =
        transport == MeshTransport::kTcp || transport == MeshTransport::kRdma
            ? r
        : transport == MeshTransport::kShm ? 0
                                           : r / 2;
  }
  return hosts;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TestMesh>> TestMesh::Create(
    int size, MeshTransport transport) {
  if (transport != MeshTransport::kRdma) {
    return CreateOnHosts(HostsOf(size, transport));
  }
  return Build(HostsOf(size, transport),
               [size](int rank, const std::shared_ptr<Store>& store) {
                 return ConnectRdma(rank, size, store);
               });
}

absl::StatusOr<std::unique_ptr<TestMesh>> TestMesh::CreateOnHosts(
    const std::vector<int>& hosts) {
  return Build(hosts, [&hosts](int rank, const std::shared_ptr<Store>& store) {
    return Connect(rank, hosts, store);
  });
}

absl::StatusOr<std::unique_ptr<TestMesh>> TestMesh::Build(
    const std::vector<int>& hosts,
    const std::function<absl::StatusOr<std::unique_ptr<transport::Context>>(
        int rank, const std::shared_ptr<Store>& store)>& connect) {
  const int size = static_cast<int>(hosts.size());
  std::unique_ptr<TestMesh> mesh(new TestMesh);
  mesh->store_ = NewInMemoryStore();
  mesh->contexts_.resize(size);
  mesh->hosts_ = hosts;
  std::vector<absl::Status> statuses(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      auto context = connect(rank, mesh->store_);
      if (context.ok()) {
        mesh->contexts_[rank] = *std::move(context);
      } else {
        statuses[rank] = context.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return mesh;
}

TestMesh* TestMesh::Shared(int size, MeshTransport transport) {
  absl::MutexLock lock(&shared_mu);
  if (shared_meshes == nullptr) {
    shared_meshes =
        new std::map<std::pair<int, MeshTransport>, std::unique_ptr<TestMesh>>;
  }
  auto& mesh = (*shared_meshes)[{size, transport}];
  if (mesh == nullptr) {
    auto created = Create(size, transport);
    if (!created.ok()) {
      ADD_FAILURE() << MeshTransportName(transport) << " mesh of " << size
                    << ": " << created.status();
      return nullptr;
    }
    mesh = *std::move(created);
  }
  return mesh.get();
}

std::vector<absl::Status> TestMesh::Run(const std::vector<int>& ranks,
                                        const RankFn& fn) {
  std::vector<absl::Status> statuses(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back(
        [&, i] { statuses[i] = fn(ranks[i], *contexts_[ranks[i]]); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

std::vector<absl::Status> TestMesh::RunAll(const RankFn& fn) {
  std::vector<int> ranks(size());
  std::iota(ranks.begin(), ranks.end(), 0);
  return Run(ranks, fn);
}

Group GroupOf(const std::vector<int>& ranks, int rank) {
  Group group{ranks, 0};
  while (group.index < group.size() && group.ranks[group.index] != rank) {
    ++group.index;
  }
  return group;
}

std::string FailedRanks(const std::vector<int>& ranks,
                        const std::vector<absl::Status>& statuses) {
  std::string out;
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i].ok()) continue;
    absl::StrAppend(&out, "rank ", ranks[i], ": ", statuses[i].ToString(),
                    "\n");
  }
  return out;
}

}  // namespace hvd::collectives
