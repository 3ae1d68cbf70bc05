#!/usr/bin/python3
"""Writes resnet50_shapes.txt: the shape of every parameter of torchvision's
ResNet-50, in model.parameters() order, one per line ("64 3 7 7"). The
fusion benchmark (fusion_bench.cc) allreduces tensors of these shapes the
way a training step does, without needing torch itself.

  /usr/bin/python3 tools/bench/resnet50_shapes.py > tools/bench/resnet50_shapes.txt
"""

import torchvision

model = torchvision.models.resnet50()
params = list(model.parameters())
print("# torchvision resnet50: %d tensors, %d parameters"
      % (len(params), sum(p.numel() for p in params)))
for p in params:
    print(" ".join(str(d) for d in p.shape))
