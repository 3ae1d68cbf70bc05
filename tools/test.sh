#!/usr/bin/env bash
# Runs every test (bazel test //...) and prints the total over all test cases:
# "N passed, N failed". Exit status is bazel's.
set -uo pipefail
cd "$(dirname "$0")/.."

bazel test //... --keep_going --noshow_progress "$@"
status=$?

# Count test cases from each target's XML report (gtest and pytest both write
# one); a target without a report (failed to build, crashed, timed out)
# counts as one failure.
/usr/bin/python3 - <<'PY'
import glob, os, xml.etree.ElementTree as ET, subprocess
logs = subprocess.run(["bazel", "info", "bazel-testlogs"], capture_output=True,
                      text=True).stdout.strip()
passed = failed = 0
for status_file in glob.glob(os.path.join(logs, "**", "test.log"), recursive=True):
    xml = os.path.join(os.path.dirname(status_file), "test.xml")
    ok_run = False
    if os.path.exists(xml):
        try:
            root = ET.parse(xml).getroot()
            suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
            for s in suites:
                cases = list(s.iter("testcase"))
                for c in cases:
                    if c.find("failure") is not None or c.find("error") is not None:
                        failed += 1
                    elif c.find("skipped") is None:
                        passed += 1
                ok_run = ok_run or bool(cases)
        except ET.ParseError:
            pass
    if not ok_run:
        failed += 1
print(f"{passed} passed, {failed} failed")
PY
exit $status
