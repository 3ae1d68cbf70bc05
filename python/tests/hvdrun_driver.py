"""Runs a pytest file on every rank of an hvdrun job: the entry point of the
multi-process py_test targets.

    hvdrun_driver.py --np 3 torch_collectives_test.py [pytest args...]
    hvdrun_driver.py --np 2 horovod_script.py      (a plain script)

Every rank runs the same tests in the same order, so their collectives meet.
pytest runs with -x: a rank whose test fails exits at once, and hvdrun then
ends the whole job (no rank is left waiting on a collective that will never
come). The job as a whole is bounded by --timeout.

Finds hvdrun, hvd-agent and libhvd.so in the Bazel runfiles tree, or else in
bazel-bin/ of the source tree (for runs by hand).
"""

import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
ROOT = os.path.dirname(PYTHON_DIR)
PYTHON = os.environ.get("HVD_TEST_PYTHON", "/usr/bin/python3")


def find(relative):
    """A built artifact, from the runfiles tree or the source tree."""
    for base in (ROOT, os.path.join(ROOT, "bazel-bin")):
        path = os.path.join(base, relative)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        "%s not found under %s or %s/bazel-bin: build it with bazel build "
        "//launcher:hvdrun //agent:hvd-agent //core:libhvd.so"
        % (relative, ROOT, ROOT))


def job_environment():
    env = dict(os.environ)
    env["HVD_LIBRARY"] = find("core/libhvd.so")
    env["HVD_AGENT_PATH"] = find("agent/hvd-agent")
    env["PYTHONPATH"] = os.pathsep.join(
        [PYTHON_DIR] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                        if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # A test job stalls only on a bug; say so well before the timeout.
    env.setdefault("HVD_STALL_CHECK_TIME_SECONDS", "20")
    return env


def run(np, command, timeout, env=None):
    """Runs `command` under `hvdrun -np np`; returns (exit code, output).
    Kills the whole job if it outlives `timeout` seconds."""
    hvdrun = find("launcher/hvdrun")
    cmd = [hvdrun, "-np", str(np), "--start-timeout", "30"] + list(command)
    proc = subprocess.Popen(cmd, env=env or job_environment(), cwd=HERE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        # hvdrun ends its workers on SIGTERM; SIGKILL the group if it can't.
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        return None, out + "\n*** hvdrun_driver: job killed after %ds\n" % timeout


# pytest with its JUnit report at <argv[1]>/rank<HVD_RANK>.xml; pytest's own
# arguments follow.
PYTEST_WITH_RANK_REPORT = (
    "import os, sys, pytest; "
    "sys.exit(pytest.main(sys.argv[2:] + ['--junitxml=%s/rank%s.xml' % "
    "(sys.argv[1], os.environ.get('HVD_RANK', '0'))]))")


def failures(path):
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return -1
    return sum(int(s.get("failures", 0)) + int(s.get("errors", 0))
               for s in ([root] if root.tag == "testsuite"
                         else root.iter("testsuite")))


def pick_report(xml_dir, xml_output, job_failed):
    """The per-case report bazel keeps: the rank report with the most
    failures. If the job failed but no report shows it (a rank died, the
    job timed out), none is kept and bazel records the target as failed."""
    reports = [(failures(p), p) for p in glob.glob(os.path.join(
        xml_dir, "rank*.xml"))]
    reports = [r for r in reports if r[0] >= 0]
    if not reports:
        return
    worst, path = max(reports)
    if job_failed and worst == 0:
        return
    shutil.copyfile(path, xml_output)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--timeout", type=int, default=240)
    parser.add_argument("test_file")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    test_file = os.path.join(HERE, args.test_file)
    xml_output = os.environ.get("XML_OUTPUT_FILE")  # set by bazel test
    xml_dir = None
    if args.test_file.endswith("_test.py"):
        pytest_args = ["-x", "-q", "-p", "no:cacheprovider",
                       test_file] + args.pytest_args
        command = [PYTHON, "-m", "pytest"] + pytest_args
        if xml_output:
            # Each rank writes its own report: rank<R>.xml. Python itself
            # names the file: no shell may run between hvdrun and Python,
            # since under the sanitizers' preloaded runtimes (run_python.sh)
            # Debian's shells crash.
            xml_dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
            command = [PYTHON, "-c", PYTEST_WITH_RANK_REPORT,
                       xml_dir] + pytest_args
    else:  # a plain script: its exit code says
        command = [PYTHON, test_file] + args.pytest_args
    code, out = run(args.np, command, args.timeout)
    sys.stdout.write(out)
    if xml_dir:
        pick_report(xml_dir, xml_output, job_failed=code != 0)
        shutil.rmtree(xml_dir, ignore_errors=True)
    if code != 0:
        print("*** %s under hvdrun -np %d failed (exit code %s)"
              % (args.test_file, args.np, code))
        sys.exit(1)
    print("*** %s passed on all %d ranks" % (args.test_file, args.np))


if __name__ == "__main__":
    main()
