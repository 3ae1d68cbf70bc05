"""What this hvd build and this machine offer, as `horovodrun --check-build`
prints it: `hvdrun --check-build` runs `python3 -m hvd.check_build`.

Frameworks are found by importing them; the rest is asked of libhvd.so (the
NCCL/CUDA it was built with and the GPUs it sees, the libfabric providers the
RDMA transport can use), so the answer is this build's, on this machine.
"""

import importlib
import sys

from hvd import _lib


def _mark(ok):
    return "[X]" if ok else "[ ]"


def _framework(module):
    """(found, version or why not) for an importable framework."""
    try:
        m = importlib.import_module(module)
    except Exception as e:  # an ImportError, or a broken install
        return False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
    return True, getattr(m, "__version__", "?")


def report():
    """The report's lines."""
    lib = _lib.lib()
    lines = ["hvd v%s:" % _lib.decode(lib.hvd_version()), "", "Available Frameworks:"]
    for name, module in (("PyTorch", "torch"), ("NumPy", "numpy"),
                         ("TensorFlow", "tensorflow"), ("MXNet", "mxnet")):
        found, detail = _framework(module)
        if found or module in ("torch", "numpy"):
            lines.append("    %s %s (%s)" % (_mark(found), name, detail))
        else:
            lines.append("    %s %s (hvd has no binding for it)"
                         % (_mark(False), name))
    lines += ["", "Available Controllers:",
              "    [X] hvd (a gRPC rendezvous; neither MPI nor Gloo)",
              "", "Available Tensor Operations:",
              "    [X] TCP (between hosts)",
              "    [X] Shared memory (within a host)"]
    providers = _lib.decode(lib.hvd_rdma_providers())
    if providers:
        lines.append("    [X] RDMA (libfabric; usable providers: %s)"
                     % providers.replace(",", ", "))
    else:
        lines.append("    [ ] RDMA (libfabric: no usable provider here)")
    nccl = lib.hvd_nccl_built()
    gpu = _lib.decode(lib.hvd_gpu_description())
    lines.append("    %s NCCL (%s)" % (_mark(nccl), gpu))
    lines += ["    [ ] MPI", "    [ ] Gloo", "", "Rendezvous modes:",
              "    [X] launcher: hvdrun -H/--hostfile starts hvd-agent on "
              "every host over ssh",
              "    [X] orchestrator: hvdrun --rendezvous-only, and "
              "hvd-agent --rendezvous on each node (Kubernetes, Slurm)"]
    return lines


def main():
    try:
        lines = report()
    except ImportError as e:  # libhvd.so not found, or not these bindings
        print("hvdrun --check-build: %s" % e, file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
