#!/usr/bin/env python3
"""The table of a scripts/device-tune.sh run: which tile each kernel should run, from one run's records.

Usage: scripts/tune_table.py WORKDIR [--out tune.md] [--summary summary.md] [--source DIR]

WORKDIR is the directory device-tune.sh packs; whatever of it exists is read (a step that did not run leaves
its part out, and the table says so): list.json (`faprobe list --variants --json`), implementations.txt (the
names tuned), notes.txt, steps.tsv, verify/*.jsonl (the short verify), bench/*.jsonl and bench/*.json (the
timed sweeps and their metadata), peers/*.jsonl (PyTorch's backends), env/nvidia-smi.csv.

tune.md (--out, default stdout):
  - the GPU that ran it, and that its numbers compare within this run only;
  - each implementation tuned (the plain kernels, every variant, cuDNN) with its verify verdict: a variant that
    failed is not timed, and is marked wherever it appears;
  - per benchmark case one row: each implementation's TFLOP/s (median time), the best variant of each kernel
    marked ★, the tile the plain kernel ran (its records' details.tile; "?" when they carry none);
  - the targets as ratios of median times in this run, ✓ or ✗ against their thresholds: cuda.fa3 against
    cuDNN (cuda.cudnn; PyTorch's torch.cudnn when faprobe has no cuda.cudnn) at bf16 head_dim 128 (≥ 1.0×
    without mask, ≥ 0.95× causal) and head_dim 64 (≥ 0.9×), cuda.fa3's fp8_e4m3 rate over its bf16 rate at
    head_dim 128 (≥ 1.6×), cuda.fa2 against torch.flash (≥ 0.95×, every FA-2 case);
  - proposed defaults: for each (kernel, dtype, head_dim, mask) measured, the fastest variant that passed
    verify (over several cases, by the geometric mean of its TFLOP/s), against the tile the plain kernel runs
    now; a change is proposed when it is at least MIN_GAIN faster, with the lines of the kernel's list of
    instantiations (kernels/cuda/<kernel>/CMakeLists.txt under --source, default this repository) as they
    are and as they would become.
Emulated records (emu.*: verified, never timed) show "untimed (emulated)"; the verdicts and the candidates
are listed all the same, and nothing is proposed without timings.

summary.md (--summary): the machine, every step's outcome, the targets and the proposals, in short.
"""

import argparse
import csv
import glob
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_summary import read, records  # noqa: E402  (the device check's readers of a work folder)

KERNELS = ("fa3", "fa2")
MIN_GAIN = 0.02  # a variant must beat the current default by 2 % to replace it: less is within run-to-run noise
SHAPE = ("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim", "dtype", "mask", "mode")
FAILED = ("mismatch", "failed")
COMPARE_WARNING = ("Every number here comes from this one run on this one GPU, its kernels interleaved case by case: "
                   "compare them within this table only. TFLOP/s from different runs (another GPU, clock, driver, "
                   "build or day) must not be compared with these, nor ratios across runs.")


# ---------------------------------------------------------------------------------------------------------
# Reading the work directory


def load_json(path):
    try:
        return json.loads(read(path))
    except ValueError:
        return None


def shape(case):
    return tuple(case.get(key) for key in SHAPE)


def steps(work):
    """[(name, status, seconds)] from steps.tsv."""
    rows = list(csv.reader(read(os.path.join(work, "steps.tsv")).splitlines(), delimiter="\t"))[1:]
    return [(r[0], r[1], r[2]) for r in rows if len(r) >= 3]


def step_status(work, name):
    return next((status for step, status, _ in steps(work) if step == name), "")


