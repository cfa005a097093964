#!/usr/bin/env bash
# The CUDA backend on the device machine, in one call: build (or use the
# binaries carried in build-cuda/bin), the CUDA op and model tests, the
# synthetic models and `lantern bench` on them, the op micro-benchmark, and
# compute-sanitizer memcheck on a short decode. Every step has a time limit
# and writes its log straight into $OUT (or ./out), line-buffered, so a step
# that is cut off still leaves what it printed. A short table is printed last.
#
#   scripts/device-cuda.sh [all|test|bench|opbench|memcheck|profile|tg|model] [shape:type ...]
#
# `tg` (not part of `all`) compares decode settings: tg128 of each model under
# each variant of $VARIANTS ("label:VAR=value,VAR=value label2:..."; BIN=path
# runs another carried `lantern` binary), with the GPU time per step
# (LANTERN_CUDA_TIMING=1; TG_TIMING=0 runs without it), into the summary.
#
# `test` and `opbench` take the same $VARIANTS when it is set: the op tests
# pass or fail under each variant (a kernel forced on everywhere it can go),
# and the op bench prints each variant's share of the copy per weight type, so
# one call compares kernels on one GPU (calls can land on different H100s).
#
# `profile` (not part of `all`) runs Nsight Compute over a short decode of each
# model and writes per-kernel times, instructions and stalls to $OUT/profile-*.txt.
#
# `trace` (not part of `all`) times every kernel of real decode steps, in the
# graph and overlapped as they run (scripts/kernel-trace: a CUPTI injection
# library, carried built in .devcarry/trace with libcupti.so.13), and writes
# each kernel kind's share of a step to $OUT/trace-*.txt.
#
# The real default model (over one call's 64 MiB) travels in two parts: a
# call that carries .devcarry/ma/part leaves it in /tmp/dm, one that carries
# .devcarry/mb/part joins them into /tmp/dm/model.gguf (the machine keeps /tmp
# while it stays warm: make the second call at once). `model` does only that
# (the first call: `model`, carrying .devcarry/ma; the second: `test`,
# carrying .devcarry/mb, build-cuda/bin/lantern_tests, lib, testdata and py). While that file exists,
# the tests run on it (LANTERN_MODEL) with the float64 reference
# (PYTHONPATH=.devcarry/py, the Python gguf package).
#
# Inputs beside the repository (carried into the ignored .devcarry/):
#   .devcarry/testdata/vocab/ggml-vocab-llama-spm.gguf   vocabulary of the synthetic models
#   .devcarry/lib/                                        shared libraries the carried binaries
#                                                         may need (only missing ones are used)
#   .devcarry/ma/part, .devcarry/mb/part, .devcarry/py/   the default model's halves, the
#                                                         reference's Python package (optional)
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stage="${1:-all}"
shift || true
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(smollm2-135m:q4_0 tinyllama-1.1b:q4_0 llama2-7b:q4_0 llama2-7b:q8_0)
out="${OUT:-$root/out}"
mkdir -p "$out"
bin="${LANTERN_DEVICE_BIN:-$root/build-cuda/bin}"  # LANTERN_DEVICE_BIN: another carried build
export LANTERN_TESTDATA="$root/.devcarry/testdata"
vocab="$LANTERN_TESTDATA/vocab/ggml-vocab-llama-spm.gguf"
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
lb() { stdbuf -oL -eL "$@"; }
want() { [ "$stage" = all ] || [ "$stage" = "$1" ]; }

# --- environment ------------------------------------------------------------------
cublas="$(find /usr/local/cuda* /usr/local/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)"
export LD_LIBRARY_PATH="${cublas:+$(dirname "$cublas"):}${LD_LIBRARY_PATH:-}"
libdir=/tmp/lantern-libs
mkdir -p "$libdir"
for b in "$bin/lantern" "$bin/lantern_tests"; do
  [ -x "$b" ] || continue
  for l in $(ldd "$b" | awk '/not found/ {print $1}'); do cp -L "$root/.devcarry/lib/$l" "$libdir/" 2>/dev/null; done
done
export LD_LIBRARY_PATH="$libdir:$LD_LIBRARY_PATH"
{
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
  echo "libraries added: $(ls "$libdir" | tr '\n' ' ')"
} > "$out/device.txt" 2>&1
# The device's copy of .git can be stale: carried binaries name their commit
# in build-cuda/bin/COMMIT (`git rev-parse --short HEAD > build-cuda/bin/COMMIT`).
if [ -f "$bin/COMMIT" ]; then
  note "commit: $(cat "$bin/COMMIT") (carried binaries)"
else
  note "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' + working tree')"
fi
note "device: $(head -1 "$out/device.txt")"

