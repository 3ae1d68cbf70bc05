#include "core/gpu/gpu_ops.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/logging.h"
#include "core/common/thread_role.h"
#include "core/gpu/staged_comm.h"

namespace hvd::gpu {
namespace {

using runtime::TensorEntry;

void FailAll(std::vector<std::unique_ptr<TensorEntry>>& entries,
             const absl::Status& status) {
  for (auto& entry : entries) {
    if (!entry || !entry->done) continue;
    auto done = std::move(entry->done);
    entry->done = nullptr;
    done(status, runtime::OpResult());
  }
}

int PositionOf(const std::vector<int>& indexes, int index) {
  return static_cast<int>(std::find(indexes.begin(), indexes.end(), index) -
                          indexes.begin());
}

// "rank 0: allreduce of 'w' (and 3 more) on process set 0"
std::string Describe(int rank, const runtime::Response& response) {
  std::string what = absl::StrCat(
      "rank ", rank, ": ",
      absl::AsciiStrToLower(runtime::OpType_Name(response.type())), " of '",
      response.names_size() > 0 ? response.names(0) : "", "'");
  if (response.names_size() > 1) {
    absl::StrAppend(&what, " (and ", response.names_size() - 1, " more)");
  }
  absl::StrAppend(&what, " on process set ", response.process_set());
  return what;
}

}  // namespace

GpuOptions GpuOptionsFrom(const runtime::Config& config) {
  GpuOptions options;
  options.policy = config.gpu_data_path;
  options.hierarchical = config.hierarchical_allreduce;
  return options;
}

std::string PredictPath(const runtime::Config& config,
                        const GpuOptions& options, Platform& platform) {
  const int count = platform.DeviceCount();
  std::string path;
  if (count == 0) {
    return "none: no GPU is visible to this process (GPU tensors fail at "
           "enqueue)";
  }
  if (options.policy == PathPolicy::kStaged) {
    path = "staged (HVD_GPU_DATA_PATH=staged)";
  } else if (!platform.HasNccl()) {
    path = "staged (no NCCL)";
  } else if (config.local_size > count) {
    path = absl::StrCat("staged if ranks share GPUs (", config.local_size,
                        " ranks on this host, ", count,
                        " GPU(s) visible here), NCCL otherwise");
  } else {
    path = "NCCL (one GPU per rank)";
  }
  absl::StrAppend(&path,
                  "; decided per process set at its first GPU op from the "
                  "members' GPU identities; hierarchical allreduce ",
                  options.hierarchical ? "requested" : "off");
  return path;
}

GpuOps::GpuOps(runtime::DeviceEnv env, std::unique_ptr<Platform> platform,
               GpuOptions options)
    : env_(std::move(env)),
      platform_(std::move(platform)),
      options_(options),
      finalizer_([this](const absl::Status& status) { Abort(status); }) {
  thread_ = std::thread([this] {
    NameThisThread("hvd-gpu-ops");
    Loop();
  });
}

GpuOps::~GpuOps() { Shutdown(); }

absl::StatusOr<std::shared_ptr<runtime::ReadyEvent>> GpuOps::MarkReady(
    int device_id, void* stream) {
  auto device = platform_->GetDevice(device_id);
  if (!device.ok()) return device.status();
  used_.store(true, std::memory_order_relaxed);
  return (*device)->MarkReady(stream);
}

absl::Status GpuOps::Execute(runtime::Response response,
                             std::vector<std::unique_ptr<TensorEntry>>& entries,
                             const collectives::Group& group) {
  used_.store(true, std::memory_order_relaxed);
  Task task;
  task.set_id = response.process_set();
  task.response = std::move(response);
  task.group = group;
  task.entries.swap(entries);
  absl::Status fatal;
  {
    absl::MutexLock lock(&mu_);
    if (fatal_.ok() && !shut_down_) {
      queue_.push_back(std::move(task));
      return absl::OkStatus();
    }
    fatal = fatal_;
  }
  // After a failure the job must stop (the error goes back to the runtime);
  // after shutdown only these entries fail.
  FailAll(task.entries, fatal.ok() ? absl::FailedPreconditionError(
                                         "the GPU backend was shut down")
                                   : fatal);
  return fatal;
}

bool GpuOps::Progress() {
  finalizer_.TryComplete();
  {
    absl::MutexLock lock(&mu_);
    // Checked before the finalizer: a task leaves queue_ and running_ only
    // once it is in the finalizer.
    if (!queue_.empty() || running_) return true;
  }
  return finalizer_.Pending();
}

void GpuOps::RemoveProcessSet(int id) {
  Task task;
  task.remove_set = true;
  task.set_id = id;
  absl::MutexLock lock(&mu_);
  if (!shut_down_) queue_.push_back(std::move(task));
}

void GpuOps::Abort(const absl::Status& reason) {
  std::vector<std::shared_ptr<Comm>> comms;
  {
    absl::MutexLock lock(&mu_);
    if (!fatal_.ok()) return;
    fatal_ = reason.ok() ? absl::AbortedError("aborted") : reason;
    comms = comms_;
  }
  // Every job of a CUDA build has this backend: one that never saw a GPU
  // tensor has nothing to say about the runtime's failure (which the
  // runtime reports itself) beyond debug level.
  if (used_.load(std::memory_order_relaxed)) {
    HVD_LOG(WARNING) << "GPU backend stops: " << reason.message();
  } else {
    HVD_LOG(DEBUG) << "GPU backend (no GPU op ran) stops: " << reason.message();
  }
  for (const auto& comm : comms) comm->Abort(reason);
  finalizer_.Abort(reason);
}

void GpuOps::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stop_ = true;
  }
  thread_.join();  // The device thread first runs what is queued.
  if (!finalizer_.Drain(absl::Now() + env_.config.timeout)) {
    Abort(absl::DeadlineExceededError(absl::StrCat(
        "rank ", env_.config.rank, ": GPU ops still running at shutdown after ",
        absl::FormatDuration(env_.config.timeout))));
    finalizer_.Drain(absl::Now() + absl::Seconds(10));
  }
  sets_.clear();
  absl::MutexLock lock(&mu_);
  comms_.clear();
}