class Run:
    """Everything the table needs from one work directory."""

    def __init__(self, work):
        self.work = work
        self.listing = load_json(os.path.join(work, "list.json")) or {}
        self.verify = records(os.path.join(work, "verify", "*.jsonl"))
        # Each kernel's sweep by its file (bench/fa3.jsonl): the same shape may be a case of both kernels.
        self.bench_of = {}
        for path in sorted(glob.glob(os.path.join(work, "bench", "*.jsonl"))):
            mine = records(path)
            family = os.path.basename(path)[:-len(".jsonl")]
            if family not in KERNELS:
                family = next((self.kernel(r["impl"]) for r in mine if self.kernel(r["impl"])), None)
            if family:
                self.bench_of.setdefault(family, []).extend(mine)
        self.bench = [r for family in self.bench_of.values() for r in family]
        self.peers = records(os.path.join(work, "peers", "*.jsonl"))
        self.meta = [m for m in (load_json(p) for p in sorted(glob.glob(os.path.join(work, "bench", "*.json")))) if m]
        self.notes = [line for line in read(os.path.join(work, "notes.txt")).splitlines() if line.strip()]
        self.target = read(os.path.join(work, "target.txt")).strip() or self.guess_target()
        variants = self.listing.get("variants") or []
        self.variant_of = {v["name"]: v.get("variant_of", "") for v in variants}
        self.support = {}  # name → {(dtype, head_dim, mask, aligned): supported} of the prefill probes
        for entry in (self.listing.get("implementations") or []) + variants:
            self.support[entry["name"]] = {(p.get("dtype"), p.get("head_dim"), p.get("mask"), p.get("aligned")):
                                           p.get("supported") for p in entry.get("support") or []
                                           if p.get("mode") == "prefill"}
        tuned = [l.strip() for l in read(os.path.join(work, "implementations.txt")).splitlines() if l.strip()]
        if not tuned:  # no list of its own: every kernel implementation seen, and every listed variant
            seen = {r["impl"] for r in self.verify + self.bench}
            tuned = [n for n in sorted(seen) if self.kernel(n) or n.endswith(".cudnn")]
            tuned += [n for n in self.variant_of if self.kernel(n) and n not in tuned
                      and n.startswith(self.target + ".")]
        self.tuned = tuned
        self.verdicts = {}

    def guess_target(self):
        names = [r["impl"] for r in self.verify + self.bench]
        return "emu" if names and all(n.startswith("emu.") for n in names) else "cuda"

    def kernel(self, name):
        """fa3 for cuda.fa3 and cuda.fa3@128x176 (emu.* alike); None otherwise."""
        base = name.split(".", 1)[-1].split("@", 1)[0]
        return base if base in KERNELS and name.split(".", 1)[0] in ("cuda", "emu") else None

    def takes(self, name, case):
        """Whether the listing's support probes say name takes case's dtype, head_dim and mask: True, False, or
        None when there is no such probe (the benchmark's record is then the only answer)."""
        aligned = case["seq_k"] % 128 == 0 and case["seq_q"] % 128 == 0
        return self.support.get(name, {}).get((case["dtype"], case["head_dim"], case["mask"], aligned))

    def verdict(self, name):
        """(passed, text): passed is True, False, or None when nothing says (no verify record, no step)."""
        if name not in self.verdicts:
            self.verdicts[name] = self.judge(name)
        return self.verdicts[name]

    def judge(self, name):
        mine = [r for r in self.verify if r["impl"] == name]
        counts = {}
        for r in mine:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        status = step_status(self.work, f"verify.{name}")
        bad = [r for r in mine if r["status"] in FAILED]
        bench_bad = [r for r in self.bench if r["impl"] == name and r["status"] in FAILED]
        tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda item: item[0] != "ok"))
        if mine and not bad and not bench_bad and not counts.get("ok"):  # faprobe verify exits 1: nothing checked
            reason = next((r.get("reason") for r in mine if r.get("reason")), "")
            return None, f"– nothing checked ({tally}" + (f": {reason[:80]}" if reason else "") + "), so not timed"
        if bad or bench_bad or (status and status not in ("pass", "pass, but no case ran")
                                and not status.startswith("skipped")):
            why = []
            if bad:
                first = bad[0]
                why.append(f"{first['status']} at {label(first['case'])}"
                           + (f": {first['reason'][:80]}" if first.get("reason") else ""))
            if status and status != "pass":
                why.append(f"verify step {status}")
            if bench_bad:
                why.append(f"{len(bench_bad)} {bench_bad[0]['status']} in the benchmark")
            return False, "✗ failed verify" + (f" ({tally})" if tally else "") + ": " + "; ".join(why)
        if counts.get("ok"):
            return True, f"✓ verified ({tally})"
        return None, "not verified: " + (f"verify step {status}" if status else "the verify step has not run")

    def gpu(self):
        """The device that ran the benchmark, in words, and its name alone."""
        for meta in self.meta:
            for device in meta.get("devices") or []:
                if isinstance(device, dict) and device.get("name"):
                    extra = [f"compute capability {device['compute_capability']}" if device.get("compute_capability") else "",
                             f"{device['sm_count']} SMs" if device.get("sm_count") else "",
                             f"{device['memory_total_bytes'] / 1e9:.0f} GB" if device.get("memory_total_bytes") else ""]
                    return device["name"] + (f" ({', '.join(e for e in extra if e)})" if any(extra) else ""), device["name"]
        for r in self.bench + self.verify:
            if r["impl"].startswith(("cuda.", "emu.")) and r.get("device"):
                return r["device"], r["device"]
        rows = list(csv.reader(read(os.path.join(self.work, "env", "nvidia-smi.csv")).splitlines()))
        if len(rows) >= 2 and rows[1]:
            return rows[1][0].strip() + " (nvidia-smi; no benchmark record)", rows[1][0].strip()
        if self.target == "emu":
            return "the emulator (emulated sm_90a) on this CPU: nothing timed", "emulated"
        return "unknown (no record and no nvidia-smi output)", "unknown GPU"


