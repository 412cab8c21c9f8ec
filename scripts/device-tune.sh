#!/usr/bin/env bash
# The tile tuning: every variant of FA-3 and FA-2 (one tile each) timed beside the plain kernels and cuDNN on
# the benchmark cases, in one short run on a GPU, and the table from which the per-case default tiles are chosen.
#   scripts/device-tune.sh OUTDIR         from the repository root, with build/device/faprobe built elsewhere
#                                         by scripts/build-device and carried here (as scripts/device-check.sh)
#   FAPROBE_TUNE_TARGET=emu scripts/device-tune.sh OUTDIR
#                                         the same steps on a CPU under the emulator (CI): emu.* for cuda.*,
#                                         tiny cases, nothing timed (faprobe never times emu.*), no peers;
#                                         the binary defaults to build/release/faprobe
# Writes OUTDIR/tune.md (the table), OUTDIR/summary.md (machine, steps, targets), OUTDIR/device-tune.tar.gz
# (everything, under 16 MiB) and OUTDIR/log.txt. Steps, each with its own timeout and log (logs/STEP.log in
# the archive):
#   gpu         nvidia-smi: name, driver, clocks, memory
#   libraries   finds libcublas.so.13 and libgomp.so.1 as device-check.sh does
#   list        faprobe list --variants --json; scripts/tune_plan.py picks the implementations to tune: the plain
#               cuda.fa3 and cuda.fa2, every variant of either (variant_of: cuda.fa3@<block_q>x<block_k>, ...)
#               and cuda.cudnn, each where listed (notes.txt says what was not)
#   verify      faprobe verify --config configs/tune-verify.json (a few odd shapes of each dtype and head_dim),
#               once per implementation, not isolated; one that fails, crashes or hangs is not timed
#   bench       configs/tune-bench.json (flash-attention's benchmark setup: batch x seq = 16k tokens per call,
#               heads x head_dim = 2048), one faprobe sweep per kernel over its cases (fa3 with cuda.cudnn;
#               fa2) with every implementation of it that passed verify, interleaved, so that ratios come
#               from one run; the config's settings: at least 5 samples and 0.1 s, 1 % noise, at most 2 s
#               each, L2 flushed before each sample
#   peers       scripts/peers_torch.py on the same cases, where PyTorch is importable: torch.flash on FA-2's
#               (the fa2 target) and torch.cudnn on FA-3's (the fa3 targets' cuDNN when cuda.cudnn is absent)
# After every step scripts/tune_table.py rewrites tune.md and summary.md from what is there: per case the
# TFLOP/s of each implementation and variant, the best variant of each kernel, the tile the plain kernel ran,
# the targets' ratios (fa3/cudnn, fa3 fp8/bf16, fa2/torch.flash) and the proposed defaults with the lines to
# put in kernels/cuda/fa3/CMakeLists.txt. A step that fails or times out is recorded and the script goes on;
# the whole run stays within FAPROBE_TUNE_SECONDS (default 280: under 5 minutes): a step gets at most what is
# left.
# Environment: FAPROBE_BIN (default build/device/faprobe; emulated: build/release/faprobe), FAPROBE_TUNE_TARGET
# (cuda, the default, or emu), FAPROBE_TUNE_SECONDS, FAPROBE_PYTHON (default python3: the interpreter with
# PyTorch for the peers; the table needs Python 3 alone).
set -uo pipefail  # no -e: a failing step is recorded, not fatal

if [ $# -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  [ $# -eq 1 ]; exit $((2 * $?))  # 0 for --help, 2 for a wrong command line
fi
target="${FAPROBE_TUNE_TARGET:-cuda}"
case "$target" in cuda | emu) ;; *) echo "FAPROBE_TUNE_TARGET: '$target' (allowed: cuda, emu)" >&2; exit 2 ;; esac
mkdir -p "$1" || exit 2
out="$(cd "$1" && pwd)"  # before the cd below: a relative OUTDIR is the caller's
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
if [ "$target" = emu ]; then bin="${FAPROBE_BIN:-build/release/faprobe}"; else bin="${FAPROBE_BIN:-build/device/faprobe}"; fi
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
# Emulated, nothing is timed: the host's rates (measured by every faprobe run, for predictions) in 0.05 s.
[ "$target" = emu ] && export FAPROBE_CALIBRATION_SECONDS="${FAPROBE_CALIBRATION_SECONDS:-0.05}"
budget_total="${FAPROBE_TUNE_SECONDS:-280}"
deadline=$((budget_total - 15))  # in $SECONDS; the rest is for the table and the archive