std::string GpuOps::PathOf(int id) {
  absl::MutexLock lock(&mu_);
  auto it = paths_.find(id);
  return it == paths_.end() ? "" : it->second;
}

absl::Status GpuOps::Fatal() {
  absl::MutexLock lock(&mu_);
  return fatal_;
}

void GpuOps::Loop() {
  UsePreciseTimers();  // NCCL's launch and the staged path poll and nap here
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      running_ = false;  // the last task, if any, is in the finalizer
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stop_;
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    Run(task);
  }
}

void GpuOps::Run(Task& task) {
  if (task.remove_set) {
    RemoveSet(task.set_id);
    return;
  }
  Finalizer::Item item;
  item.deadline = absl::Now() + env_.config.timeout;
  absl::Status status = Launch(task, item);
  // The description is for errors only: built when one is reported.
  item.what = [rank = env_.config.rank, response = std::move(task.response)] {
    return Describe(rank, response);
  };
  if (!status.ok()) {
    // Peers may already wait in a collective this member will never join:
    // stop everything, with this error.
    if (Fatal().ok()) {
      status = absl::Status(status.code(),
                            absl::StrCat(item.what(), ": ", status.message()));
    }
    Abort(status);
    item.status = Fatal();
  }
  item.entries = std::move(task.entries);
  finalizer_.Add(std::move(item));
}