# ---------------------------------------------------------------------------------------------------------
# Formatting


def fmt_seq(value):
    return f"{value // 1024}k" if value >= 1024 and value % 1024 == 0 else str(value)


def label(case):
    heads = f"h{case['heads']}" + (f":{case['kv_heads']}" if case.get("kv_heads", case["heads"]) != case["heads"] else "")
    seq = f"s{fmt_seq(case['seq_k'])}" if case["seq_q"] == case["seq_k"] else f"q{case['seq_q']} k{case['seq_k']}"
    return (f"b{case['batch']} {heads} {seq} d{case['head_dim']} {case['dtype']}"
            f"{' causal' if case.get('mask') == 'causal' else ''}{' decode' if case.get('mode') == 'decode' else ''}")


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def median_of(record):
    if record is None or record.get("status") != "ok":
        return None
    median = (record.get("time_s") or {}).get("median")
    return median if isinstance(median, (int, float)) and median > 0 else None


def tflops_of(record):
    median = median_of(record)
    if median is None:
        return None
    rate = record.get("tflops")
    if isinstance(rate, (int, float)):
        return float(rate)
    flops = record.get("flops")
    return flops / median / 1e12 if isinstance(flops, (int, float)) else None


def untimed(record):
    return "untimed (emulated)" if "emulated" in str(record.get("device", "")) else "untimed"


def tile_of(record):
    tile = (record or {}).get("details", {}) or {}
    return tile.get("tile") if isinstance(tile, dict) and tile.get("tile") else None


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


# ---------------------------------------------------------------------------------------------------------
# The default tiles in the source: kernels/cuda/<kernel>/CMakeLists.txt's list of instantiations


class Instantiations:
    """FAPROBE_<KERNEL>_INSTANTIATIONS: one quoted line per instantiation, "dtype head_dim block_q block_k masks"."""

    ENTRY = re.compile(r'^(\s*")(\S+)(\s+)(\d+)(\s+)(\d+)(\s+)(\d+)(\s+)([^"]*?)(\s*"\s*)$')

    def __init__(self, source, kernel):
        self.path = f"kernels/cuda/{kernel}/CMakeLists.txt"
        text = read(os.path.join(source, self.path))
        match = re.search(rf"set\(FAPROBE_{kernel.upper()}_INSTANTIATIONS\b(.*?)^\)", text, re.S | re.M)
        self.lines = []
        for line in (match.group(1) if match else "").splitlines():
            entry = self.ENTRY.match(line)
            if entry:
                masks = [m for m in entry.group(10).split() if m != "-"]
                self.lines.append({"line": line, "match": entry, "dtype": entry.group(2),
                                   "head_dim": int(entry.group(4)), "tile": f"{entry.group(6)}x{entry.group(8)}",
                                   "masks": masks})
        self.found = bool(self.lines)

    def default(self, dtype, head_dim, mask):
        return next((l["tile"] for l in self.lines if (l["dtype"], l["head_dim"]) == (dtype, head_dim)
                     and mask in l["masks"]), None)

    def edit(self, changes):
        """[(old lines, new lines)] for {(dtype, head_dim, mask): new tile}: the mask moves to the new tile's line."""
        edits = []
        for group in sorted({(dtype, head_dim) for dtype, head_dim, _ in changes}):
            mine = [l for l in self.lines if (l["dtype"], l["head_dim"]) == group]
            masks = {id(l): list(l["masks"]) for l in mine}
            for (dtype, head_dim, mask), tile in changes.items():
                if (dtype, head_dim) != group:
                    continue
                for l in mine:
                    if mask in masks[id(l)]:
                        masks[id(l)].remove(mask)
                    if l["tile"] == tile:
                        masks[id(l)].append(mask)
            old, new = [], []
            for l in mine:
                ordered = [m for m in ("none", "causal") if m in masks[id(l)]]
                ordered += [m for m in masks[id(l)] if m not in ordered]
                if ordered != l["masks"]:
                    g = l["match"].groups()
                    old.append(l["line"])
                    new.append("".join(g[:9]) + (" ".join(ordered) or "-") + g[10])
            if old:
                edits.append((old, new))
        return edits


