#!/bin/bash
# The GPU checks, run on a machine with a GPU (the device tool's machine):
# the same as tools/gpu/run_on_device.sh, which this runs with the same
# arguments. Build the bundle it needs here first
# (tools/gpu/bundle_for_device.sh -> .device/gpu, carried to the machine);
# docs/gpu.md, "Running the GPU tests on a GPU machine", says more.
exec bash "$(dirname "$0")/../../tools/gpu/run_on_device.sh" "$@"
