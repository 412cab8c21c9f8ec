#!/usr/bin/python3
"""Plot a faprobe sweep: peak memory, median time and GFLOP/s against sequence length.

Usage: scripts/plot.py RESULTS [RESULTS ...] [--out-dir DIR] [--prefix NAME] [--plots LIST] [--describe FILE]

RESULTS is a `faprobe sweep --json FILE` document (records plus the run's metadata: host, devices,
command, version, time, rates) or an `--out FILE.jsonl` file (one record per line, schema "faprobe/1");
several are drawn together (faprobe's records beside a peer's, such as scripts/peers_torch.py's torch.*
records). The PNGs are written to DIR (default: the directory of the first RESULTS), named NAME + memory.png,
NAME + time.png and NAME + gflops.png (default NAME: the file name of the first RESULTS without its
extension, plus "-": results/h200.json -> results/h200-memory.png). When the records hold both modes,
prefill and decode get figures of their own, the mode ending the name: NAME + memory-prefill.png, NAME +
memory-decode.png, and so on (a mode whose records are all unsupported gets no figures; stderr says so).
Each file written is named on standard output. --plots chooses among memory,
time, gflops (the default three), tflops and gbps.

  memory  peak memory vs seq_k, log-log, one line per implementation: measured peak for cases that
          ran, the predicted peak of skipped cases faded, and O(S), O(S^2) guide slopes anchored at the
          first measured point; the axis in one unit (MB, GB, ...) that its ticks are written in.
  time    median time vs seq, log-log, in one unit (s, ms, µs), error bars from the first to the third
          quartile; the predicted time of skipped cases faded.
  gflops  GFLOP/s vs seq, log x (log y too when the records' rates differ by more than 100x: decided on
          the records alone, so a --json document and its JSONL records get the same scale); on prefill
          figures of CPU records, the host's fp32 GEMM rate that faprobe measured for the run (the --json
          document's rates.fp32_gemm_gflops) as a labelled dotted line, so a reader sees how close each
          kernel is.
  tflops  TFLOP/s vs seq, one figure per (dtype, head_dim, mask): NAME + tflops-bf16-d128-causal.png
          (+ -prefill, -decode when the records hold both modes); peers' lines (implementations not named
          cpu.*, cuda.* or emu.*) dashed.
  gbps    decode only (mode decode, equal key lengths): GB/s (minimum bytes / median time) vs seq_k, one
          figure per (dtype, head_dim, heads, kv_heads, batch) with two or more key lengths, NAME +
          gbps-bf16-d128-h32kv8-b1.png, and vs batch per (..., seq_k) with two or more batches, NAME +
          gbps-bf16-d128-h32kv8-s4k-by-batch.png; one line per implementation × page size (contiguous or
          paged; page sizes differ by marker fill), peers dashed, and the device's copy bandwidth as a
          dotted line (the --json document's rates.gpu.copy_gbytes_per_s, else gbytes_per_s /
          bandwidth_fraction of the records); with CPU records the host's (rates.memory_gbytes_per_s, else
          the same quotient over cpu.* records). Points above it read data that stayed in cache; the
          legend says so.
  samples one case's raw samples (time_s.samples_s), NAME + samples.png: the run order (sample index vs
          seconds: drift, warm-up, throttling show as trends and steps) beside a histogram of the same
          samples, one colour per record — the case as BASE and NEW of `faprobe compare`, when both files
          are given. --select FIELD=VALUE,... chooses the case (impl and case fields: impl=cpu.tiled,
          seq_k=4096,dtype=bf16); every record it matches is drawn, and it must match at least one with
          raw samples.
A measured ceiling is a band from low to high when the --json document's rates give its spread over the
calibration's repetitions (fp32_gemm_gflops_range, memory_gbytes_per_s_range, gpu.copy_gbytes_per_s_range:
[low, high]), labelled with rates.threads when present. Each ceiling drawn is also named on standard
output ("NAME-gflops.png: fp32 GEMM ceiling 311 GFLOP/s, 1 thread (range 290–320 over its repetitions)").

Every implementation has its own colour, marker and line style, the same in every figure of one run of the
script (thick lines and big markers under thin ones and small ones, so that lines with equal values stay
visible; the legend names a line that lies on another: "cpu.tiled (≈ cpu.naive)"). When records span
several shapes (batch, heads, head_dim, dtype, mask, ... differ), each shape gets its own line with a
compact label (marker fill telling shapes apart), or its own panel when there would be too many lines.
When batch · seq is constant along lines (a fixed token count, as in configs/h200-quick.json), lines are
keyed by tokens. Each figure's footer gives the source file, faprobe's version and the run's time, and
lists what the figure does not draw and why: skipped, unsupported and failed pairs (implementations, the
lengths, and the record's reason), summarised; and how many of its timed points were measured while the
machine was busy (time_s.contended).

--describe FILE writes what each figure drew as JSON, read back from the figures: per file its kind, mode,
title, axes (labels, scales, limits, tick labels), series (implementation, colour, marker, line style),
ceilings, footer lines and the pairs not plotted; and the style of each implementation.

Needs Python 3 with matplotlib and numpy only; on Debian: apt-get install python3-matplotlib
python3-numpy, and run it with the system interpreter (/usr/bin/python3 scripts/plot.py ...) if the
python3 first on PATH lacks them. Exit status: 0 plots written; 2 missing or malformed input (one line on
stderr naming the file, and the line for JSONL).
"""

import argparse
import json
import math
import os
import re
import sys

SCHEMA = "faprobe/1"
STATUSES = ("ok", "mismatch", "skipped", "unsupported", "failed")
MEASURED = ("ok", "mismatch")  # statuses whose record carries measurements
SAME = "="  # stands for seq_q == seq_k in a line's identity

# Case fields in the order labels show them; fields not listed (added later) follow alphabetically.
AXIS_ORDER = ("seq_q", "seq_k", "tokens", "batch", "heads", "kv_heads", "head_dim", "dtype", "mask", "mode",
              "page_size", "seqlens", "splits", "seed")


class InputError(Exception):
    """Missing or malformed input: reported in one line, exit status 2."""


# ---------------------------------------------------------------------------------------------------------
# Reading


def check_record(record, where):
    if not isinstance(record, dict):
        raise InputError(f"{where}: a record must be a JSON object")
    if not isinstance(record.get("impl"), str) or not record["impl"]:
        raise InputError(f"{where}: record has no 'impl' name")
    case = record.get("case")
    if not isinstance(case, dict):
        raise InputError(f"{where}: record has no 'case' object")
    for axis in ("seq_q", "seq_k"):
        value = case.get(axis)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"{where}: case.{axis} must be a positive integer, got {json.dumps(value)}")
    if record.get("status") not in STATUSES:
        raise InputError(
            f"{where}: status {json.dumps(record.get('status'))} is not one of {', '.join(STATUSES)}")
    return record


