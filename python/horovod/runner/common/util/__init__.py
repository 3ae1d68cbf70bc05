"""horovod.runner.common.util: helpers Horovod's tests import (env)."""
