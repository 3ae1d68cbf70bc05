#!/usr/bin/python3
"""hvd against its anchors, in one invocation, on the same sizes.

Runs the nccl-tests-style sweep of hvd (hvd_bench under hvdrun),
torch.distributed with gloo (gloo_bench.py) and Open MPI (mpi_bench.c, built
here with mpicc), alternating the systems round by round (the order rotates
each round), then reports per op and size the median over rounds of each
run's median time, one side-by-side table of bus bandwidths with the ratios
hvd/gloo and hvd/mpi, and a PNG plot of busbw against size per op. The
system `memcpy` (local runs, sizes from 64 KiB) is the memory line: the
rate of one copy of each size while --np processes copy at once
(memcpy_rate), the most each rank can move when every rank moves memory;
hvd/memcpy is hvd's busbw over it.

Local (one host, --np ranks):
  /usr/bin/python3 tools/bench/compare.py --np 2 --out /tmp/cmp \\
      [--ops allreduce,allgather,broadcast,alltoall,reducescatter] \\
      [--systems hvd,gloo,mpi,memcpy] [--rounds 3] [-b 8] [-e 256M] [-f 2] \\
      [-n 50] [-w 5]

Across network-namespace hosts (run under tests/multihost/netns_hosts.sh,
which exports HVD_MH_*; tools/bench/shaped_links.sh does that): add
--netns; one rank per host h1..hN, hvdrun from the client host h0 over ssh,
gloo ranks started inside each host's namespace; Open MPI is left out.

Needs `bazel build //launcher:hvdrun //agent:hvd-agent //tools/bench:hvd_bench
//tools/bench:memcpy_rate` first (or --build). Writes OUT/raw/<system>-<round>.csv, OUT/summary.csv,
OUT/table.txt and OUT/busbw_<op>.png.
"""

import argparse
import csv
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time

from bench_sizes import parse_size, sweep_sizes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(REPO, "tools", "bench")
PY = "/usr/bin/python3"
BUILD_TARGETS = ["//launcher:hvdrun", "//agent:hvd-agent", "//tools/bench:hvd_bench",
                 "//tools/bench:memcpy_rate"]
CSV_HEADER = ("system,op,bytes,count,dtype,redop,ranks,iters,median_us,"
              "min_us,algbw_gbs,busbw_gbs,wrong\n")
MEMCPY_FROM = 64 << 10  # below it a copy's time is mostly the clock's