# The synthetic model for shape:type, made on first use (synth's output
# appended to the log file $2, if given).
model_file() {
  local f="/tmp/lantern-models/${1%%:*}-${1##*:}.gguf" log="${2:-/dev/null}"
  mkdir -p /tmp/lantern-models
  [ -f "$f" ] || timeout 120 "$bin/lantern" synth --shape "${1%%:*}" --type "${1##*:}" --vocab "$vocab" -o "$f" -t 16 \
    >> "$log" 2>&1
  echo "$f"
}

# --- the real default model, if carried (two calls) -------------------------------
mkdir -p /tmp/dm
[ -f "$root/.devcarry/ma/part" ] && [ ! -f /tmp/dm/model.gguf ] && cp "$root/.devcarry/ma/part" /tmp/dm/a
if [ -f "$root/.devcarry/mb/part" ] && [ -f /tmp/dm/a ]; then
  cat /tmp/dm/a "$root/.devcarry/mb/part" > /tmp/dm/model.gguf && rm -f /tmp/dm/a
fi
if [ -f /tmp/dm/model.gguf ]; then
  export LANTERN_MODEL=/tmp/dm/model.gguf PYTHONPATH="$root/.devcarry/py${PYTHONPATH:+:$PYTHONPATH}"
  note "default model: /tmp/dm/model.gguf ($(stat -c %s /tmp/dm/model.gguf) bytes)"
fi
if [ "$stage" = model ]; then  # the first of the two calls: nothing else to do
  note "model parts in /tmp/dm: $(ls /tmp/dm | tr '\n' ' ')"
  exit 0
fi

# --- build ------------------------------------------------------------------------
# Only the binaries the stage runs need be carried (test, memcheck, opbench:
# lantern_tests; bench, tg, profile: lantern).
need=(lantern_tests lantern)
case "$stage" in
  test | memcheck | opbench) need=(lantern_tests) ;;
  bench | tg | profile | trace) need=(lantern) ;;
esac
missing=0
for b in "${need[@]}"; do [ -x "$bin/$b" ] || missing=1; done
if [ "$missing" = 1 ]; then
  note "building (no carried binaries)"
  cmake -B build-cuda -DLANTERN_CUDA=ON -DLANTERN_OPENCL=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLANTERN_BENCHMARKS=OFF > "$out/build.log" 2>&1 &&
    cmake --build build-cuda -j16 --target lantern_cli lantern_tests >> "$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; exit 1; }
fi

# --- tests ------------------------------------------------------------------------
# Each "label:VAR=value,VAR=value" of $VARIANTS as environment settings (the
# label alone: none).
variant_env() {
  local kv
  sets=()
  IFS=, read -ra parts <<< "${1#*:}"
  for kv in "${parts[@]}"; do [ -n "$kv" ] && sets+=("$kv"); done
}
if want test; then
  for v in ${VARIANTS:-:}; do
    label="${v%%:*}"
    variant_env "$v"
    log="$out/tests${label:+-$label}.log"
    start=$SECONDS
    env "${sets[@]}" stdbuf -oL -eL timeout 240 "$bin/lantern_tests" \
      --gtest_filter='*CudaOps*:*CudaExtraOps*:CudaModel*:CudaBackend*' > "$log" 2>&1
    rc=$?
    grep -E "^\[  FAILED  \].*\)$|\[ cuda \]" "$log" | head -30
    note "tests${label:+ ($label)}: rc=$rc, $(grep -c '^\[       OK \]' "$log") passed, $(grep -c '^\[  FAILED  \].*)$' "$log") failed ($((SECONDS - start)) s)"
    grep "\[ cuda \]" "$log" >> "$summary"
  done
fi

# --- models and benches -----------------------------------------------------------
if want bench; then
  mkdir -p /tmp/lantern-bench
  : > "$out/bench.log"
  bench() {  # name, model, args...
    local name="$1" f="$2"
    shift 2
    lb timeout 150 "$bin/lantern" bench -m "$f" --backend cuda --n-gpu-layers 99 -o json "$@" \
      > "/tmp/lantern-bench/$name.json" 2>> "$out/bench.log"
    echo "== $name: rc=$?" >> "$out/bench.log"
    cat "/tmp/lantern-bench/$name.json" >> "$out/bench.log"
  }
  for m in "${models[@]}"; do
    shape="${m%%:*}"
    type="${m##*:}"
    f="$(model_file "$m" "$out/bench.log")"
    bench "$shape-$type" "$f" -p 512 -n 128 -r 3 --verbose
    [ "$shape" = tinyllama-1.1b ] && bench "$shape-$type-d4096" "$f" -p 0 -n 128 -d 4096 -r 2
    if [ "$shape" = smollm2-135m ] || [ "$shape-$type" = llama2-7b-q4_0 ]; then
      LANTERN_GRAPHS=0 bench "$shape-$type-nographs" "$f" -p 0 -n 128 -r 2
    fi
    grep "cuda: graphs" "$out/bench.log" | tail -1
  done
  python3 - /tmp/lantern-bench <<'PY' | tee -a "$summary"
