#!/bin/bash
# Runs page_test.py with Debian's python3 (the test needs nothing else).
exec /usr/bin/python3 tests/metrics/page_test.py "$@"
