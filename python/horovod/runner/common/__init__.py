"""horovod.runner.common: see horovod.runner.common.util."""
