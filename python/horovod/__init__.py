"""Horovod's package name over hvd: `import horovod.torch as hvd` gives
hvd.torch, so existing Horovod scripts run unchanged under hvdrun;
horovod.run (horovod.runner.run) is hvd.run."""

from hvd import __version__  # noqa: F401
from horovod.runner import run  # noqa: F401,E402
