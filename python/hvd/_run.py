"""hvd.run (also horovod.run, horovod.runner.run): runs a Python function on
every rank of an hvdrun job and returns its return values in rank order.

How it works (docs/python.md, "Running a function: hvd.run"):

- The caller pickles (fn, args, kwargs) with cloudpickle into a private job
  directory and, when it is at most _ENV_PAYLOAD_LIMIT bytes of base64, also
  into the job's environment (HVD_RUN_PAYLOAD_<i> chunks), which hvdrun carries
  to every host, ssh hosts included.
- It starts `hvdrun ... <python> -m hvd._run_task` (hvd/_run_task.py) and
  relays the job's output to sys.stdout / sys.stderr as it comes.
- Each rank runs fn and hands back a record (its return value, or its
  exception and traceback): as a file in the job directory when it can see
  that directory (this host, or a shared filesystem), else as marked lines on
  its stdout, which hvdrun streams back; the caller strips those lines.
- The caller returns the values in rank order, or raises HvdRunError for the
  rank that failed, with that rank's traceback.
"""

import os
import sys

# Environment variables of the protocol between run() and hvd._run_task.
ENV_JOB = "HVD_RUN_JOB"              # the job's nonce (also marks the stream)
ENV_DIR = "HVD_RUN_DIR"              # the caller's job directory
ENV_CHUNKS = "HVD_RUN_PAYLOAD_CHUNKS"  # how many HVD_RUN_PAYLOAD_<i> there are
ENV_CHUNK = "HVD_RUN_PAYLOAD_"       # + index: base64 of the payload, in parts
ENV_BYTES = "HVD_RUN_PAYLOAD_BYTES"  # payload size, for messages

PAYLOAD_FILE = "payload"
NONCE_FILE = "job"
RESULT_FILE = "result.%d"

# Base64 of the payload carried in the environment, at most: one variable may
# hold 128 KiB on Linux (MAX_ARG_STRLEN) and argv+environ ARG_MAX (2 MiB
# usually) at every exec (hvdrun, agent, worker).
_ENV_PAYLOAD_LIMIT = 1 << 20
_ENV_CHUNK_CHARS = 96 * 1024
# Characters of base64 per streamed result line: under hvdrun's 64 KiB cut.
STREAM_CHUNK_CHARS = 48 * 1024
STREAM_END = "end"

# Horovod's elastic arguments: hvd.run starts fixed jobs only.
_ELASTIC = ("min_num_proc", "max_num_proc", "slots", "reset_limit",
            "cooldown_range", "host_discovery_script")


def stream_marker(nonce):
    """The prefix of a result line in a rank's stdout."""
    return "hvd-run-result:%s:" % nonce


class HvdRunError(RuntimeError):
    """A job started by hvd.run failed.

    Attributes: rank (the rank that failed first, or None for a failure of
    the launch), host, exit_code (hvdrun's), remote_traceback (the rank's
    traceback text, or None), exception (the rank's exception object when it
    could be unpickled here; also the __cause__ of this error), errors (every
    failed rank's (rank, host, traceback text), in rank order)."""

    def __init__(self, message, rank=None, host=None, exit_code=None,
                 remote_traceback=None, exception=None, errors=()):
        super().__init__(message)
        self.rank = rank
        self.host = host
        self.exit_code = exit_code
        self.remote_traceback = remote_traceback
        self.exception = exception
        self.errors = list(errors)