import glob, json, os, sys
embd = {"smollm2-135m": 576, "tinyllama-1.1b": 2048, "llama2-7b": 4096}
bpe = {"q4_0": 18 / 32, "q8_0": 34 / 32}
target = {("smollm2-135m", "q4_0"): (40000, 2000), ("tinyllama-1.1b", "q4_0"): (30000, 1500),
          ("llama2-7b", "q4_0"): (11000, 550), ("llama2-7b", "q8_0"): (10000, 330)}
print("| run | pp512 t/s (target) | tg128 t/s (target) | weight GB read per token | tg weight GB/s |")
print("| --- | ---: | ---: | ---: | ---: |")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    name = os.path.basename(path)[:-5]
    try:
        rows = json.load(open(path))
    except Exception as e:
        print(f"| {name} | failed ({e}) | | | |")
        continue
    parts = name.split("-")
    shape, typ = "-".join(parts[:2]), parts[2]
    pp = next((r["avg_ts"] for r in rows if r["n_prompt"] > 0), None)
    tg = next((r["avg_ts"] for r in rows if r["n_gen"] > 0), None)
    per_tok = (rows[0]["model_size"] - 32000 * embd.get(shape, 0) * bpe.get(typ, 0)) / 1e9
    tp, tt = target.get((shape, typ), (None, None)) if len(parts) == 3 else (None, None)
    fmt = lambda v, t: "-" if v is None else f"{v:,.0f}" + (f" ({t:,})" if t else "")
    print(f"| {name} | {fmt(pp, tp)} | {fmt(tg, tt)} | {per_tok:.3f} | {'-' if tg is None else f'{per_tok * tg:,.0f}'} |")
PY
fi

# --- decode settings side by side (only when asked) --------------------------------
if [ "$stage" = tg ]; then
  for m in "${models[@]}"; do
    shape="${m%%:*}"
    type="${m##*:}"
    f="$(model_file "$m")"
    for v in ${VARIANTS:-default:}; do
      label="${v%%:*}"
      IFS=, read -ra parts <<< "${v#*:}"
      exe="$bin/lantern"
      sets=()
      for kv in "${parts[@]}"; do
        if [ "${kv%%=*}" = BIN ]; then exe="$root/${kv#BIN=}"; else sets+=("$kv"); fi
      done
      r="$(env "${sets[@]}" LANTERN_CUDA_TIMING="${TG_TIMING:-1}" timeout 120 "$exe" bench -m "$f" --backend cuda \
        --n-gpu-layers 99 -p 0 -n 128 -r 2 -o json 2> /tmp/lantern-tg.err)"
      ts="$(python3 -c 'import json,sys; print(round(json.loads(sys.argv[1])[0]["avg_ts"]))' "$r" 2> /dev/null)"
      gpu="$(grep -o 'GPU time per step [0-9.]* us' /tmp/lantern-tg.err | tail -1)"
      host="$(grep -o 'host, per step.*' /tmp/lantern-tg.err | tail -1)"
      note "tg: $shape-$type $label: ${ts:-failed} t/s, ${gpu:-no timing}; ${host} $(grep -m1 -i error /tmp/lantern-tg.err)"
    done
  done
fi

