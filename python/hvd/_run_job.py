"""The caller's side of hvd.run: one hvdrun process, its output relayed, the
ranks' records collected (protocol in hvd/_run.py)."""

import base64
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from hvd import _run

# hvdrun's prefix of a worker's line: "[3]<stderr>:text".
_WORKER_LINE = re.compile(r"^\[(\d+)\]<(stdout|stderr)>:(.*)$", re.S)
# hvdrun's line naming the rank that ended the job.
_RANK_FAILED = re.compile(r"rank (\d+) \(host ([^)]*)\) "
                          r"(?:exited|killed|could not start)")
# Seconds hvdrun gets to end its workers after SIGTERM before SIGKILL: its
# own --kill-grace-seconds (5) plus slack.
_TERM_GRACE = 15
_TAIL_LINES = 20


def _pdeathsig_hook():
    """A preexec_fn giving hvdrun SIGTERM when the caller dies, so a killed
    notebook kernel does not leave the job running; None where prctl is not
    available. prctl is looked up here, in the parent: the child, forked
    from a process that may have other threads, only makes the call."""
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no such safety net
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong, ctypes.c_ulong]
    sigterm = int(signal.SIGTERM)

    def hook():
        prctl(1, sigterm, 0, 0, 0)  # PR_SET_PDEATHSIG
    return hook