def load_results(path):
    """Returns (records, metadata) from a --json document or an --out JSONL file."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file")
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file (expected faprobe JSON or JSONL)")
    if not text.strip():
        raise InputError(f"{path}: empty file, no records")

    lines = text.splitlines()
    first = next(line.strip() for line in lines if line.strip())
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        if first == "{" or first.startswith('{"schema"') or first.startswith("["):
            # A pretty-printed (--json) document: its own line numbers are the helpful ones.
            raise InputError(f"{path}:{error.lineno}: malformed JSON document ({error.msg})")
        document = None

    if isinstance(document, dict) and "records" in document:
        schema = document.get("schema")
        if not isinstance(schema, str) or schema.split("/")[0] != "faprobe":
            raise InputError(f"{path}: schema {json.dumps(schema)} is not a faprobe result (expected {SCHEMA})")
        if schema != SCHEMA:
            print(f"plot.py: {path}: schema {schema}, this script reads {SCHEMA}; trying anyway", file=sys.stderr)
        if not isinstance(document["records"], list):
            raise InputError(f"{path}: 'records' is not a list")
        records = [check_record(r, f"{path}: record {i + 1}") for i, r in enumerate(document["records"])]
        metadata = {k: v for k, v in document.items() if k != "records"}
        return records, metadata
    if document is not None and not (isinstance(document, dict) and "schema" not in document):
        raise InputError(f"{path}: a JSON document without 'records' (expected a faprobe --json or --out file)")

    # JSONL: one record per line. Like faprobe's own reader, a last line cut short by a kill is dropped.
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            if number == len(lines) and not line.rstrip().endswith("}"):
                print(f"plot.py: {path}:{number}: ignoring a last line cut short", file=sys.stderr)
                break
            raise InputError(f"{path}:{number}: not valid JSON ({error.msg}, column {error.colno})")
        records.append(check_record(record, f"{path}:{number}"))
    return records, {}


def number(mapping, key):
    """A finite float from mapping[key], or None (absent, null, not a number)."""
    if not isinstance(mapping, dict):
        return None
    value = mapping.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


# ---------------------------------------------------------------------------------------------------------
# Formatting


def fmt_seq(value):
    """Sequence lengths as the CLI writes them: 512, 1k, 1.5k, 64k, 1m (k = 1024)."""
    if value <= 0:
        return ""
    for scale, suffix in ((1 << 20, "m"), (1 << 10, "k")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def fmt_bytes(value):
    if value <= 0:
        return "0 B"
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} B"


def fmt_seconds(value):
    if value <= 0:
        return "0"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def fmt_count(value):
    return fmt_seq(value) if isinstance(value, int) and value >= 1024 and value % 256 == 0 else str(value)


def axis_parts(items, shown):
    """Short text for the (axis, value) pairs of a line's identity whose axis is in `shown`."""
    values = dict(items)
    names = [n for n in AXIS_ORDER if n in values] + sorted(n for n in values if n not in AXIS_ORDER)
    parts = []
    for name in names:
        value = values[name]
        if name not in shown:
            continue
        if name == "heads":
            # GQA reads "h8 kv2"; MHA, where both vary together, just "h8".
            kv = values.get("kv_heads")
            parts.append(f"h{value}" + (f" kv{kv}" if "kv_heads" in shown and kv != value else ""))
        elif name == "kv_heads":
            if "heads" not in shown:
                parts.append(f"kv{value}")
        elif name == "batch":
            parts.append(f"b{value}")
        elif name == "head_dim":
            parts.append(f"d{value}")
        elif name == "seq_q":
            parts.append("sq=sk" if value == SAME else f"sq {fmt_count(value)}")
        elif name == "seq_k":
            parts.append(f"sk {fmt_count(value)}")
        elif name == "mask":
            parts.append({"none": "no mask"}.get(value, str(value)))
        elif name in ("dtype", "mode"):
            parts.append(str(value))
        elif name == "page_size":
            parts.append(f"page {value}" if value else "contiguous")
        elif name == "seqlens":
            parts.append("varlen")
        elif name == "splits":
            parts.append(f"{value} splits" if value else "heuristic splits")
        elif name == "seed":
            parts.append(f"seed {value}")
        elif name == "tokens":
            parts.append(f"{fmt_count(value)} tokens")
        else:
            parts.append(f"{name}={value}")
    return parts


def describe_machine(metadata, records):
    """"AMD EPYC 9654 (16 cores, 135 GB) · NVIDIA H200" from the --json metadata, else the records' devices."""
    parts = []
    host = metadata.get("host")
    if isinstance(host, dict):
        model = host.get("cpu_model") or host.get("model") or host.get("name")
        extra = []
        if isinstance(host.get("cores"), int):
            extra.append(f"{host['cores']} cores")
        memory = number(host, "memory_total_bytes")
        if memory:
            extra.append(fmt_bytes(memory))
        if model:
            parts.append(str(model).strip() + (f" ({', '.join(extra)})" if extra else ""))
    elif isinstance(host, str) and host:
        parts.append(host)
    devices = metadata.get("devices")
    names = []
    if isinstance(devices, list):
        names = [str(d.get("name")) for d in devices if isinstance(d, dict) and d.get("name")]
    if not names and not parts:
        names = sorted({str(r.get("device")) for r in records if r.get("device") not in (None, "", "cpu")})
    parts.extend(dict.fromkeys(names))  # unique, in order
    return " · ".join(parts)


# ---------------------------------------------------------------------------------------------------------
# Series: one line per (implementation, every case axis but the one on x)


class Series:
    def __init__(self, impl, identity, order):
        self.impl = impl
        self.identity = identity  # tuple of (axis, value) pairs
        self.order = order  # where its first record is in the input
        self.records = []  # (x, record), sorted by x

    def points(self, statuses, value):
        """(x, y, record) for records with one of `statuses` whose value(record) is positive."""
        out = []
        for x, record in self.records:
            if record["status"] in statuses:
                y = value(record)
                if y is not None and y > 0:
                    out.append((x, y, record))
        return out


def hashable(value):
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def build_series(records, x_axis=None):
    """Returns (series list, x axis name, axes that vary between lines). x_axis: seq_k or seq_q (default:
    seq_q when only it varies, else seq_k), or batch."""
    # A rerun appended to the same JSONL repeats a case: the last record of an (impl, case) wins.
    latest = {}
    for record in records:
        latest[(record["impl"], json.dumps(record["case"], sort_keys=True))] = record
    records = [r for r in latest.values() if r["status"] not in ("unsupported", "failed")]

    seq_k = {r["case"]["seq_k"] for r in records}
    seq_q = {r["case"]["seq_q"] for r in records}
    if x_axis is None:
        x_axis = "seq_q" if len(seq_k) == 1 and len(seq_q) > 1 else "seq_k"

    def identity_of(case, tokens):
        identity = []
        for name, value in case.items():
            if name == x_axis or (tokens and name == "batch"):
                continue
            if name == "seq_q" and value == case["seq_k"]:
                value = SAME
            identity.append((name, hashable(value)))
        if tokens:
            identity.append(("tokens", case["batch"] * case[x_axis]))
        return tuple(sorted(identity))

    # A sweep that keeps batch · seq fixed (configs/h200-quick.json: 16k tokens per call) would give one
    # point per line; when batch · seq is the same along every line, lines are keyed by tokens, not batch.
    lines = {}
    for record in records:
        without_batch = tuple(item for item in identity_of(record["case"], False) if item[0] != "batch")
        lines.setdefault((record["impl"], without_batch), []).append(record["case"])
    tokens = x_axis != "batch" and any(len({c["batch"] for c in cases}) > 1 for cases in lines.values()) and all(
        len({c["batch"] * c[x_axis] for c in cases}) == 1 for cases in lines.values())

    series = {}
    for index, record in enumerate(records):
        case = record["case"]
        identity = identity_of(case, tokens)
        key = (record["impl"], identity)
        if key not in series:
            series[key] = Series(record["impl"], identity, index)
        series[key].records.append((case[x_axis], record))
    for line in series.values():
        line.records.sort(key=lambda pair: pair[0])

    # An axis varies when lines disagree on it, or when some lines lack it (a field newer files add).
    values = {}
    for line in series.values():
        for name, value in line.identity:
            values.setdefault(name, set()).add(value)
    varying = {name for name, seen in values.items()
               if len(seen) > 1 or any(name not in dict(s.identity) for s in series.values())}
    # Implementations alphabetically (stable colours); shapes in the order the sweep ran them.
    first_seen = {}
    for line in sorted(series.values(), key=lambda s: s.order):
        first_seen.setdefault(line.identity, len(first_seen))
    ordered = sorted(series.values(), key=lambda s: (s.impl, first_seen[s.identity]))
    return ordered, x_axis, varying


