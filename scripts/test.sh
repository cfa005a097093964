#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh) and runs the whole test suite: the
# C++ tests (ctest: unit, op, tokenizer, model and end-to-end tests, the
# OpenCL backend on PoCL when built), the Python reference's own checks and
# the C API through ctypes (tests/python), and
# on x86 machines the AArch64 build's tests under qemu (scripts/test-arm64.sh;
# LANTERN_SKIP_ARM64=1 leaves them out).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${LANTERN_BUILD_DIR:-$root/build}"

"$root/scripts/setup.sh"
jobs="$(nproc 2>/dev/null || echo 2)"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 1200
LANTERN_BUILD_DIR="$build_dir" python3 -m pytest -q "$root/tests/reference" "$root/tests/python"
if [ "${LANTERN_SKIP_ARM64:-0}" != 1 ] && [ "$(uname -m)" = x86_64 ]; then
  "$root/scripts/test-arm64.sh"
fi