# ---------------------------------------------------------------------------------------------------------
# The sections


def header(run):
    gpu, _ = run.gpu()
    lines = [f"# faprobe tile tuning: {gpu}", ""]
    meta = run.meta[0] if run.meta else {}
    if meta:
        lines.append(f"- faprobe {meta.get('version', '?')} ({meta.get('git_revision', '?')}), run at {meta.get('time', '?')}; "
                     f"target {run.target}")
    else:
        lines.append(f"- target {run.target}; no benchmark metadata (bench/*.json) yet")
    devices = sorted({r.get("device", "?") for r in run.bench if r["impl"].startswith(("cuda.", "emu."))})
    if devices:
        lines.append(f"- records' device: {', '.join(devices)}")
    if run.target == "emu":
        lines.append("- **Emulated run**: emu.* are checked, never timed; this table exercises the steps, the "
                     "verify verdicts and the candidates. The defaults are chosen from a run on a GPU.")
    lines.append(f"- **{COMPARE_WARNING}**")
    lines += [f"- note: {note}" for note in run.notes]
    return lines + [""]


def implementations(run):
    rows = []
    for name in run.tuned:
        passed, text = run.verdict(name)
        timed = [r for r in run.bench if r["impl"] == name]
        if passed is False:
            bench = "no: failed verify" if not timed else f"{len(timed)} records (after a failed check)"
        elif not timed:
            bench = "no record" + (" (its family's step has not run)" if not run.bench else "")
        else:
            n = sum(median_of(r) is not None for r in timed)
            bench = f"{n} of {len(timed)} cases timed" if n else f"{len(timed)} cases, {untimed(timed[0])}"
        tile = name.split("@", 1)[1] if "@" in name else ("each case's default" if run.kernel(name) else "-")
        rows.append([f"`{name}`", f"`{run.variant_of[name]}`" if run.variant_of.get(name) else "-", tile, text, bench])
    if not rows:
        return ["## Implementations tuned", "", "None yet: the list step has not run or found nothing to tune.", ""]
    return (["## Implementations tuned", ""] + table(["implementation", "variant of", "tile", "verify", "benchmark"], rows)
            + ["", "A variant that failed verify is not timed and never proposed.", ""])


