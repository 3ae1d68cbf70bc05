#include "core/bootstrap/connect.h"

#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/bootstrap/data_plane_token.h"
#include "core/bootstrap/layout.h"
#include "core/bootstrap/open_files.h"
#include "core/common/annotate.h"
#include "core/rendezvous/grpc_store.h"
#include "core/transport/composite/composite_context.h"
#include "core/common/logging.h"
#include "core/transport/shm/shm_context.h"
#include "core/transport/tcp/tcp_context.h"
#include "rdma/fabric.h"
#include "rdma/rdma_context.h"

namespace hvd::bootstrap {
namespace {

using runtime::Config;

transport::TcpOptions TcpOptionsOf(const Config& config) {
  transport::TcpOptions options;
  options.iface = config.iface;
  options.hostname = config.hostname;
  options.token = DataPlaneToken(config.token);
  options.connect_timeout = config.start_timeout;
  options.tuning = config.tcp;
  return options;
}

// All but the provider, which the ranks agree on (AgreeOnLayout).
rdma::RdmaOptions RdmaOptionsOf(const Config& config) {
  rdma::RdmaOptions options;
  options.hostname = config.hostname;
  options.token = DataPlaneToken(config.token);
  options.connect_timeout = config.start_timeout;
  return options;
}

// The libfabric provider this rank offers for ranks on other hosts, "" for
// TCP. Forced RDMA with no usable provider fails (on every rank: each looks
// for itself). auto takes a hardware provider (rdma::HardwareProvider), never
// a software one, and a job on one host has no other hosts to reach.
absl::StatusOr<std::string> LocalRdmaChoice(const Config& config) {
  switch (config.transport) {
    case runtime::Transport::kTcp:
      return std::string();
    case runtime::Transport::kAuto:
      // One host has no other hosts to reach; without a device no hardware
      // provider can be usable (and asking libfabric costs about 0.1 s).
      if (config.local_size >= config.size || !rdma::HasRdmaDevices()) {
        return std::string();
      }
      return rdma::HardwareProvider(config.rdma_provider,
                                    rdma::UsableProviders());
    case runtime::Transport::kRdma:
      break;
  }
  absl::StatusOr<std::string> provider =
      rdma::ResolveProvider(config.rdma_provider);
  if (!provider.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", config.rank, ": HVD_TRANSPORT=rdma, but ",
                     provider.status().message()));
  }
  return provider;
}

// Each rank's host index, and the RDMA provider the ranks on different
// hosts use ("" unless every rank offers RDMA).
struct HostsAndProvider {
  std::vector<int> hosts;
  std::string rdma_provider;
};

absl::StatusOr<HostsAndProvider> AgreeOnLayout(const Config& config,
                                               Store& store) {
  absl::StatusOr<std::string> mine = LocalRdmaChoice(config);
  if (!mine.ok()) return mine.status();
  absl::StatusOr<Layout> layout =
      ExchangeLayout(config.rank, config.size, {config.hostname, !mine->empty()},
                     store, config.start_timeout);
  if (!layout.ok()) return layout.status();
  if (!layout->all_rdma && config.transport == runtime::Transport::kRdma) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", config.rank,
        ": HVD_TRANSPORT=rdma, but another rank has no usable RDMA provider"));
  }
  HostsAndProvider agreed{std::move(layout->hosts), ""};
  if (layout->all_rdma) agreed.rdma_provider = *std::move(mine);
  return agreed;
}

// The store keys of this connect: fresh for each init of a process, so a
// job can shut down and init again. In an elastic job every member of a
// round must use the same ones, whatever its history: the round's.
std::string KeyPrefix(const Config& config) {
  if (config.elastic()) {
    return absl::StrCat("core/e", config.elastic_round, "/");
  }
  return absl::StrCat("core/", config.init_count, "/");
}

