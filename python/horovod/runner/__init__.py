"""horovod.runner: Horovod's programmatic launcher, over hvdrun.

run(func, args=(), kwargs=None, num_proc=..., hosts=..., ...) is hvd.run
(hvd/_run.py); HvdRunError is what it raises when the job fails. The
subpackages hold the helpers Horovod's own tests import from here
(util.threads, common.util.env)."""

from hvd._run import HvdRunError, run  # noqa: F401
