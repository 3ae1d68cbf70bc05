#!/usr/bin/python3
"""Launch-time benchmark: from hvdrun's start until every rank has initialized.

`hvdrun -np 4 -H h1:2,h2:2 driver --allreduce` over two ssh hosts made by
tests/multihost/netns_hosts.sh (network namespaces with their own sshd; needs
root). hvdrun runs in the harness's client host h0, so both hosts are
reached over ssh. Each rank prints the CLOCK_REALTIME at which hvd_init()
returned; a run's launch time is the latest of those minus the time hvdrun
was started (one clock: every "host" is on this machine). The time until
hvdrun exits is reported too, and the launcher's CPU: hvdrun's and its ssh
clients' user + system time (the hosts' sshd, agents and ranks are not
hvdrun's descendants and are not counted).

With --fanout K[,K...] each run launches once per K with `--launch-fanout
K`, in turn (a flat launch when K is at least the host count; a tree of
agents below it, whose ssh clients run in the agents and are not the
launcher's CPU).

  /usr/bin/python3 tools/bench/launch_time.py [--runs 9] [--np 4]
      [--hosts 2] [--fanout K[,K...]] [--no-build] [--json FILE]

Prints each run and the median. Exit code 0 when every run succeeded.
"""

import argparse
import json
import os
import re
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(REPO, "tests", "multihost", "netns_hosts.sh")
TARGETS = ["//launcher:hvdrun", "//agent:hvd-agent", "//tests/multihost:driver"]
INIT_RE = re.compile(r"^\[(\d+)\]<stdout>:initialized unix_time=([0-9.]+)$", re.M)
OK_RE = re.compile(r"^\[(\d+)\]<stdout>:allreduce sum=\d+ expected=\d+ ok$", re.M)


def bazel_bin():
    out = subprocess.run(["bazel", "info", "bazel-bin"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.strip()
    return out


def read_env(run_dir):
    env = {}
    with open(os.path.join(run_dir, "env")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("export "):
                key, _, value = line[len("export "):].partition("=")
                env[key] = shlex.split(value)[0] if value else ""
    return env


def one_run(env, binaries, np_, hosts, fanout=None):
    per_host = (np_ + hosts - 1) // hosts
    host_list = ",".join("h%d:%d" % (i, per_host) for i in range(1, hosts + 1))
    cmd = ["ip", "netns", "exec", env["HVD_MH_CLIENT_NETNS"], binaries["hvdrun"],
           "--agent-path", binaries["agent"],
           "--ssh-config-file", env["HVD_MH_SSH_CONFIG"],
           "-i", env["HVD_MH_SSH_KEY"],
           "-np", str(np_), "-H", host_list]
    if fanout is not None:
        cmd += ["--launch-fanout", str(fanout)]
    cmd += [binaries["driver"], "--allreduce"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       cwd="/tmp")
    end = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    inits = {int(r): float(t) for r, t in INIT_RE.findall(p.stdout)}
    oks = {int(r) for r in OK_RE.findall(p.stdout)}
    if p.returncode != 0 or len(inits) != np_ or len(oks) != np_:
        sys.stderr.write("run failed (exit %d):\n%s\n%s\n" %
                         (p.returncode, p.stdout, p.stderr))
        return None
    return {"init_s": max(inits.values()) - start, "exit_s": end - start,
            "launcher_cpu_s": cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--fanout", default="",
                    help="comma-separated --launch-fanout values, each run "
                         "in turn (default: hvdrun's)")
    ap.add_argument("--no-build", action="store_true",
                    help="use what bazel-bin holds")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("launch_time.py: needs root (network namespaces)")

    if not args.no_build:
        subprocess.run(["bazel", "build"] + TARGETS, cwd=REPO, check=True)
    bin_dir = bazel_bin()
    binaries = {
        "hvdrun": os.path.join(bin_dir, "launcher", "hvdrun"),
        "agent": os.path.join(bin_dir, "agent", "hvd-agent"),
        "driver": os.path.join(bin_dir, "tests", "multihost", "driver"),
    }
    for path in binaries.values():
        if not os.access(path, os.X_OK):
            sys.exit("launch_time.py: missing %s (build it first)" % path)

    run_dir = subprocess.run([HARNESS, "up", "--hosts", str(args.hosts)],
                             check=True, capture_output=True,
                             text=True).stdout.strip()
    # Torn down whatever happens, Ctrl-C included.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    fanouts = list(dict.fromkeys(
        int(f) for f in args.fanout.split(",") if f)) or [None]
    results = {f: [] for f in fanouts}
    try:
        env = read_env(run_dir)
        one_run(env, binaries, args.np, args.hosts)  # warm the page cache
        for i in range(args.runs):
            for f in fanouts:
                r = one_run(env, binaries, args.np, args.hosts, f)
                if r is None:
                    sys.exit(1)
                results[f].append(r)
                print("run %d%s: all %d ranks initialized after %.3f s, hvdrun "
                      "exited after %.3f s, launcher CPU %.3f s" % (
                          i + 1, "" if f is None else " fanout %d" % f,
                          args.np, r["init_s"], r["exit_s"],
                          r["launcher_cpu_s"]), flush=True)
    finally:
        subprocess.run([HARNESS, "down", run_dir], check=False)

    summary = []
    for f in fanouts:
        runs = results[f]
        init = statistics.median(r["init_s"] for r in runs)
        exit_ = statistics.median(r["exit_s"] for r in runs)
        cpu = statistics.median(r["launcher_cpu_s"] for r in runs)
        print("median of %d runs (-np %d over %d ssh hosts%s): initialized "
              "%.3f s, exited %.3f s, launcher CPU %.3f s (%.3f s per host)" % (
                  len(runs), args.np, args.hosts,
                  "" if f is None else ", --launch-fanout %d" % f, init, exit_,
                  cpu, cpu / args.hosts))
        summary.append({"fanout": f, "runs": runs, "median_init_s": init,
                        "median_exit_s": exit_, "median_launcher_cpu_s": cpu})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"np": args.np, "hosts": args.hosts, "by_fanout": summary},
                      f, indent=2)


if __name__ == "__main__":
    main()