# ---------------------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------------------
# Styles: one per implementation, the same in every figure a run of this script writes

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
# matplotlib's tab10 then Dark2, written out so that styles need no matplotlib.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")
# (name, dash pattern, marker size, line width) for faprobe's own implementations, in turn: thick lines and
# big markers drawn first, thin ones on top, so that lines with the same values (cpu.decode's and
# cpu.tiled's decode memory) show as a thick line with a thinner one on it, markers as concentric shapes.
WEIGHTS = (("solid", "-", 9.0, 2.8), ("dashdot", "-.", 7.5, 2.2), ("dotted", ":", 6.0, 2.0),
           ("dashdotdotted", (0, (5, 1.5, 1, 1.5, 1, 1.5)), 4.5, 1.6))
PEER_LINE = ("dashed", "--")  # other programs' records (peers_torch.py's torch.*), whatever their weight
# Fill styles tell shapes apart when one panel holds several shapes of an implementation.
FILLS = ("full", "none", "left", "bottom", "right", "top")
SAME_VALUES = 0.02  # lines within 2 % of each other at every common x are named as lying on each other


def implementation_styles(impls):
    """impl -> {color, marker, linestyle (its name), dashes, markersize, linewidth, zorder}: distinct colour,
    marker and line style per implementation, in the order the records first name them (a sweep's own order:
    cpu.naive, cpu.tiled, then the decode ones), peers dashed."""
    styles = {}
    for index, impl in enumerate(dict.fromkeys(impls)):
        name, dashes, size, width = WEIGHTS[index % len(WEIGHTS)]
        if is_peer(impl):
            name, dashes = PEER_LINE
        styles[impl] = {"color": PALETTE[index % len(PALETTE)], "marker": MARKERS[index % len(MARKERS)],
                        "linestyle": name, "dashes": dashes, "markersize": size, "linewidth": width,
                        "zorder": 3 + 0.1 * (index % len(WEIGHTS))}
    return styles


def limit_of(mapping, key):
    """(value, low, high) of a measured limit: mapping[key] and its spread mapping[key + '_range'] = [low, high]
    (each None when absent or malformed)."""
    value = number(mapping, key)
    spread = mapping.get(key + "_range") if isinstance(mapping, dict) else None
    low = high = None
    if isinstance(spread, list) and len(spread) == 2 and all(number({"v": v}, "v") for v in spread):
        low, high = sorted(float(v) for v in spread)
        if low <= 0:
            low = high = None
    return value, low, high


def threads_text(rates):
    threads = rates.get("threads") if isinstance(rates, dict) else None
    if isinstance(threads, int) and not isinstance(threads, bool) and threads > 0:
        return f"{threads} thread" + ("" if threads == 1 else "s")
    return ""


def fmt_tick(value):
    """A tick in the axis label's unit: 0.01, 0.5, 2, 15, 1,000, 20,000."""
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def pick_unit(values, units):
    """The (scale, name) of `units` (largest first) whose ticks read best: as few decades below 0.1 and above
    10,000 as can be, the larger unit on a tie. Peak memory from 0.5 MB to 22 GB reads in MB (1 to 10,000),
    from 270 MB to 137 GB in GB (0.2 to 200); decode times from 10 µs to 2 ms in µs."""
    positive = [v for v in values if v > 0]
    if not positive:
        return units[-1]
    low, high = min(positive), max(positive)

    def decades_out(unit):
        scale = unit[0]
        return max(0.0, math.log10(0.1 * scale / low)) + max(0.0, math.log10(high / scale / 1e4))

    return min(units, key=decades_out)  # min keeps the first (largest) of equals


BYTE_UNITS = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "bytes"))
SECOND_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


# ---------------------------------------------------------------------------------------------------------
# Drawing