// The rendezvous store, registered: the job's, and a view of it scoped to
// this connect and cancelled with `cancel` when there is one. Either keeps
// the connection alive. Elastic workers do not register: their ranks
// move between processes from round to round, and the server keeps a rank
// for the process that registered it first.
struct Stores {
  std::shared_ptr<Store> scoped;
  std::shared_ptr<Store> job;
};
absl::StatusOr<Stores> ReachRendezvous(
    const Config& config, std::shared_ptr<const Cancellation> cancel) {
  GrpcStoreOptions options;
  options.tls = {config.rendezvous_ca_pem, config.rendezvous_tls_name};
  auto store = GrpcStore::Connect(config.rendezvous_addr, config.token,
                                  config.start_timeout, options);
  if (!store.ok()) {
    return Annotate(store.status(), absl::StrCat("rank ", config.rank,
                                                 ": cannot reach the rendezvous"));
  }
  if (!config.elastic()) {
    // Rank 0's own rendezvous (a job hvdrun did not start) is a new server
    // at each of its inits, on the same port: a rank early for the next one
    // waits for it. hvdrun's serves the whole job: one try.
    const absl::Duration wait = config.launched_by.empty()
                                    ? absl::ZeroDuration()
                                    : config.start_timeout;
    auto registration = (*store)->Register(
        config.rank, config.hostname, getpid(), {}, config.init_count, wait);
    if (!registration.ok()) {
      return Annotate(registration.status(),
                      absl::StrCat("rank ", config.rank, ": register"));
    }
  }
  // Each view's deleter keeps the store below it alive.
  std::shared_ptr<Store> base = std::move(*store);
  std::shared_ptr<Store> scoped(new PrefixStore(base.get(), KeyPrefix(config)),
                                [base](Store* view) { delete view; });
  if (!cancel) return Stores{std::move(scoped), std::move(base)};
  std::shared_ptr<Store> cancellable(
      new CancellableStore(scoped.get(), std::move(cancel)),
      [scoped](Store* view) { delete view; });
  return Stores{std::move(cancellable), std::move(base)};
}

// `tcp` with the ranks on this host routed through shared memory where they
// can map each other's segments (a composite context); `tcp` itself when no
// local peer can; the shared memory alone when it reaches every rank.
absl::StatusOr<std::unique_ptr<transport::Context>> AddSharedMemory(
    const Config& config, const std::vector<int>& hosts, Store* store,
    std::unique_ptr<transport::Context> tcp) {
  std::vector<int> local;
  for (int r = 0; r < config.size; ++r) {
    if (hosts[r] == hosts[config.rank]) local.push_back(r);
  }
  if (!config.shm || local.size() < 2) return tcp;
  transport::ShmOptions options;
  options.connect_timeout = config.start_timeout;
  options.tuning = config.shm_tuning;
  auto mesh = transport::CreateShmContext(config.rank, config.size, local,
                                          store, options);
  if (!mesh.ok()) return mesh.status();
  if (mesh->peers.empty()) return tcp;
  std::vector<int> route(config.size, 0);
  for (int peer : mesh->peers) route[peer] = 1;
  std::vector<std::unique_ptr<transport::Context>> children;
  children.push_back(std::move(tcp));
  children.push_back(std::move(mesh->context));
  return transport::NewCompositeContext(std::move(children), std::move(route));
}

}  // namespace

absl::StatusOr<runtime::RuntimeParts> ConnectJob(
    const Config& config, std::shared_ptr<const Cancellation> cancel) {
  runtime::RuntimeParts parts;
  if (config.size == 1) return parts;
  if (absl::Status s = EnsureOpenFiles(OpenFilesFor(config.size));
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("rank ", config.rank, " on ",
                                               config.hostname, ": ",
                                               s.message()));
  }
  auto stores = ReachRendezvous(config, std::move(cancel));
  if (!stores.ok()) return stores.status();
  parts.store = std::move(stores->scoped);
  parts.job_store = std::move(stores->job);
  auto layout = AgreeOnLayout(config, *parts.store);
  if (!layout.ok()) return layout.status();
  const std::string& rdma_provider = layout->rdma_provider;
  const bool use_rdma = !rdma_provider.empty();
  const transport::TcpOptions tcp_options = TcpOptionsOf(config);
  rdma::RdmaOptions rdma_options = RdmaOptionsOf(config);
  rdma_options.provider = rdma_provider;
  runtime::ContextFactory make_context;
  if (use_rdma) {
    make_context = [rdma_options](int rank, int size,
                                  std::shared_ptr<Store> store) {
      return rdma::CreateRdmaContext(rank, size, std::move(store), rdma_options);
    };
  } else {
    make_context = [tcp_options](int rank, int size,
                                 std::shared_ptr<Store> store) {
      return transport::CreateTcpContext(rank, size, std::move(store),
                                         tcp_options);
    };
  }
  auto tcp = make_context(config.rank, config.size, parts.store);
  if (!tcp.ok()) return tcp.status();
  HVD_LOG(INFO) << "rank " << config.rank << ": ranks on other hosts over "
                << (use_rdma ? absl::StrCat("rdma (", rdma_provider, ")")
                             : std::string("tcp"));
  parts.hosts = std::move(layout->hosts);
  auto context = AddSharedMemory(config, parts.hosts, parts.store.get(),
                                 *std::move(tcp));
  if (!context.ok()) return context.status();
  parts.context = *std::move(context);
  parts.make_context = std::move(make_context);
  return parts;
}

}  // namespace hvd::bootstrap