class Family:
    """One kernel's benchmark: the cases of its sweep (bench/<kernel>.jsonl) and every record on them: its
    implementations, cuDNN beside FA-3, and PyTorch's backends on the same shapes."""

    def __init__(self, run, kernel):
        self.run, self.kernel = run, kernel
        self.plain = f"{run.target}.{kernel}"
        mine = run.bench_of.get(kernel, [])
        self.cases = {}
        for r in mine:
            self.cases.setdefault(shape(r["case"]), r["case"])
        self.by_key = {(r["impl"], shape(r["case"])): r for r in run.peers if shape(r["case"]) in self.cases}
        self.by_key.update({(r["impl"], shape(r["case"])): r for r in mine})
        # bf16 before fp8, then head_dim, sequence length, no mask before causal
        self.keys = sorted(self.cases, key=lambda k: (k[6] != "bf16", k[6], k[5], k[4], k[7] != "none"))

    def record(self, impl, key):
        return self.by_key.get((impl, key))

    def variants(self):
        """The kernel's variants, tuned or with a record here, in the listing's order."""
        names = [n for n in self.run.tuned if self.run.kernel(n) == self.kernel and "@" in n]
        return names + sorted({impl for impl, _ in self.by_key if self.run.kernel(impl) == self.kernel
                               and "@" in impl} - set(names))

    def columns(self):
        """The plain kernel, its variants, then the others on its cases (cuDNN, PyTorch's)."""
        mine = [self.plain] + self.variants()
        others = {impl for impl, _ in self.by_key} - set(mine)
        return mine + sorted(others, key=lambda n: (not n.startswith(("cuda.", "emu.")), n))

    def best_variant(self, key):
        """The fastest timed variant that passed verify, on this case: (name, TFLOP/s) or None."""
        timed = [(tflops_of(self.record(v, key)), v) for v in self.variants()
                 if self.run.verdict(v)[0] is not False and tflops_of(self.record(v, key))]
        return max(timed)[::-1] if timed else None


def families(run):
    return [Family(run, kernel) for kernel in KERNELS if run.bench_of.get(kernel)]


def cell(run, record, impl, case, best):
    failed = run.verdict(impl)[0] is False
    if record is None:
        takes = run.takes(impl, case)
        if failed and takes is not False:
            return "✗ failed verify"
        return "n/a" if takes is False else "-"
    rate = tflops_of(record)
    if rate is not None:
        return f"{rate:.1f} ✗ failed verify" if failed else f"**{rate:.1f} ★**" if impl == best else f"{rate:.1f}"
    if record["status"] == "ok":
        return untimed(record)
    if record["status"] == "unsupported":
        return "n/a"
    return record["status"] + (f": {record['reason'][:50]}" if record.get("reason") else "")


def case_tables(run):
    out = []
    titles = {"fa3": "FA-3 cases", "fa2": "FA-2 cases"}
    for family in families(run):
        columns = family.columns()
        rows = []
        for key in family.keys:
            case = family.cases[key]
            best = family.best_variant(key)
            row = [label(case), tile_of(family.record(family.plain, key)) or "?"]
            row += [cell(run, family.record(impl, key), impl, case, best[0] if best else None) for impl in columns]
            row.append(f"`{best[0]}`" if best else "-")
            rows.append(row)
        out += [f"## {titles[family.kernel]}: TFLOP/s (median time)", ""]
        out += table(["case", f"tile {family.plain} ran"] + [f"`{n}`" for n in columns] + ["best variant"], rows)
        out += ["", "★: the fastest variant of the kernel that passed verify on the case. n/a: the implementation "
                    "does not take the case (a variant's tile is built for some dtypes and head_dims only). FLOPs "
                    "count only the keys a causal row sees.", ""]
    if not out:
        status = step_status(run.work, "bench.fa3") or step_status(run.work, "bench.fa2")
        out = ["## Benchmark cases", "", "No benchmark record yet" + (f" (bench: {status})." if status else "."), ""]
    return out


# The targets, each a ratio of median times in this run: cuDNN's over cuda.fa3's at (dtype, head_dim, mask),
# cuda.fa3's bf16 twin's over its fp8_e4m3 (the same FLOPs), torch.flash's over cuda.fa2's.
CUDNN_TARGETS = (("bf16", 128, "none", 1.0), ("bf16", 128, "causal", 0.95), ("bf16", 64, "none", 0.9),
                 ("bf16", 64, "causal", 0.9))
FP8_TARGET = 1.6
FLASH_TARGET = 0.95