class Plotter:
    def __init__(self, plt, ticker, line2d, records, metadata, source, styles, described, x_axis=None,
                 facet=None, mode=None):
        """x_axis: as build_series; facet: one panel per shape (True), one panel (False), or by line count;
        mode: the mode every record has (prefill, decode), named in the titles; described: where each figure
        saved appends what it drew (--describe)."""
        self.plt, self.ticker, self.Line2D = plt, ticker, line2d
        self.metadata = metadata
        self.records = records
        self.styles = styles
        self.described = described
        self.mode = mode
        self.series, self.x_axis, self.varying = build_series(records, x_axis)
        latest = {}
        for record in records:
            latest[(record["impl"], json.dumps(record["case"], sort_keys=True))] = record
        self.unique = list(latest.values())
        self.superseded = len(records) - len(latest)
        self.impls = sorted({s.impl for s in self.series})
        self.shapes = list(dict.fromkeys(s.identity for s in sorted(self.series, key=lambda s: s.order)))
        # Lines in the order of the styles (the thick ones first, so that a thin line lying on one is named as
        # lying on it), shapes in the order the sweep ran them.
        order = list(styles)
        self.series.sort(key=lambda s: (order.index(s.impl), self.shapes.index(s.identity)))
        # Panels: one per shape when one axes would hold too many lines, else one panel.
        self.facet = len(self.shapes) > 1 and len(self.impls) * len(self.shapes) > 8 if facet is None else facet
        self.machine = describe_machine(metadata, records)
        all_names = {name for s in self.series for name, _ in s.identity}
        constant = all_names - self.varying - {"seed"}
        if all(dict(s.identity).get("seq_q") == SAME for s in self.series):
            constant.discard("seq_q")  # the x label says seq_q = seq_k
        if mode:
            constant.discard("mode")  # the title says it
        self.constant_text = " · ".join(axis_parts(self.series[0].identity, constant)) if self.series else ""

        if self.x_axis == "seq_k":
            everywhere_same = all(dict(s.identity).get("seq_q") == SAME for s in self.series)
            self.x_label = "sequence length S = seq_q = seq_k" if everywhere_same else "key length S = seq_k"
        elif self.x_axis == "batch":
            self.x_label = "batch"
        else:
            self.x_label = "query length S = seq_q"
        if self.x_axis != "batch":
            self.x_label += " (k = 1024)"
        self.x_name = self.x_label.split(" S = ")[0]

        provenance = [os.path.basename(source)]
        if metadata.get("version"):
            revision = metadata.get("git_revision")
            known = revision not in (None, "", "unknown")
            provenance.append(f"faprobe {metadata['version']}" + (f" ({revision})" if known else ""))
        if metadata.get("time"):
            provenance.append(str(metadata["time"]))
        self.provenance = " · ".join(provenance)

    # -- figure scaffolding ------------------------------------------------------------------------------

    def style(self, line):
        """matplotlib keywords for a series: its implementation's colour, marker and line style; several
        shapes of one implementation in one panel differ by marker fill (by colour and marker when the figure
        has a single implementation)."""
        style = self.styles[line.impl]
        kwargs = {"color": style["color"], "marker": style["marker"], "linestyle": style["dashes"],
                  "markersize": style["markersize"], "linewidth": style["linewidth"], "zorder": style["zorder"]}
        if not self.facet and len(self.shapes) > 1:
            shape = self.shapes.index(line.identity)
            if len(self.impls) == 1:
                kwargs["color"] = PALETTE[shape % len(PALETTE)]
                kwargs["marker"] = MARKERS[shape % len(MARKERS)]
            else:
                kwargs["fillstyle"] = FILLS[shape % len(FILLS)]
        return kwargs

    def label(self, line):
        if self.facet:
            return line.impl
        shape = " ".join(axis_parts(line.identity, self.varying))
        return f"{line.impl} · {shape}" if shape else line.impl

    def figure(self, kind, title):
        plt = self.plt
        panels = self.shapes if self.facet else [None]
        if self.facet:
            columns = 2 if len(panels) == 4 else min(3, len(panels))
            rows = math.ceil(len(panels) / columns)
            fig, grid = plt.subplots(rows, columns, figsize=(4.3 * columns + 1.0, 3.4 * rows + 1.2),
                                     sharex=True, sharey=True, squeeze=False, layout="constrained")
            axes = list(grid.flat)
            for ax in axes[len(panels):]:
                ax.set_visible(False)
            for ax, shape in zip(axes, panels):
                ax.set_title(" ".join(axis_parts(shape, self.varying)), fontsize=9)
            axes = axes[:len(panels)]
        else:
            fig, ax = plt.subplots(figsize=(10, 5.8), layout="constrained")
            axes = [ax]
        heading = [f"faprobe: {self.mode + ' · ' if self.mode else ''}{title}"]
        detail = " · ".join(t for t in (self.machine, self.constant_text) if t)
        if detail:
            heading.append(detail)
        fig.suptitle("\n".join(heading), fontsize=11)
        # What this figure draws, for the footer and --describe: records drawn (measured or predicted),
        # series (label, implementation, style), ceilings, the note.
        self.drawn, self.predicted = set(), set()
        self.info = {"kind": kind, "mode": self.mode, "title": heading[0], "subtitle": detail, "series": [],
                     "ceilings": []}
        self.limits = []  # ceilings: in the y range, not in the choice of scale
        self.ceiling_handles = []  # (legend handle, label) of each ceiling drawn
        self.on_panel = {}  # panel -> [(impl, {x: y})] drawn so far, to name lines that lie on others
        self.note = ""
        return fig, dict(zip(panels, axes))

    def panel_of(self, panels, line):
        return panels[line.identity] if self.facet else panels[None]

    def draw_series(self, ax, line, points, draw, **extra):
        """Draws a series' measured points with draw(xs, ys, **style) (ax.plot, ax.errorbar), labelled (and
        named as lying on an earlier line when its values are within 2 % of it at every common x)."""
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        values = dict(zip(xs, ys))
        label = self.label(line)
        on = None
        # (Not in panels: their legend is shared, and a line may lie on another in one panel only.)
        for other_label, other in [] if self.facet else self.on_panel.get(id(ax), []):
            common = [x for x in values if x in other]
            if len(common) == len(values) and len(common) >= 2 and all(
                    abs(values[x] - other[x]) <= SAME_VALUES * max(values[x], other[x]) for x in common):
                on = other_label
                break
        self.on_panel.setdefault(id(ax), []).append((label, values))
        kwargs = self.style(line)
        kwargs.update(extra)
        legend = label + (f" (≈ {on})" if on else "")
        draw(xs, ys, label=legend, **kwargs)
        self.drawn.update(id(p[2]) for p in points)
        style = self.styles[line.impl]
        self.info["series"].append({
            "label": legend, "impl": line.impl, "color": kwargs["color"], "marker": kwargs["marker"],
            "linestyle": style["linestyle"], "markersize": kwargs["markersize"], "linewidth": kwargs["linewidth"],
            "fillstyle": kwargs.get("fillstyle", "full"), "points": len(points), "same_values_as": on,
            "panel": " ".join(axis_parts(line.identity, self.varying)) if self.facet else None})

    def draw_predicted(self, ax, line, measured, predicted):
        """Predicted values of skipped cases, faded, joined to the last measured point before them."""
        style = self.style(line)
        chain = [p for p in measured if p[0] < predicted[0][0]][-1:] + predicted
        ax.plot([p[0] for p in chain], [p[1] for p in chain], color=style["color"], linestyle=style["linestyle"],
                linewidth=style["linewidth"] * 0.6, alpha=0.45, zorder=style["zorder"] - 1)
        ax.plot([p[0] for p in predicted], [p[1] for p in predicted], color=style["color"], marker=style["marker"],
                markersize=style["markersize"], linestyle="none", alpha=0.35, zorder=style["zorder"] - 1,
                label=None if measured else self.label(line) + " (predicted only)")
        self.predicted.update(id(p[2]) for p in predicted)

    def x_text(self, value):
        return str(value) if self.x_axis == "batch" else fmt_seq(value)

    def not_plotted(self, quantity):
        """What this figure leaves out, summarised: [{impls, status, count, at (x values), reason, drawn_as}],
        one entry per (status, reason up to its numbers, x values), implementations with equal ones together."""
        every_x = sorted({r["case"].get(self.x_axis) for r in self.unique})
        groups = {}
        for record in self.unique:
            status = record["status"]
            if id(record) in self.drawn:
                continue
            drawn_as = "predicted" if id(record) in self.predicted else None
            reason = str(record.get("reason") or "").strip()
            if status in MEASURED and not drawn_as:
                reason = f"no {quantity} in the record"
            reason = reason or "no reason given"
            key = (status, re.sub(r"\d+(?:\.\d+)?(?: ?(?:[kMGTP]i?B|B|s|ms|µs|ns)\b)?", "#", reason), drawn_as)
            groups.setdefault(key, {}).setdefault(record["impl"], []).append(record)
        entries = []
        for (status, _, drawn_as), by_impl in groups.items():
            merged = {}
            for impl, records in sorted(by_impl.items()):
                merged.setdefault(tuple(sorted({r["case"].get(self.x_axis) for r in records})), []).append(
                    (impl, records))
            for at, members in merged.items():
                records = sorted((r for _, rs in members for r in rs), key=lambda r: r["case"].get(self.x_axis))
                reasons = list(dict.fromkeys(str(r.get("reason") or "").strip() for r in records))
                entries.append({"impls": [impl for impl, _ in members], "status": status, "count": len(records),
                                "at": list(at), "every": list(at) == every_x and len(at) > 1,
                                "reason": reasons[0] if status not in MEASURED or drawn_as else
                                f"no {quantity} in the record", "reasons": len(reasons), "drawn_as": drawn_as})
        entries.sort(key=lambda e: (STATUSES.index(e["status"]), e["impls"]))
        return entries

    def not_plotted_text(self, entries):
        parts = []
        for entry in entries:
            at = entry["at"]
            if entry["every"]:
                where = "every length" if self.x_axis != "batch" else "every batch"
            elif len(at) > 6:
                where = f"{self.x_text(at[0])}–{self.x_text(at[-1])} ({len(at)} values)"
            else:
                where = ", ".join(self.x_text(x) for x in at)
            reason = entry["reason"]
            if len(reason) > 150:
                reason = reason[:150].rstrip() + " …"
            if entry["reasons"] > 1:
                reason = f"e.g. at {self.x_text(at[0])}: {reason}"
            drawn = " (drawn faded: the prediction)" if entry["drawn_as"] else ""
            count = f" ({entry['count']} records)" if len(entry["impls"]) > 1 else ""
            parts.append(f"{', '.join(entry['impls'])}: {entry['status']} at {where}{count}{drawn} — {reason}")
        if self.superseded:
            parts.append(f"{self.superseded} earlier record(s) of a repeated (implementation, case): the last drawn")
        return parts

    def finish(self, fig, panels, y_label, y_values, x_values, unit=(1.0, ""), y_format=fmt_tick, log_y=True,
               note=None, extra_handles=()):
        """Scales, limits, ticks and labels of every panel, and the legend. y_label gets the unit the ticks are
        written in: unit = (scale, name), ticks show value / scale."""
        ticker = self.ticker
        axes = list(panels.values())
        # Every length a record names but for unsupported ones, so that the figures of one mode share an x range
        # and a length skipped everywhere shows as a gap (its reason in the footer).
        tried = [r["case"].get(self.x_axis) for r in self.unique if r["status"] != "unsupported"]
        x_values = sorted(set(x_values) | ({x for x in tried if isinstance(x, int) and x > 0} if x_values else set()))
        scale, unit_name = unit
        y_label = f"{y_label} ({unit_name})" if unit_name else y_label
        self.note = note or ""
        if not y_values:
            for ax in axes:
                ax.text(0.5, 0.5, "no records to plot", ha="center", va="center", transform=ax.transAxes,
                        color="0.4")
                ax.set_xticks([])
                ax.set_yticks([])
            return
        # Explicit limits, so that guide lines and shared panels never stretch the view.
        lo_x, hi_x = x_values[0], x_values[-1]
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_xlim(lo_x / 1.25, hi_x * 1.25)
            ticks = x_values
            if len(ticks) > 10:
                powers = [2.0 ** p for p in range(math.floor(math.log2(lo_x)), math.ceil(math.log2(hi_x)) + 1)]
                ticks = powers[::math.ceil(len(powers) / 10)]
            ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: self.x_text(v)))
            ax.xaxis.set_minor_locator(ticker.NullLocator())
            ax.grid(True, which="major", color="0.88", linewidth=0.8)
            ax.set_axisbelow(True)
        in_view = list(y_values) + self.limits
        lo_y, hi_y = min(in_view), max(in_view)
        if log_y:
            lo_y, hi_y = lo_y / 1.6, hi_y * 1.6
            decades = math.log10(hi_y / lo_y)
            for ax in axes:
                ax.set_yscale("log")
                ax.set_ylim(lo_y, hi_y)
                # Labelled ticks: every decade on a tall axis, 1-2-5 on a short one, denser on a tiny one.
                if decades > 3.2:
                    subs = (1.0,)
                elif decades > 0.8:
                    subs = (1.0, 2.0, 5.0)
                else:
                    subs = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
                ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
                minor = ticker.LogLocator(base=10, subs="all") if decades < 6 else ticker.NullLocator()
                ax.yaxis.set_minor_locator(minor)
                ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: y_format(v / scale)))
                ax.yaxis.set_minor_formatter(ticker.NullFormatter())
                ax.grid(True, which="minor", axis="y", color="0.95", linewidth=0.5)
        else:
            for ax in axes:
                ax.set_ylim(0, hi_y * 1.12)
                ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: y_format(v / scale)))
        # Axis labels on the outer panels only: the lowest panel of each column, the first column.
        columns = axes[0].get_subplotspec().get_gridspec().ncols
        for index, ax in enumerate(axes):
            if index + columns >= len(axes):
                ax.set_xlabel(self.x_label)
                ax.tick_params(labelbottom=True)
            if index % columns == 0:
                ax.set_ylabel(y_label)
        handles, labels = [], []
        for ax in axes:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                if label not in labels:
                    handles.append(handle)
                    labels.append(label)
        for handle in extra_handles:
            handles.append(handle)
            labels.append(handle.get_label())
        for handle, label in self.ceiling_handles:
            handles.append(handle)
            labels.append(label)
        if handles:
            fig.legend(handles, labels, loc="upper left",
                       bbox_to_anchor=(1.0, 0.93), fontsize=8, frameon=False)

    def ceiling(self, panels, limit, name, unit, path, context):
        """A measured limit (a GEMM rate, a copy bandwidth): limit = (value, low, high) from limit_of. A
        dotted line at the value, and a band from low to high when the run recorded the spread over its
        repetitions; labelled with the thread count when known and `context` (what a point above means).
        Named on standard output too ("NAME: fp32 GEMM ceiling 98 GFLOP/s")."""
        value, low, high = limit
        threads = threads_text(self.metadata.get("rates"))
        shown = [v for v in (value, low, high) if v]
        if not shown:
            return
        self.limits += shown
        head = f"{name} {value:.0f} {unit}" if value else f"{name} {low:.0f}–{high:.0f} {unit}"
        spread = f"range {low:.0f}–{high:.0f} over its repetitions" if low and value else ""
        text = ", ".join(t for t in (head, threads) if t)
        detail = "; ".join(t for t in ("measured", spread) if t)
        for ax in panels.values():
            if low:
                ax.axhspan(low, high, color="tab:red", alpha=0.12, linewidth=0, zorder=0.5)
            if value:
                ax.axhline(value, color="tab:red", linestyle=":", linewidth=1.1, zorder=1)
            ax.text(0.01, value or high, f" {text}", transform=ax.get_yaxis_transform(), fontsize=7.5,
                    color="tab:red", va="bottom")
        # In the legend: the line over its band, with what the band is and what a point above it means.
        handle = self.Line2D([], [], color="tab:red", linestyle=":", linewidth=1.1)
        if low:
            from matplotlib.patches import Patch

            handle = (Patch(color="tab:red", alpha=0.25, linewidth=0), handle)
        self.ceiling_handles.append((handle, f"{text}\n({detail})\n{context}"))
        self.info["ceilings"].append({"text": text, "detail": detail, "context": context, "value": value,
                                      "low": low, "high": high, "threads": threads or None})
        print(f"{os.path.basename(path)}: {text}" + (f" ({spread})" if spread else ""))

    def save(self, fig, path, quantity):
        """The footer (the note, where the records come from, what was left out and why), the file, and what
        the figure holds for --describe."""
        import textwrap

        entries = self.not_plotted(quantity)
        lines = []
        if self.note:
            lines.append(self.note)
        lines.append(self.provenance)
        # Points whose samples were taken while the machine was busy (faprobe's time_s.contended): drawn, but
        # their times are partly the scheduler's (peak memory is not a time: not said there).
        busy = [r for r in self.unique if id(r) in self.drawn and (r.get("time_s") or {}).get("contended")
                and self.info["kind"] != "memory"]
        if busy:
            impls = ", ".join(dict.fromkeys(r["impl"] for r in busy))
            lines.append(f"measured while the machine was busy (time_s.contended): {len(busy)} of {len(self.drawn)} "
                         f"points ({impls}); their times are partly the scheduler's")
        left_out = self.not_plotted_text(entries)
        if left_out:
            lines.append("not measured or not plotted:")
            for part in left_out:
                lines += textwrap.wrap(part, 160, initial_indent="  · ", subsequent_indent="    ")
        else:
            lines.append("not plotted: nothing (every record is drawn)")
        fig.text(0.0, -0.01, "\n".join(lines), fontsize=7, color="0.4", ha="left", va="top", linespacing=1.5)
        fig.savefig(path, dpi=130, bbox_inches="tight", pad_inches=0.15)

        def ticks(ax):  # the labelled y ticks in view, as drawn
            low, high = sorted(ax.get_ylim())
            return [t.get_text() for t in ax.get_yticklabels() if t.get_text() and low <= t.get_position()[1] <= high]

        axes = [ax for ax in fig.axes if ax.get_visible()]
        self.described.append(dict(self.info, file=os.path.basename(path), footer=lines, not_plotted=entries,
                                   busy_points=len(busy), axes=[{
            "title": ax.get_title(), "x_label": ax.get_xlabel(), "y_label": ax.get_ylabel(),
            "x_scale": ax.get_xscale(), "y_scale": ax.get_yscale(), "y_limits": list(ax.get_ylim()),
            "y_ticks": ticks(ax)} for ax in axes]))
        self.plt.close(fig)

    def mismatch_handle(self, any_mismatch):
        if not any_mismatch:
            return []
        return [self.Line2D([], [], color="red", marker="x", linestyle="none", markersize=8,
                                label="mismatch (output wrong)")]

    def mark_mismatches(self, ax, points):
        bad = [(x, y) for x, y, record in points if record["status"] == "mismatch"]
        if bad:
            ax.plot(*zip(*bad), linestyle="none", marker="x", color="red", markersize=9, markeredgewidth=1.8,
                    zorder=6)
        return bool(bad)

    def predicted_handle(self):
        return self.Line2D([], [], color="0.35", marker="o", linestyle="-", linewidth=1.0, alpha=0.4,
                           label="predicted (skipped, not measured)")

    # -- the plots ---------------------------------------------------------------------------------------

    def memory(self, path):
        fig, panels = self.figure("memory", f"peak memory vs {self.x_name}")
        peak = lambda r: number(r.get("memory"), "peak_bytes")
        predicted = lambda r: number(r.get("memory"), "predicted_bytes")
        xs, ys, any_mismatch, any_predicted = [], [], False, False
        anchors = {}  # panel -> first measured point
        for line in self.series:
            ax = self.panel_of(panels, line)
            measured = line.points(MEASURED, peak)
            skipped = line.points(("skipped",), predicted)
            if measured:
                self.draw_series(ax, line, measured, ax.plot)
                any_mismatch |= self.mark_mismatches(ax, measured)
                first = min(measured, key=lambda p: (p[0], p[1]))
                if id(ax) not in anchors or (first[0], first[1]) < anchors[id(ax)][1:]:
                    anchors[id(ax)] = (ax, first[0], first[1])
            if skipped:
                any_predicted = True
                self.draw_predicted(ax, line, measured, skipped)
            xs += [p[0] for p in measured + skipped]
            ys += [p[1] for p in measured + skipped]
        # The memory limit as a line when the records come within 100× of it (else it would squeeze them to the
        # bottom of the axes), otherwise in the note.
        limit = number(self.metadata, "mem_limit_bytes")
        note = "grey dashed guides: O(S) and O(S²) through the first measured point"
        if limit and ys and max(ys) * 100 < limit:
            note += f" · memory limit {fmt_bytes(limit)}, above the view"
        elif limit and ys:
            self.limits.append(limit)
            for ax in panels.values():
                ax.axhline(limit, color="tab:red", linestyle=":", linewidth=1.1)
                ax.text(0.01, limit, f" memory limit {fmt_bytes(limit)}", transform=ax.get_yaxis_transform(),
                        fontsize=7.5, color="tab:red", va="bottom")
        extra = self.mismatch_handle(any_mismatch) + ([self.predicted_handle()] if any_predicted else [])
        unit = pick_unit(ys, BYTE_UNITS)
        self.finish(fig, panels, "peak memory", ys, xs, unit=unit, extra_handles=extra, note=note)
        for ax, x0, y0 in anchors.values():
            if max(xs) > x0:  # a slope needs a range of S
                self.guides(ax, x0, y0, max(xs))
        self.save(fig, path, "peak memory")

    def guides(self, ax, x0, y0, x_end):
        """O(S) and O(S²) slopes through (x0, y0), labelled where they leave the view."""
        import numpy as np

        top = ax.get_ylim()[1]
        for power, name in ((1, "O(S)"), (2, "O(S²)")):
            x = np.geomspace(x0, x_end * 1.25, 64)
            y = y0 * (x / x0) ** power
            ax.plot(x, y, color="0.55", linestyle="--", linewidth=0.8, zorder=1)
            # Near where the line leaves the plot (the right edge, or the top), inside the view.
            x_label = min(x_end, x0 * (top / y0 / 2.5) ** (1.0 / power))
            if x_label > x0 * 1.3:
                # Measured lines usually lie above the O(S) guide and below the O(S²) one (both start at
                # the lowest first point), so the labels go on the far sides: O(S) below, O(S²) above.
                below = power == 1
                ax.annotate(name, (x_label, y0 * (x_label / x0) ** power), fontsize=8, color="0.45",
                            textcoords="offset points", xytext=(2 if below else -3, -3 if below else 3),
                            ha="right" if not below else "center", va="top" if below else "bottom")

    def time(self, path):
        fig, panels = self.figure("time", f"median time vs {self.x_name}")
        median = lambda r: number(r.get("time_s"), "median")
        predicted = lambda r: number(r, "predicted_time_s")
        xs, ys, any_mismatch, any_predicted = [], [], False, False
        for line in self.series:
            ax = self.panel_of(panels, line)
            points = line.points(MEASURED, median)
            skipped = line.points(("skipped",), predicted)
            if points:
                lower, upper = [], []
                for _, y, record in points:
                    q1, q3 = number(record["time_s"], "q1"), number(record["time_s"], "q3")
                    lower.append(max(0.0, y - q1) if q1 is not None and q1 > 0 else 0.0)
                    upper.append(max(0.0, q3 - y) if q3 is not None else 0.0)
                    ys += [v for v in (q1, q3) if v is not None and v > 0]
                self.draw_series(ax, line, points, lambda x, y, **kw: ax.errorbar(x, y, yerr=[lower, upper], **kw),
                                 capsize=2.5, elinewidth=1.0)
                any_mismatch |= self.mark_mismatches(ax, points)
            if skipped:
                any_predicted = True
                self.draw_predicted(ax, line, points, skipped)
            xs += [p[0] for p in points + skipped]
            ys += [p[1] for p in points + skipped]
        extra = self.mismatch_handle(any_mismatch) + ([self.predicted_handle()] if any_predicted else [])
        self.finish(fig, panels, "median time per call", ys, xs, unit=pick_unit(ys, SECOND_UNITS),
                    extra_handles=extra, note="error bars: first to third quartile of the samples")
        self.save(fig, path, "median time")

    def gflops(self, path):
        fig, panels = self.figure("gflops", f"throughput vs {self.x_name}")

        def rate(record):
            value = number(record, "gflops")
            if value is None and number(record, "tflops") is not None:
                value = number(record, "tflops") * 1e3
            median, flops = number(record.get("time_s"), "median"), number(record, "flops")
            if value is None and median and flops:
                value = flops / median * 1e-9
            return value

        xs, ys, any_mismatch, _ = self.rate_lines(panels, rate)
        note = "FLOPs = 4·batch·heads·seq_q·avg_k·head_dim (causal: visible keys only) / median time"
        if ys and any(on_cpu(line.impl, self.records) for line in self.series):
            if self.mode == "decode":
                note += " · decode is memory-bound: its ceiling is the copy bandwidth (--plots gbps), not GEMM"
            else:
                self.ceiling(panels, limit_of(self.metadata.get("rates"), "fp32_gemm_gflops"), "fp32 GEMM ceiling",
                             "GFLOP/s", path, "a GEMM's rate, not a peak: points above\nit beat this GEMM")
        self.finish_rate(fig, panels, path, "GFLOP/s", xs, ys, any_mismatch, note, "", "GFLOP/s")

    def rate_lines(self, panels, rate):
        """One line per series of rate(record) vs x in its implementation's style (peers dashed), mismatches
        marked. Returns the xs and ys drawn and whether any mismatch and any peer were."""
        xs, ys, any_mismatch, any_peer = [], [], False, False
        for line in self.series:
            ax = self.panel_of(panels, line)
            points = line.points(MEASURED, rate)
            if not points:
                continue
            any_peer |= is_peer(line.impl)
            self.draw_series(ax, line, points, ax.plot)
            any_mismatch |= self.mark_mismatches(ax, points)
            xs += [p[0] for p in points]
            ys += [p[1] for p in points]
        return xs, ys, any_mismatch, any_peer

    def finish_rate(self, fig, panels, path, unit, xs, ys, any_mismatch, note, peer_note, quantity):
        """The end of a rate figure: a log scale when the records' rates span more than 100× (decided on the
        records alone, so that a --json document and its JSONL records get the same scale, ceiling or not),
        the note (peer_note first), the mismatch legend, and the file."""
        log_y = bool(ys) and max(ys) / min(ys) > 100
        self.finish(fig, panels, unit + (", log scale" if log_y else ""), ys, xs, y_format=lambda v: f"{v:,.4g}",
                    log_y=log_y, extra_handles=self.mismatch_handle(any_mismatch), note=peer_note + note)
        self.save(fig, path, quantity)

    def tflops(self, path):
        """TFLOP/s vs seq: faprobe's implementations in their styles, peers (torch.* from peers_torch.py) dashed."""
        fig, panels = self.figure("tflops", f"TFLOP/s vs {self.x_name}")

        xs, ys, any_mismatch, any_peer = self.rate_lines(panels, lambda r: measured_rate(r, "tflops", "flops", 1e-12))
        self.finish_rate(fig, panels, path, "TFLOP/s", xs, ys, any_mismatch,
                         "FLOPs = 4·batch·heads·seq_q·avg_k·head_dim (causal: visible keys only) / median time",
                         "dashed: PyTorch SDPA backends (scripts/peers_torch.py) · " if any_peer else "", "TFLOP/s")

    def gbps(self, path):
        """Decode's GB/s (minimum bytes / median time) vs seq_k or batch: one style per implementation, one
        marker fill per page size; peers dashed; the copy bandwidth dotted, its spread as a band."""
        fig, panels = self.figure("gbps", "GB/s vs " + ("batch" if self.x_axis == "batch" else "key length"))

        xs, ys, any_mismatch, any_peer = self.rate_lines(panels, lambda r: measured_rate(r, "gbytes_per_s", "bytes", 1e-9))
        cache = "points above: cache-resident data"
        if ys and any(not on_cpu(line.impl, self.records) for line in self.series):
            self.ceiling(panels, gpu_copy_bandwidth(self.metadata, self.records), "GPU copy bandwidth", "GB/s", path,
                         "device memory copy;\n" + cache)
        if ys and any(on_cpu(line.impl, self.records) for line in self.series):
            self.ceiling(panels, host_copy_bandwidth(self.metadata, self.records), "host copy bandwidth", "GB/s",
                         path, "DRAM copy;\n" + cache)
        self.finish_rate(fig, panels, path, "GB/s", xs, ys, any_mismatch,
                         "GB/s = minimum bytes (Q, K, V, O once) / median time",
                         "dashed: PyTorch SDPA (contiguous only) · " if any_peer else "", "GB/s")


