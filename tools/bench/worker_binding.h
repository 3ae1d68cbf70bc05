// Binding a benchmark's processes to CPUs the way hvdrun's agent binds its
// workers (host/cpu_binding.h), so that what they measure is what a job's
// ranks get.
#ifndef HVD_TOOLS_BENCH_WORKER_BINDING_H_
#define HVD_TOOLS_BENCH_WORKER_BINDING_H_

namespace hvd::bench {

// Binds this process, worker `index` of `workers` on this host, to its share
// of the cores; nobody is bound where the workers outnumber the cores.
void BindAsAWorker(int index, int workers);

}  // namespace hvd::bench

#endif  // HVD_TOOLS_BENCH_WORKER_BINDING_H_