# --- op micro-benchmark -----------------------------------------------------------
if want opbench; then
  for v in ${VARIANTS:-:}; do
    label="${v%%:*}"
    variant_env "$v"
    log="$out/opbench${label:+-$label}.log"
    env "${sets[@]}" LANTERN_CUDA_BENCH=1 stdbuf -oL -eL timeout 300 "$bin/lantern_tests" \
      --gtest_filter='CudaOpBench.*' > "$log" 2>&1
    if [ -z "$label" ]; then
      grep "\[ bench \]" "$log" >> "$summary"
    else
      # One line per variant: each type's share of the copy on 4096 x 11008
      # and (after the /) 4096 x 32000.
      note "opbench $label: $(awk '$1 == "[" && $5 ~ /^4096x(11008|32000)$/ {
        k = $4; v[k] = v[k] ($5 == "4096x11008" ? "" : "/") $NF; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
        END { for (i = 1; i <= n; ++i) printf "%s %s  ", order[i], v[order[i]] }' "$log")"
    fi
  done
fi

# --- ncu profile of one decode layer (only when asked) -----------------------------
# The machine's nsys lacks its importer, so Nsight Compute times the kernels
# of a decode step one by one (no overlap between them): duration, warp
# instructions and the main stall reasons per kernel, for the first
# `launches` kernels after 1,000 have run (a decode layer and more).
if [ "$stage" = profile ]; then
  ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
  metrics="gpu__time_duration.sum,smsp__inst_executed.sum,launch__grid_size,dram__bytes_read.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
  for r in long_scoreboard short_scoreboard barrier wait not_selected; do
    metrics="$metrics,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  for m in "${models[@]}"; do
    shape="${m%%:*}"
    type="${m##*:}"
    f="$(model_file "$m")"
    if [ -z "$ncu" ]; then note "profile: no ncu on this machine"; break; fi
    timeout 240 "$ncu" --graph-profiling node --cache-control none --clock-control none --metrics "$metrics" \
      --launch-skip 1000 --launch-count "${NCU_COUNT:-8}" --csv "$bin/lantern" bench -m "$f" --backend cuda --n-gpu-layers 99 \
      -p 0 -n 16 -r 1 > "/tmp/lantern-ncu-$shape-$type.csv" 2> /dev/null
    python3 - "/tmp/lantern-ncu-$shape-$type.csv" > "$out/profile-$shape-$type.txt" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("no ncu rows")
h = rows[0]
ki, ni, vi, ii = (h.index(c) for c in ("Kernel Name", "Metric Name", "Metric Value", "ID"))
cur, line = None, ""
for r in rows[1:]:
    if r[ii] != cur:
        if line:
            print(line)
        cur, line = r[ii], r[ki].split("(")[0][-40:]
    name = r[ni].replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", "")
    line += f" | {name}={r[vi]}"
print(line)
PY
    note "profile: $shape-$type ($(wc -l < "$out/profile-$shape-$type.txt") kernels)"
  done
fi

# --- kernel timeline of decode steps (only when asked) ------------------------------
if [ "$stage" = trace ]; then
  for m in "${models[@]}"; do
    f="$(model_file "$m")"
    name="${m%%:*}-${m##*:}"
    CUDA_INJECTION64_PATH="$root/.devcarry/trace/libkernel_trace.so" KERNEL_TRACE_OUT="/tmp/trace-$name.csv" \
      LD_LIBRARY_PATH="$root/.devcarry/trace:$LD_LIBRARY_PATH" timeout 120 "$bin/lantern" bench -m "$f" \
      --backend cuda --n-gpu-layers 99 -p 0 -n 48 -r 1 > /dev/null 2> "$out/trace-$name.err"
    python3 scripts/kernel-trace/summarize.py "/tmp/trace-$name.csv" --steps 20 > "$out/trace-$name.txt" 2>&1
    note "trace: $name: $(head -1 "$out/trace-$name.txt")"
  done
fi

# --- compute-sanitizer ------------------------------------------------------------
if want memcheck; then
  start=$SECONDS
  # Not under stdbuf: its LD_PRELOAD keeps the sanitizer from attaching. The test
  # binary builds its op cases before main(), hence the long launch timeout.
  timeout 300 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 --launch-timeout 120 \
    "$bin/lantern_tests" --gtest_filter='CudaModel.ShortDecode:Cuda/CudaExtraOps.MatchesCpu/attn_decode*:Cuda/CudaExtraOps.MatchesCpu/fused_layer_q4_0_t1:Cuda/CudaExtraOps.MatchesCpu/prenorm_chain_q4_0:Cuda/CudaExtraOps.MatchesCpu/mul_mat_q3_K_*x1:Cuda/CudaExtraOps.MatchesCpu/mul_mat_q6_K_*x1:Cuda/CudaExtraOps.MatchesCpu/gate_up_q5_K_*:Cuda/CudaExtraOps.MatchesCpu/norm_qkv_q5_K:Cuda/CudaExtraOps.MatchesCpu/gate_up_q4_0_*:Cuda/CudaExtraOps.MatchesCpu/mul_mat_q4_0_2048x6001x1:Cuda/CudaExtraOps.MatchesCpu/mul_mat_q[48]_0_4128x4401x1:Cuda/CudaExtraOps.MatchesCpu/mul_mat_q4_0_11008x300x1' \
    > "$out/memcheck.log" 2>&1
  rc=$?
  note "memcheck: rc=$rc, $(grep -m1 'ERROR SUMMARY' "$out/memcheck.log"), $(grep -c '^\[       OK \]' "$out/memcheck.log") tests passed ($((SECONDS - start)) s)"
fi
echo "---- summary ----"
cat "$summary"