def targets(run):
    by_kernel = {family.kernel: family for family in families(run)}
    rows = []

    def speed(mine, other):
        a, b = median_of(mine), median_of(other)
        return b / a if a and b else None

    def result(ratio, goal, *pairs):
        if ratio:
            return "✓" if ratio >= goal else "✗"
        if run.target == "emu":
            return "not measured: emulated run (nothing timed, no cuDNN, no PyTorch)"
        missing = []
        for impl, record, step in pairs:
            if record is None:
                status = step_status(run.work, step)
                missing.append(f"no {impl} record" + (f" ({step}: {status})" if status else f" ({step} has not run)"))
            elif median_of(record) is None:
                missing.append(f"{impl} {untimed(record) if record['status'] == 'ok' else record['status']}")
        return "not measured: " + "; ".join(missing)

    def with_best(family, key, other, reverse=False):
        best = family.best_variant(key)
        if not best or not median_of(other):
            return "-"
        mine = family.record(best[0], key)
        ratio = speed(other, mine) if reverse else speed(mine, other)
        return f"{ratio:.2f}× ({best[0].split('@', 1)[1]})" if ratio else "-"

    fa3 = by_kernel.get("fa3")
    if fa3:
        cudnn = ("cuda.cudnn" if run.target == "emu" or any(r["impl"] == "cuda.cudnn" for r in run.bench)
                 else "torch.cudnn")
        cudnn_step = "bench.fa3" if cudnn == "cuda.cudnn" else "peers.fa3"
        for dtype, head_dim, mask, goal in CUDNN_TARGETS:
            for key in [k for k in fa3.keys if (k[6], k[5], k[7]) == (dtype, head_dim, mask)]:
                mine, other = fa3.record(fa3.plain, key), fa3.record(cudnn, key)
                ratio = speed(mine, other)
                rows.append([f"{fa3.plain} / {cudnn}", label(fa3.cases[key]), f"{ratio:.2f}×" if ratio else "-",
                             with_best(fa3, key, other), f"≥ {goal:.2f}×",
                             result(ratio, goal, (fa3.plain, mine, "bench.fa3"), (cudnn, other, cudnn_step))])
        for key in [k for k in fa3.keys if k[6] == "fp8_e4m3" and k[5] == 128 and k[7] == "none"]:
            twin = key[:6] + ("bf16",) + key[7:]
            fp8, bf16 = fa3.record(fa3.plain, key), fa3.record(fa3.plain, twin)
            ratio = speed(fp8, bf16)
            best = fa3.best_variant(key)
            best_twin = fa3.best_variant(twin)
            both = speed(fa3.record(best[0], key), fa3.record(best_twin[0], twin)) if best and best_twin else None
            rows.append([f"{fa3.plain} fp8_e4m3 / bf16 rate", label(fa3.cases[key]), f"{ratio:.2f}×" if ratio else "-",
                         f"{both:.2f}× ({best[0].split('@', 1)[1]} / {best_twin[0].split('@', 1)[1]})" if both else "-",
                         f"≥ {FP8_TARGET:.2f}×", result(ratio, FP8_TARGET, (f"{fa3.plain} fp8_e4m3", fp8, "bench.fa3"),
                                                         (f"{fa3.plain} bf16", bf16, "bench.fa3"))])
    fa2 = by_kernel.get("fa2")
    if fa2:
        for key in [k for k in fa2.keys if k[5] in (64, 128) and k[4] >= 2048]:
            mine, flash = fa2.record(fa2.plain, key), fa2.record("torch.flash", key)
            ratio = speed(mine, flash)
            rows.append([f"{fa2.plain} / torch.flash", label(fa2.cases[key]), f"{ratio:.2f}×" if ratio else "-",
                         with_best(fa2, key, flash), f"≥ {FLASH_TARGET:.2f}×",
                         result(ratio, FLASH_TARGET, (fa2.plain, mine, "bench.fa2"), ("torch.flash", flash, "peers.fa2"))])
    if not rows:
        return []
    out = ["## Targets (ratios of median times in this run)", ""]
    out += table(["target", "case", "plain kernel", "with the best variant (its tile)", "threshold", "result"], rows)
    notes = ["", "A ratio is the other's median time over the kernel's (above 1: the kernel is faster); fp8/bf16 is "
                 "the bf16 twin's median time over the fp8 one's (the same FLOPs). \"with the best variant\": the "
                 "ratio if the fastest verified tile of the case were the default."]
    if fa3 and run.target != "emu" and not any(r["impl"] == "cuda.cudnn" for r in run.bench):
        notes.append("cuDNN here is PyTorch's (torch.cudnn, scripts/peers_torch.py, run after the sweep in its own "
                     "process): this faprobe has no cuda.cudnn.")
    return out + notes + [""]


