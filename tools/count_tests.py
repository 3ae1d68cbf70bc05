"""Totals test cases over a `bazel test` run: prints "N passed, N failed".

Cases come from each target's XML report (gtest and pytest both write one).
A target with no usable report (crashed, timed out, failed to build), or one
bazel failed although its report shows no failing case, counts as one failure.

Usage: count_tests.py BAZEL_OUTPUT_FILE [NAME=EXIT_STATUS ...]

Each NAME=EXIT_STATUS is a check run outside bazel test (the thread-safety
build): one case, passed when its exit status is 0.
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


def main():
    logs = subprocess.run(["bazel", "info", "bazel-testlogs"],
                          capture_output=True, text=True).stdout.strip()
    bad = failed_targets(sys.argv[1], logs)
    results = {}  # target -> [passed, failed]
    for log in glob.glob(os.path.join(logs, "**", "test.log"), recursive=True):
        target = target_of(os.path.dirname(log))
        p, f, ok = count_report(os.path.join(os.path.dirname(log), "test.xml"))
        entry = results.setdefault(target, [0, 0])
        entry[0] += p
        entry[1] += f if ok else max(f, 1)
    for target in bad:
        entry = results.setdefault(target, [0, 0])
        entry[1] = max(entry[1], 1)
    for check in sys.argv[2:]:
        name, _, status = check.partition("=")
        results[name] = [1, 0] if status == "0" else [0, 1]
    passed = sum(p for p, _ in results.values())
    failed = sum(f for _, f in results.values())
    print(f"{passed} passed, {failed} failed")


if __name__ == "__main__":
    main()