void GpuOps::RemoveSet(int set_id) {
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return;
  const SetState& state = *it->second;
  const std::vector<Comm*> gone = {state.comms.main.get(), state.staged.get(),
                                   state.comms.local.get(),
                                   state.comms.cross.get()};
  {
    absl::MutexLock lock(&mu_);
    paths_.erase(set_id);
    comms_.erase(std::remove_if(comms_.begin(), comms_.end(),
                                [&](const std::shared_ptr<Comm>& c) {
                                  return std::count(gone.begin(), gone.end(),
                                                    c.get()) > 0;
                                }),
                 comms_.end());
  }
  sets_.erase(it);
}

absl::Status GpuOps::Launch(Task& task, Finalizer::Item& item) {
  if (absl::Status fatal = Fatal(); !fatal.ok()) return fatal;
  absl::StatusOr<Device*> device = DeviceFor(task);
  if (!device.ok()) return device.status();
  absl::StatusOr<SetState*> set = StateFor(task, *device);
  if (!set.ok()) return set.status();
  for (const auto& entry : task.entries) {
    if (!entry || !entry->ready) continue;
    if (absl::Status waited = (*device)->WaitFor(*entry->ready); !waited.ok()) {
      return waited;
    }
  }
  absl::StatusOr<GpuOpResult> result = RunGpuOp(
      GpuOp{task.response, task.group, task.entries, **device, (*set)->comms});
  if (!result.ok()) return result.status();
  item.results = std::move(result->results);
  item.comms = std::move(result->used);
  absl::StatusOr<std::unique_ptr<Event>> event = (*device)->Record();
  if (!event.ok()) return event.status();
  item.event = std::move(*event);
  return absl::OkStatus();
}

absl::StatusOr<Device*> GpuOps::DeviceFor(const Task& task) {
  int wanted = -1;
  std::string name;
  for (const auto& entry : task.entries) {
    if (!entry) continue;
    if (wanted < 0) {
      wanted = entry->device_id;
      name = entry->request.name();
    } else if (entry->device_id != wanted) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensors '", name, "' and '", entry->request.name(),
                       "' of one op are on different GPUs (", wanted, " and ",
                       entry->device_id, ")"));
    }
  }
  if (wanted < 0) {  // A joined rank: no tensor says which GPU.
    wanted = device_id_;
    if (wanted < 0) {
      const int count = platform_->DeviceCount();
      if (count == 0) return absl::FailedPreconditionError("no GPU visible");
      wanted = env_.config.local_rank % count;
    }
  }
  if (device_id_ < 0) device_id_ = wanted;
  if (wanted != device_id_) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor '", name, "' is on GPU ", wanted,
                     " but this process runs its "
                     "GPU ops on GPU ",
                     device_id_,
                     ": hvd takes one GPU per process "
                     "(torch.cuda.set_device(hvd.local_rank()))"));
  }
  return platform_->GetDevice(device_id_);
}

std::string GpuOps::Who(const Task& task) const {
  return absl::StrCat("rank ", env_.config.rank, " (member ", task.group.index,
                      " of ", task.group.size(), " of process set ",
                      task.set_id, ")");
}