def bazel_bin():
    return subprocess.run(["bazel", "info", "bazel-bin"], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout.strip()


def built(targets, build=True):
    """The paths of `targets` ("//pkg:name") in bazel-bin, built first
    unless `build` is false (then they are whatever bazel-bin holds)."""
    if build:
        subprocess.run(["bazel", "build", "--noshow_progress", *targets],
                       cwd=REPO, check=True)
    out = bazel_bin()
    return [os.path.join(out, t[2:].replace(":", "/")) for t in targets]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_mh_env():
    env = {k: v for k, v in os.environ.items() if k.startswith("HVD_MH_")}
    if "HVD_MH_HOSTS" not in env:
        sys.exit("compare.py --netns: no HVD_MH_HOSTS; run under "
                 "tests/multihost/netns_hosts.sh (see tools/bench/shaped_links.sh)")
    return env


class Runner:
    def __init__(self, args, out):
        self.a = args
        self.out = out
        b = args.bazel_bin or bazel_bin()
        self.hvdrun = os.path.join(b, "launcher", "hvdrun")
        self.agent = os.path.join(b, "agent", "hvd-agent")
        self.hvd_bench = os.path.join(b, "tools", "bench", "hvd_bench")
        self.memcpy_rate = os.path.join(b, "tools", "bench", "memcpy_rate")
        self.mh = read_mh_env() if args.netns else None
        self.hosts = self.mh["HVD_MH_HOSTS"].split() if self.mh else []
        self.np = len(self.hosts) if self.mh else args.np
        self.mpi_bench = None

    def sweep_args(self):
        a = self.a
        return ["-b", a.b, "-e", a.e, "-f", str(a.f), "-n", str(a.n),
                "-w", str(a.w), "--ops", a.ops, "--budget", a.budget]

    def run(self, cmd, log, env=None, timeout=None):
        with open(log, "w") as f:
            f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
            f.flush()
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                               timeout=timeout or self.a.timeout, cwd="/tmp")
        if p.returncode != 0:
            sys.stderr.write("command failed (exit %d), see %s\n" % (p.returncode, log))
        return p.returncode == 0

    def hvd(self, csv_path, log):
        bench = [self.hvd_bench] + self.sweep_args() + ["--csv", csv_path]
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(self.agent) + ":" + env.get("PATH", "")
        extra = []
        for kv in self.a.hvd_env:
            extra += ["-x", kv]
        if not self.mh:
            return self.run([self.hvdrun, "-np", str(self.np)] + extra + bench,
                            log, env)
        hosts = ",".join(h + ":1" for h in self.hosts)
        cmd = ["ip", "netns", "exec", self.mh["HVD_MH_CLIENT_NETNS"], self.hvdrun,
               "--agent-path", self.agent,
               "--ssh-config-file", self.mh["HVD_MH_SSH_CONFIG"],
               "-i", self.mh["HVD_MH_SSH_KEY"],
               "-np", str(self.np), "-H", hosts] + extra + bench
        return self.run(cmd, log, env)

    def gloo(self, csv_path, log):
        port = free_port()
        master = self.mh["HVD_MH_ADDR_" + self.hosts[0]] if self.mh else "127.0.0.1"
        procs = []
        with open(log, "w") as f:
            for r in range(self.np):
                env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(self.np),
                           MASTER_ADDR=master, MASTER_PORT=str(port),
                           OMP_NUM_THREADS="1")
                cmd = [PY, os.path.join(HERE, "gloo_bench.py")] + self.sweep_args()
                if r == 0:
                    cmd += ["--csv", csv_path]
                if self.mh:
                    # gloo binds to the address its host name resolves to:
                    # name the interface.
                    env["GLOO_SOCKET_IFNAME"] = "eth0"
                    cmd = ["ip", "netns", "exec",
                           self.mh["HVD_MH_NETNS_" + self.hosts[r]]] + cmd
                f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
                f.flush()
                procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                              env=env, cwd="/tmp",
                                              start_new_session=True))
            ok = True
            deadline = time.time() + self.a.timeout
            for p in procs:
                try:
                    ok &= p.wait(timeout=max(1, deadline - time.time())) == 0
                except subprocess.TimeoutExpired:
                    ok = False
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        if not ok:
            sys.stderr.write("gloo run failed, see %s\n" % log)
        return ok

    def memcpy(self, csv_path, log):
        """The memory line: memcpy_rate at each size, --np copies at once,
        one row per op (the same line under each op's plot)."""
        budget = parse_size(self.a.budget)
        rows = []
        with open(log, "w") as f:
            for b in (b for b in sweep_sizes(self.a.b, self.a.e, self.a.f)
                      if b >= MEMCPY_FROM):
                iters = max(5, min(self.a.n, budget // b))
                cmd = [self.memcpy_rate, str(b), str(iters), str(self.np)]
                f.write("$ " + " ".join(cmd) + "\n")
                p = subprocess.run(cmd, capture_output=True, text=True,
                                   timeout=self.a.timeout)
                f.write(p.stdout + p.stderr)
                if p.returncode != 0:
                    sys.stderr.write("memcpy_rate failed, see %s\n" % log)
                    return False
                us, gbs = p.stdout.split()[2:4]
                for op in self.a.ops.split(","):
                    rows.append("memcpy,%s,%d,%d,uint8,copy,%d,%d,%s,%s,%s,%s,0\n"
                                % (op, b, b, self.np, iters, us, us, gbs, gbs))
        with open(csv_path, "w") as f:
            f.write(CSV_HEADER + "".join(rows))
        return True

    def mpi(self, csv_path, log):
        if self.mpi_bench is None:
            self.mpi_bench = os.path.join(self.out, "mpi_bench")
            subprocess.run(["mpicc", "-O2", "-o", self.mpi_bench,
                            os.path.join(HERE, "mpi_bench.c")], check=True)
        over = ["--oversubscribe"] if self.np > (os.cpu_count() or 1) else []
        cmd = ["mpirun", "--allow-run-as-root", "-np", str(self.np)] + over + \
              ["--mca", "btl", "self,vader", self.mpi_bench] + \
            self.sweep_args() + ["--csv", csv_path]
        return self.run(cmd, log)


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def fmt_size(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return "%d%s" % (n // scale, unit)
    return str(n)


def summarize(out, systems, rounds_rows):
    # (system, op, bytes) -> list of per-run median times
    times, factor = {}, {}
    for system, rows in rounds_rows:
        for r in rows:
            key = (system, r["op"], int(r["bytes"]))
            times.setdefault(key, []).append(float(r["median_us"]))
            # The bus factor of op and size, from a row that can tell it (a
            # rate printed as 0.000 cannot); a copy's rate is its own busbw.
            if system != "memcpy" and float(r["algbw_gbs"]) > 0:
                factor[(r["op"], int(r["bytes"]))] = (
                    float(r["busbw_gbs"]) / float(r["algbw_gbs"]))
    summary = {}
    for key, ts in times.items():
        t = statistics.median(ts)
        b = key[2]
        alg = b / t / 1e3
        bus = 1.0 if key[0] == "memcpy" else factor.get((key[1], key[2]), 0)
        summary[key] = (t, alg * bus, len(ts))
    ops = sorted({k[1] for k in summary}, key=lambda o: [
        "allreduce", "allgather", "broadcast", "alltoall", "reducescatter"].index(o))
    with open(os.path.join(out, "summary.csv"), "w") as f:
        f.write("system,op,bytes,runs,median_us,busbw_gbs\n")
        for (s, o, b), (t, bus, runs) in sorted(summary.items()):
            f.write("%s,%s,%d,%d,%.2f,%.4f\n" % (s, o, b, runs, t, bus))
    others = [s for s in systems if s != "hvd"]
    lines = []
    for op in ops:
        sizes = sorted({k[2] for k in summary if k[1] == op})
        head = "%-8s" % "size"
        for s in systems:
            head += " %11s %9s" % (s + " us", s + " GB/s")
        for s in others:
            head += " %9s" % ("hvd/" + s)
        lines.append("== %s (busbw = bus bandwidth; ratios of busbw) ==" % op)
        lines.append(head)
        for b in sizes:
            row = "%-8s" % fmt_size(b)
            for s in systems:
                v = summary.get((s, op, b))
                row += " %11s %9s" % (("%.1f" % v[0], "%.3f" % v[1]) if v else ("-", "-"))
            for s in others:
                h, o = summary.get(("hvd", op, b)), summary.get((s, op, b))
                row += " %9s" % ("%.2fx" % (h[1] / o[1]) if h and o and o[1] > 0 else "-")
            lines.append(row)
        lines.append("")
    text = "\n".join(lines)
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(text)
    print(text)
    plot(out, systems, ops, summary)


def plot(out, systems, ops, summary):
    try:
        import matplotlib
    except ImportError:
        print("compare.py: no plots: this Python (%s) has no matplotlib; the "
              "tables are in %s (Debian's python3-matplotlib, under "
              "/usr/bin/python3, draws them)" % (sys.executable, out),
              file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for op in ops:
        fig, ax = plt.subplots(figsize=(8, 5))
        for s in systems:
            pts = sorted((b, v[1]) for (ss, o, b), v in summary.items()
                         if ss == s and o == op and v[1] > 0)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        markersize=3, label=s)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title("%s: bus bandwidth, median over rounds" % op)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "busbw_%s.png" % op), dpi=110)
        plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--netns", action="store_true",
                    help="one rank per netns host (under netns_hosts.sh)")
    ap.add_argument("--systems", default="hvd,gloo,mpi,memcpy")
    ap.add_argument("--ops", default="allreduce")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="256M")
    ap.add_argument("-f", type=float, default=2)
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("--budget", default="2G",
                    help="at most BUDGET/size iterations per size (min 3)")
    ap.add_argument("--hvd-env", action="append", default=[],
                    help="NAME=VALUE for hvd's ranks (repeatable)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--bazel-bin", help="default: bazel info bazel-bin")
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    systems = a.systems.split(",")
    for local_only in ("mpi", "memcpy"):
        if a.netns and local_only in systems:
            systems.remove(local_only)
    unknown = set(systems) - {"hvd", "gloo", "mpi", "memcpy"}
    if unknown:
        ap.error("--systems: unknown %s (hvd, gloo, mpi, memcpy)"
                 % ", ".join(sorted(unknown)))
    os.makedirs(os.path.join(a.out, "raw"), exist_ok=True)
    if a.build:
        subprocess.run(["bazel", "build"] + BUILD_TARGETS, cwd=REPO, check=True)
    runner = Runner(a, a.out)
    with open(os.path.join(a.out, "machine.txt"), "w") as f:
        f.write(subprocess.run("uname -a; nproc; lscpu | grep 'Model name'; "
                               "free -g | head -2; uptime", shell=True,
                               capture_output=True, text=True).stdout)
    rows = []
    ok = True
    for rnd in range(a.rounds):
        order = systems[rnd % len(systems):] + systems[:rnd % len(systems)]
        for s in order:
            path = os.path.join(a.out, "raw", "%s-%d.csv" % (s, rnd))
            log = os.path.join(a.out, "raw", "%s-%d.log" % (s, rnd))
            t0 = time.time()
            good = getattr(runner, s)(path, log)
            print("round %d %-5s %s in %.0f s (load %s)" % (
                rnd + 1, s, "ok" if good else "FAILED", time.time() - t0,
                os.getloadavg()[0]), flush=True)
            ok &= good
            if os.path.exists(path):
                rows.append((s, load(path)))
    summarize(a.out, systems, rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
