#!/usr/bin/env bash
# The OpenCL backend on the device machine (NVIDIA H100, NVIDIA's OpenCL), in
# one call: build (or use binaries carried in .devcarry/opencl/bin), enable
# NVIDIA's ICD, run the OpenCL op tests and model checks against NVIDIA, the
# op micro-benchmark, make the synthetic models and `lantern bench` them.
# Logs go to $OUT (or ./out); a short table is printed last.
#
#   scripts/device-opencl.sh [all|test|bench] [shape:type ...]
#
# Inputs carried into the ignored .devcarry/ (../shared does not travel):
#   .devcarry/testdata/vocab/ggml-vocab-llama-spm.gguf  vocabulary of the synthetic models
#   .devcarry/opencl/bin/{lantern,lantern_tests}       binaries built here (optional)
#   .devcarry/opencl/lib/, .devcarry/lib/              shared libraries they need, when the image lacks them
# The default model (98 MB) is over the transfer limit: the model checks run
# on a synthetic smollm2-135m Q4_0 model made on the device.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stage="${1:-all}"
shift || true
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(tinyllama-1.1b:q4_0 llama2-7b:q4_0)
out="${OUT:-$root/out}"
mkdir -p "$out"
logs=/tmp/lantern-ocl-logs
mkdir -p "$logs"
summary="$logs/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
pack() { tar czf "$out/opencl-logs.tgz" -C "$logs" . 2>/dev/null; cp "$summary" "$out/opencl-summary.txt" 2>/dev/null; }
export LANTERN_TESTDATA="$root/.devcarry/testdata"
vocab="$LANTERN_TESTDATA/vocab/ggml-vocab-llama-spm.gguf"
export LANTERN_OPENCL_CACHE_DIR=/tmp/lantern-opencl-cache
export LANTERN_OPENCL_PLATFORM="${LANTERN_OPENCL_PLATFORM:-NVIDIA}"

# --- NVIDIA's OpenCL driver and the ICD loader ----------------------------------
mkdir -p /etc/OpenCL/vendors
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
libdir=/tmp/lantern-ocl-libs
mkdir -p "$libdir"

# --- binaries -----------------------------------------------------------------------
bin="$root/.devcarry/opencl/bin"
if [ -x "$bin/lantern_tests" ] && [ -x "$bin/lantern" ]; then
  note "binaries: carried ($(cat "$bin/COMMIT" 2>/dev/null || echo unknown commit))"
  for b in "$bin/lantern" "$bin/lantern_tests"; do
    ldd "$b" | awk '/not found/ {print $1}' | while read -r l; do
      cp -L "$root/.devcarry/opencl/lib/$l" "$libdir/" 2>/dev/null || cp -L "$root/.devcarry/lib/$l" "$libdir/" 2>/dev/null
    done
  done
  export LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}"
else
  start=$SECONDS
  bin="$root/build-ocl/bin"
  cmake -B build-ocl -DLANTERN_OPENCL=ON -DLANTERN_CUDA=OFF -DLANTERN_BENCHMARKS=OFF > "$logs/build.log" 2>&1 &&
    cmake --build build-ocl -j16 --target lantern_cli lantern_tests >> "$logs/build.log" 2>&1 ||
    { tail -30 "$logs/build.log"; pack; exit 1; }
  note "binaries: built here ($((SECONDS - start)) s)"
fi
# The device's copy of .git can be stale: carried binaries name their commit in COMMIT (above).
[ -f "$bin/COMMIT" ] || note "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo ' (+ working tree)')"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader > "$logs/device.txt" 2>&1
"$bin/lantern" devices >> "$logs/device.txt" 2>&1
grep -E "^opencl device|^  [0-9]+ MiB" "$logs/device.txt" | cut -c1-160
if ! grep -q "NVIDIA" "$logs/device.txt"; then
  note "NVIDIA's OpenCL platform is not visible"
  pack
  exit 1
fi

# --- synthetic models ----------------------------------------------------------------
mdir=/tmp/lantern-models
mkdir -p "$mdir"
synth() {  # shape type -> path
  local f="$mdir/$1-$2.gguf"
  [ -f "$f" ] || "$bin/lantern" synth --shape "$1" --type "$2" --vocab "$vocab" -o "$f" -t 16 >> "$logs/synth.log" 2>&1
  echo "$f"
}
check_model="$(synth smollm2-135m q4_0)"