def measured_rate(record, field, amount, scale):
    """record[field] (a rate), or amount / median time · scale when the record lacks it (peers)."""
    value = number(record, field)
    median, total = number(record.get("time_s"), "median"), number(record, amount)
    if value is None and median and total:
        value = total / median * scale
    return value


def gpu_copy_bandwidth(metadata, records):
    """The GPU's copy bandwidth in GB/s as limit_of's (value, low, high): the --json document's
    rates.gpu.copy_gbytes_per_s (and its _range), else derived from the cuda.* records."""
    rates = metadata.get("rates") if isinstance(metadata.get("rates"), dict) else {}
    value, low, high = limit_of(rates.get("gpu"), "copy_gbytes_per_s")
    return (value or derived_copy_bandwidth(records, "cuda."), low, high)


def host_copy_bandwidth(metadata, records):
    """The host's copy bandwidth in GB/s as limit_of's (value, low, high): the --json document's
    rates.memory_gbytes_per_s (and memory_gbytes_per_s_range), else derived from the cpu.* records."""
    value, low, high = limit_of(metadata.get("rates"), "memory_gbytes_per_s")
    return (value or derived_copy_bandwidth(records, "cpu."), low, high)


def derived_copy_bandwidth(records, prefix):
    """The median of gbytes_per_s / bandwidth_fraction (the copy bandwidth each record was judged against)
    over the records of implementations named prefix* that carry both; None when none does."""
    derived = sorted(number(r, "gbytes_per_s") / number(r, "bandwidth_fraction") for r in records
                     if r["impl"].startswith(prefix) and number(r, "gbytes_per_s") and number(r, "bandwidth_fraction"))
    return derived[len(derived) // 2] if derived else None


def on_cpu(impl, records):
    """Whether the implementation's records ran on the host's CPU (faprobe's cpu.*, or a peer's CPU backend)."""
    return impl.startswith("cpu.") or any(r["impl"] == impl and r.get("device") == "cpu" for r in records)


def is_peer(impl):
    """Records of other programs (peers_torch.py writes torch.flash, ...) rather than faprobe's own."""
    return impl.split(".")[0] not in ("cpu", "cuda", "emu")


def tflops_groups(records):
    """(file suffix, records, mode) per (dtype, head_dim, mask), and per mode when the records hold both
    (the mode then ends the suffix): one TFLOP/s figure each."""
    groups = {}
    both = len({mode_of(r) for r in records}) > 1
    for record in records:
        case = record["case"]
        key = (str(case.get("dtype")), case.get("head_dim"), str(case.get("mask")), mode_of(record))
        groups.setdefault(key, []).append(record)
    return [(f"tflops-{dtype}-d{head_dim}-{'causal' if mask == 'causal' else 'nomask'}" + (f"-{mode}" if both else ""),
             group, mode)
            for (dtype, head_dim, mask, mode), group in sorted(groups.items(), key=lambda item: str(item[0]))
            if any(r["status"] in MEASURED for r in group)]


def gbps_groups(records):
    """(file suffix, records, x axis) for the decode GB/s figures: per (dtype, head_dim, heads, kv_heads, batch)
    against seq_k where two or more key lengths ran, and per (..., seq_k) against batch where two or more
    batches did. Variable-length cases are left out (no single key length); a contiguous case gets
    page_size 0, so that its line is labelled as such beside the paged ones."""
    decode = []
    for record in records:
        case = record["case"]
        if case.get("mode") != "decode" or case.get("seqlens"):
            continue
        decode.append(dict(record, case=dict(case, page_size=case.get("page_size") or 0)))
    decode.sort(key=lambda record: record["case"]["page_size"])  # lines in page-size order, contiguous first
    figures = []
    for x_axis, fixed in (("seq_k", "batch"), ("batch", "seq_k")):
        groups = {}
        for record in decode:
            case = record["case"]
            key = (str(case.get("dtype")), case.get("head_dim"), case.get("heads"), case.get("kv_heads"), case[fixed])
            groups.setdefault(key, []).append(record)
        for (dtype, head_dim, heads, kv_heads, value), group in sorted(groups.items(), key=lambda item: str(item[0])):
            if len({r["case"][x_axis] for r in group if r["status"] in MEASURED}) < 2:
                continue
            suffix = (f"gbps-{dtype}-d{head_dim}-h{heads}kv{kv_heads}-"
                      + (f"b{value}" if fixed == "batch" else f"s{fmt_seq(value)}-by-batch"))
            figures.append((suffix, group, x_axis))
    return figures


def select_records(records, selection):
    """The records whose impl and case fields equal every FIELD=VALUE of `selection` (values compared as
    text, so seq_k=4096 matches the integer 4096)."""
    wanted = {}
    for part in filter(None, (p.strip() for p in selection.split(","))):
        field, equals, value = part.partition("=")
        if not equals or not field.strip():
            raise InputError(f"--select '{selection}': expected FIELD=VALUE,... (impl=cpu.tiled,seq_k=4096)")
        wanted[field.strip()] = value.strip()

    def value_of(record, field):
        if field == "impl":
            return record["impl"]
        if field == "device":
            return record.get("device")
        return record["case"].get(field)

    return [r for r in records if all(str(value_of(r, f)) == v for f, v in wanted.items())]


def plot_samples(plt, records, path, source):
    """Run order and histogram of the raw samples of `records` (each tagged with its file in "_source")."""
    drawn = [r for r in records if (r.get("time_s") or {}).get("samples_s")]
    fig, (order, histogram) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained",
                                           gridspec_kw={"width_ratios": [3, 2]})
    palette = plt.get_cmap("tab10").colors
    everything = [v for r in drawn for v in r["time_s"]["samples_s"]]
    low, high = min(everything), max(everything)
    bins = [low + (high - low) * i / 40 for i in range(41)] if high > low else 10
    for i, record in enumerate(drawn):
        seconds = record["time_s"]["samples_s"]
        taken = record["time_s"].get("samples") or len(seconds)
        label = f"{record['impl']} · {record['_source']} ({len(seconds)} of {taken} samples)"
        color = palette[i % len(palette)]
        order.plot(range(len(seconds)), [v * 1e3 for v in seconds], marker=".", markersize=3, linewidth=0.6,
                   color=color, label=label)
        histogram.hist([v * 1e3 for v in seconds], bins=[b * 1e3 for b in bins] if isinstance(bins, list) else bins,
                       alpha=0.5, color=color, label=label)
    case = drawn[0]["case"]
    shape = " ".join(f"{k}={case[k]}" for k in AXIS_ORDER if case.get(k) not in (None, "", [], 0) and k != "seed")
    order.set_title("samples in the order taken", fontsize=9)
    order.set_xlabel("sample")
    order.set_ylabel("ms")
    histogram.set_title("distribution", fontsize=9)
    histogram.set_xlabel("ms")
    histogram.set_ylabel("samples")
    order.legend(fontsize=7)
    fig.suptitle(f"raw samples: {shape}", fontsize=10)
    fig.text(0.5, -0.02, source + " · kept samples are evenly thinned beyond 10,000 (faprobe's README)",
             ha="center", fontsize=7, color="gray")
    fig.savefig(path, dpi=130, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)


