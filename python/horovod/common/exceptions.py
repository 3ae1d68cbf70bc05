"""horovod.common.exceptions over hvd.exceptions: HorovodInternalError is
hvd's HvdInternalError (every collective error derives from it), and
HostsUpdatedInterrupt is the one hvd.elastic raises when the launcher of an
elastic job (hvdrun --min-np / --host-discovery-script) adds or removes
hosts."""

from hvd.exceptions import HostsUpdatedInterrupt  # noqa: F401
from hvd.exceptions import HvdInternalError as HorovodInternalError  # noqa: F401