python="${FAPROBE_PYTHON:-python3}"
if ! command -v "$python" > /dev/null; then
  echo "device-tune: needs Python 3 ($python) for the plan and the table" >&2
  exit 2
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/faprobe-device-tune.XXXXXX")" || exit 2
work="$scratch/device-tune"
mkdir -p "$work"/{env,logs,plan,verify,bench,peers}
log="$out/log.txt"
: > "$log"
exec > >(tee -a "$log") 2>&1
printf 'step\tstatus\tseconds\tcommand\n' > "$work/steps.tsv"
echo "$target" > "$work/target.txt"
: > "$work/notes.txt"
echo "faprobe device tune ($target): $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $bin, budget ${budget_total}s"

# ---------------------------------------------------------------------------------------------------------

archive=device-tune archive_exclude='list.json'
# shellcheck source=scripts/device_steps.sh
source scripts/device_steps.sh
refresh() { tabulate; }

tabulate() {  # tune.md and summary.md, from whatever the steps have left so far
  if $python scripts/tune_table.py "$work" --out "$work/tune.md.part" --summary "$work/summary.md.part" \
       2> "$work/logs/table.log"; then
    mv -f "$work/tune.md.part" "$work/tune.md"
    mv -f "$work/summary.md.part" "$work/summary.md"
  else  # the steps table alone
    steps_table "faprobe device tune (scripts/tune_table.py failed: see logs/table.log)"
  fi
  cp -f "$work/summary.md" "$out/summary.md"
  [ -f "$work/tune.md" ] && cp -f "$work/tune.md" "$out/tune.md"
}

finish() {
  trap - EXIT
  stop_running_step
  echo "== done in ${SECONDS}s: $out/tune.md, $out/summary.md, $out/device-tune.tar.gz"
  tabulate
  pack
  sed -n '1,/^## Steps/p' "$out/summary.md" | head -n 20
  rm -rf "$scratch"
}
trap finish EXIT
trap 'echo "interrupted"; exit 130' INT TERM

# ---------------------------------------------------------------------------------------------------------
# The machine and the libraries (a GPU run only: the emulated one runs the release build on this CPU)

{ uname -a; echo; grep -m1 'model name' /proc/cpuinfo; echo "cores: $(nproc)"; free -g | head -2; } > "$work/env/host.txt"
if [ "$target" = cuda ]; then
  step gpu 20 --stdout "$work/env/nvidia-smi.csv" nvidia-smi \
    --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu \
    --format=csv
  cat "$work/env/nvidia-smi.csv"
else
  record_step gpu "skipped: emulated" 0 ""
fi

find_cublas_dir() {  # as scripts/device-check.sh: ldconfig, /usr/local/cuda, pip's nvidia-cublas wheel
  local path dir
  path=$(ldconfig -p 2>/dev/null | awk '/libcublas\.so\.13 / {print $NF; exit}')
  if [ -n "$path" ]; then dirname "$path"; return; fi
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
    if [ -e "$dir/libcublas.so.13" ]; then echo "$dir"; return; fi
  done
  $python - 2> /dev/null <<'PY'
import glob, os
import nvidia
for root in nvidia.__path__:
    for path in sorted(glob.glob(os.path.join(root, "**", "libcublas.so.13*"), recursive=True)):
        print(os.path.dirname(path))
        raise SystemExit
PY
}

check_libraries() {
  local dir
  if [ "$target" = cuda ]; then
    dir=$(find_cublas_dir)
    if [ -n "$dir" ]; then
      echo "libcublas.so.13: $dir"
      case ":${LD_LIBRARY_PATH:-}:" in *":$dir:"*) ;; *) export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
    else
      echo "libcublas.so.13: not found (ldconfig, /usr/local/cuda, pip's nvidia packages)"
    fi
  fi
  if [ ! -x "$bin" ]; then
    echo "$bin: no such executable (build it with scripts/build-device and carry build/device)"
    return 1
  fi
  if ldd "$bin" | grep -q 'libgomp.so.1 => not found' && [ -e "$(dirname "$bin")/lib/libgomp.so.1" ]; then
    echo "libgomp.so.1: not on this machine, using the build's copy in $(dirname "$bin")/lib"
    LD_LIBRARY_PATH="$(dirname "$bin")/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
  fi
  ldd "$bin"
  ! ldd "$bin" | grep -q 'not found'
}
# Not through step(): its exports must reach this shell.
began=$SECONDS
if check_libraries > "$work/env/libraries.txt" 2>&1; then status=pass; else status="FAIL: see env/libraries.txt"; fi
record_step libraries "$status" $((SECONDS - began)) "ldd $bin"
sed 's/^/   | /' "$work/env/libraries.txt"
echo "   -> $status"

