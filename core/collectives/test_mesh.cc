#include "core/collectives/test_mesh.h"

#include <map>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/transport/tcp/tcp_context.h"
#include "gtest/gtest.h"

namespace hvd::collectives {
namespace {

absl::Mutex shared_mu(absl::kConstInit);
std::map<int, std::unique_ptr<TestMesh>>* shared_meshes
    ABSL_GUARDED_BY(shared_mu) = nullptr;

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

absl::StatusOr<std::unique_ptr<TestMesh>> TestMesh::Create(int size) {
  std::unique_ptr<TestMesh> mesh(new TestMesh);
  mesh->store_ = NewInMemoryStore();
  mesh->contexts_.resize(size);
  std::vector<absl::Status> statuses(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      transport::TcpOptions options;
      options.iface = "127.0.0.1";
      options.hostname = "localhost";
      options.token = "collectives-test";
      auto context =
          transport::CreateTcpContext(rank, size, mesh->store_.get(), options);
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

TestMesh* TestMesh::Shared(int size) {
  absl::MutexLock lock(&shared_mu);
  if (shared_meshes == nullptr) {
    shared_meshes = new std::map<int, std::unique_ptr<TestMesh>>;
  }
  auto& mesh = (*shared_meshes)[size];
  if (mesh == nullptr) {
    auto created = Create(size);
    if (!created.ok()) {
      ADD_FAILURE() << "mesh of " << size << ": " << created.status();
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
