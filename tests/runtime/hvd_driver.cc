// A worker process for the runtime tests: `hvd_driver SCENARIO`, started N
// times against a rendezvous server by runtime_test.cc. Uses only the C ABI.
// Prints "rank R: ..." lines; exits 0 when every check of the scenario held.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "tests/runtime/driver_util.h"

namespace hvd::driver {
namespace {

hvd_options Opts(const char* name, int op = HVD_OP_SUM) {
  hvd_options o = hvd_default_options();
  o.name = name;
  o.op = op;
  return o;
}

void AllreduceOps(Checker& c, int rank, int size) {
  const struct { int op; const char* name; } ops[] = {
      {HVD_OP_SUM, "sum"}, {HVD_OP_AVERAGE, "avg"}, {HVD_OP_MIN, "min"},
      {HVD_OP_MAX, "max"}, {HVD_OP_PRODUCT, "prod"}};
  for (const auto& [op, name] : ops) {
    Tensor<float> t({3, 5});
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = rank + 1 + (i % 2);
    hvd_options o = Opts(name, op);
    c.Ok(name, Wait(hvd_allreduce_async(&t.dl, nullptr, &o)));
    for (size_t i = 0; i < t.data.size(); ++i) {
      float want = 0, lo = 1e9, hi = -1e9, prod = 1;
      for (int r = 0; r < size; ++r) {
        const float v = r + 1 + (i % 2);
        want += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        prod *= v;
      }
      const float expect = op == HVD_OP_SUM ? want
                           : op == HVD_OP_AVERAGE ? want / size
                           : op == HVD_OP_MIN ? lo
                           : op == HVD_OP_MAX ? hi : prod;
      c.Equal(std::string("allreduce ") + name, t.data[i], expect);
    }
  }
  Tensor<int32_t> in({7}, rank), out({7}, -1);
  hvd_options o = Opts("int.scaled");
  o.prescale_factor = 2.0;
  o.postscale_factor = 3.0;
  c.Ok("int allreduce", Wait(hvd_allreduce_async(&in.dl, &out.dl, &o)));
  c.Equal("int allreduce scaled", out.data[6], 6 * size * (size - 1) / 2);
  c.Equal("int allreduce input untouched", in.data[0], rank);
}

void Grouped(Checker& c, int rank, int size) {
  Tensor<float> a({4}, 1.0f), b({1000}, rank), d({0});
  DLTensor* tensors[] = {&a.dl, &b.dl, &d.dl};
  hvd_options o = Opts("group");
  c.Ok("grouped", Wait(hvd_grouped_allreduce_async(3, tensors, nullptr, &o)));
  c.Equal("grouped a", a.data[3], static_cast<float>(size));
  c.Equal("grouped b", b.data[999], static_cast<float>(size * (size - 1) / 2));
}

void Allgather(Checker& c, int rank, int size) {
  Tensor<int64_t> t({rank + 1, 2}, rank);
  hvd_options o = Opts("gather");
  hvd_handle h = hvd_allgather_async(&t.dl, &o);
  c.Ok("allgather", Wait(h));
  DLManagedTensor* out = hvd_handle_output(h, 0);
  if (out == nullptr) return c.Fail("allgather: no output");
  c.Equal("allgather rows", out->dl_tensor.shape[0],
          static_cast<int64_t>(size * (size + 1) / 2));
  const auto* v = static_cast<const int64_t*>(out->dl_tensor.data);
  int64_t at = 0;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < (r + 1) * 2; ++i) c.Equal("allgather value", v[at++], int64_t{r});
  }
  out->deleter(out);
  hvd_release(h);
}

void Broadcast(Checker& c, int rank, int size) {
  Tensor<double> t({9}, rank == size - 1 ? 42.5 : -1.0);
  hvd_options o = Opts("bcast");
  o.root_rank = size - 1;
  c.Ok("broadcast", Wait(hvd_broadcast_async(&t.dl, nullptr, &o)));
  c.Equal("broadcast value", t.data[8], 42.5);
}