absl::StatusOr<GpuOps::SetState*> GpuOps::StateFor(const Task& task,
                                                   Device* device) {
  if (auto it = sets_.find(task.set_id); it != sets_.end()) {
    if (it->second->device != device) {
      return absl::InternalError("process set state on another GPU");
    }
    return it->second.get();
  }
  const std::string who = Who(task);
  const int index = task.group.index;
  const int size = task.group.size();
  const std::string prefix = absl::StrCat("gpu/set", task.set_id, "/");
  auto infos = ExchangeMemberInfo(env_.store, prefix, index, size,
                                  {env_.config.hostname, device->Identity()},
                                  env_.config.timeout);
  if (!infos.ok()) return infos.status();
  PathOptions path_options;
  path_options.policy = options_.policy;
  path_options.hierarchical = options_.hierarchical;
  path_options.nccl_available = platform_->HasNccl();
  auto choice = ChoosePath(*infos, index, path_options);
  if (!choice.ok()) return choice.status();
  auto state = std::make_unique<SetState>();
  state->device = device;
  SetState* raw = state.get();
  if (choice->nccl) {
    auto main = MakeNccl(device, prefix + "nccl/all", index, size, who);
    if (!main.ok()) return main.status();
    state->comms.main = *main;
    state->path = "nccl";
    if (choice->hierarchical) {
      const int local = PositionOf(choice->local, index);
      const int cross = PositionOf(choice->cross, index);
      auto local_comm = MakeNccl(
          device, absl::StrCat(prefix, "nccl/host", choice->host_index), local,
          static_cast<int>(choice->local.size()), who + " on its host");
      if (!local_comm.ok()) return local_comm.status();
      auto cross_comm = MakeStaged(
          device, absl::StrCat(prefix, "cross", local, "/"), cross,
          static_cast<int>(choice->cross.size()), who + " across hosts");
      if (!cross_comm.ok()) return cross_comm.status();
      state->comms.local = *local_comm;
      state->comms.cross = *cross_comm;
      state->path = "nccl+hierarchical";
    }
    state->comms.fallback = [this, raw, prefix, index, size,
                             who]() -> absl::StatusOr<std::shared_ptr<Comm>> {
      if (!raw->staged) {
        auto staged =
            MakeStaged(raw->device, prefix + "staged/", index, size, who);
        if (!staged.ok()) return staged.status();
        raw->staged = *staged;
      }
      return raw->staged;
    };
  } else {
    auto main = MakeStaged(device, prefix + "staged/", index, size, who);
    if (!main.ok()) return main.status();
    state->comms.main = *main;
    state->path = "staged";
  }
  HVD_LOG(INFO) << who << ": GPU data path " << state->path << " on GPU "
                << device->id() << " (" << choice->reason << ")";
  {
    absl::MutexLock lock(&mu_);
    paths_[task.set_id] = state->path;
  }
  sets_[task.set_id] = std::move(state);
  return raw;
}

absl::StatusOr<std::shared_ptr<Comm>> GpuOps::MakeNccl(Device* device,
                                                       const std::string& key,
                                                       int rank, int size,
                                                       const std::string& who) {
  auto id = ShareFromRoot(
      env_.store, key, rank == 0, [this] { return platform_->NewNcclId(); },
      env_.config.timeout);
  if (!id.ok()) {
    return absl::Status(id.status().code(),
                        absl::StrCat(who, ": NCCL unique id '", key,
                                     "': ", id.status().message()));
  }
  auto comm = platform_->NewNcclComm(
      device, *id, rank, size, absl::Now() + env_.config.timeout,
      [this] { return Fatal(); }, who);
  if (!comm.ok()) return comm.status();
  std::shared_ptr<Comm> shared = std::move(*comm);
  Register(shared);
  return shared;
}

absl::StatusOr<std::shared_ptr<Comm>> GpuOps::MakeStaged(
    Device* device, const std::string& prefix, int rank, int size,
    const std::string& who) {
  std::unique_ptr<transport::Context> context;
  if (size > 1) {
    if (env_.store == nullptr || !env_.make_context) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, ": the staged path needs the rendezvous store"));
    }
    auto made = env_.make_context(
        rank, size, std::make_shared<PrefixStore>(env_.store, prefix));
    if (!made.ok()) {
      return absl::Status(made.status().code(),
                          absl::StrCat(who, ": staged path connections: ",
                                       made.status().message()));
    }
    context = std::move(*made);
  }
  auto comm = std::make_shared<StagedComm>(device, std::move(context), rank,
                                           size, env_.collective_options, who);
  Register(comm);
  return comm;
}

void GpuOps::Register(const std::shared_ptr<Comm>& comm) {
  absl::Status fatal;
  {
    absl::MutexLock lock(&mu_);
    comms_.push_back(comm);
    fatal = fatal_;
  }
  if (!fatal.ok()) comm->Abort(fatal);
}

}  // namespace hvd::gpu
