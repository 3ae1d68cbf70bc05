"""horovod.common: the names Horovod scripts import from it."""
