#!/usr/bin/env bash
# Cross-compiles Lantern for 64-bit ARM (AArch64) and runs its CPU tests
# under qemu-user, so that the NEON kernels (src/quant/simd_neon.h) and
# everything else that differs on ARM (unsigned char, weak memory order)
# are tested on an x86 machine. scripts/test.sh runs it.
#
# Three builds: build-arm64 with SDOT (-march=armv8.2-a+dotprod, as on
# Cortex-A76, Neoverse N1 or Apple M1) runs the quant, text and engine
# tests; build-arm64-v8a (plain ARMv8-A NEON, as on Cortex-A53/A72) runs
# the quant tests, which are all that differ there; build-arm64-opencl
# compiles the OpenCL backend.
#
#   scripts/test-arm64.sh                # set up, build, test
#   LANTERN_SKIP_ARM64=1 scripts/test.sh # the suite without this part
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[arm64] %s\n' "$*" >&2; }
# shellcheck source=scripts/packages.sh
source "$root/scripts/packages.sh"

# --- the cross toolchain, qemu, and arm64 builds of the libraries -----------
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  log "adding the arm64 architecture to dpkg"
  as_root dpkg --add-architecture arm64
fi
install_packages g++-aarch64-linux-gnu qemu-user libgtest-dev:arm64 libgmock-dev:arm64 libcpp-httplib-dev:arm64 \
  ocl-icd-opencl-dev:arm64 opencl-headers nlohmann-json3-dev libcli11-dev

jobs="$(nproc 2>/dev/null || echo 2)"
configure() {  # build dir, -march, [OpenCL ON/OFF]
  cmake -S "$root" -B "$1" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DLANTERN_NATIVE=OFF -DLANTERN_CUDA=OFF -DLANTERN_OPENCL="${3:-OFF}" \
    -DLANTERN_BENCHMARKS=OFF -DCMAKE_CXX_FLAGS="-march=$2 -Wno-psabi" >/dev/null
}

log "build-arm64 (armv8.2-a+dotprod)"
configure "$root/build-arm64" armv8.2-a+dotprod
cmake --build "$root/build-arm64" -j "$jobs" --target lantern_base_tests lantern_text_tests lantern_tests
ctest --test-dir "$root/build-arm64" --output-on-failure -j "$jobs" --timeout 1200

log "build-arm64-v8a (armv8-a)"
configure "$root/build-arm64-v8a" armv8-a
cmake --build "$root/build-arm64-v8a" -j "$jobs" --target lantern_base_tests
qemu-aarch64 -cpu max "$root/build-arm64-v8a/bin/lantern_base_tests" --gtest_brief=1

# The OpenCL backend is for ARM SoCs (Adreno, Mali) above all: it must build
# there. Compiled only: its tests need an OpenCL driver, which qemu-user
# cannot run here (ICDs are shared libraries; see tests/CMakeLists.txt).
log "build-arm64-opencl (the OpenCL backend, compiled)"
configure "$root/build-arm64-opencl" armv8.2-a+dotprod ON
cmake --build "$root/build-arm64-opencl" -j "$jobs" --target lantern_opencl
