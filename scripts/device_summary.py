#!/usr/bin/env python3
"""The summary of a scripts/device-check.sh run, as Markdown on stdout.

Usage: scripts/device_summary.py WORKDIR    (the directory device-check.sh packs: steps.tsv, env/, ...)

Reads whatever exists (a step that did not run leaves its section out): the GPU from nvidia-smi, the
outcome of every step, the GPU CI gate (a line at the top: "GPU CI gate: passed" or "failed", with its exit
status; per implementation, its verify step's exit status and its pass, mismatch, failed, skipped and
unsupported counts), verify's mismatches, the NumPy check of the saved outputs, the best
TFLOP/s per implementation at the largest sequence length of configs/h200-quick.json (faprobe's CUDA
implementations and PyTorch's SDPA backends), the kernels' targets as ratios measured in the same run
(cuda.fa2 against PyTorch's flash backend and against cuda.fa1; cuda.fa3 against PyTorch's cuDNN backend and
against cuda.fa2, its causal and fp8 TFLOP/s; cuda.decode-splitk against cuda.decode, against the GPU's copy
bandwidth, and paged against contiguous), the FA-3 sweep's table (configs/fa3-vs-fa2.json), the decode
sweep's table (configs/decode-gpu.json) and the seed table's rows.
"""

import csv
import glob
import json
import os
import re
import sys

STATUSES = ("ok", "mismatch", "failed", "skipped", "unsupported")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return ""


def records(*patterns):
    """Records from JSONL files (a line cut short by a kill is dropped); the last of an (impl, case) wins."""
    latest = {}
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            for line in read(path).splitlines():
                try:
                    record = json.loads(line)
                    latest[(record["impl"], json.dumps(record["case"], sort_keys=True))] = record
                except (ValueError, KeyError, TypeError):
                    continue
    return list(latest.values())


def label(case):
    heads = f"h{case['heads']}" + (f":{case['kv_heads']}" if case.get("kv_heads") != case["heads"] else "")
    seq = f"s{case['seq_k']}" if case["seq_q"] == case["seq_k"] else f"q{case['seq_q']} k{case['seq_k']}"
    if case.get("seqlens"):
        lengths = case["seqlens"]  # the first few of a long list, as faprobe's labels
        shown = ",".join(map(str, lengths[:4])) + (f",...({len(lengths)})" if len(lengths) > 4 else "")
        seq = f"q{case['seq_q']} k[{shown}]"
    return (f"b{case['batch']} {heads} {seq} d{case['head_dim']} {case['dtype']}"
            f"{' causal' if case.get('mask') == 'causal' else ''}{' decode' if case.get('mode') == 'decode' else ''}"
            f"{' page' + str(case['page_size']) if case.get('page_size') else ''}"
            f"{' splits' + str(case['splits']) if case.get('splits') else ''}")


def fmt_seq(value):
    """1024 -> 1k, 131072 -> 128k, 1000 -> 1000."""
    return f"{value // 1024}k" if value >= 1024 and value % 1024 == 0 else str(value)


def fmt_time(seconds):
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def fmt_bytes(value):
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def machine(work):
    lines = []
    rows = list(csv.reader(read(os.path.join(work, "env", "nvidia-smi.csv")).splitlines()))
    if len(rows) >= 2:
        for gpu in rows[1:]:
            fields = dict(zip((h.strip() for h in rows[0]), (v.strip() for v in gpu)))
            lines.append("- GPU: " + ", ".join(f"{k} {v}" for k, v in fields.items()))
    else:
        lines.append("- GPU: none found (nvidia-smi failed: see logs/gpu.log)")
    for name in ("python.txt", "libraries.txt"):
        text = read(os.path.join(work, "env", name)).splitlines()
        if name == "libraries.txt":
            text = [l for l in text if l.startswith(("libcublas", "libgomp", "LD_LIBRARY_PATH"))]
        lines += [f"- {l.strip()}" for l in text if l.strip()]
    for path in sorted(glob.glob(os.path.join(work, "sweep", "*.json")) + glob.glob(os.path.join(work, "verify", "*.json"))):
        try:
            meta = json.loads(read(path))
            lines.append(f"- faprobe {meta.get('version')} ({meta.get('git_revision')}), run at {meta.get('time')}")
            break
        except ValueError:
            continue
    rates, where = gpu_rates(work)
    if rates:
        gemm = rates.get("bf16_gemm_tflops")
        lines.append(f"- GPU rates measured by faprobe ({where}): copy {rates['copy_gbytes_per_s']:,.0f} GB/s"
                     + (f", bf16 GEMM {gemm:.0f} TFLOP/s" if isinstance(gemm, (int, float)) else ""))
    return lines


