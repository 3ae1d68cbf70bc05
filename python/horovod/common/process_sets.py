"""horovod.common.process_sets over hvd.process_sets."""

from hvd.process_sets import (  # noqa: F401
    ProcessSet, add_process_set, global_process_set, remove_process_set)
