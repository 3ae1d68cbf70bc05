"""Horovod's package name over hvd: `import horovod.torch as hvd` gives
hvd.torch, so existing Horovod scripts run unchanged under hvdrun."""

from hvd import __version__  # noqa: F401