void Alltoall(Checker& c, int rank, int size) {
  // Rank r sends j+1 rows to rank j, each row holding the sender's rank.
  std::vector<int64_t> splits;
  int64_t rows = 0;
  for (int j = 0; j < size; ++j) {
    splits.push_back(j + 1);
    rows += j + 1;
  }
  Tensor<float> t({rows, 3}, rank);
  hvd_options o = Opts("a2a");
  o.splits = splits.data();
  o.num_splits = size;
  hvd_handle h = hvd_alltoall_async(&t.dl, &o);
  c.Ok("alltoall", Wait(h));
  std::vector<int64_t> received(size);
  c.Equal("alltoall splits count", hvd_handle_splits(h, 0, received.data(), size), size);
  for (int j = 0; j < size; ++j) c.Equal("alltoall split", received[j], int64_t{rank + 1});
  DLManagedTensor* out = hvd_handle_output(h, 0);
  if (out == nullptr) return c.Fail("alltoall: no output");
  const auto* v = static_cast<const float*>(out->dl_tensor.data);
  for (int j = 0, at = 0; j < size; ++j) {
    for (int i = 0; i < (rank + 1) * 3; ++i) c.Equal("alltoall value", v[at++], float(j));
  }
  out->deleter(out);
  hvd_release(h);
}

void ReduceScatter(Checker& c, int rank, int size) {
  const int64_t rows = 2 * size + 1;
  Tensor<float> t({rows, 2});
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(i + rank);
  hvd_options o = Opts("rs");
  hvd_handle h = hvd_reducescatter_async(&t.dl, &o);
  c.Ok("reducescatter", Wait(h));
  DLManagedTensor* out = hvd_handle_output(h, 0);
  if (out == nullptr) return c.Fail("reducescatter: no output");
  const int64_t mine = rows / size + (rank < rows % size ? 1 : 0);
  c.Equal("reducescatter rows", out->dl_tensor.shape[0], mine);
  int64_t first_row = 0;
  for (int r = 0; r < rank; ++r) first_row += rows / size + (r < rows % size ? 1 : 0);
  const auto* v = static_cast<const float*>(out->dl_tensor.data);
  for (int64_t i = 0; i < mine * 2; ++i) {
    const float base = static_cast<float>(first_row * 2 + i);
    c.Equal("reducescatter value", v[i], base * size + size * (size - 1) / 2.0f);
  }
  out->deleter(out);
  hvd_release(h);
}

void ProcessSets(Checker& c, int rank, int size) {
  // {0, last} for 3+ ranks, {1} for 2; with 1 rank the only set is global.
  const int32_t ranks[] = {size > 2 ? 0 : size - 1, size - 1};
  const int members = size > 2 ? 2 : 1;
  const int32_t id = hvd_add_process_set(ranks, members);
  if (size == 1) {
    if (id != -1 || std::string(hvd_last_error()) !=
                        "a process set with ranks [0] already exists (id 0)") {
      c.Fail(std::string("duplicate global set: ") + hvd_last_error());
    }
    return;
  }
  if (id <= 0) return c.Fail(std::string("add_process_set: ") + hvd_last_error());
  c.Equal("set size", hvd_process_set_size(id), members);
  if (hvd_process_set_rank(id) >= 0) {
    // Unnamed ops only the members run: generated names must not shift the
    // names of later ops every rank runs (remove_process_set below).
    Tensor<float> t({5}, rank);
    hvd_options o = Opts(nullptr);
    o.process_set_id = id;
    c.Ok("set allreduce", Wait(hvd_allreduce_async(&t.dl, nullptr, &o)));
    c.Equal("set allreduce value", t.data[0], static_cast<float>(size - 1));
    c.Ok("set barrier", Wait(hvd_barrier_async(&o)));
  } else {
    c.Equal("non-member set rank", hvd_process_set_rank(id), -1);
  }
  if (hvd_remove_process_set(id) != HVD_OK) c.Fail(hvd_last_error());
  c.Equal("removed set size", hvd_process_set_size(id), -1);
}

void Join(Checker& c, int rank, int size) {
  // Rank r has r + 1 batches; a joined rank contributes zeros.
  for (int step = 0; step <= rank; ++step) {
    Tensor<float> t({6}, 1.0f);
    const std::string name = "join.step." + std::to_string(step);
    hvd_options o = Opts(name.c_str());
    c.Ok("allreduce before join", Wait(hvd_allreduce_async(&t.dl, nullptr, &o)));
    c.Equal("allreduce with joined ranks", t.data[0], float(size - step));
  }
  hvd_handle h = hvd_join_async(nullptr);
  c.Ok("join", Wait(h));
  c.Equal("last joined rank", hvd_handle_result(h), int64_t{size - 1});
  hvd_release(h);
}

int Collectives(Checker& c, int rank, int size) {
  AllreduceOps(c, rank, size);
  Grouped(c, rank, size);
  Allgather(c, rank, size);
  Broadcast(c, rank, size);
  Alltoall(c, rank, size);
  ReduceScatter(c, rank, size);
  c.Ok("barrier", Wait(hvd_barrier_async(nullptr)));
  ProcessSets(c, rank, size);
  Join(c, rank, size);
  return 0;
}