def run(func, args=(), kwargs=None, num_proc=None, min_num_proc=None,
        max_num_proc=None, slots=None, reset_limit=None, cooldown_range=None,
        hosts=None, hostfile=None, host_discovery_script=None,
        start_timeout=None, ssh_port=None, ssh_identity_file=None,
        disable_cache=None, output_filename=None, verbose=None,
        use_gloo=None, use_mpi=None, mpi_args=None, network_interface=None,
        network_interfaces=None, executable=None, np=None, min_np=None,
        max_np=None, env=None, ssh_config_file=None):
    """Runs func(*args, **kwargs) on every rank of an hvdrun job and returns
    the list of its return values, index = rank.

    Horovod's horovod.runner.run signature. num_proc (np, deprecated):
    ranks; default: all slots of hosts/hostfile, else 1. hosts
    ("h1:2,h2:2", or a list of such entries) or hostfile, ssh_port,
    ssh_identity_file, start_timeout (default $HOROVOD_START_TIMEOUT, else
    hvdrun's 30 s), network_interfaces (network_interface, deprecated),
    output_filename, verbose: as hvdrun's flags (docs/launcher.md).
    executable: the Python the ranks run (default sys.executable).
    env (hvd's own): a dict of variables set for the ranks, over the caller's
    environment. ssh_config_file (hvd's own): hvdrun's --ssh-config-file.
    use_gloo and disable_cache are accepted and change nothing
    (hvd has one transport and no cached checks). The elastic arguments
    (min/max_num_proc, min/max_np, slots, reset_limit, cooldown_range,
    host_discovery_script) raise ValueError: hvd.run starts fixed jobs only
    (hvdrun starts elastic ones). use_mpi/mpi_args raise ValueError: hvd
    has no MPI.

    Raises ValueError for a bad argument (also hvdrun's usage errors, with
    its message; nothing is started), TypeError when func or its arguments
    cannot be pickled, HvdRunError when the job fails: the first failed
    rank's exception and traceback, or hvdrun's message.
    """
    import warnings
    if network_interface:
        warnings.warn("network_interface is deprecated, use "
                      "network_interfaces instead", DeprecationWarning, 2)
        network_interfaces = network_interface.split(",")
    if np is not None:
        warnings.warn("np is deprecated, use num_proc instead",
                      DeprecationWarning, 2)
        num_proc = np
    if min_np is not None:
        min_num_proc = min_np
    if max_np is not None:
        max_num_proc = max_np
    given = dict(min_num_proc=min_num_proc, max_num_proc=max_num_proc,
                 slots=slots, reset_limit=reset_limit,
                 cooldown_range=cooldown_range,
                 host_discovery_script=host_discovery_script)
    for name in _ELASTIC:
        if given[name] is not None:
            raise ValueError(
                "hvd.run(%s=...): hvd.run starts fixed jobs only (no "
                "elastic jobs); give num_proc and hosts or hostfile, or "
                "start an elastic job with hvdrun --min-np / "
                "--host-discovery-script (docs/elastic.md)" % name)
    if use_gloo and use_mpi:
        raise ValueError("hvd.run: use_gloo and use_mpi cannot both be True")
    if use_mpi:
        raise ValueError("hvd.run(use_mpi=True): hvd has no MPI controller; "
                         "hvdrun starts the job itself (leave use_mpi unset)")
    if mpi_args is not None:
        raise ValueError("hvd.run(mpi_args=...): hvd does not use MPI, so "
                         "there is no mpirun to pass arguments to")
    if not callable(func):
        raise TypeError("hvd.run: func must be callable, not %r" % (func,))
    if kwargs is None:
        kwargs = {}

    flags = _hvdrun_flags(num_proc, hosts, hostfile, start_timeout, ssh_port,
                          ssh_identity_file, output_filename, verbose,
                          network_interfaces)
    if ssh_config_file is not None:
        flags += ["--ssh-config-file", os.fspath(ssh_config_file)]
    worker_env = _worker_env(env)
    flags += [a for name in sorted(worker_env) for a in ("-x", name)]

    from hvd import _run_job
    return _run_job.Job(
        hvdrun=find_hvdrun(), flags=flags,
        command=[executable or sys.executable, "-m", "hvd._run_task"],
        env=worker_env, payload=_pickle_call(func, args, kwargs),
        verbose=bool(verbose)).run()


