"""The job's rank and size as a launcher's environment gives them."""

import os

# (rank, size) variable pairs, in the order they are trusted: hvdrun's own,
# Horovod's, Open MPI's, then MPICH/Slurm PMI's.
_PAIRS = (("HVD_RANK", "HVD_SIZE"),
          ("HOROVOD_RANK", "HOROVOD_SIZE"),
          ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
          ("PMI_RANK", "PMI_SIZE"))


def get_env_rank_and_size():
    """(rank, size) from the first pair of variables that is set, or (0, 1)
    outside any job. RuntimeError when only half of a pair is set."""
    for rank_name, size_name in _PAIRS:
        rank = os.environ.get(rank_name)
        size = os.environ.get(size_name)
        if rank is None and size is None:
            continue
        if rank is None or size is None:
            raise RuntimeError(
                "cannot tell this process's rank and size: %s is set but %s "
                "is not" % ((rank_name, size_name) if rank is not None
                            else (size_name, rank_name)))
        return int(rank), int(size)
    return 0, 1
