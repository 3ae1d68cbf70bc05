"""hvdrun --metrics-port with a real 4-rank job, read as its users read it:
Prometheus' /metrics over HTTP, and the page in headless Chromium (Debian's
chromium): its DOM while the job runs, a screenshot, and its DOM after one
rank is killed. hvdrun lingers with the page up after the job ends.
"""
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""),
                        os.environ.get("TEST_WORKSPACE", "__main__"))


def runfile(path):
    p = os.path.join(RUNFILES, path) if os.environ.get("TEST_SRCDIR") else path
    return os.path.realpath(p)


HVDRUN = runfile("launcher/hvdrun")
AGENT = runfile("agent/hvd-agent")
DRIVER = runfile("tests/multihost/driver")
CHROMIUM = "/usr/bin/chromium"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MetricsPageTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="metrics-",
                                    dir=os.environ.get("TEST_TMPDIR"))
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        started = os.path.join(self.dir, "started")
        os.mkdir(started)
        self.out = open(os.path.join(self.dir, "out"), "w+")
        self.job = subprocess.Popen(
            [HVDRUN, "--agent-path", AGENT, "-np", "4", "-H", "localhost:4",
             "--metrics-port", str(self.port), "--metrics-linger-seconds",
             "120", DRIVER, "--allreduce", "--loop", "100000000", "--bytes",
             "4096", "--started", started],
            stdout=self.out, stderr=subprocess.STDOUT, cwd=self.dir)
        self.wait_for(lambda: len(os.listdir(started)) == 4, "4 ranks looping")

    def tearDown(self):
        if self.job.poll() is None:
            self.job.kill()
        self.job.wait()
        self.out.close()

    def output(self):
        self.out.flush()
        with open(self.out.name) as f:
            return f.read()

    def wait_for(self, cond, what, timeout=60.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond():
                return
            time.sleep(0.2)
        self.fail("timed out waiting for %s; hvdrun said:\n%s" %
                  (what, self.output()))

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()

    def chromium(self, *args):
        r = subprocess.run(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--user-data-dir=" + os.path.join(self.dir, "chromium"),
             "--virtual-time-budget=3000", *args, self.url + "/"],
            capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def rows(self, dom):
        """rank -> data-state of its row, as the page's script rendered it."""
        return {int(m.group(1)): m.group(2) for m in re.finditer(
            r'<tr id="rank-(\d+)" data-state="([^"]*)"', dom)}

    def test_metrics_and_the_page_while_running_and_after_a_rank_dies(self):
        # Every rank reports within a few seconds (HVD_METRICS_INTERVAL=2).
        def all_counting():
            _, _, text = self.get("/metrics")
            counts = re.findall(r'hvd_collectives_total\{rank="(\d)",'
                                r'host="localhost",op="allreduce"\} (\d+)', text)
            return len([c for _, c in counts if int(c) > 0]) == 4
        self.wait_for(all_counting, "every rank's allreduce count on /metrics")
        status, ctype, text = self.get("/metrics")
        self.assertEqual((status, ctype), (200, "text/plain; version=0.0.4"))
        self.assertIn("# TYPE hvd_collectives_total counter\n", text)
        self.assertIn("hvd_job_failed 0\n", text)
        for rank in range(4):
            self.assertRegex(text, r'hvd_resident_memory_bytes\{rank="%d",'
                             r'host="localhost"\} [1-9]\d+\n' % rank)

        dom = self.chromium("--dump-dom")
        self.assertIn('<span id="phase">running</span>', dom)
        self.assertEqual(self.rows(dom), {r: "running" for r in range(4)})
        self.assertIn('<div id="failure"></div>', dom)
        shot = os.path.join(os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR",
                                           self.dir), "metrics_page.png")
        self.chromium("--window-size=900,400", "--hide-scrollbars",
                      "--screenshot=" + shot)
        with open(shot, "rb") as f:
            png = f.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(png), 5000)

        pid = int(re.search(r"\[2\]<stdout>:identity .* pid=(\d+)",
                            self.output()).group(1))
        os.kill(pid, signal.SIGKILL)
        self.wait_for(lambda: '"phase":"ended"' in self.get("/status.json")[2],
                      "the job to end")
        dom = self.chromium("--dump-dom")
        self.assertIn('<span id="phase">ended</span>', dom)
        self.assertIn('<div id="failure">hvdrun: rank 2 (host localhost) '
                      'killed by signal 9 (Killed)</div>', dom)
        self.assertEqual(self.rows(dom)[2], "killed by signal 9 (Killed)")
        self.assertIn("hvd_job_failed 1\n", self.get("/metrics")[2])

        # Lingering: a signal ends it at once, with the job's code.
        self.job.send_signal(signal.SIGINT)
        self.assertEqual(self.job.wait(timeout=30), 137, self.output())
        self.assertIn("hvdrun: rank 2 (host localhost) killed by signal 9",
                      self.output())


if __name__ == "__main__":
    unittest.main(verbosity=2)