def gpu_rates(work):
    """({copy_gbytes_per_s, ...}, where) from a sweep's --json metadata (rates.gpu, measured by the sweep),
    the decode sweep's first; else the copy bandwidth implied by the decode records (gbytes_per_s /
    bandwidth_fraction); else ({}, "")."""
    paths = [os.path.join(work, "sweep", "decode-gpu.json")] + sorted(glob.glob(os.path.join(work, "sweep", "*.json")))
    for path in paths:
        try:
            gpu = ((json.loads(read(path)) or {}).get("rates") or {}).get("gpu")
        except (ValueError, AttributeError):
            continue
        copy = gpu.get("copy_gbytes_per_s") if isinstance(gpu, dict) else None
        if isinstance(copy, (int, float)) and copy > 0:
            return gpu, os.path.relpath(path, work)
    implied = sorted(r["gbytes_per_s"] / r["bandwidth_fraction"]
                     for r in records(os.path.join(work, "sweep", "*.jsonl"))
                     if r["impl"].startswith("cuda.") and isinstance(r.get("gbytes_per_s"), (int, float))
                     and isinstance(r.get("bandwidth_fraction"), (int, float)) and r["bandwidth_fraction"] > 0)
    if implied:
        return {"copy_gbytes_per_s": implied[len(implied) // 2]}, "implied by the records' bandwidth_fraction"
    return {}, ""


def steps(work):
    rows = list(csv.reader(read(os.path.join(work, "steps.tsv")).splitlines(), delimiter="\t"))[1:]
    total = sum(int(r[2]) for r in rows if len(r) > 2 and r[2].isdigit())
    out = table(("step", "status", "seconds"), [(r[0], r[1] if r[1] == "pass" else f"**{r[1]}**", r[2])
                                                 for r in rows if len(r) >= 3])
    return out + ["", f"{sum(r[1] == 'pass' for r in rows if len(r) > 1)} of {len(rows)} steps passed, "
                      f"{total} s in steps."]


def counts(recs):
    by_impl = {}
    for r in recs:
        count = by_impl.setdefault(r["impl"], dict.fromkeys(STATUSES, 0))
        count[r["status"]] = count.get(r["status"], 0) + 1
    return by_impl


# ---------------------------------------------------------------------------------------------------------
# The GPU CI gate: `faprobe verify --config configs/gpu-verify.json`, one step (verify.IMPL) per implementation

VERIFY_STEP = "verify."


def exit_status(status):
    """A step's exit status read from its status in steps.tsv (scripts/device_steps.sh): 0 for "pass" (also
    "pass, but ..."), N for "FAIL (exit N)" and "FAIL: cannot run (exit N)", 124 for "TIMEOUT after Ns"; None
    for a step that did not run to its end (skipped, interrupted)."""
    if status.startswith("pass"):
        return 0
    found = re.search(r"\(exit (\d+)\)", status)
    if found:
        return int(found.group(1))
    return 124 if status.startswith("TIMEOUT") else None


def gate(work):
    """The gate over the verify steps and their records: (passed, exit status, rows, reasons).

    An implementation passes when its verify step exited 0 and its records hold at least one pass (status ok)
    and no mismatch or failure; skipped and unsupported pairs are verify's to refuse, on any machine. The
    gate passes when every implementation of the run passes: those in implementations.txt (what the run
    checks), else those with a verify step or a record. Its exit status is 0 when it passes, else the largest
    of the implementations' (1 for one whose step exited 0 with records that did not pass)."""
    recs = records(os.path.join(work, "verify", "verify.jsonl"))
    by_impl = counts(recs)
    steps_of = {}
    for row in csv.reader(read(os.path.join(work, "steps.tsv")).splitlines()[1:], delimiter="\t"):
        if len(row) > 1 and row[0].startswith(VERIFY_STEP):
            steps_of[row[0][len(VERIFY_STEP):]] = row[1]  # the last of a name wins
    listed = [line.strip() for line in read(os.path.join(work, "implementations.txt")).splitlines() if line.strip()]
    impls = list(dict.fromkeys(listed + list(steps_of) + list(by_impl)))
    rows, reasons, codes = [], [], []
    for impl in impls:
        count = by_impl.get(impl, dict.fromkeys(STATUSES, 0))
        status = steps_of.get(impl)
        code = exit_status(status) if status is not None else None
        why = []
        if status is None:
            why.append("verify has not run")
        elif code is None:
            why.append(f"verify {status}")
        elif code != 0:
            why.append(f"exit {code}")
        why += [f"{count[name]} {name}" for name in ("mismatch", "failed") if count[name]]
        if code == 0 and count["ok"] == 0:
            why.append("no case checked")
        passed = not why
        codes.append(0 if passed else code if code else 1)
        rows.append([impl, "-" if code is None else str(code), count["ok"], count["mismatch"], count["failed"],
                     count["skipped"], count["unsupported"], "passed" if passed else "**failed**"])
        if not passed:
            reasons.append(f"{impl}: {', '.join(why)}")
    if not impls:
        reasons.append("no implementation was verified")
        codes.append(1)
    passed = not reasons
    return passed, max(codes) if not passed else 0, rows, reasons


def gate_line(work):
    passed, code, rows, reasons = gate(work)
    command = "`faprobe verify --config configs/gpu-verify.json`"
    if passed:
        total = {name: sum(row[column] for row in rows) for column, name in ((2, "pass"), (5, "skipped"))}
        return (f"**GPU CI gate: passed** (exit status 0): {command} passed for each of the {len(rows)} "
                f"implementations ({total['pass']} pass, 0 mismatch, 0 failed, {total['skipped']} skipped).")
    shown = "; ".join(reasons[:8]) + (f"; and {len(reasons) - 8} more" if len(reasons) > 8 else "")
    return f"**GPU CI gate: failed** (exit status {code}): {command} did not pass: {shown}."


def verify(work):
    recs = records(os.path.join(work, "verify", "verify.jsonl"))
    _, _, rows, _ = gate(work)
    if not rows:
        return []
    out = ["## Verify (configs/gpu-verify.json): the GPU CI gate", ""]
    out += table(("impl", "exit status", "pass", "mismatch", "failed", "skipped", "unsupported", "gate"), rows)
    out += ["", "One `faprobe verify` per implementation (steps verify.IMPL); pass: records checked and matching "
                "the float64 reference (status ok). An implementation passes the gate when its verify exited 0 "
                "with at least one pass and no mismatch or failure; the gate (the line at the top) when every "
                "implementation does."]
    bad = [r for r in recs if r["status"] in ("mismatch", "failed")]
    if bad:
        out += ["", f"{len(bad)} mismatched or failed (first 12):"]
        out += [f"- {r['impl']} {label(r['case'])}: {r['status']}, {r.get('reason', '')[:160]}" for r in bad[:12]]
    if recs and all(c["ok"] == 0 for c in counts(recs).values()):
        out += ["", "**No case ran** (every record is unsupported or skipped: no GPU, or a CPU-only build)."]
    return out + [""]


def saved(work):
    text = read(os.path.join(work, "saved", "check.txt")).strip()
    return ["## Saved outputs checked with NumPy (scripts/check_npy.py)", "", "```", text, "```", ""] if text else []


def throughput(work):
    recs = records(os.path.join(work, "sweep", "h200-quick.jsonl"), os.path.join(work, "peers", "h200-quick.jsonl"))
    ran = [r for r in recs if r["status"] in ("ok", "mismatch") and isinstance(r.get("tflops"), (int, float))]
    if not ran:
        return []
    groups = sorted({(r["case"]["dtype"], r["case"]["head_dim"], r["case"]["mask"]) for r in ran})
    impls = sorted({r["impl"] for r in ran}, key=lambda name: (not name.startswith("cuda."), name))
    rows = []
    for impl in impls:
        row = [impl]
        for group in groups:
            mine = [r for r in ran if r["impl"] == impl and (r["case"]["dtype"], r["case"]["head_dim"], r["case"]["mask"]) == group]
            if not mine:
                row.append("-")
                continue
            longest = max(r["case"]["seq_k"] for r in mine)
            best = max(r["tflops"] for r in mine if r["case"]["seq_k"] == longest)
            row.append(f"{best:.1f}" + ("" if longest == 16384 else f" (at {longest})")
                       + (" ✗" if any(r["status"] == "mismatch" for r in mine) else ""))
        rows.append(row)
    out = ["## TFLOP/s at 16k tokens, seq 16384 (configs/h200-quick.json)", ""]
    out += table(["impl"] + [f"{d} d{h} {'causal' if m == 'causal' else 'no mask'}" for d, h, m in groups], rows)
    return out + ["", "Median time; FLOPs count only the keys a causal row sees. ✗: some output mismatched.", ""]


SHAPE = ("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim", "dtype", "mask", "mode")


def shape(case):
    """What makes two records the same problem, whichever program wrote them (a peer's case may carry
    fewer or more fields than faprobe's)."""
    return tuple(case.get(key) for key in SHAPE)


def ran_with_time(recs):
    return [r for r in recs if r["status"] == "ok" and (r.get("time_s") or {}).get("median")]


def targets(work):
    """The issue targets as ratios of median times in this run (same case, same GPU, minutes apart)."""
    out = []
    quick = ran_with_time(records(os.path.join(work, "sweep", "h200-quick.jsonl"),
                                  os.path.join(work, "peers", "h200-quick.jsonl")))
    time_of = {(r["impl"], shape(r["case"])): r["time_s"]["median"] for r in quick}
    rows = []
    for r in sorted(quick, key=lambda r: r["case"]["seq_k"]):
        case = r["case"]
        if (r["impl"] != "cuda.fa2" or case["dtype"] != "bf16" or case["head_dim"] != 128
                or case["mask"] != "none" or case["seq_k"] < 2048):
            continue
        flash = time_of.get(("torch.flash", shape(case)))
        if flash:
            ratio = flash / r["time_s"]["median"]
            rows.append([label(case), f"{r.get('tflops', 0):.1f}", f"{ratio * 100:.0f} %",
                         "met" if ratio >= 0.9 else "missed"])
    if rows:
        out += ["### cuda.fa2 against torch.flash (Dao's FA-2): bf16, d128, 16k tokens, no mask, seq ≥ 2k; target ≥ 90 %", ""]
        out += table(["case", "fa2 TFLOP/s", "fa2 speed / flash speed", "target"], rows) + [""]
    pair = ran_with_time(records(os.path.join(work, "sweep", "fa2-vs-fa1.jsonl")))
    rows = []
    for r in pair:
        if r["impl"] != "cuda.fa2":
            continue
        fa1 = next((o for o in pair if o["impl"] == "cuda.fa1" and shape(o["case"]) == shape(r["case"])), None)
        if fa1:
            speedup = fa1["time_s"]["median"] / r["time_s"]["median"]
            rows.append([label(r["case"]), fmt_time(fa1["time_s"]["median"]), fmt_time(r["time_s"]["median"]),
                         f"{speedup:.2f}x", "met" if speedup >= 1.5 else "missed"])
    if rows:
        out += ["### cuda.fa2 against cuda.fa1 (configs/fa2-vs-fa1.json); target ≥ 1.5x", ""]
        out += table(["case", "fa1", "fa2", "speedup", "target"], rows) + [""]
    out += fa3_targets(work)
    out += decode_targets(work)
    return (["## Targets (ratios of median times in this run)", ""] + out) if out else []


# ---------------------------------------------------------------------------------------------------------
# FA-3 (configs/fa3-vs-fa2.json): the targets for cuda.fa3 and the sweep's table

FA3, FA2, CUDNN = "cuda.fa3", "cuda.fa2", "torch.cudnn"
FAPROBE_CUDNN = "cuda.cudnn"  # cuDNN's SDPA in faprobe's process (kernels/cuda/cudnn.cpp), beside PyTorch's
FA3_SWEEP, FA3_PEERS = "sweep.fa3-vs-fa2", "peers.fa3-vs-fa2"
FA3_CASE = {"batch": 2, "heads": 16, "kv_heads": 16, "seq_q": 8192, "seq_k": 8192, "head_dim": 128,
            "mode": "prefill"}  # seq 8k at 16k tokens per call; dtype and mask per target
# cuda.fa3 at least as fast as cuDNN at bf16, no mask (FA-3 paper, Shah et al. 2024, figure for head_dim 128:
# 640-660 TFLOP/s on an H100 at this shape); causal at least 550 TFLOP/s; at least 1.5x cuda.fa2; fp8 over
# 1000 TFLOP/s.
FA3_CUDNN_TARGET, FA3_CAUSAL_TARGET, FA3_FA2_TARGET, FA3_FP8_TARGET = 1.0, 550.0, 1.5, 1000.0


def fa3_records(work):
    return records(os.path.join(work, "sweep", "fa3-vs-fa2.jsonl"), os.path.join(work, "peers", "fa3-vs-fa2.jsonl"))


def tflops_of(record):
    rate = record.get("tflops")
    if isinstance(rate, (int, float)):
        return float(rate)
    median, flops = (record.get("time_s") or {}).get("median"), record.get("flops")
    return flops / median / 1e12 if median and isinstance(flops, (int, float)) else None


def fa3_targets(work):
    """The four FA-3 targets at seq 8k, each "met", "missed" or "not measured: why" (rendered even before the
    sweep has run, so that a run cut short says so)."""
    by_key = {(r["impl"], shape(r["case"])): r for r in fa3_records(work)}

    def at(dtype, mask):
        return shape(dict(FA3_CASE, dtype=dtype, mask=mask))

    def timed(impl, key):
        record = by_key.get((impl, key))
        return record if record and record["status"] == "ok" and (record.get("time_s") or {}).get("median") else None

    def why_not(impl, key):
        record = by_key.get((impl, key))
        if record:
            return f"{impl} {record['status']}" + (f": {record['reason'][:80]}" if record.get("reason") else "")
        name = FA3_PEERS if impl.startswith("torch.") else FA3_SWEEP
        status = step_status(work, name)
        if not status and name == FA3_PEERS:  # the peer runs only after the sweep
            name, status = FA3_SWEEP, step_status(work, FA3_SWEEP)
        if not status or status.startswith("skipped") or "no case ran" in status:  # the step's, said once
            return f"{name}: {status}" if status else f"{name} has not run"
        return f"no {impl} record" + (f" ({name}: {status})" if status != "pass" else "")

    def median(record):
        return record["time_s"]["median"]

    rows = []

    def row(what, key, other, goal, measure):
        """measure(fa3, other) -> (value text, passed) from timed records; other is None for an absolute goal."""
        case = label(dict(zip(SHAPE, key)))
        fa3, peer = timed(FA3, key), timed(other, key) if other else None
        if fa3 and (peer or not other):
            value, passed = measure(fa3, peer)
            rows.append([what, case, f"{tflops_of(fa3):.1f}", f"{other} {tflops_of(peer):.1f}" if peer else "-",
                         value, goal, "met" if passed else "missed"])
        else:
            missing = [why_not(impl, key) for impl, record in ((FA3, fa3), (other, peer)) if impl and not record]
            rows.append([what, case, f"{tflops_of(fa3):.1f}" if fa3 else "-",
                         f"{other} {tflops_of(peer):.1f}" if peer else (other or "-"), "-", goal,
                         "not measured: " + "; ".join(dict.fromkeys(missing))])

    def speedup(target):
        return lambda fa3, peer: (f"{median(peer) / median(fa3):.2f}x", median(peer) / median(fa3) >= target)

    row(f"as fast as {CUDNN}", at("bf16", "none"), CUDNN, f"≥ {FA3_CUDNN_TARGET:.1f}x", speedup(FA3_CUDNN_TARGET))
    row("causal TFLOP/s", at("bf16", "causal"), None, f"≥ {FA3_CAUSAL_TARGET:g}",
        lambda fa3, _: (f"{tflops_of(fa3):.0f} TFLOP/s", tflops_of(fa3) >= FA3_CAUSAL_TARGET))
    for mask in ("none", "causal"):
        row(f"speedup over {FA2}", at("bf16", mask), FA2, f"≥ {FA3_FA2_TARGET:.1f}x", speedup(FA3_FA2_TARGET))
    row("fp8 TFLOP/s", at("fp8_e4m3", "none"), None, f"> {FA3_FP8_TARGET:g}",
        lambda fa3, _: (f"{tflops_of(fa3):.0f} TFLOP/s", tflops_of(fa3) > FA3_FP8_TARGET))
    out = [f"### FA-3: {FA3} (configs/fa3-vs-fa2.json): 16k tokens per call, heads 16, head_dim 128, seq 8k", ""]
    out += table(["target", "case", f"{FA3} TFLOP/s", "against (TFLOP/s)", "measured", "goal", "result"], rows)
    return out + ["", f"Ratios are of median times on the same case ({FA2}'s or {CUDNN}'s over {FA3}'s); a case "
                      "whose output mismatched counts as not measured.", ""]


def fa3_sweep(work):
    """The FA-3 sweep as one table: TFLOP/s per case and implementation, and cuda.fa3's ratios."""
    recs = fa3_records(work)
    if not any(r["impl"].startswith("cuda.") for r in recs):
        return []
    impls = [impl for impl in (FA2, FA3, FAPROBE_CUDNN, CUDNN) if any(r["impl"] == impl for r in recs)]
    others = [other for other in (FA2, FAPROBE_CUDNN, CUDNN) if other in impls and FA3 in impls]
    impls += sorted({r["impl"] for r in recs} - set(impls))
    by_key = {(r["impl"], shape(r["case"])): r for r in recs}
    cases = sorted({shape(r["case"]) for r in recs}, key=lambda k: (k[6] != "bf16", k[6], k[7] != "none", k[4]))

    def cell(record):
        if record is None:
            return "-"
        if record["status"] in ("ok", "mismatch") and (record.get("time_s") or {}).get("median"):
            return f"{tflops_of(record):.1f}" + (" ✗" if record["status"] == "mismatch" else "")
        return record["status"] + (f": {record.get('reason', '')[:40]}" if record["status"] in ("skipped", "failed")
                                   else "")

    def ratio(other, key):
        mine, theirs = by_key.get((FA3, key)), by_key.get((other, key))
        if not (mine and theirs and mine["status"] == theirs["status"] == "ok"):
            return "-"
        times = (mine.get("time_s") or {}).get("median"), (theirs.get("time_s") or {}).get("median")
        return f"{times[1] / times[0]:.2f}x" if all(times) else "-"

    rows = []
    for key in cases:
        rows.append([label(dict(zip(SHAPE, key)))] + [cell(by_key.get((impl, key))) for impl in impls]
                    + [ratio(other, key) for other in others])
    header = ["case"] + impls + [f"{FA3} / {other}" for other in others]
    out = ["## FA-3 sweep (configs/fa3-vs-fa2.json: 16k tokens per call, heads 16, head_dim 128), TFLOP/s", ""]
    out += table(header, rows)
    return out + ["", "Median time; FLOPs count only the keys a causal row sees; a ratio is the other's median time "
                      f"over {FA3}'s (cases that ran and matched). ✗: the output mismatched. {CUDNN} and "
                      f"{FAPROBE_CUDNN} take no fp8.", ""]


# ---------------------------------------------------------------------------------------------------------
# Decode (configs/decode-gpu.json): FlashDecoding's targets and the sweep's table

DECODE, SPLITK = "cuda.decode", "cuda.decode-splitk"
SPEEDUP_CASE = {"batch": 1, "heads": 32, "seq_k": 32768, "head_dim": 128, "dtype": "bf16"}  # the seed's 3.6x
SPEEDUP_TARGET, FRACTION_TARGET, PAGED_TARGET = 3.0, 0.80, 1.08


def decode_key(case):
    """What makes two decode records the same problem, whichever program wrote them (seed and splits aside;
    a contiguous case has no page_size)."""
    return (case.get("batch"), case.get("heads"), case.get("kv_heads"), case.get("seq_k"), case.get("head_dim"),
            case.get("dtype"), case.get("page_size") or 0)


def decode_label(key, shape=True):
    """A decode_key as "b1 h32:8 s32k d128 bf16 page 64" (without d and dtype when shape is False)."""
    batch, heads, kv_heads, seq_k, head_dim, dtype, page = key
    return (f"b{batch} h{heads}" + (f":{kv_heads}" if kv_heads != heads else "") + f" s{fmt_seq(seq_k)}"
            + (f" d{head_dim} {dtype}" if shape else "") + (f" page {page}" if page else ""))


def decode_records(work):
    """The decode sweep's records and its peers': equal key lengths, each implementation's own split count
    (a forced --splits is another experiment)."""
    recs = records(os.path.join(work, "sweep", "decode-gpu.jsonl"), os.path.join(work, "peers", "decode-gpu.jsonl"))
    return [r for r in recs if r["case"].get("mode") == "decode" and not r["case"].get("seqlens")
            and not r["case"].get("splits")]


def step_status(work, name):
    """NAME's status in steps.tsv, or "" when the step has not been recorded."""
    for row in csv.reader(read(os.path.join(work, "steps.tsv")).splitlines(), delimiter="\t"):
        if len(row) > 1 and row[0] == name:
            return row[1]
    return ""


def fraction_of(record, copy):
    """The record's bandwidth_fraction, else its GB/s over the copy bandwidth; None when neither is known."""
    value = record.get("bandwidth_fraction")
    if isinstance(value, (int, float)):
        return float(value)
    rate = gbytes_of(record)
    return rate / copy if rate and copy else None


def gbytes_of(record):
    rate = record.get("gbytes_per_s")
    if isinstance(rate, (int, float)):
        return float(rate)
    median, moved = (record.get("time_s") or {}).get("median"), record.get("bytes")
    return moved / median / 1e9 if median and isinstance(moved, (int, float)) else None


def decode_targets(work):
    recs = decode_records(work)
    step = step_status(work, "sweep.decode-gpu")
    if not recs and not step:
        return []  # the decode sweep has not run (yet)
    timed = {(r["impl"], decode_key(r["case"])): r for r in ran_with_time(recs)}
    every = {(r["impl"], decode_key(r["case"])): r for r in recs}
    copy = gpu_rates(work)[0].get("copy_gbytes_per_s")

    def why_not(impl, key):
        record = every.get((impl, key))
        if record:
            return f"{impl} {record['status']}" + (f": {record['reason'][:80]}" if record.get("reason") else "")
        return f"no {impl} record" + (f" (sweep.decode-gpu: {step})" if step and step != "pass" else "")

    def time_of(impl, key):
        record = timed.get((impl, key))
        return record["time_s"]["median"] if record else None

    out = []
    # cuda.decode-splitk against cuda.decode at the seed's shape, for each kv_heads the sweep has.
    at = SPEEDUP_CASE
    kv_list = sorted({r["case"]["kv_heads"] for r in recs if not r["case"].get("page_size")
                      and all(r["case"].get(k) == v for k, v in at.items())}, reverse=True)
    rows = []
    for kv in kv_list or [None]:
        name = (f"b{at['batch']} h{at['heads']}" + (f":{kv}" if kv and kv != at["heads"] else "")
                + f" s{fmt_seq(at['seq_k'])} d{at['head_dim']} {at['dtype']}, contiguous")
        key = (at["batch"], at["heads"], kv, at["seq_k"], at["head_dim"], at["dtype"], 0)
        plain, split = time_of(DECODE, key), time_of(SPLITK, key)
        if plain and split:
            speedup = plain / split
            splits = (timed[(SPLITK, key)].get("details") or {}).get("splits")
            rows.append([name, fmt_time(plain), fmt_time(split) + (f" ({splits} splits)" if splits else ""),
                         f"{speedup:.2f}x", "met" if speedup >= SPEEDUP_TARGET else "missed"])
        else:
            reasons = [why_not(impl, key) for impl, t in ((DECODE, plain), (SPLITK, split)) if not t]
            rows.append([name, fmt_time(plain) if plain else "-", fmt_time(split) if split else "-", "-",
                         "not measured: " + "; ".join(reasons)])
    out += [f"### {SPLITK} against {DECODE} (configs/decode-gpu.json): batch 1, 32 heads, seq 32k; "
            f"target ≥ {SPEEDUP_TARGET:g}x (the seed: 3.6x)", ""]
    out += table(["case", DECODE, SPLITK, "speedup", "target"], rows) + [""]

    # cuda.decode-splitk's bandwidth at long contexts, contiguous.
    rows = []
    long_contiguous = [r for r in recs if r["impl"] == SPLITK and not r["case"].get("page_size")
                       and r["case"]["seq_k"] >= 32768]
    for r in sorted(long_contiguous, key=lambda r: (-r["case"]["kv_heads"], r["case"]["batch"], r["case"]["seq_k"])):
        median = (r.get("time_s") or {}).get("median") if r["status"] == "ok" else None
        fraction = fraction_of(r, copy) if median else None
        if not median:
            verdict = "not measured: " + why_not(SPLITK, decode_key(r["case"]))
        elif fraction is None:
            verdict = "not measured: no copy bandwidth"
        else:
            verdict = "met" if fraction >= FRACTION_TARGET else "missed"
        rate = gbytes_of(r) if median else None
        rows.append([decode_label(decode_key(r["case"])), fmt_time(median) if median else "-",
                     f"{rate:,.0f}" if rate else "-", f"{fraction * 100:.0f} %" if fraction is not None else "-",
                     verdict])
    if not rows:
        why = f"sweep.decode-gpu: {step}" if step and step != "pass" else f"no {SPLITK} record"
        rows.append([f"{SPLITK}, seq ≥ 32k, contiguous", "-", "-", "-", "not measured: " + why])
    out += [f"### {SPLITK}'s bandwidth, seq ≥ 32k, contiguous; target ≥ {FRACTION_TARGET * 100:.0f} % of the "
            f"GPU's copy bandwidth" + (f" ({copy:,.0f} GB/s, measured by faprobe)" if copy else ""), ""]
    out += table(["case", "median", "GB/s", "of copy", "target"], rows) + [""]

    # Paged against contiguous for cuda.decode-splitk, pages of 64 keys and more: the worst case per page size.
    pages = sorted({r["case"].get("page_size") or 0 for r in recs} - {0})
    rows = []
    for page in [p for p in pages if p >= 64] or [None]:
        ratios, untimed = [], 0  # untimed: paged cases without a median of their own or of their contiguous twin
        for r in recs:
            if r["impl"] != SPLITK or (r["case"].get("page_size") or 0) != page:
                continue
            paged = time_of(SPLITK, decode_key(r["case"]))
            contiguous = time_of(SPLITK, decode_key(r["case"])[:-1] + (0,))
            if paged and contiguous:
                ratios.append((paged / contiguous, r["case"]))
            else:
                untimed += 1
        if not ratios:
            rows.append([f"{page}" if page else "≥ 64", "0", "-", "-", "-",
                         "not measured: " + (f"sweep.decode-gpu: {step}" if step and step != "pass"
                                             else f"no paged {SPLITK} record with a contiguous twin")])
            continue
        ratios.sort(key=lambda item: item[0])
        worst, case = ratios[-1]
        within = sum(ratio <= PAGED_TARGET for ratio, _ in ratios)
        rows.append([str(page), f"{within} of {len(ratios)}" + (f" ({untimed} more not timed)" if untimed else ""),
                     f"{worst:.3f}",
                     decode_label(decode_key(case)[:-1] + (0,), shape=False),
                     f"{ratios[len(ratios) // 2][0]:.3f}", "met" if within == len(ratios) else "missed"])
    out += [f"### {SPLITK} paged against contiguous, pages of 64 keys and more; target: paged time ≤ "
            f"{PAGED_TARGET:g} × contiguous time, every case", ""]
    out += table(["page size", f"cases ≤ {PAGED_TARGET:g}x", "worst ratio", "worst at", "median ratio", "target"],
                 rows) + [""]
    return out


def decode_sweep(work):
    """The decode sweep as one table: a row per case, a column per implementation × page size."""
    recs = decode_records(work)
    mine = [r for r in recs if r["impl"].startswith("cuda.")]
    if not mine:
        return []
    rates, where = gpu_rates(work)
    copy = rates.get("copy_gbytes_per_s")
    impls = [impl for impl in (DECODE, SPLITK) if any(r["impl"] == impl for r in mine)]
    impls += sorted({r["impl"] for r in mine} - set(impls))
    pages = sorted({r["case"].get("page_size") or 0 for r in mine})
    columns = [(impl, page) for impl in impls for page in pages]
    cases = sorted({decode_key(r["case"])[:-1] for r in mine}, key=lambda k: (k[5], k[4], -k[2], k[0], k[3]))
    shapes = {(case[4], case[5]) for case in cases}  # (head_dim, dtype): in the heading when there is one
    by_key = {(r["impl"], decode_key(r["case"])): r for r in recs}

    def cell(record):
        if record is None:
            return "-"
        if record["status"] != "ok" or not (record.get("time_s") or {}).get("median"):
            return record["status"] + (f": {record.get('reason', '')[:40]}" if record["status"] == "skipped" else "")
        rate, fraction = gbytes_of(record), fraction_of(record, copy)
        return (fmt_time(record["time_s"]["median"]) + (f", {rate:,.0f} GB/s" if rate else "")
                + (f" ({fraction * 100:.0f} %)" if fraction is not None else ""))

    peers = any(r["impl"].startswith("torch.") for r in recs)
    rows = []
    for case in cases:
        row = [decode_label(case + (0,), shape=len(shapes) > 1)]
        row += [cell(by_key.get((impl, case + (page,)))) for impl, page in columns]
        split = by_key.get((SPLITK, case + (0,)))
        if SPLITK in impls:
            ran = split is not None and split["status"] == "ok"
            row.append(str((split.get("details") or {}).get("splits", "-")) if ran else "-")
        if peers:
            timed = [r for r in ran_with_time(recs)
                     if r["impl"].startswith("torch.") and decode_key(r["case"]) == case + (0,)]
            best = min(timed, key=lambda r: r["time_s"]["median"]) if timed else None
            row.append((f"{best['impl'][len('torch.'):]}: " if best else "") + cell(best))
        rows.append(row)
    header = ["case"] + [f"{impl} {'contiguous' if page == 0 else f'page {page}'}" for impl, page in columns]
    header += [f"{SPLITK} splits"] if SPLITK in impls else []
    header += ["PyTorch SDPA, best backend"] if peers else []
    shape = f", d{next(iter(shapes))[0]} {next(iter(shapes))[1]}" if len(shapes) == 1 else ""
    out = [f"## Decode sweep (configs/decode-gpu.json{shape})", ""]
    out += [f"GPU copy bandwidth measured by faprobe: {copy:,.0f} GB/s ({where})." if copy
            else "GPU copy bandwidth: not measured (no rates in the sweep's --json, no bandwidth_fraction in its "
                 "records).", ""]
    out += table(header, rows)
    return out + ["", "Median time per call; GB/s = minimum bytes (Q, K, V read once, O written once) / median time; "
                      "(%) of the copy bandwidth. The split count is split-K's own choice on the contiguous case; "
                      "PyTorch runs contiguous K/V only. Timing only (--no-verify): the decode kernels' outputs are "
                      "checked by the verify step.", ""]


def seed_table(work):
    recs = records(os.path.join(work, "sweep", "seed-table-gpu.jsonl"), os.path.join(work, "peers", "seed-table-gpu.jsonl"))
    if not recs:
        return []
    impls = sorted({r["impl"] for r in recs}, key=lambda name: (not name.startswith("cuda."), name))
    seqs = sorted({r["case"]["seq_k"] for r in recs})
    cell = {}
    for r in recs:
        if r["status"] in ("ok", "mismatch") and r.get("time_s"):
            peak = (r.get("memory") or {}).get("peak_bytes")
            text = fmt_time(r["time_s"]["median"]) + (f", {fmt_bytes(peak)}" if peak else "")
            cell[(r["impl"], r["case"]["seq_k"])] = text + (" ✗" if r["status"] == "mismatch" else "")
        elif r["status"] == "skipped":  # the predicted memory or time, as the seed table's OOM rows
            cell[(r["impl"], r["case"]["seq_k"])] = f"skipped: {r.get('reason', '')[:60]}"
        else:
            cell[(r["impl"], r["case"]["seq_k"])] = r["status"]
    out = ["## Seed table shape (configs/seed-table-gpu.json: batch 8, heads 32, head_dim 128, causal, fp16)", ""]
    out += table(["seq"] + impls, [[seq] + [cell.get((impl, seq), "-") for impl in impls] for seq in seqs])
    return out + ["", "Median time per call, peak memory (inputs and output included).", ""]


def peers(work):
    text = read(os.path.join(work, "peers", "backends.md"))
    line = next((l for l in text.splitlines() if l.startswith("Silent fallbacks")), "")
    return ["## PyTorch SDPA backend table (peers/backends.md)", "", line, ""] if line else []


def probes(work):
    text = read(os.path.join(work, "logs", "probes.log")).strip().splitlines()
    return ["## Probes (faprobe probes; logs/probes.log, probes.json)", "", "```", *text[-12:], "```", ""] if text else []


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    work = argv[0]
    gpu = next(iter(csv.reader(read(os.path.join(work, "env", "nvidia-smi.csv")).splitlines()[1:2])), ["no GPU"])
    try:
        headline = [gate_line(work), ""]
    except Exception as error:  # as for the sections below
        headline = [f"(GPU CI gate: could not summarize: {type(error).__name__}: {error})", ""]
    out = ([f"# faprobe device check: {gpu[0]}", ""] + machine(work) + [""] + headline + ["## Steps", ""]
           + steps(work) + [""])
    for section in (probes, verify, saved, throughput, targets, fa3_sweep, decode_sweep, seed_table, peers):
        try:
            out += section(work)
        except Exception as error:  # one malformed file must not lose the rest of the summary
            out += [f"({section.__name__}: could not summarize: {type(error).__name__}: {error})", ""]
    out += ["Everything else is in device-check.tar.gz: env/, logs/, list.json, probes.json, verify/, saved/, "
            "sweep/, peers/, plots/."]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