// Training-like steps: the same 40 tensors every step, so fusion and the
// response cache both get work.
int Steps(Checker& c, int rank, int size) {
  for (int step = 0; step < 20; ++step) {
    std::vector<Tensor<float>> grads;
    grads.reserve(40);
    std::vector<hvd_handle> handles;
    for (int i = 0; i < 40; ++i) grads.emplace_back(std::vector<int64_t>{i * 37 + 1}, float(rank + step));
    for (int i = 0; i < 40; ++i) {
      const std::string name = "grad." + std::to_string(i);
      hvd_options o = Opts(name.c_str(), HVD_OP_AVERAGE);
      handles.push_back(hvd_allreduce_async(&grads[i].dl, nullptr, &o));
    }
    for (int i = 0; i < 40; ++i) {
      c.Ok("step allreduce", Wait(handles[i]));
      hvd_release(handles[i]);
      c.Equal("step value", grads[i].data.back(), step + (size - 1) / 2.0f);
    }
  }
  return 0;
}

// Each rank submits tensor "x" differently; every rank must get the error.
// "duplicate": rank 0 submits "x" twice; the second call is refused.
int Mismatch(Checker& c, int rank, int size, const std::string& kind) {
  Tensor<float> f({kind == "shape" ? 4 + rank : 4}, 1.0f);
  Tensor<double> d({4}, 1.0);
  DLTensor* t = kind == "dtype" && rank == 1 ? &d.dl : &f.dl;
  hvd_options o = Opts("x");
  std::string error;
  if (kind == "op") o.op = rank == 1 ? HVD_OP_MAX : HVD_OP_SUM;
  if (kind == "scale") o.postscale_factor = rank == 1 ? 2.0 : 1.0;
  if (kind == "root") {
    o.root_rank = rank == 1 ? 1 : 0;
    error = Wait(hvd_broadcast_async(t, nullptr, &o));
  } else if (kind == "duplicate") {
    // A second submission under a name still in flight is refused by the
    // call itself; the first completes normally on every rank.
    hvd_handle first = hvd_allreduce_async(t, nullptr, &o);
    if (rank == 0) {
      Tensor<float> again({4}, 1.0f);
      if (hvd_allreduce_async(&again.dl, nullptr, &o) != 0) {
        c.Fail("duplicate: second submission accepted");
      }
      std::printf("rank %d: refused: %s\n", rank, hvd_last_error());
    }
    c.Ok("first submission", Wait(first));
    c.Equal("first submission value", f.data[0], float(size));
    error = "none expected";
  } else {
    error = Wait(hvd_allreduce_async(t, nullptr, &o));
  }
  std::printf("rank %d: error: %s\n", rank, error.c_str());
  if (error.empty()) c.Fail("mismatch " + kind + " was not reported");
  // The job goes on after a mismatch.
  Tensor<float> ok({2}, 1.0f);
  hvd_options o2 = Opts("after");
  c.Ok("allreduce after mismatch", Wait(hvd_allreduce_async(&ok.dl, nullptr, &o2)));
  c.Equal("allreduce after mismatch", ok.data[0], float(size));
  return 0;
}

// Rank 1 submits 3 s late: rank 0 warns (HVD_STALL_CHECK_TIME_SECONDS=1).
int Stall(Checker& c, int rank, int size) {
  if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(3));
  Tensor<float> t({4}, 1.0f);
  hvd_options o = Opts("late.tensor");
  const hvd_handle h = hvd_allreduce_async(&t.dl, nullptr, &o);
  if (rank == 0) {
    // A wait for an op that cannot complete yet ends after its timeout
    // (the Python bindings wait in 1 s slices to see Ctrl-C), not after
    // twice that: running the cycles and waiting share the one timeout.
    const auto start = std::chrono::steady_clock::now();
    const int rc = hvd_wait(h, 1.0);
    const double took = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count();
    c.Equal("wait(1 s) for a late rank", rc, int{HVD_TIMEOUT});
    if (took > 1.8) c.Fail("wait(1 s) took " + std::to_string(took) + " s");
  }
  c.Ok("late allreduce", Wait(h));
  return 0;
}