def proposals(run, source):
    """The rows [kernel, dtype, head_dim, mask, ..., proposal] and the section's lines."""
    out, changes_of, rows = [], {}, []
    for family in families(run):
        kernel, plain = family.kernel, family.plain
        source_list = Instantiations(source, kernel)
        groups = {}
        for key in family.keys:
            groups.setdefault((key[6], key[5], key[7]), []).append(key)
        for (dtype, head_dim, mask), group in sorted(groups.items()):
            ran = sorted({tile_of(family.record(plain, key)) for key in group} - {None})
            listed = source_list.default(dtype, head_dim, mask)
            now = ran[0] if len(ran) == 1 else listed
            shown = (now or "?") + (f" ({plain} ran {', '.join(ran)})" if len(ran) > 1 else "")
            if ran and listed and now != listed:
                shown += f"; {source_list.path} marks {listed}"
            cases = [family.cases[key] for key in group]
            on_case = [v for v in family.variants()
                       if any(family.record(v, key) and family.record(v, key)["status"] != "unsupported" for key in group)
                       or (not any(family.record(v, key) for key in group) and all(run.takes(v, c) for c in cases))]
            excluded = [v for v in on_case if run.verdict(v)[0] is False]
            candidates = [v for v in on_case if v not in excluded]
            # The candidates timed on every case of the group, by the geometric mean of their TFLOP/s.
            ranked = []
            for v in candidates:
                rates = [tflops_of(family.record(v, key)) for key in group]
                if all(rates):
                    ranked.append((geomean(rates), v))
            ranked.sort(reverse=True)
            baseline = None
            if now:
                rates = [tflops_of(family.record(f"{plain}@{now}", key)) or tflops_of(family.record(plain, key))
                         for key in group]
                baseline = geomean(rates) if all(rates) else None
            change = None
            if not ranked:
                fastest = "-"
                if not family.variants():
                    proposal = f"nothing to choose: no variant of {plain} is listed"
                elif run.target == "emu":
                    proposal = "no timings (emulated run): chosen on a GPU"
                else:
                    proposal = "nothing to choose: no verified variant was timed on every case"
            else:
                rate, best = ranked[0]
                tile = best.split("@", 1)[1]
                fastest = f"`{best}` {rate:.1f}"
                if tile == now:
                    proposal = "keep " + tile
                elif now and f"{plain}@{now}" in excluded:
                    proposal, change = f"**change to {tile}** (the current tile failed verify)", tile
                elif now is None:
                    proposal, change = f"**set {tile}** (the current default is not known)", tile
                elif baseline is None:
                    proposal = f"keep {now}? its rate was not measured; the fastest verified is {tile}"
                elif rate >= baseline * (1 + MIN_GAIN):
                    proposal, change = f"**change to {tile}** (+{(rate / baseline - 1) * 100:.1f} %)", tile
                else:
                    proposal = f"keep {now} ({tile} within {MIN_GAIN * 100:.0f} %: {(rate / baseline - 1) * 100:+.1f} %)"
            if change:
                changes_of.setdefault(kernel, {})[(dtype, head_dim, mask)] = change
            rows.append([f"`{plain}`", dtype, head_dim, mask, shown, f"{baseline:.1f}" if baseline else "-",
                         ", ".join(f"`{c.split('@', 1)[1]}`" for c in candidates) or "none",
                         ", ".join(f"`{e}` ✗ failed verify" for e in excluded) or "-", fastest, proposal])
    if not rows:
        return [], []
    out = ["## Proposed defaults", ""]
    out += table(["kernel", "dtype", "head_dim", "mask", "default tile now", "its TFLOP/s", "candidates (passed verify)",
                  "excluded", "fastest (TFLOP/s)", "proposal"], rows)
    out += ["", f"Per (kernel, dtype, head_dim, mask) benchmarked: the variants that passed verify, ranked by the "
                f"geometric mean of their TFLOP/s over its cases; a change is proposed when the fastest beats the "
                f"default tile by at least {MIN_GAIN * 100:.0f} % (less is within the noise of one run). A variant that "
                "failed verify is never a candidate. fp16 is not benchmarked: its defaults stay as they are.", ""]
    for kernel, changes in changes_of.items():
        source_list = Instantiations(source, kernel)
        edits = source_list.edit(changes) if source_list.found else []
        if not edits:
            out += [f"{source_list.path} has no FAPROBE_{kernel.upper()}_INSTANTIATIONS line to edit here; make these "
                    f"cuda.{kernel}'s defaults:", ""]
            out += [f"- {dtype} head_dim {head_dim} {mask}: {tile}" for (dtype, head_dim, mask), tile in sorted(changes.items())]
            out.append("")
            continue
        out += [f"In {source_list.path}, the list of instantiations (its last column: the masks plain cuda.{kernel} "
                "runs each tile for):", "", "```diff"]
        for old, new in edits:
            out += ["-" + line for line in old] + ["+" + line for line in new]
        out += ["```", ""]
    if not changes_of and any(median_of(r) for r in run.bench):
        out += [f"No change proposed: every default is the fastest verified tile, or within {MIN_GAIN * 100:.0f} % of it.", ""]
    return rows, out


