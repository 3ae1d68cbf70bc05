"""What every rank of an hvd.run job runs (`python -m hvd._run_task`): loads
the caller's (func, args, kwargs), calls func, and hands back a record of its
return value or its exception (protocol in hvd/_run.py).

Exit codes: 0 when func returned and its record was handed back; 1 when func
(or loading it) raised, right after the record is out, without atexit
handlers, so hvdrun ends the job at once and names this rank first.
"""

import base64
import os
import socket
import sys
import time
import traceback

from hvd import _run


def main():
    nonce = os.environ.get(_run.ENV_JOB, "")
    if not nonce:
        sys.stderr.write("hvd._run_task: %s is not set: this module is run "
                         "by hvd.run, not by hand\n" % _run.ENV_JOB)
        return 2
    job_dir = os.environ.get(_run.ENV_DIR, "")
    env_payload = _take_env_payload()
    rank = int(os.environ.get("HVD_RANK", os.environ.get("HOROVOD_RANK", 0)))
    size = int(os.environ.get("HVD_SIZE", os.environ.get("HOROVOD_SIZE", 1)))
    shared = _sees_job_dir(job_dir, nonce)
    try:
        import cloudpickle
    except ImportError:
        sys.stderr.write("hvd.run: cloudpickle is not installed on this host "
                         "(%s) for %s\n" % (socket.gethostname(),
                                            sys.executable))
        return 1
    try:
        payload = _payload(job_dir if shared else None, env_payload)
        func, args, kwargs = cloudpickle.loads(payload)
        record = {"ok": True, "value": func(*args, **kwargs)}
    except BaseException as e:  # noqa: B036 - SystemExit is a failure too
        record = _error_record(e)
    # The host as hvdrun names it (-H), as its messages do.
    record.update(size=size, host=os.environ.get(
        "HVD_HOSTNAME", os.environ.get("HOROVOD_HOSTNAME",
                                       socket.gethostname())))
    blob = _dumps(cloudpickle, record)
    _flush_stdio()
    if shared:
        _write_file(job_dir, rank, blob)
    else:
        _write_stream(nonce, blob)
    if not record["ok"]:
        os._exit(1)
    return 0


def _take_env_payload():
    """The payload's base64 parts from the environment, removed from it so
    that func's own child processes do not inherit up to 1 MiB."""
    try:
        count = int(os.environ.pop(_run.ENV_CHUNKS, "0"))
    except ValueError:
        count = 0
    parts = [os.environ.pop(_run.ENV_CHUNK + str(i), "")
             for i in range(count)]
    return "".join(parts) if count else None


def _sees_job_dir(job_dir, nonce):
    """True when this rank sees the caller's job directory: the same host, or
    a shared filesystem. The nonce tells it from a same-named directory."""
    if not job_dir:
        return False
    try:
        with open(os.path.join(job_dir, _run.NONCE_FILE)) as f:
            return f.read() == nonce
    except OSError:
        return False


def _payload(job_dir, env_payload):
    if job_dir is not None:
        with open(os.path.join(job_dir, _run.PAYLOAD_FILE), "rb") as f:
            return f.read()
    if env_payload is not None:
        return base64.b64decode(env_payload)
    raise RuntimeError(
        "hvd.run: func and its arguments (%s bytes pickled) are too large "
        "for the job's environment (at most %d bytes of base64), and this "
        "host (%s) does not see the caller's directory %s: set "
        "HVD_RUN_TMPDIR to a directory on a filesystem every host shares, "
        "or pass less (e.g. load data inside func)"
        % (os.environ.get(_run.ENV_BYTES, "?"), _run._ENV_PAYLOAD_LIMIT,
           os.environ.get("HVD_HOSTNAME", socket.gethostname()),
           os.environ.get(_run.ENV_DIR) or "(HVD_RUN_NO_SHARED_DIR=1)"))


def _error_record(e):
    try:
        message = str(e)[:500]
    except Exception:
        message = ""
    return {"ok": False, "type": type(e).__name__, "exception": e,
            "message": message,
            "traceback": "".join(traceback.format_exception(
                type(e), e, e.__traceback__)),
            "time": time.time()}


def _dumps(cloudpickle, record):
    """The pickled record; a value or exception that cannot be pickled
    becomes an error record / is left out (its traceback text stays)."""
    try:
        return cloudpickle.dumps(record)
    except Exception as e:
        if record["ok"]:
            failed = _error_record(e)
            failed["traceback"] = (
                "hvd.run: the return value of func (%s) cannot be pickled:\n"
                % type(record["value"]).__name__) + failed["traceback"]
            failed.update(size=record["size"], host=record["host"])
            record = failed
        try:
            return cloudpickle.dumps(record)
        except Exception:
            record["exception"] = None
            return cloudpickle.dumps(record)


def _flush_stdio():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _write_file(job_dir, rank, blob):
    path = os.path.join(job_dir, _run.RESULT_FILE % rank)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _write_stream(nonce, blob):
    """The record as marked lines on fd 1, which hvdrun streams back (the
    caller also finds the marker after text of a line func left open)."""
    marker = _run.stream_marker(nonce)
    encoded = base64.b64encode(blob).decode("ascii")
    step = _run.STREAM_CHUNK_CHARS
    lines = ["%s%s\n" % (marker, encoded[i:i + step])
             for i in range(0, len(encoded), step)]
    lines.append("%s%s\n" % (marker, _run.STREAM_END))
    data = "".join(lines).encode("ascii")
    while data:
        data = data[os.write(1, data):]


if __name__ == "__main__":
    sys.exit(main())
