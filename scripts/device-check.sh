#!/usr/bin/env bash
# The GPU check: everything faprobe can learn on a CUDA machine in one short run, packed into one archive.
#   scripts/device-check.sh OUTDIR        from the repository root, with build/device/faprobe built
#                                         elsewhere by scripts/build-device and carried here
# Writes OUTDIR/device-check.tar.gz (everything), OUTDIR/summary.md (GPU, steps, key numbers) and
# OUTDIR/log.txt. Steps, each with its own timeout and log (logs/STEP.log in the archive):
#   gpu         nvidia-smi: name, driver, clocks, memory
#   libraries   finds libcublas.so.13 (ldconfig, /usr/local/cuda, pip's nvidia wheels), checks ldd
#   list        faprobe list --json; the CUDA implementations are the cuda.* names it reports
#   probes      faprobe probes: each instruction probe on the GPU against the emulator, bit for bit
#   verify      faprobe verify --config configs/gpu-verify.json, once per implementation: the GPU CI gate,
#               whose line ("GPU CI gate: passed" or "failed", with the exit status) heads summary.md
#   sweep       configs/fa2-vs-fa1.json (right after verify: cuda.fa1 and cuda.fa2 in one process), then
#               configs/fa3-vs-fa2.json (cuda.fa2, cuda.fa3 and cuda.cudnn in one process), followed by its
#               peer (PyTorch's cuDNN backend on the same cases) and plots (TFLOP/s), then
#               configs/decode-gpu.json (cuda.decode and cuda.decode-splitk in one process, timing only),
#               followed by its peers (PyTorch's SDPA on its contiguous cases) and plots (GB/s)
#   save        faprobe run --save: one small odd-shaped case per implementation (contiguous K/V, equal
#               lengths: run --save refuses paged and variable-length cases), then check-npy:
#               scripts/check_npy.py checks the saved outputs with NumPy in float64, independently
#   sweep       configs/h200-quick.json and configs/seed-table-gpu.json, once per implementation, each
#               followed by
#   peers       scripts/peers_torch.py: PyTorch's SDPA backends on the same cases; then the backend table
#   plots       scripts/plot.py over faprobe's and the peers' records
# Each implementation runs in its own faprobe process (the two pair sweeps: one process, each case in a
# child of its own), so that a crash loses only its own records; one that times out (a hang) is skipped by
# the later steps. A step that fails or times out is recorded and the script goes on; the archive and the
# summary are rewritten after every step and at exit, so what finished comes back even if the whole run is
# cut short. The whole run stays within FAPROBE_CHECK_SECONDS (default 450): a step gets at most what is
# left.
# Environment: FAPROBE_BIN (default build/device/faprobe), FAPROBE_CHECK_IMPLS (default: every cuda.*
# implementation `faprobe list` reports), FAPROBE_CHECK_SECONDS, FAPROBE_PYTHON (default python3: the
# interpreter with PyTorch, NumPy and matplotlib).
# The kernels' tiles are tuned by its sibling, scripts/device-tune.sh: every FA-3 and FA-2 variant timed on the
# benchmark cases, and the table from which the default tile of each case is chosen.
set -uo pipefail  # no -e: a failing step is recorded, not fatal

if [ $# -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  [ $# -eq 1 ]; exit $((2 * $?))  # 0 for --help, 2 for a wrong command line
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
mkdir -p "$1" || exit 2
out="$(cd "$1" && pwd)"
bin="${FAPROBE_BIN:-build/device/faprobe}"
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
budget_total="${FAPROBE_CHECK_SECONDS:-450}"
deadline=$((budget_total - 15))  # in $SECONDS; the rest is for the summary and the archive

scratch="$(mktemp -d "${TMPDIR:-/tmp}/faprobe-device-check.XXXXXX")" || exit 2
work="$scratch/device-check"
mkdir -p "$work"/{env,logs,verify,saved,sweep,peers,plots}
log="$out/log.txt"
: > "$log"
exec > >(tee -a "$log") 2>&1
printf 'step\tstatus\tseconds\tcommand\n' > "$work/steps.tsv"
echo "faprobe device check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $bin, budget ${budget_total}s"

python="${FAPROBE_PYTHON:-python3}"
command -v "$python" > /dev/null || python=""

# ---------------------------------------------------------------------------------------------------------

archive=device-check archive_exclude='*.npy'
# shellcheck source=scripts/device_steps.sh
source scripts/device_steps.sh
refresh() { summarize; }

summarize() {
  if [ -n "$python" ] && $python scripts/device_summary.py "$work" > "$work/summary.md.part" 2> "$work/logs/summary.log"; then
    mv -f "$work/summary.md.part" "$work/summary.md"
  else  # the steps table alone
    steps_table "faprobe device check (scripts/device_summary.py failed: see logs/summary.log)"
  fi
  cp -f "$work/summary.md" "$out/summary.md"
}

finish() {
  trap - EXIT
  stop_running_step
  echo "== done in ${SECONDS}s: $out/summary.md, $out/device-check.tar.gz"
  summarize
  pack
  sed -n '1,/^## Steps/p' "$out/summary.md" | head -n 20
  rm -rf "$scratch"
}
trap finish EXIT
trap 'echo "interrupted"; exit 130' INT TERM

# Implementations that timed out (a hang, most likely) are not run again by later steps.
hung=" "
runnable() {  # runnable STEP IMPL: 0 unless IMPL timed out before (then the step is recorded as skipped)
  case "$hung" in *" $2 "*)
    record_step "$1" "skipped: $2 timed out earlier" 0 ""
    echo "== $1: skipped, $2 timed out earlier"
    return 1 ;;
  esac
}
note_hang() {  # note_hang RC IMPL
  if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then hung="$hung$2 "; fi
}

