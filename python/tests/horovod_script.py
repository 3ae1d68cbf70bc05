"""A training script written for Horovod, as its documentation teaches it,
run unchanged under hvdrun: nothing below knows about hvd.

(Used by horovod_script_np2_test / _np3_test; exits non-zero on failure.)
"""

import torch
import torch.nn.functional as F
import torch.utils.data
import torch.utils.data.distributed

import horovod.torch as hvd
from horovod.common.exceptions import HorovodInternalError

# Initialize Horovod
hvd.init()
torch.set_num_threads(1)
torch.manual_seed(42 + hvd.rank())

# A dataset with a learnable rule, partitioned among workers.
g = torch.Generator().manual_seed(0)
features = torch.randn(512, 8, generator=g)
labels = (features[:, :4].sum(1) > 0).long()
dataset = torch.utils.data.TensorDataset(features, labels)
sampler = torch.utils.data.distributed.DistributedSampler(
    dataset, num_replicas=hvd.size(), rank=hvd.rank())
loader = torch.utils.data.DataLoader(dataset, batch_size=16, sampler=sampler)

model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 2))

# Scale learning rate by the number of workers.
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(),
                            momentum=0.5)

# Broadcast parameters and optimizer state from rank 0.
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

# Wrap the optimizer with Horovod's DistributedOptimizer.
optimizer = hvd.DistributedOptimizer(optimizer,
                                     named_parameters=model.named_parameters(),
                                     compression=hvd.Compression.fp16,
                                     op=hvd.Average)


def metric_average(val, name):
    tensor = torch.tensor(val)
    avg_tensor = hvd.allreduce(tensor, name=name)
    return avg_tensor.item()


for epoch in range(4):
    sampler.set_epoch(epoch)
    model.train()
    for data, target in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    model.eval()
    with torch.no_grad():
        correct = 0
        for data, target in loader:
            correct += int((model(data).argmax(1) == target).sum())
    accuracy = metric_average(correct / len(sampler), "avg_accuracy")
    # Integer metrics (Horovod averages them in float64, truncated).
    total_correct = metric_average(correct, "avg_correct")
    if hvd.rank() == 0:
        print("epoch %d: accuracy %.3f (avg correct per rank %d)"
              % (epoch, accuracy, total_correct))

# Every rank ends with the same model.
weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
gathered = hvd.allgather(weights.unsqueeze(0))
assert all(torch.equal(gathered[0], w) for w in gathered), "models differ"
assert accuracy > 0.85, "did not learn: accuracy %.3f" % accuracy
assert isinstance(optimizer, torch.optim.SGD)
try:
    hvd.allreduce(torch.ones(hvd.rank() + 1), name="deliberate.mismatch")
    raise SystemExit("mismatched shapes did not raise")
except HorovodInternalError as e:
    if hvd.rank() == 0:
        print("mismatch raised HorovodInternalError: %s" % e)
objs = hvd.allgather_object({"rank": hvd.rank()})
assert objs == [{"rank": r} for r in range(hvd.size())]
hvd.join()
if hvd.rank() == 0:
    print("horovod script OK on %d ranks" % hvd.size())
