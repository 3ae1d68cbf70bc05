"""Totals test cases over a `bazel test` run: prints "N passed, N failed".

Cases come from each target's XML report (gtest and pytest both write one).
A target with no usable report (crashed, timed out, failed to build), or one
bazel failed although its report shows no failing case, counts as one failure.

Usage: count_tests.py BAZEL_OUTPUT_FILE [NAME=EXIT_STATUS ...]
                      [RUN=OUTPUT_FILE@TESTLOGS_DIR ...]

Each NAME=EXIT_STATUS is a check run outside bazel test (the thread-safety
build, a fuzzer): one case, passed when its exit status is 0. Each
RUN=OUTPUT_FILE@TESTLOGS_DIR is another bazel test run in an output base of
its own (the suite under ASan): its cases count too, as cases of RUN.
"""
import glob
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

BAD = re.compile(r"^//(\S+):(\S+)\s+(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)")


def failed_targets(bazel_output, logs):
    bad = set()
    with open(bazel_output, errors="replace") as f:
        for line in f:
            m = BAD.match(line)
            if m:
                bad.add(os.path.join(logs, m.group(1), m.group(2)))
    return bad


def count_report(xml_path):
    """(passed, failed, had_cases) of one XML report."""
    passed = failed = 0
    try:
        root = ET.parse(xml_path).getroot()
    except (ET.ParseError, OSError):
        return 0, 0, False
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    cases = [c for s in suites for c in s.iter("testcase")]
    for c in cases:
        if c.find("failure") is not None or c.find("error") is not None:
            failed += 1
        elif c.find("skipped") is None:
            passed += 1
    return passed, failed, bool(cases)


def target_of(log_dir):
    base = os.path.basename(log_dir)
    return os.path.dirname(log_dir) if base.startswith(("shard_", "run_")) else log_dir


RAN = re.compile(r"^//(\S+):(\S+)\s+(\(cached\) )?(PASSED|FAILED|TIMEOUT|"
                 r"NO STATUS|FLAKY)")


def targets_in(bazel_output, logs):
    """The log folders of the targets this run reported (older runs' logs
    stay in the output base and must not count)."""
    ran = set()
    with open(bazel_output, errors="replace") as f:
        for line in f:
            m = RAN.match(line)
            if m:
                ran.add(os.path.join(logs, m.group(1), m.group(2)))
    return ran


def add_run(results, run, bazel_output, logs):
    """Adds the cases of one bazel test run, keyed by (run, target)."""
    ran = targets_in(bazel_output, logs)
    for log in glob.glob(os.path.join(logs, "**", "test.log"), recursive=True):
        target = target_of(os.path.dirname(log))
        if target not in ran:
            continue
        p, f, ok = count_report(os.path.join(os.path.dirname(log), "test.xml"))
        entry = results.setdefault((run, target), [0, 0])
        entry[0] += p
        entry[1] += f if ok else max(f, 1)
    for target in failed_targets(bazel_output, logs):
        entry = results.setdefault((run, target), [0, 0])
        entry[1] = max(entry[1], 1)


def main():
    logs = subprocess.run(["bazel", "info", "bazel-testlogs"],
                          capture_output=True, text=True).stdout.strip()
    results = {}  # (run, target) -> [passed, failed]
    add_run(results, "", sys.argv[1], logs)
    for item in sys.argv[2:]:
        name, _, value = item.partition("=")
        if "@" in value:
            output, _, run_logs = value.partition("@")
            add_run(results, name, output, run_logs)
        else:
            results[(name, "")] = [1, 0] if value == "0" else [0, 1]
    passed = sum(p for p, _ in results.values())
    failed = sum(f for _, f in results.values())
    print(f"{passed} passed, {failed} failed")


if __name__ == "__main__":
    main()