def _hvdrun_flags(num_proc, hosts, hostfile, start_timeout, ssh_port,
                  ssh_identity_file, output_filename, verbose,
                  network_interfaces):
    flags = []
    if num_proc is None and hosts is None and hostfile is None:
        num_proc = 1  # Horovod's default
    if num_proc is not None:
        if isinstance(num_proc, bool) or not isinstance(num_proc, int):
            raise ValueError("hvd.run: num_proc must be an int, not %r"
                             % (num_proc,))
        if num_proc <= 0:
            raise ValueError("hvd.run: num_proc must be at least 1, not %d"
                             % num_proc)
        flags += ["-np", str(num_proc)]
    if hosts is not None and hostfile is not None:
        raise ValueError("hvd.run: give hosts or hostfile, not both")
    if hosts is not None:
        if not isinstance(hosts, str):
            hosts = ",".join(hosts)
        if not hosts:
            raise ValueError("hvd.run: hosts is empty")
        flags += ["-H", hosts]
    if hostfile is not None:
        flags += ["--hostfile", os.fspath(hostfile)]
    if start_timeout is None and os.environ.get("HOROVOD_START_TIMEOUT"):
        start_timeout = os.environ["HOROVOD_START_TIMEOUT"]
    if start_timeout is not None:
        try:
            seconds = float(start_timeout)
        except (TypeError, ValueError):
            seconds = -1
        if not seconds > 0:
            raise ValueError("hvd.run: start_timeout must be a positive "
                             "number of seconds, not %r" % (start_timeout,))
        flags += ["--start-timeout", repr(seconds)]
    if ssh_port is not None:
        flags += ["-p", str(int(ssh_port))]
    if ssh_identity_file is not None:
        flags += ["-i", os.fspath(ssh_identity_file)]
    if network_interfaces:
        if isinstance(network_interfaces, str):
            network_interfaces = network_interfaces.split(",")
        flags += ["--network-interfaces", ",".join(network_interfaces)]
    if output_filename is not None:
        flags += ["--output-filename", os.fspath(output_filename)]
    if verbose:
        flags.append("--verbose")
    return flags


def _worker_env(env):
    """The variables run() sets for the ranks (env, checked)."""
    out = {}
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not name or "=" in name \
                or "\0" in name:
            raise ValueError("hvd.run: bad environment variable name %r"
                             % (name,))
        if name.startswith("HVD_RUN_"):
            raise ValueError("hvd.run: %s is hvd.run's own variable" % name)
        out[name] = str(value)
    return out


def _pickle_call(func, args, kwargs):
    try:
        import cloudpickle
    except ImportError as e:
        raise ImportError("hvd.run needs cloudpickle (Debian: "
                          "python3-cloudpickle; pip: cloudpickle)") from e
    try:
        return cloudpickle.dumps((func, tuple(args), dict(kwargs)))
    except Exception as e:
        raise TypeError("hvd.run: func and its arguments must be picklable "
                        "with cloudpickle: %s: %s"
                        % (type(e).__name__, e)) from e


def find_hvdrun():
    """$HVD_HVDRUN_PATH; else hvdrun next to the package (hvd/hvdrun, or
    bazel-bin/launcher/hvdrun of the source tree it lies in); else PATH."""
    path = os.environ.get("HVD_HVDRUN_PATH")
    if path:
        if not os.access(path, os.X_OK):
            raise HvdRunError("hvd.run: HVD_HVDRUN_PATH=%s is not an "
                              "executable file" % path)
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))  # python/hvd -> root
    for candidate in (os.path.join(here, "hvdrun"),
                      os.path.join(root, "bazel-bin", "launcher", "hvdrun")):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    import shutil
    found = shutil.which("hvdrun")
    if found:
        return found
    raise HvdRunError("hvd.run: hvdrun not found: set HVD_HVDRUN_PATH, put "
                      "hvdrun on PATH (tools/setup.sh), or build it with "
                      "`bazel build //launcher:hvdrun //agent:hvd-agent`")