# ---------------------------------------------------------------------------------------------------------
# The machine

{ uname -a; echo; grep -m1 'model name' /proc/cpuinfo; echo "cores: $(nproc)"; free -g | head -2
  echo; head -n 2 /etc/os-release 2>/dev/null; echo; ldd --version 2>&1 | head -1; } > "$work/env/host.txt"
step gpu 20 --stdout "$work/env/nvidia-smi.csv" nvidia-smi \
  --query-gpu=name,driver_version,compute_cap,memory.total,memory.used,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,persistence_mode \
  --format=csv
nvidia-smi -q > "$work/env/nvidia-smi-q.txt" 2>&1 || true
cat "$work/env/nvidia-smi.csv"
[ -n "$python" ] && $python - > "$work/env/python.txt" 2>&1 <<'PY'
import sys
print("python", sys.version.split()[0])
for name in ("numpy", "matplotlib", "torch"):
    try:
        module = __import__(name)
        extra = ""
        if name == "torch":
            extra = f" (CUDA {module.version.cuda}, cuDNN {module.backends.cudnn.version()}, device: " \
                    f"{module.cuda.get_device_name(0) if module.cuda.is_available() else 'none'})"
        print(name, module.__version__ + extra)
    except Exception as error:
        print(name, "unavailable:", error)
PY

# ---------------------------------------------------------------------------------------------------------
# The libraries faprobe needs: cuBLAS from wherever this machine has it, libgomp as a fallback from the build

find_cublas_dir() {
  local path dir
  path=$(ldconfig -p 2>/dev/null | awk '/libcublas\.so\.13 / {print $NF; exit}')
  if [ -n "$path" ]; then dirname "$path"; return; fi
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
    if [ -e "$dir/libcublas.so.13" ]; then echo "$dir"; return; fi
  done
  # pip's nvidia-cublas wheel, which PyTorch depends on (nvidia/cublas/lib or nvidia/cu13/lib)
  [ -n "$python" ] && $python - 2> /dev/null <<'PY'
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
  dir=$(find_cublas_dir)
  if [ -n "$dir" ]; then
    echo "libcublas.so.13: $dir"
    case ":${LD_LIBRARY_PATH:-}:" in *":$dir:"*) ;; *) export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
  else
    echo "libcublas.so.13: not found (ldconfig, /usr/local/cuda, pip's nvidia packages)"
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
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
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
# faprobe

impls=()
if step list 30 --stdout "$work/list.json" "$bin" list --json && [ -n "$python" ]; then
  read -r -a impls < <($python -c '
import json, sys
names = [i["name"] for i in json.load(open(sys.argv[1]))["implementations"] if i["name"].startswith("cuda.")]
print(" ".join(names))' "$work/list.json")
fi
"$bin" list > "$work/list.txt" 2>&1 || true
if [ -n "${FAPROBE_CHECK_IMPLS:-}" ]; then read -r -a impls <<< "${FAPROBE_CHECK_IMPLS//,/ }"; fi
echo "implementations: ${impls[*]:-none}"
printf '%s\n' "${impls[@]}" > "$work/implementations.txt"

step probes 90 "$bin" probes --json "$work/probes.json"

# One process per implementation, its cases not isolated (--no-isolate): a child per case would spend most
# of a step starting CUDA ~380 times; a crash loses the rest of that implementation's cases, not the others'.
for impl in "${impls[@]}"; do
  runnable "verify.$impl" "$impl" || continue
  step "verify.$impl" 75 "$bin" verify --config configs/gpu-verify.json --impl "$impl" --no-isolate \
    --out "$work/verify/verify.jsonl" --json "$work/verify/$impl.json" --md "$work/verify/$impl.md"
  note_hang $? "$impl"
done

# The FA-2 target against FA-1 (configs/fa2-vs-fa1.json), early: it is short and a later step may run out
# of budget. Both in one process; a hang of either is caught by --isolate (on by default for cuda.*).
fa_pair=()
for impl in cuda.fa1 cuda.fa2; do
  case " ${impls[*]} " in *" $impl "*) case "$hung" in *" $impl "*) ;; *) fa_pair+=("$impl") ;; esac ;; esac