# --- tests against NVIDIA -------------------------------------------------------------
if [ "$stage" = all ] || [ "$stage" = test ]; then
  start=$SECONDS
  LANTERN_MODEL="$check_model" timeout 240 "$bin/lantern_tests" --gtest_filter='*Opencl*:-OpenclOpBench*' \
    > "$logs/tests.log" 2>&1
  rc=$?
  grep -E "^\[  FAILED  \]|lantern opencl:|^\[  PASSED  \]|tests ran" "$logs/tests.log" | head -30
  grep "\[ opencl \]" "$logs/tests.log" | head -3
  note "tests on NVIDIA: rc=$rc, $(grep -c '^\[       OK \]' "$logs/tests.log") passed, $(grep -c '^\[  SKIPPED \]' "$logs/tests.log") skipped (K-quants), $(grep -c '^\[  FAILED  \].*ms)' "$logs/tests.log") failed ($((SECONDS - start)) s)"
  # The model checks run on a synthetic model (random weights): the same
  # checks against PoCL on this machine's CPU show how much of any
  # difference is the model's own sensitivity rather than NVIDIA's kernels.
  if [ "${SKIP_POCL:-0}" != 1 ]; then
    LANTERN_MODEL="$check_model" LANTERN_OPENCL_PLATFORM=Portable timeout 90 "$bin/lantern_tests" \
      --gtest_filter='OpenclModel.Greedy*:*OpenclOffload*' > "$logs/tests-pocl.log" 2>&1
    note "model checks on PoCL (same synthetic model): rc=$?, $(grep -c '^\[       OK \]' "$logs/tests-pocl.log") passed, $(grep -c '^\[  FAILED  \].*ms)' "$logs/tests-pocl.log") failed"
  fi
  pack
  start=$SECONDS
  LANTERN_OPENCL_BENCH=1 timeout 180 "$bin/lantern_tests" --gtest_filter='OpenclOpBench.*' > "$logs/opbench.log" 2>&1
  grep "\[ bench \]" "$logs/opbench.log" | tee -a "$summary"
  grep -E "Failure|FAILED" "$logs/opbench.log" | head -5
  note "op bench: $((SECONDS - start)) s"
  pack
fi

# --- lantern bench on the synthetic models -------------------------------------------
if [ "$stage" = all ] || [ "$stage" = bench ]; then
  for m in "${models[@]}"; do
    shape="${m%%:*}"
    type="${m##*:}"
    f="$(synth "$shape" "$type")"
    timeout 150 "$bin/lantern" bench -m "$f" --backend opencl --n-gpu-layers 99 -p 512 -n 128 -r 5 -o json --verbose \
      > "$logs/bench-$shape-$type.json" 2> "$logs/bench-$shape-$type.err"
    echo "$shape $type: $(grep -m1 'opencl: graphs' "$logs/bench-$shape-$type.err")"
    if [ "$shape" = tinyllama-1.1b ]; then  # one launch more per norm: the launch-bound model shows the cost
      LANTERN_OPENCL_FUSE_NORM=0 timeout 150 "$bin/lantern" bench -m "$f" --backend opencl --n-gpu-layers 99 -p 0 -n 128 -r 5 \
        -o json > "$logs/bench-$shape-$type-unfused_norm.json" 2>> "$logs/bench-$shape-$type.err"
    fi
    pack
  done
  python3 - "$logs" <<'PY' | tee -a "$summary"
import glob, json, os, sys
logs = sys.argv[1]
embd = {"smollm2-135m": 576, "tinyllama-1.1b": 2048, "llama2-7b": 4096}
bpe = {"q4_0": 18 / 32, "q8_0": 34 / 32}
target = {("tinyllama-1.1b", "q4_0"): (None, 600), ("llama2-7b", "q4_0"): (3000, 300)}
print("| model | pp512 t/s (target) | tg128 t/s (target) | weight GB read per token | tg GB/s |")
print("| --- | ---: | ---: | ---: | ---: |")
for path in sorted(glob.glob(os.path.join(logs, "bench-*.json"))):
    name = os.path.basename(path)[6:-5]
    variant = ""
    if name.endswith("-unfused_norm"):
        name, variant = name[: -len("-unfused_norm")], " (norm not fused)"
    shape, typ = name.rsplit("-", 1)
    try:
        rows = json.load(open(path))
    except Exception as e:
        print(f"| {name} | failed: {e} | | | |")
        continue
    pp = next((r["avg_ts"] for r in rows if r["n_prompt"] > 0), None)
    tg = next((r["avg_ts"] for r in rows if r["n_gen"] > 0), None)
    # Generation reads every weight but the embedding table (one row of it).
    per_tok = (rows[0]["model_size"] - 32000 * embd.get(shape, 0) * bpe.get(typ, 0)) / 1e9
    tp, tt = target.get((shape, typ), (None, None))
    fmt = lambda v, t: "-" if v is None else f"{v:,.0f}" + (f" ({t:,})" if t else "")
    bw = "-" if tg is None else f"{per_tok * tg:,.0f}"
    print(f"| {shape} {typ}{variant} | {fmt(pp, tp)} | {fmt(tg, tt)} | {per_tok:.3f} | {bw} |")
PY
fi
pack
echo "---- summary ----"
cat "$summary"
