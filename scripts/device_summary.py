#!/usr/bin/env python3
"""The summary of a scripts/device-check.sh run, as Markdown on stdout.

Usage: scripts/device_summary.py WORKDIR    (the directory device-check.sh packs: steps.tsv, env/, ...)

Reads whatever exists (a step that did not run leaves its section out): the GPU from nvidia-smi, the
outcome of every step, verify's counts and mismatches, the NumPy check of the saved outputs, the best
TFLOP/s per implementation at the largest sequence length of configs/h200-quick.json (faprobe's CUDA
implementations and PyTorch's SDPA backends), the kernels' targets as ratios measured in the same run
(cuda.fa2 against PyTorch's flash backend and against cuda.fa1), and the seed table's rows.
"""

import csv
import glob
import json
import os
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
    return (f"b{case['batch']} {heads} {seq} d{case['head_dim']} {case['dtype']}"
            f"{' causal' if case.get('mask') == 'causal' else ''}{' decode' if case.get('mode') == 'decode' else ''}")


def fmt_time(seconds):
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
    return lines


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


def verify(work):
    recs = records(os.path.join(work, "verify", "verify.jsonl"))
    if not recs:
        return []
    out = ["## Verify (configs/gpu-verify.json)", ""]
    out += table(("impl",) + STATUSES, [(impl,) + tuple(c[s] for s in STATUSES) for impl, c in counts(recs).items()])
    bad = [r for r in recs if r["status"] in ("mismatch", "failed")]
    if bad:
        out += ["", f"{len(bad)} mismatched or failed (first 12):"]
        out += [f"- {r['impl']} {label(r['case'])}: {r['status']}, {r.get('reason', '')[:160]}" for r in bad[:12]]
    if all(c["ok"] == 0 for c in counts(recs).values()):
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
    return (["## Targets (ratios of median times in this run)", ""] + out) if out else []


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
    out = [f"# faprobe device check: {gpu[0]}", ""] + machine(work) + ["", "## Steps", ""] + steps(work) + [""]
    for section in (probes, verify, saved, throughput, targets, seed_table, peers):
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