# ---------------------------------------------------------------------------------------------------------
# What to tune: the plain kernels, their variants, cuDNN; each verified in its own process

impls=()
if step list 30 --stdout "$work/list.json" "$bin" list --variants --json; then
  mapfile -t impls < <($python scripts/tune_plan.py implementations "$work/list.json" "$target" --notes "$work/notes.txt")
fi
printf '%s\n' "${impls[@]}" > "$work/implementations.txt"
echo "implementations to tune: ${impls[*]:-none}"
sed 's/^/   note: /' "$work/notes.txt"

passed=()
if [ ${#impls[@]} -gt 0 ] &&
   $python scripts/tune_plan.py config configs/tune-verify.json "$target" "${impls[@]}" > "$work/plan/verify.json"; then
  # Not isolated (--no-isolate): a child process per case would spend the step starting CUDA; a crash loses the
  # rest of this implementation's cases only, and the implementation is not timed.
  for impl in "${impls[@]}"; do
    if step "verify.$impl" 40 "$bin" verify --config "$work/plan/verify.json" --impl "$impl" --no-isolate \
         --out "$work/verify/verify.jsonl" --md "$work/verify/$impl.md"; then
      passed+=("$impl")
    fi
  done
fi
printf '%s\n' "${passed[@]}" > "$work/passed.txt"
echo "passed verify: ${passed[*]:-none}"

# ---------------------------------------------------------------------------------------------------------
# The benchmark cases: each kernel's implementations that passed, interleaved in one process

have_torch=""
if [ "$target" = cuda ] && $python -c 'import torch' 2> /dev/null; then have_torch=yes; fi

# bench KERNEL SECONDS: the sweep of configs/tune-bench.json's KERNEL parts. The implementations are named on the
# command line as well as in the derived config: a config's own impl list is narrowed to what this machine runs
# by default (no emu.* in a sweep), a named one is not.
bench() {
  local config="$work/plan/bench-$1.json" names
  if [ ${#passed[@]} -eq 0 ] ||
     ! $python scripts/tune_plan.py config configs/tune-bench.json "$target" --family "$1" "${passed[@]}" \
         > "$config" 2> "$work/logs/plan-$1.log"; then
    record_step "bench.$1" "skipped: no $target.$1 implementation passed verify" 0 ""
    rm -f "$config"
    return 1
  fi
  names=$($python -c 'import json, sys; print(json.load(open(sys.argv[1]))["impl"])' "$config")
  step "bench.$1" "$2" "$bin" sweep --config "$config" --impl "$names" --out "$work/bench/$1.jsonl" \
    --json "$work/bench/$1.json" --md "$work/bench/$1.md"
}

# peers KERNEL BACKEND SECONDS: PyTorch's BACKEND on KERNEL's cases (the same derived config)
peers() {
  if [ "$target" != cuda ]; then
    record_step "peers.$1" "skipped: emulated (PyTorch's backends are timed on a GPU)" 0 ""
  elif [ -z "$have_torch" ]; then
    record_step "peers.$1" "skipped: PyTorch is not importable by $python" 0 ""
  elif [ ! -f "$work/plan/bench-$1.json" ]; then
    record_step "peers.$1" "skipped: no $1 cases were run" 0 ""
  else
    step "peers.$1" "$3" "$python" scripts/peers_torch.py --config "$work/plan/bench-$1.json" --backends "$2" \
      --out "$work/peers/$1.jsonl" --time-budget $(($3 - 10))
  fi
}

# FA-3 first (its targets and most of the tiles), then FA-2, then the peers FA-2's target needs.
bench fa3 100
bench fa2 110
peers fa2 flash 50
peers fa3 cudnn 35