done
if [ ${#fa_pair[@]} -eq 2 ]; then
  step sweep.fa2-vs-fa1 90 "$bin" sweep --config configs/fa2-vs-fa1.json --out "$work/sweep/fa2-vs-fa1.jsonl" \
    --md "$work/sweep/fa2-vs-fa1.md"
else
  record_step sweep.fa2-vs-fa1 "skipped: needs cuda.fa1 and cuda.fa2 (have: ${fa_pair[*]:-none})" 0 ""
fi

# plot_sweep NAME PLOTS: scripts/plot.py over sweep/NAME.jsonl and peers/NAME.jsonl (whichever exist).
have_matplotlib=""
[ -n "$python" ] && $python -c 'import matplotlib, numpy' 2> /dev/null && have_matplotlib=yes
plot_sweep() {
  local file inputs=()
  if [ -z "$have_matplotlib" ]; then
    record_step "plots.$1" "skipped: no matplotlib/numpy for ${python:-python3}" 0 ""
    return
  fi
  for file in "$work/sweep/$1.jsonl" "$work/peers/$1.jsonl"; do
    [ -s "$file" ] && inputs+=("$file")
  done
  if [ ${#inputs[@]} -eq 0 ]; then
    record_step "plots.$1" "skipped: no records" 0 ""
    return
  fi
  step "plots.$1" 60 "$python" scripts/plot.py "${inputs[@]}" --out-dir "$work/plots" --prefix "$1-" --plots "$2"
}

# The FA-3 targets (configs/fa3-vs-fa2.json), right after FA-2's: cuda.fa3 against cuda.fa2 and cuda.cudnn
# (cuDNN's SDPA through its graph API) at 16k tokens, bf16, head_dim 128, seq 512..16k, causal and not, and
# cuda.fa3 alone in fp8 at seq 8k; all in one process, each case in a child (--isolate, on by default for
# cuda.*). 38 cases of a few milliseconds per call; cuda.cudnn's 12 children each load cuDNN's engines and
# build a graph, hence the 150 s. cuda.cudnn is left out (--impl, which also offers the fp8 part to cuda.fa2,
# recorded as unsupported at no cost) when it is not among the implementations or timed out earlier. Then
# PyTorch's cuDNN backend on the same cases (the fp8 ones are recorded as unsupported: SDPA takes no fp8) and
# the TFLOP/s plots; scripts/device_summary.py reads the targets from these records.
fa3_pair=()
for impl in cuda.fa2 cuda.fa3; do
  case " ${impls[*]} " in *" $impl "*) case "$hung" in *" $impl "*) ;; *) fa3_pair+=("$impl") ;; esac ;; esac
done
fa3_without_cudnn=(--impl "cuda.fa2,cuda.fa3")
case " ${impls[*]} " in *" cuda.cudnn "*) case "$hung" in *" cuda.cudnn "*) ;; *) fa3_without_cudnn=() ;; esac ;; esac
if [ ${#fa3_pair[@]} -eq 2 ]; then
  step sweep.fa3-vs-fa2 150 "$bin" sweep --config configs/fa3-vs-fa2.json "${fa3_without_cudnn[@]}" \
    --out "$work/sweep/fa3-vs-fa2.jsonl" --md "$work/sweep/fa3-vs-fa2.md"
  step peers.fa3-vs-fa2 45 "$python" scripts/peers_torch.py --config configs/fa3-vs-fa2.json --backends cudnn \
    --out "$work/peers/fa3-vs-fa2.jsonl" --time-budget 30
  plot_sweep fa3-vs-fa2 tflops
else
  record_step sweep.fa3-vs-fa2 "skipped: needs cuda.fa2 and cuda.fa3 (have: ${fa3_pair[*]:-none})" 0 ""
fi

# Decode (configs/decode-gpu.json), the FlashDecoding targets: cuda.decode against cuda.decode-splitk over
# the KV length and the batch, contiguous and paged, in one process, not isolated (a child process per case
# would spend the budget starting CUDA 160 times; a hang costs the step's timeout). Timing only: a float64 check of one 32k-key
# case over 32 KV heads regenerates 3·10^8 values on the host (seconds per case, minutes for the sweep);
# the decode kernels' outputs, paged and variable-length included, are the verify step's. --json keeps the
# GPU's copy bandwidth measured by the sweep (rates.gpu), which summary.md and the plot compare against.
decode_impls=()
for impl in cuda.decode cuda.decode-splitk; do
  case " ${impls[*]} " in *" $impl "*) case "$hung" in *" $impl "*) ;; *) decode_impls+=("$impl") ;; esac ;; esac
