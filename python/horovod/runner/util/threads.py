"""Thread helpers with the behaviour of Horovod's horovod.runner.util.threads
(its test utilities import in_thread from here)."""

import queue
import threading


def _check_args(args):
    if not isinstance(args, tuple):
        raise ValueError("args must be a tuple, not %s; for one argument "
                         "write (arg,)" % type(args).__name__)


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Starts target(*args) in a new thread and returns the thread. daemon:
    the thread does not keep the process alive. silent: an exception of
    target is swallowed instead of reported by threading's excepthook."""
    _check_args(args)
    body = target
    if silent:
        def body(*a):
            try:
                target(*a)
            except BaseException:  # noqa: B036 - silent means silent
                pass
    thread = threading.Thread(target=body, args=args, name=name,
                              daemon=daemon)
    thread.start()
    return thread


def on_event(event, func, args=(), stop=None, check_stop_interval_s=1.0,
             daemon=True, silent=False):
    """Starts a thread that calls func(*args) once `event` is set. With a
    `stop` event, the thread checks it every check_stop_interval_s seconds
    and returns without calling func once stop is set; a non-daemon thread
    needs a stop event (or it could keep the process alive forever).
    Returns the thread."""
    if event is None:
        raise ValueError("event must not be None")
    _check_args(args)
    if stop is None:
        if not daemon:
            raise ValueError("a non-daemon event thread needs a stop event")

        def wait_then_call():
            event.wait()
            func(*args)
    else:
        def wait_then_call():
            while not (event.is_set() or stop.is_set()):
                event.wait(timeout=check_stop_interval_s)
            if not stop.is_set():
                func(*args)
    return in_thread(wait_then_call, daemon=daemon, silent=silent)


def execute_function_multithreaded(fn, args_list, block_until_all_done=True,
                                   max_concurrent_executions=1000):
    """Calls fn(*args_list[i]) for every i on at most
    max_concurrent_executions threads. When block_until_all_done, waits for
    all and returns {i: result}, raising RuntimeError if some call did not
    complete (it raised); otherwise returns None at once (the threads are
    daemons)."""
    pending = queue.Queue()
    for index, args in enumerate(args_list):
        pending.put((index, list(args)))
    results = queue.Queue()

    def worker():
        while True:
            try:
                index, args = pending.get(block=False)
            except queue.Empty:
                return
            results.put((index, fn(*args)))

    threads = [in_thread(worker, daemon=not block_until_all_done)
               for _ in range(min(max_concurrent_executions, len(args_list)))]
    if not block_until_all_done:
        return None
    # Short joins, so that a signal (Ctrl-C) still reaches this thread.
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(0.1)
    done = {}
    while not results.empty():
        index, value = results.get()
        done[index] = value
    if len(done) != len(args_list):
        raise RuntimeError("some threads running %s did not complete "
                           "successfully" % getattr(fn, "__name__", fn))
    return done
