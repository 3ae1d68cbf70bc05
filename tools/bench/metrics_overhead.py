#!/usr/bin/python3
"""What hvdrun --metrics-port costs a job: a 4 KiB allreduce loop on this
machine (2 ranks by default, one per core of a 2-core machine: with more
ranks than cores the loop's time is the scheduler's), with metrics on and
off, in the same run.

"On" is --metrics-port (each rank then reports every 2 s) with the page's
/status.json and Prometheus' /metrics fetched every --scrape-interval
seconds meanwhile (Prometheus' own default is a minute; 15 s is common;
1 s is a person watching the page), by an HTTP client in this process
(not a program started per scrape); "off" is the same job without the flag. Runs alternate on and off, so that drift
of a shared machine falls on both. A run's time is the slowest rank's loop
(from its first allreduce's end, as tests/multihost/driver prints it).

  /usr/bin/python3 tools/bench/metrics_overhead.py [--runs 10] [--ranks 2]
      [--iterations 100000] [--scrape-interval 15] [--no-build]

Prints every run, and on/off - 1 of the medians and of the fastest runs
(noise on a shared machine only ever adds time, so the fastest run of
each mode is the one least disturbed). Then the cost measured directly
(tools/bench/metrics_cost): the counting a cycle does with metrics on and
one report, as a share of the "off" median time per allreduce (one cycle
per allreduce in this loop; a report every 2 s). On a machine whose runs
differ by more than the cost, that share is the figure to read.
"""

import argparse
import http.client
import os
import re
import statistics
import subprocess
import sys
import threading

from compare import built, free_port  # tools/bench, beside this

TARGETS = ["//launcher:hvdrun", "//agent:hvd-agent", "//tests/multihost:driver",
           "//tools/bench:metrics_cost"]
REPORT_INTERVAL_S = 2  # HVD_METRICS_INTERVAL under --metrics-port
DONE_RE = re.compile(r"^\[(\d+)\]<stdout>:loop done iterations=\d+ ok "
                     r"seconds=([0-9.]+)$", re.M)


def scrape(port, interval, stop):
    """Fetches the page's data and /metrics every `interval` seconds until
    `stop` (http.client opens a new connection when the server closed
    the last one, as hvdrun's does after each answer)."""
    connection = None
    while not stop.wait(interval):
        for path in ("/status.json", "/metrics"):
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", port,
                                                            timeout=5)
                connection.request("GET", path)
                connection.getresponse().read()
            except (OSError, http.client.HTTPException):
                connection = None  # not up yet, closed, or the job ended


def direct_cost(binary, us_per_allreduce):
    """Prints metrics_cost's figures against `us_per_allreduce`."""
    out = subprocess.run([binary], capture_output=True, text=True,
                         check=True).stdout
    figures = dict(line.split() for line in out.splitlines())
    cycle_us = float(figures["cycle_ns"]) / 1000
    report_us = float(figures["report_us"])
    share = (cycle_us / us_per_allreduce +
             report_us / (REPORT_INTERVAL_S * 1e6)) * 100
    print("measured directly: counting %.3f us a cycle, a report %.1f us "
          "every %d s: %.2f%% of %.2f us per allreduce" % (
              cycle_us, report_us, REPORT_INTERVAL_S, share,
              us_per_allreduce))


def run(binaries, ranks, iterations, metrics, interval):
    hvdrun, agent, driver = binaries[:3]
    cmd = [hvdrun, "--agent-path", agent, "-np", str(ranks),
           "-H", "localhost:%d" % ranks]
    port = free_port()
    if metrics:
        cmd += ["--metrics-port", str(port)]
    cmd += [driver, "--allreduce", "--loop", str(iterations), "--bytes", "4096"]
    stop = threading.Event()
    scraper = threading.Thread(target=scrape, args=(port, interval, stop))
    if metrics:
        scraper.start()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    stop.set()
    if metrics:
        scraper.join()
    times = [float(s) for _, s in DONE_RE.findall(r.stdout)]
    if r.returncode != 0 or len(times) != ranks:
        sys.exit("run failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    return max(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--iterations", type=int, default=100000)
    p.add_argument("--scrape-interval", type=float, default=15.0)
    p.add_argument("--no-build", action="store_true")
    a = p.parse_args()
    binaries = built(TARGETS, build=not a.no_build)
    on, off = [], []
    print("%-4s %-4s %10s %12s" % ("run", "mode", "seconds", "us/allreduce"))
    for i in range(a.runs):
        for metrics in ((True, False) if i % 2 == 0 else (False, True)):
            t = run(binaries, a.ranks, a.iterations, metrics,
                    a.scrape_interval)
            (on if metrics else off).append(t)
            print("%-4d %-4s %10.3f %12.1f" % (i, "on" if metrics else "off",
                                              t, t / a.iterations * 1e6))
            sys.stdout.flush()
    for name, pick in (("median", statistics.median), ("fastest", min)):
        t_on, t_off = pick(on), pick(off)
        print("%s: on %.3f s, off %.3f s (%.2f / %.2f us per allreduce); "
              "on/off - 1 = %+.2f%%" % (name, t_on, t_off,
                                         t_on / a.iterations * 1e6,
                                         t_off / a.iterations * 1e6,
                                         (t_on / t_off - 1) * 100))
    direct_cost(binaries[3], statistics.median(off) / a.iterations * 1e6)


if __name__ == "__main__":
    main()