done
if [ ${#decode_impls[@]} -gt 0 ]; then
  decode_list=$(IFS=,; echo "${decode_impls[*]}")
  step sweep.decode-gpu 110 "$bin" sweep --config configs/decode-gpu.json --impl "$decode_list" --no-verify \
    --no-isolate --out "$work/sweep/decode-gpu.jsonl" --json "$work/sweep/decode-gpu.json" \
    --md "$work/sweep/decode-gpu.md"
  # SDPA where it applies: the contiguous cases (paged ones are recorded as unsupported, at no cost)
  step peers.decode-gpu 60 "$python" scripts/peers_torch.py --config configs/decode-gpu.json \
    --out "$work/peers/decode-gpu.jsonl" --time-budget 45
  plot_sweep decode-gpu gbps
else
  record_step sweep.decode-gpu "skipped: needs cuda.decode or cuda.decode-splitk (have: ${impls[*]:-none})" 0 ""
fi

# One small odd-shaped case per implementation (GQA, seq_q != seq_k, causal, bf16), saved for NumPy; a
# decode-only implementation refuses it and gets a decode case instead. Both are contiguous with equal
# lengths (no --page-size, no --seqlens); run --save writes those as a KV cache, which check_npy.py reads
# too, but this step keeps to the cases it was sized for.
saved_dirs=()
for impl in "${impls[@]}"; do
  runnable "save.$impl" "$impl" || continue
  dir="$work/saved/$impl"
  step "save.$impl" 30 "$bin" run --impl "$impl" --batch 2 --heads 4 --kv-heads 2 --seq 257 --seq-q 77 \
    --head-dim 64 --dtype bf16 --mask causal --save "$dir"
  note_hang $? "$impl"
  if [ ! -e "$dir/o.npy" ] && grep -q " 1 unsupported" "$work/logs/save.$impl.log"; then
    step "save.$impl.decode" 30 "$bin" run --impl "$impl" --mode decode --batch 2 --heads 4 --kv-heads 2 \
      --seq 1000 --head-dim 64 --dtype bf16 --save "$dir"
  fi
  [ -e "$dir/o.npy" ] && saved_dirs+=("$dir")
done
if [ ${#saved_dirs[@]} -gt 0 ]; then
  step check-npy 60 --stdout "$work/saved/check.txt" "$python" scripts/check_npy.py "${saved_dirs[@]}"
  cat "$work/saved/check.txt"
else
  record_step check-npy "skipped: nothing was saved" 0 ""
fi

# Each sweep, then PyTorch's SDPA backends on the same cases right after it: h200-quick (where the FA-2
# target against Dao's FA-2 is read) before the seed table, so that a short budget loses the latter.
sweep_impls() {  # sweep_impls NAME
  local impl
  for impl in "${impls[@]}"; do
    runnable "sweep.$1.$impl" "$impl" || continue
    step "sweep.$1.$impl" 120 "$bin" sweep --config "configs/$1.json" --impl "$impl" \
      --out "$work/sweep/$1.jsonl" --json "$work/sweep/$1.$impl.json" \
      --csv "$work/sweep/$1.$impl.csv" --md "$work/sweep/$1.$impl.md"
    note_hang $? "$impl"
  done
}
sweep_impls h200-quick
step peers.h200-quick 120 "$python" scripts/peers_torch.py --config configs/h200-quick.json \
  --out "$work/peers/h200-quick.jsonl" --time-budget 100
sweep_impls seed-table-gpu
step peers.seed-table-gpu 90 "$python" scripts/peers_torch.py --config configs/seed-table-gpu.json \
  --out "$work/peers/seed-table-gpu.jsonl" --time-budget 70
step peers.backend-table 60 "$python" scripts/peers_torch.py --backend-table "$work/peers/backends.md"

# ---------------------------------------------------------------------------------------------------------
# The plots (the decode sweep's were drawn right after it)

for sweep in h200-quick seed-table-gpu; do
  plot_sweep "$sweep" memory,time,gflops,tflops
done
