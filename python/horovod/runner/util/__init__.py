"""horovod.runner.util: helpers Horovod's test utilities import."""
