"""horovod.common.exceptions over hvd.exceptions."""

from hvd.exceptions import HvdInternalError as HorovodInternalError  # noqa: F401


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod elastic's signal that hosts changed. hvd has no elastic mode,
    so it is never raised; it exists so that scripts importing it run."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