def tune_md(run, source):
    out = header(run) + implementations(run) + case_tables(run) + targets(run) + proposals(run, source)[1]
    return "\n".join(out).rstrip() + "\n"


def summary_md(run, source):
    gpu, name = run.gpu()
    out = [f"# faprobe device tune: {name}", "", f"- {gpu}"]
    for file in ("nvidia-smi.csv",):
        rows = list(csv.reader(read(os.path.join(run.work, "env", file)).splitlines()))
        for row in rows[1:]:
            out.append("- nvidia-smi: " + ", ".join(f"{h.strip()} {v.strip()}" for h, v in zip(rows[0], row)))
    out += [f"- note: {note}" for note in run.notes]
    rows = steps(run.work)
    out += ["", "## Steps", ""]
    out += table(["step", "status", "seconds"], [(n, s if s == "pass" else f"**{s}**", t) for n, s, t in rows])
    out += ["", f"{sum(s == 'pass' for _, s, _ in rows)} of {len(rows)} steps passed, "
                f"{sum(int(t) for _, _, t in rows if t.isdigit())} s in steps.", ""]
    verdicts = {n: run.verdict(n)[0] for n in run.tuned}
    failed = [n for n, passed in verdicts.items() if passed is False]
    out += [f"Verify: {sum(p is True for p in verdicts.values())} of {len(verdicts)} implementations verified"
            + (f"; failed (not timed): {', '.join(failed)}" if failed else "")
            + (f"; {sum(p is None for p in verdicts.values())} without a verdict (no case ran, or not verified yet)"
               if None in verdicts.values() else "") + ".", ""]
    out += targets(run)
    rows, _ = proposals(run, source)
    changes = [r for r in rows if "change" in r[-1] or "set " in r[-1]]
    if rows:
        out += [f"## Proposed defaults: {len(changes)} change(s) of {len(rows)} (tune.md has the table and the lines)", ""]
        out += [f"- {r[0]} {r[1]} d{r[2]} {r[3]}: {r[-1]}" for r in changes] or [
            "- none" + (": an emulated run times nothing" if run.target == "emu" else "")]
        out.append("")
    out += [f"**{COMPARE_WARNING}**", "", "Everything is in device-tune.tar.gz: tune.md, list.json, plan/, verify/, "
            "bench/, peers/, logs/."]
    return "\n".join(out).rstrip() + "\n"


def write(path, text):
    if path in (None, "-"):
        sys.stdout.write(text)
        return
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tune_table.py", description=__doc__.split("\n")[0])
    parser.add_argument("work", metavar="WORKDIR")
    parser.add_argument("--out", help="tune.md (default: stdout)")
    parser.add_argument("--summary", help="also write the short summary here")
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="the source tree whose kernels/cuda/<kernel>/CMakeLists.txt lists the tiles")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.work):
        print(f"tune_table.py: {args.work}: not a directory", file=sys.stderr)
        return 2
    run = Run(args.work)
    write(args.out, tune_md(run, args.source))
    if args.summary:
        write(args.summary, summary_md(run, args.source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