class Job:
    def __init__(self, hvdrun, flags, command, env, payload, verbose):
        self._argv = [hvdrun] + flags + ["--"] + command
        self._env = env
        self._payload = payload
        self._verbose = verbose
        self._nonce = secrets.token_hex(16)
        self._marker = _run.stream_marker(self._nonce)
        self._lock = threading.Lock()
        self._streams = {}       # rank -> [base64 chunks]
        self._complete = set()   # ranks whose stream ended
        self._tails = {}         # rank -> last stderr lines
        self._hvdrun_lines = []  # hvdrun's own stderr lines

    def run(self):
        job_dir = tempfile.mkdtemp(prefix="hvd-run-",
                                   dir=os.environ.get("HVD_RUN_TMPDIR"))
        try:
            return self._run_in(job_dir)
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)

    def _run_in(self, job_dir):
        with open(os.path.join(job_dir, _run.NONCE_FILE), "w") as f:
            f.write(self._nonce)
        with open(os.path.join(job_dir, _run.PAYLOAD_FILE), "wb") as f:
            f.write(self._payload)
        env = dict(os.environ)
        env.update(self._env)
        env.update(self._protocol_env(
            "" if os.environ.get("HVD_RUN_NO_SHARED_DIR") == "1" else job_dir))
        env.setdefault("PYTHONUNBUFFERED", "1")  # rank output as it comes
        env["PYTHONPATH"] = _with_package_dir(env.get("PYTHONPATH", ""))
        if self._verbose:
            print("hvd.run: %s" % " ".join(self._argv), file=sys.stderr)
        try:
            proc = subprocess.Popen(
                self._argv, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, preexec_fn=_pdeathsig_hook())
        except OSError as e:
            raise _run.HvdRunError("hvd.run: cannot start %s: %s"
                                   % (self._argv[0], e)) from e
        readers = [threading.Thread(target=self._read, args=(proc.stdout,
                                                             False)),
                   threading.Thread(target=self._read, args=(proc.stderr,
                                                             True))]
        for t in readers:
            t.daemon = True
            t.start()
        code = _wait(proc)
        for t in readers:
            t.join()
        return self._outcome(code, job_dir)

    def _protocol_env(self, job_dir):
        env = {_run.ENV_JOB: self._nonce, _run.ENV_DIR: job_dir,
               _run.ENV_BYTES: str(len(self._payload)), _run.ENV_CHUNKS: "0"}
        encoded = base64.b64encode(self._payload).decode("ascii")
        if len(encoded) <= _run._ENV_PAYLOAD_LIMIT:
            step = _run._ENV_CHUNK_CHARS
            parts = [encoded[i:i + step]
                     for i in range(0, len(encoded), step)] or [""]
            env[_run.ENV_CHUNKS] = str(len(parts))
            for i, part in enumerate(parts):
                env[_run.ENV_CHUNK + str(i)] = part
        return env

    # -- output ------------------------------------------------------------

    def _read(self, pipe, is_stderr):
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace")
            body = line[:-1] if line.endswith("\n") else line
            m = _WORKER_LINE.match(body)
            if m is None:  # hvdrun's own line
                with self._lock:
                    self._hvdrun_lines.append(body)
                if self._verbose:
                    _write(sys.stderr, line)
                continue
            rank, text = int(m.group(1)), m.group(3)
            if not is_stderr:
                at = text.find(self._marker)
                if at >= 0:
                    self._take_chunk(rank, text[at + len(self._marker):])
                    if at == 0:
                        continue
                    line = "[%d]<stdout>:%s\n" % (rank, text[:at])
            else:
                with self._lock:
                    tail = self._tails.setdefault(rank, [])
                    tail.append(text)
                    del tail[:-_TAIL_LINES]
            # Looked up per line: the caller may swap sys.stdout meanwhile.
            _write(sys.stderr if is_stderr else sys.stdout, line)
        pipe.close()

    def _take_chunk(self, rank, chunk):
        with self._lock:
            if chunk == _run.STREAM_END:
                self._complete.add(rank)
            else:
                self._streams.setdefault(rank, []).append(chunk)

    # -- results -----------------------------------------------------------

    def _outcome(self, code, job_dir):
        records = self._records(job_dir)
        hvdrun_text = "\n".join(line for line in self._hvdrun_lines if line)
        if code == 2 and not records and not _RANK_FAILED.search(hvdrun_text):
            # A usage error: nothing was started.
            raise ValueError(_last_hvdrun_message(self._hvdrun_lines)
                             or "hvdrun: bad arguments (exit code 2)")
        errors = {r: rec for r, rec in records.items() if not rec["ok"]}
        if errors:
            raise self._rank_error(errors, code)
        if code != 0:
            failed = _RANK_FAILED.search(hvdrun_text)
            rank = int(failed.group(1)) if failed else None
            host = failed.group(2) if failed else None
            message = (_last_hvdrun_message(self._hvdrun_lines)
                       or "hvdrun exited with code %d" % code)
            tail = self._tails.get(rank) if rank is not None else None
            if tail:
                message += ("\nlast stderr lines of rank %d:\n  %s"
                            % (rank, "\n  ".join(tail)))
            raise _run.HvdRunError(message, rank=rank, host=host,
                                   exit_code=code)
        if not records:
            raise _run.HvdRunError("hvd.run: the job ended with code 0 but "
                                   "no rank handed back a result", exit_code=0)
        if not self._verbose:  # hvdrun's warnings of a job that went well
            for line in self._hvdrun_lines:
                _write(sys.stderr, line + "\n")
        size = next(iter(records.values()))["size"]
        missing = [r for r in range(size) if r not in records]
        if missing:
            raise _run.HvdRunError(
                "hvd.run: rank(s) %s exited with code 0 without handing back "
                "a result (did func end the process, e.g. os._exit?)"
                % ", ".join(map(str, missing)), rank=missing[0], exit_code=0)
        return [records[r]["value"] for r in range(size)]

    def _records(self, job_dir):
        import cloudpickle
        records = {}
        blobs = {}
        for name in os.listdir(job_dir):
            if name.startswith("result."):
                try:
                    rank = int(name.split(".", 1)[1])
                except ValueError:
                    continue
                with open(os.path.join(job_dir, name), "rb") as f:
                    blobs[rank] = f.read()
        for rank in self._complete:
            if rank not in blobs:
                blobs[rank] = "".join(self._streams.get(rank, ()))
        for rank, blob in blobs.items():
            try:
                if isinstance(blob, str):  # streamed: base64
                    blob = base64.b64decode(blob, validate=True)
                records[rank] = cloudpickle.loads(blob)
            except Exception as e:
                records[rank] = {
                    "ok": False, "host": "?", "size": None,
                    "type": type(e).__name__, "exception": None,
                    "traceback": "hvd.run: the result of rank %d cannot be "
                                 "unpickled here: %s: %s"
                                 % (rank, type(e).__name__, e)}
        return records

    def _rank_error(self, errors, code):
        failed = _RANK_FAILED.search("\n".join(self._hvdrun_lines))
        first = int(failed.group(1)) if failed else None
        if first not in errors:  # hvdrun named one without a record
            first = min(errors, key=lambda r: (errors[r].get("time", 0), r))
        rec = errors[first]
        text = rec["traceback"].rstrip("\n")
        what = rec["type"] + (": " + rec["message"] if rec.get("message")
                              else "")
        message = "rank %d (host %s) raised %s\n\nRemote traceback of rank " \
                  "%d:\n%s" % (first, rec["host"], what, first, text)
        others = sorted(r for r in errors if r != first)
        if others:
            message += "\n\nAlso failed: " + "; ".join(
                "rank %d: %s" % (r, errors[r]["traceback"].rstrip(
                    "\n").splitlines()[-1] if errors[r]["traceback"] else
                    errors[r]["type"]) for r in others)
        err = _run.HvdRunError(
            message, rank=first, host=rec["host"], exit_code=code,
            remote_traceback=rec["traceback"], exception=rec["exception"],
            errors=[(r, errors[r]["host"], errors[r]["traceback"])
                    for r in sorted(errors)])
        if isinstance(rec["exception"], BaseException):
            err.__cause__ = rec["exception"]
        return err


def _wait(proc):
    """proc's exit code; on any interruption (Ctrl-C, an exception in this
    thread), end the job first: SIGTERM to hvdrun, which ends its workers,
    then SIGKILL to its process group if it does not exit in time."""
    try:
        return proc.wait()
    except BaseException:
        _end(proc)
        raise


def _end(proc):
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=_TERM_GRACE)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _write(stream, text):
    """Never raises: a reader that stopped would leave hvdrun blocked on a
    full pipe. Output the caller cannot take (no stream, closed) is lost."""
    try:
        stream.write(text)
        stream.flush()
    except Exception:
        pass


def _last_hvdrun_message(lines):
    for line in reversed(lines):
        if line.startswith("hvdrun:"):
            return line
    for line in reversed(lines):
        if line.strip():
            return line
    return ""


def _with_package_dir(pythonpath):
    """PYTHONPATH with the directory holding this hvd package appended, so
    ranks import the same hvd even when the caller found it by sys.path."""
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = [p for p in pythonpath.split(os.pathsep) if p]
    if pkg_parent not in parts:
        parts.append(pkg_parent)
    return os.pathsep.join(parts)