// Ranks submit different tensors: with a stall shutdown time every rank's
// op fails with the stall error instead of hanging.
int StallShutdown(Checker& c, int rank, int size) {
  Tensor<float> t({4}, 1.0f);
  const std::string name = rank == 0 ? "only.rank0" : "others";
  hvd_options o = Opts(name.c_str());
  const hvd_handle h = hvd_allreduce_async(&t.dl, nullptr, &o);
  const std::string error = Wait(h);
  std::printf("rank %d: error: %s (status code %d)\n", rank, error.c_str(),
              hvd_handle_error_code(h));
  if (error.empty()) c.Fail("stalled allreduce succeeded");
  return 0;
}

// The last rank SIGKILLs itself in the middle of a stream of large
// allreduces; the others must fail (not hang) naming a peer.
int KillPeer(Checker& c, int rank, int size) {
  if (rank == size - 1) {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      raise(SIGKILL);
    }).detach();
  }
  Tensor<float> t({4 << 20}, 1.0f);
  for (int i = 0; i < 100000; ++i) {
    const std::string name = "big." + std::to_string(i);
    hvd_options o = Opts(name.c_str());
    const std::string error = Wait(hvd_allreduce_async(&t.dl, nullptr, &o));
    if (!error.empty()) {
      std::printf("rank %d: error: %s\n", rank, error.c_str());
      return 0;
    }
  }
  c.Fail("no error after the peer was killed");
  return 0;
}

// Each rank in turn submits 200 ms after the others, twice per tensor (the
// second time negotiated by response-cache bit). Run with an HVD_CYCLE_TIME
// far beyond the job's timeout: a tensor that waited out a cycle would
// never finish in time, whichever rank was late.
int Staggered(Checker& c, int rank, int size) {
  for (int pass = 0; pass < 2; ++pass) {
    for (int late = 0; late < size; ++late) {
      if (rank == late) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      Tensor<float> t({16}, 1.0f);
      const std::string name = "staggered." + std::to_string(late);
      hvd_options o = Opts(name.c_str());
      c.Ok(name, Wait(hvd_allreduce_async(&t.dl, nullptr, &o)));
      c.Equal(name, t.data[0], float(size));
    }
  }
  return 0;
}

int Timeline(Checker& c, int rank, int size) {
  for (int i = 0; i < 3; ++i) {
    Tensor<float> a({100}, 1.0f), b({50}, 2.0f);
    hvd_options oa = Opts("timeline.a"), ob = Opts("timeline.b");
    hvd_handle ha = hvd_allreduce_async(&a.dl, nullptr, &oa);
    hvd_handle hb = hvd_allreduce_async(&b.dl, nullptr, &ob);
    c.Ok("timeline a", Wait(ha));
    c.Ok("timeline b", Wait(hb));
  }
  // Two separate submissions share a cycle only when the background thread
  // is slower than the caller; a group is negotiated, and fused, as one.
  Tensor<float> a({100}, 1.0f), b({50}, 2.0f);
  DLTensor* group[] = {&a.dl, &b.dl};
  hvd_options og = Opts("timeline.group");
  c.Ok("timeline group",
       Wait(hvd_grouped_allreduce_async(2, group, nullptr, &og)));
  return 0;
}

}  // namespace
}  // namespace hvd::driver

int main(int argc, char** argv) {
  using namespace hvd::driver;
  const std::string scenario = argc > 1 ? argv[1] : "";
  setvbuf(stdout, nullptr, _IOLBF, 0);  // Lines survive a SIGKILL.
  if (hvd_init() != HVD_OK) {
    std::printf("init failed: %s\n", hvd_last_error());
    return 3;
  }
  Checker c;
  c.rank = hvd_rank();
  const int size = hvd_size();
  std::printf("rank %d: size %d local_rank %d cross_rank %d\n", c.rank, size,
              hvd_local_rank(), hvd_cross_rank());
  std::map<std::string, std::function<int(Checker&, int, int)>> scenarios = {
      {"collectives", Collectives}, {"steps", Steps}, {"stall", Stall},
      {"stall_shutdown", StallShutdown}, {"kill_peer", KillPeer},
      {"timeline", Timeline}, {"staggered", Staggered}};
  int rc = 2;
  if (scenario.rfind("mismatch_", 0) == 0) {
    rc = Mismatch(c, c.rank, size, scenario.substr(9));
  } else if (auto it = scenarios.find(scenario); it != scenarios.end()) {
    rc = it->second(c, c.rank, size);
  } else {
    std::printf("unknown scenario '%s'\n", scenario.c_str());
  }
  hvd_shutdown();
  if (rc == 0 && c.failures == 0) std::printf("rank %d: PASS\n", c.rank);
  std::fflush(stdout);
  return rc != 0 ? rc : (c.failures ? 1 : 0);
}
