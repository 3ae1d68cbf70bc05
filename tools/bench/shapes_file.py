"""Tensor shapes from a file of one shape a line ("64 3 7 7"; '#' lines are
comments): resnet50_shapes.txt, which resnet50_shapes.py writes.
shapes_file.h reads the same for the C++ benchmarks."""

import os

RESNET50 = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "resnet50_shapes.txt")


def read(path=RESNET50):
    """The shapes in `path`, in file order, each a list of ints."""
    with open(path) as f:
        return [[int(x) for x in line.split()] for line in f
                if line.strip() and not line.startswith("#")]