PLOTS = ("memory", "time", "gflops", "tflops", "gbps", "samples")


def mode_of(record):
    return str(record["case"].get("mode") or "prefill")


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="plot.py", description="Plot a faprobe sweep (memory, time, GFLOP/s vs sequence length).")
    parser.add_argument("results", metavar="RESULTS", nargs="+",
                        help="faprobe --json documents or --out JSONL files (records of peers too), drawn together")
    parser.add_argument("--out-dir", metavar="DIR", help="where the PNGs go (default: the directory of RESULTS)")
    parser.add_argument("--prefix", metavar="NAME",
                        help="file name prefix (default: the first RESULTS' name without extension, plus '-')")
    parser.add_argument("--plots", default="memory,time,gflops",
                        help=f"which plots, comma-separated from {', '.join(PLOTS)} (default: memory,time,gflops)")
    parser.add_argument("--select", metavar="FIELD=VALUE,...", default="",
                        help="the case of --plots samples: impl and case fields (impl=cpu.tiled,seq_k=4096)")
    parser.add_argument("--describe", metavar="FILE",
                        help="also write what each figure draws as JSON to FILE: axes (labels, scales), series "
                             "(implementation, colour, marker, line style), ceilings, footer and what was not plotted")
    args = parser.parse_args(argv)
    plots = [name.strip() for name in args.plots.split(",") if name.strip()]
    if not plots or any(name not in PLOTS for name in plots):
        print(f"plot.py: --plots '{args.plots}': allowed {', '.join(PLOTS)}", file=sys.stderr)
        return 2

    records, metadata = [], {}
    try:
        for path in args.results:
            file_records, file_metadata = load_results(path)
            if not file_records:
                raise InputError(f"{path}: no records")
            records += [dict(r, _source=os.path.basename(path)) for r in file_records]
            metadata = metadata or file_metadata  # the first --json document's host, devices, version
        if "samples" in plots:
            if not args.select:
                raise InputError("--plots samples needs --select FIELD=VALUE,... naming one case")
            selected = [r for r in select_records(records, args.select) if (r.get("time_s") or {}).get("samples_s")]
            if not selected:
                raise InputError(f"--select '{args.select}': no record with raw samples (time_s.samples_s) matches")
    except InputError as error:
        print(f"plot.py: {error}", file=sys.stderr)
        return 2
    source = " + ".join(os.path.basename(path) for path in args.results)

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
        from matplotlib.lines import Line2D
    except ImportError as error:
        print(f"plot.py: needs matplotlib and numpy ({error}); on Debian: apt-get install python3-matplotlib "
              "python3-numpy, then run it with /usr/bin/python3", file=sys.stderr)
        return 1

    first = args.results[0]
    out_dir = args.out_dir if args.out_dir is not None else (os.path.dirname(first) or ".")
    prefix = args.prefix if args.prefix is not None else os.path.splitext(os.path.basename(first))[0] + "-"
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as error:
        print(f"plot.py: --out-dir {out_dir}: cannot create ({error.strerror or error})", file=sys.stderr)
        return 2

    # One style per implementation for every figure; prefill and decode in figures of their own (NAME-memory-
    # prefill.png, NAME-memory-decode.png) when the records hold both, their rates and times being apart by
    # orders of magnitude.
    styles = implementation_styles(r["impl"] for r in records)
    described = []
    # A mode whose every record is unsupported (cpu.decode's prefill cases) has nothing to draw: no figures.
    modes = list(dict.fromkeys(mode_of(r) for r in records))
    for mode in list(modes):
        group = [r for r in records if mode_of(r) == mode]
        if len(modes) > 1 and all(r["status"] == "unsupported" for r in group):
            modes.remove(mode)
            impls = ", ".join(dict.fromkeys(r["impl"] for r in group))
            print(f"plot.py: no {mode} figures: every {mode} record is unsupported ({impls})", file=sys.stderr)
    by_mode = {}
    figures = []  # (file name without prefix, plotter, method)
    for name in plots:
        if name == "tflops":
            for suffix, group, mode in tflops_groups(records):
                figures.append((suffix, Plotter(plt, ticker, Line2D, group, metadata, source, styles, described,
                                                mode=mode), "tflops"))
        elif name == "gbps":
            # One panel per figure: its lines are implementations × page sizes.
            for suffix, group, x_axis in gbps_groups(records):
                figures.append((suffix, Plotter(plt, ticker, Line2D, group, metadata, source, styles, described,
                                                x_axis, facet=False, mode="decode"), "gbps"))
        elif name == "samples":
            figures.append(("samples", None, "samples"))
        else:
            for mode in modes:
                if mode not in by_mode:
                    group = [r for r in records if mode_of(r) == mode]
                    by_mode[mode] = Plotter(plt, ticker, Line2D, group, metadata, source, styles, described,
                                            mode=mode)
                figures.append((f"{name}-{mode}" if len(modes) > 1 else name, by_mode[mode], name))
    if not figures:
        print(f"plot.py: nothing to draw for --plots {args.plots} (gbps needs decode records at two or more "
              "key lengths or batches)", file=sys.stderr)
    for name, drawer, method in figures:
        path = os.path.join(out_dir, f"{prefix}{name}.png")
        try:
            if method == "samples":
                plot_samples(plt, selected, path, source)
            else:
                getattr(drawer, method)(path)
        except OSError as error:
            print(f"plot.py: {path}: cannot write ({error.strerror or error})", file=sys.stderr)
            return 2
        print(path)
    if args.describe:
        description = {"files": [os.path.join(out_dir, f"{prefix}{name}.png") for name, _, _ in figures],
                       "styles": {impl: {k: v for k, v in style.items() if k != "dashes"}
                                  for impl, style in styles.items()},
                       "figures": described}
        try:
            with open(args.describe, "w", encoding="utf-8") as file:
                json.dump(description, file, indent=1, ensure_ascii=False)
                file.write("\n")
        except OSError as error:
            print(f"plot.py: --describe {args.describe}: cannot write ({error.strerror or error})", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
