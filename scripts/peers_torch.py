#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention backends as peers of faprobe's implementations.

Usage:
  scripts/peers_torch.py --config configs/h200-quick.json --out peers.jsonl
  scripts/peers_torch.py --seq 512..16k --batch 1 --heads 16 --head-dim 128 --dtype bf16 --mask causal
  scripts/peers_torch.py --backend-table backends.md         (the seed's exercise C; no cases needed)
  scripts/peers_torch.py --device cpu --seq 4096 --heads 8 --head-dim 64 --dtype fp32 --mask causal

Runs each SDPA backend (torch.flash, torch.efficient, torch.cudnn, torch.math; each forced with
torch.nn.attention.sdpa_kernel) on the cases a faprobe config or the same axis flags describe (the grammar
of faprobe's ranges, "parts" included; flags override the config), and appends one faprobe/1 record per
(backend, case) to --out, so that scripts/plot.py draws them beside faprobe's records.

- Inputs: torch.randn in the case's dtype, laid out (batch, seq, heads, head_dim) as faprobe's and passed
  to SDPA as transposed views; GQA/MQA through enable_gqa=True. Outputs are not verified (verify: null),
  only required to be finite.
- Causal: faprobe's mask is bottom-right aligned, torch's is_causal top-left; they agree when
  seq_q == seq_k, and for seq_q == 1 bottom-right means every key (run without a mask). Other causal
  cases are recorded as unsupported with that reason; mask causal-top-left is is_causal itself.
- Decode (mode decode, seq_q = 1) runs where SDPA applies: contiguous K/V of equal lengths. A case with a
  paged KV cache (page_size > 0) or its own key length per batch entry (seqlens) is recorded as
  unsupported with the reason: SDPA takes dense (batch, heads, seq, head_dim) tensors only, and padding
  the entries to one length would time work faprobe's kernels do not do. Such records keep page_size and
  seqlens in their case, as faprobe writes them (absent when contiguous, equal lengths).
- splits (faprobe's forced key-split count for split-K implementations) is accepted, for faprobe's
  configs, and ignored: SDPA has no such knob, so a case is run once whatever splits says, and its record's
  case has no splits field. Records join faprobe's on the other case fields (scripts/device_summary.py).
- Time: CUDA events around one call, a 2 x L2 buffer zeroed before each sample (the L2 flush), warm-up
  runs first, then samples until --min-samples and --min-time are met and the relative standard error of
  the mean is below --max-noise percent, or --max-time is spent; the median is reported.
- --device cpu runs PyTorch's CPU backends, as faprobe times its CPU kernels: flash (ATen's tiled CPU
  kernel) and math; efficient and cudnn exist only on CUDA and are recorded as unsupported. Threads:
  torch.set_num_threads(--threads, default every core this process may use, as faprobe's CPU kernels);
  time: the wall clock around one call, no cache flush (faprobe flushes no CPU caches either); the same
  sampling rules. Records carry device "cpu" and details.threads, so they join faprobe's CPU records.
  Memory on the CPU is predicted only (peak_bytes null): PyTorch keeps no allocator statistics there.
- FLOPs as faprobe counts them: 4 * batch * heads * seq_q * avg_k * head_dim, avg_k the mean number of
  keys a row sees (bottom-right causal); bytes: Q, K, V read once and O written once.
- Memory: peak_bytes = the inputs plus the high point of what PyTorch's caching allocator held during one
  call (the output and every workspace allocated through it); workspace_bytes = that high point less the
  output. A case whose predicted memory exceeds what the device has free is skipped with the numbers
  (math materialises the scores in fp32: 16 bytes per score predicted, for the scores, the
  probabilities and a temporary, since PyTorch upcasts fp16 and bf16 for it).
- A backend that refuses a case is recorded as unsupported with PyTorch's own warnings and error text.

--backend-table FILE writes a Markdown table: for dtype x head_dim x mask (none, causal, a float mask
tensor), which backend the default dispatcher picks (torch._fused_sdp_choice, where this torch has it)
and which backends accept the case; rows where the default is math are the silent fallbacks.

Needs PyTorch, with a CUDA device unless --device cpu (--help does not). Exit status: 0 done; 1 some
(backend, case) failed; 2 bad usage, or no PyTorch or CUDA device.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings

BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
            "math": "MATH"}
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
AXES = ("seq", "seq_q", "batch", "heads", "kv_heads", "head_dim", "dtype", "mask", "mode", "seed", "page_size",
        "splits", "seqlens")
MEASURE = {"warmup": 1, "min_samples": 10, "min_time": 0.5, "max_noise": 0.5, "max_time": 10.0}
CPU_BACKENDS = ("flash", "math")  # SDPA's backends with a CPU kernel


# ---------------------------------------------------------------------------------------------------------
# Cases: faprobe's config keys and range grammar (src/harness/io/range.cpp, src/harness/plan/axes.cpp)


def parse_integer(text):
    text = text.strip()
    scale = {"k": 1024, "m": 1 << 20}.get(text[-1:].lower(), 1)
    return int(text[:-1] if scale != 1 else text) * scale


def parse_list(text):
    """'1,17,512..4096:*4,1k..8k:+1k' -> [1, 17, 512, 2048, 1024, ...] (unique, in order)."""
    values = []
    for item in str(text).split(","):
        if ".." not in item:
            values.append(parse_integer(item))
            continue
        bounds, _, step = item.partition(":")
        start, end = (parse_integer(part) for part in bounds.split(".."))
        step = step.strip() or "*2"
        if parse_integer(step[1:]) < (2 if step[0] == "*" else 1) or (step[0] == "*" and start < 1):
            raise ValueError(f"range {item}: it would never reach its end")
        value = start
        while value <= end:
            values.append(value)
            value = value * parse_integer(step[1:]) if step[0] == "*" else value + parse_integer(step[1:])
    return list(dict.fromkeys(values))


def parse_lengths(text):
    """seqlens: '1000,17,4097,1' -> [1000, 17, 4097, 1], one length per batch entry (repeats kept)."""
    values = [parse_integer(item) for item in str(text).split(",")]
    if any(value < 1 for value in values):
        raise ValueError(f"seqlens: every length must be at least 1, got {text}")
    return values


def config_text(value):
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)


def expand(settings):
    """The cases of one cross product, in faprobe's order (seq varies fastest). seqlens is one case's
    lengths, not an axis: it sets the batch and the (longest) seq. splits is ignored (see the top)."""
    names = lambda key, default: [n.strip() for n in config_text(settings.get(key, default)).split(",")]
    ints = lambda key, default: parse_list(config_text(settings.get(key, default)))
    seqlens = parse_lengths(config_text(settings["seqlens"])) if settings.get("seqlens") is not None else None
    batches, seqs = ([len(seqlens)], [max(seqlens)]) if seqlens else (ints("batch", 1), ints("seq", 1024))
    cases = []
    for mode in names("mode", "prefill"):
        if seqlens and mode != "decode":
            raise ValueError("seqlens gives each batch entry of a decode case its own key length: it needs mode decode")
        for dtype in names("dtype", "fp32"):
            for mask in names("mask", "none"):
                for batch in batches:
                    for heads in ints("heads", 8):
                        for kv_heads in ints("kv_heads", heads):
                            for head_dim in ints("head_dim", 64):
                                for seed in ints("seed", 0):
                                    for page_size in ints("page_size", 0):
                                        for seq_q in ints("seq_q", 0):
                                            for seq in seqs:
                                                case = {
                                                    "batch": batch, "heads": heads, "kv_heads": kv_heads,
                                                    "seq_q": 1 if mode == "decode" else (seq_q or seq),
                                                    "seq_k": seq, "head_dim": head_dim, "dtype": dtype,
                                                    "mask": mask, "mode": mode, "seed": seed}
                                                if page_size:  # as faprobe writes a case: only when set
                                                    case["page_size"] = page_size
                                                if seqlens:
                                                    case["seqlens"] = list(seqlens)
                                                cases.append(case)
    return cases


def plan(config, flags):
    """Cases and measurement settings from a config (with its parts) overridden by flags."""
    config = {k.replace("-", "_"): v for k, v in config.items()}
    measure = {k: float(flags.get(k) if flags.get(k) is not None else config.get(k, default))
               for k, default in MEASURE.items()}
    base = {k: v for k, v in config.items() if k in AXES}
    parts = config.get("parts") or [{}]
    given = {k: v for k, v in flags.items() if k in AXES and v is not None}
    if "seqlens" in given and ("batch" in given or "seq" in given):
        raise ValueError("--seqlens and --batch/--seq both set the batch's key lengths; give one of them")
    cases, seen = [], set()
    for part in parts:
        merged = dict(base, **{k.replace("-", "_"): v for k, v in part.items()})
        merged.update(given)
        for case in expand(merged):
            key = json.dumps(case, sort_keys=True)
            if key not in seen:
                seen.add(key)
                cases.append(case)
    return cases, measure


def avg_keys(case):
    """The mean number of keys a query row sees, over the rows and (seqlens) the batch entries."""
    def mean_visible(seq_k):
        if case["mask"] not in ("causal", "causal-top-left"):
            return float(seq_k)
        offset = (0 if case["mask"] == "causal-top-left" else seq_k - case["seq_q"]) + 1
        return sum(min(max(row + offset, 0), seq_k) for row in range(case["seq_q"])) / case["seq_q"]
    lengths = case.get("seqlens") or [case["seq_k"]]
    return sum(mean_visible(length) for length in lengths) / len(lengths)


def total_keys(case):
    """Key rows over the batch: batch * seq_k, or the sum of seqlens (no padding)."""
    return sum(case["seqlens"]) if case.get("seqlens") else case["batch"] * case["seq_k"]


def label(case):
    heads = f"h{case['heads']}" + (f":{case['kv_heads']}" if case["kv_heads"] != case["heads"] else "")
    seq = f"s{case['seq_k']}" if case["seq_q"] == case["seq_k"] else f"q{case['seq_q']} k{case['seq_k']}"
    if case.get("seqlens"):
        lengths = case["seqlens"]  # the first few of a long list, as faprobe's labels
        shown = ",".join(map(str, lengths[:4])) + (f",...({len(lengths)})" if len(lengths) > 4 else "")
        seq = f"q{case['seq_q']} k[{shown}]"
    return (f"b{case['batch']} {heads} {seq} d{case['head_dim']} {case['dtype']}"
            f"{' ' + case['mask'] if case['mask'] != 'none' else ''}{' decode' if case['mode'] == 'decode' else ''}"
            f"{' page' + str(case['page_size']) if case.get('page_size') else ''}")


def fmt_bytes(value):
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


# ---------------------------------------------------------------------------------------------------------
# Running one backend on one case


def cpu_threads():
    """Every core this process may use: what faprobe's CPU kernels take by default (OpenMP's default)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class Peers:
    def __init__(self, torch, measure, device="cuda", threads=None):
        self.torch, self.measure, self.device_type = torch, measure, device
        from torch.nn.attention import SDPBackend, sdpa_kernel

        self.SDPBackend, self.sdpa_kernel = SDPBackend, sdpa_kernel
        self.functional = torch.nn.functional
        self.dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        if device == "cpu":
            self.device = "cpu"  # as faprobe's CPU records name theirs
            self.threads = threads or cpu_threads()
            torch.set_num_threads(self.threads)
            self.flush = None
            return
        properties = torch.cuda.get_device_properties(0)
        self.device = properties.name
        self.threads = None
        l2_bytes = getattr(properties, "L2_cache_size", 0) or (64 << 20)
        self.flush = torch.empty(2 * l2_bytes, dtype=torch.uint8, device="cuda")

    def synchronize(self):
        if self.device_type == "cuda":
            self.torch.cuda.synchronize()

    def inputs(self, case):
        torch, device = self.torch, self.device_type
        generator = torch.Generator(device=device).manual_seed(case["seed"])
        dtype = self.dtypes[case["dtype"]]
        shape = lambda seq, heads: (case["batch"], seq, heads, case["head_dim"])  # faprobe's layout
        make = lambda seq, heads: torch.randn(shape(seq, heads), dtype=dtype, device=device, generator=generator)
        q, k, v = make(case["seq_q"], case["heads"]), make(case["seq_k"], case["kv_heads"]), make(case["seq_k"], case["kv_heads"])
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # SDPA's (batch, heads, seq, head_dim)

    def call(self, backend, q, k, v, is_causal, gqa, attn_mask=None):
        with self.sdpa_kernel([getattr(self.SDPBackend, BACKENDS[backend])]):
            extra = {"enable_gqa": True} if gqa else {}
            return self.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                                                                **extra)

    def sample(self, run):
        """Seconds of one call: CUDA events after an L2 flush, or the wall clock on the CPU."""
        if self.device_type == "cpu":
            began = time.perf_counter()
            run()
            return time.perf_counter() - began
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.flush.zero_()  # evicts Q, K, V from L2
        start.record()
        run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def time(self, run):
        m = self.measure
        began = time.perf_counter()
        for _ in range(int(m["warmup"])):
            run()
        samples = []
        while True:
            samples.append(self.sample(run))
            spent = time.perf_counter() - began
            n = len(samples)
            noise = statistics.stdev(samples) / statistics.mean(samples) / math.sqrt(n) * 100 if n > 1 else 100
            if spent >= m["max_time"] or (n >= m["min_samples"] and spent >= m["min_time"] and noise <= m["max_noise"]):
                break
        ordered = sorted(samples)
        quartiles = statistics.quantiles(ordered, n=4) if n > 1 else [ordered[0]] * 3
        return {"median": statistics.median(ordered), "mean": statistics.mean(ordered), "min": ordered[0],
                "max": ordered[-1], "q1": quartiles[0], "q3": quartiles[2],
                "stddev": statistics.stdev(ordered) if n > 1 else 0.0, "samples": n}

    def record(self, backend, case):
        torch = self.torch
        rows, keys = case["batch"] * case["heads"] * case["seq_q"], case["seq_k"]
        element = DTYPE_BYTES.get(case["dtype"], 0)
        kv_bytes = element * 2 * total_keys(case) * case["kv_heads"] * case["head_dim"]
        qkv_bytes = element * rows * case["head_dim"] + kv_bytes   # the inputs
        io_bytes = qkv_bytes + element * rows * case["head_dim"]   # and the output: faprobe's "bytes"
        predicted = io_bytes + (16 * rows * keys if backend == "math" else 0)
        record = {"impl": f"torch.{backend}", "device": self.device, "case": case, "status": "ok", "reason": "",
                  "time_s": None, "predicted_time_s": None,
                  "flops": 4.0 * rows * avg_keys(case) * case["head_dim"], "bytes": float(io_bytes),
                  "memory": {"peak_bytes": None, "workspace_bytes": None, "predicted_bytes": predicted},
                  "verify": None, "details": {"backend": BACKENDS[backend], "torch": torch.__version__,
                                              "layout": "(batch, seq, heads, head_dim), transposed views",
                                              "l2_flushed": self.device_type == "cuda"}}
        if self.threads:
            record["details"]["threads"] = self.threads
        causal = case["mask"] == "causal"
        top_left = case["mask"] == "causal-top-left"  # torch's own is_causal, whatever the lengths
        if self.device_type == "cpu" and backend not in CPU_BACKENDS:
            return dict(record, status="unsupported", reason=f"SDPA's {backend} backend has no CPU kernel "
                        f"(on the CPU: {', '.join(CPU_BACKENDS)})")
        if case["dtype"] not in self.dtypes:
            return dict(record, status="unsupported", reason=f"SDPA takes fp32, fp16, bf16, not {case['dtype']}")
        if causal and case["seq_q"] not in (case["seq_k"], 1):
            return dict(record, status="unsupported", reason="torch's is_causal is top-left aligned, faprobe's "
                        "causal bottom-right: compared only where seq_q == seq_k (or seq_q == 1)")
        if case.get("page_size"):
            return dict(record, status="unsupported", reason=f"SDPA takes contiguous K/V only, not a paged KV cache "
                        f"(page_size {case['page_size']})")
        if case.get("seqlens"):
            return dict(record, status="unsupported", reason="SDPA takes equal key lengths per batch entry only "
                        "(seqlens): padding them would time keys that are not there")
        free = 0.9 * (torch.cuda.mem_get_info()[0] if self.device_type == "cuda"
                      else os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        if predicted > free:
            return dict(record, status="skipped", reason=f"needs {fmt_bytes(predicted)}, free {fmt_bytes(free)}")
        is_causal = top_left or (causal and case["seq_q"] == case["seq_k"] and case["seq_q"] > 1)
        record["details"]["is_causal"] = is_causal
        try:
            q, k, v = self.inputs(case)
            gqa = case["kv_heads"] != case["heads"]
            run = lambda: self.call(backend, q, k, v, is_causal, gqa)
            cuda = self.device_type == "cuda"
            if cuda:
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    out = run()
                    self.synchronize()
                except RuntimeError as error:
                    if "out of memory" in str(error).lower():
                        raise
                    why = [str(w.message) for w in caught] + [str(error).splitlines()[0]]
                    return dict(record, status="unsupported", reason=" | ".join(dict.fromkeys(why)))
            if cuda:
                high = torch.cuda.max_memory_allocated() - base
                out_bytes = out.numel() * out.element_size()
                record["memory"].update(peak_bytes=qkv_bytes + high, workspace_bytes=max(0, high - out_bytes))
            if not bool(torch.isfinite(out).all()):
                record.update(status="mismatch", reason="non-finite output")
            del out
            record["time_s"] = self.time(run)
        except Exception as error:  # out of memory, CUDA errors: the record says what happened
            record.update(status="failed", reason=f"{type(error).__name__}: {str(error).splitlines()[0]}")
        finally:
            q = k = v = None
            if self.device_type == "cuda":
                torch.cuda.empty_cache()
        median = (record["time_s"] or {}).get("median")
        if median:
            record.update(tflops=record["flops"] / median / 1e12, gflops=record["flops"] / median / 1e9,
                          gbytes_per_s=record["bytes"] / median / 1e9)
        return record


# ---------------------------------------------------------------------------------------------------------
# Exercise C: which backend the dispatcher picks, and which accept a case


def backend_table(peers, path):
    torch = peers.torch
    choose = getattr(torch, "_fused_sdp_choice", None)
    names = {}
    for name in ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "OVERRIDEABLE", "ERROR"):
        if hasattr(peers.SDPBackend, name):
            member = getattr(peers.SDPBackend, name)
            names[int(getattr(member, "value", member))] = name.lower()
    where = f"CUDA {torch.version.cuda}" if peers.device_type == "cuda" else f"{peers.threads} threads"
    lines = [f"# SDPA backends on {peers.device} (torch {torch.__version__}, {where})", "",
             "batch 1, heads 8, seq 256; ✓ the backend runs the case, ✗ it refuses (reason below); "
             "'default' is what scaled_dot_product_attention picks unforced"
             + ("" if choose else " (this torch does not expose torch._fused_sdp_choice)") + ".", "",
             "| dtype | head_dim | mask | default | " + " | ".join(BACKENDS) + " |",
             "|---|---|---|---|" + "---|" * len(BACKENDS)]
    reasons, fallbacks = {}, []
    for dtype in ("fp32", "fp16", "bf16"):
        for head_dim in (60, 64, 96, 128, 256, 512):
            for mask in ("none", "causal", "float tensor"):
                case = {"batch": 1, "heads": 8, "kv_heads": 8, "seq_q": 256, "seq_k": 256, "head_dim": head_dim,
                        "dtype": dtype, "mask": "none", "mode": "prefill", "seed": 0}
                q, k, v = peers.inputs(case)
                attn_mask = (torch.zeros(256, 256, dtype=q.dtype, device=peers.device_type) if mask == "float tensor"
                             else None)
                is_causal = mask == "causal"
                default = "?"
                if choose:
                    try:
                        default = names.get(int(choose(q, k, v, attn_mask, 0.0, is_causal)), "?")
                    except Exception as error:  # the private signature changes between versions
                        default = f"? ({type(error).__name__})"
                cells = []
                for backend in BACKENDS:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        try:
                            if peers.device_type == "cpu" and backend not in CPU_BACKENDS:
                                raise RuntimeError(f"no CPU kernel (on the CPU: {', '.join(CPU_BACKENDS)})")
                            peers.call(backend, q, k, v, is_causal, False, attn_mask)
                            peers.synchronize()
                            cells.append("✓")
                        except Exception as error:  # RuntimeError "No available kernel", or a check's own
                            why = " | ".join(dict.fromkeys([str(w.message) for w in caught] + [str(error).splitlines()[0]]))
                            cells.append(f"✗ [{reasons.setdefault(why, len(reasons) + 1)}]")
                if default == "math":
                    fallbacks.append(f"{dtype} d{head_dim} {mask}")
                    default = "**math**"
                lines.append(f"| {dtype} | {head_dim} | {mask} | {default} | " + " | ".join(cells) + " |")
    lines += ["", "Silent fallbacks (the default dispatcher picks math): " + (", ".join(fallbacks) or "none"), ""]
    lines += [f"[{n}] {why}" for why, n in reasons.items()]
    with open(path, "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    print(f"wrote {path}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(prog="peers_torch.py", description=__doc__.split("\n")[0],
                                     epilog="See the top of scripts/peers_torch.py for what is measured and how.")
    parser.add_argument("--config", help="a faprobe config (JSON); its impl key is ignored")
    for axis in AXES:
        parser.add_argument("--" + axis.replace("_", "-"), dest=axis, help="as faprobe's flag; overrides --config")
    for key, default in MEASURE.items():
        parser.add_argument("--" + key.replace("_", "-"), dest=key, type=float, help=f"as faprobe's (default {default})")
    parser.add_argument("--backends", help="comma-separated (default: all four on cuda, flash,math on cpu)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="where SDPA runs (default cuda); cpu times PyTorch's CPU backends")
    parser.add_argument("--threads", type=int, default=0,
                        help="--device cpu: torch.set_num_threads (default: every core this process may use)")
    parser.add_argument("--out", help="JSONL file the records are appended to (one per line, flushed)")
    parser.add_argument("--time-budget", type=float, default=0,
                        help="seconds; once spent, the remaining cases are recorded as skipped (default: none)")
    parser.add_argument("--backend-table", metavar="FILE", help="write the backend table (Markdown) to FILE")
    args = parser.parse_args(argv)
    backends = [b.strip() for b in (args.backends or ",".join(CPU_BACKENDS if args.device == "cpu" else BACKENDS)).split(",")]
    if any(b not in BACKENDS for b in backends):
        parser.error(f"--backends: allowed {', '.join(BACKENDS)}")
    if args.threads < 0 or (args.threads and args.device != "cpu"):
        parser.error("--threads: a positive thread count, with --device cpu only")
    try:
        config = {}
        if args.config:
            with open(args.config, encoding="utf-8") as file:
                config = json.load(file)
        flags = vars(args)
        cases, measure = plan(config, flags)
    except (OSError, ValueError, IndexError) as error:
        print(f"peers_torch.py: {args.config or 'axes'}: {error}", file=sys.stderr)
        return 2
    if not args.config and not any(flags.get(axis) for axis in AXES):
        cases = []  # nothing asked but (maybe) the backend table
    if not cases and not args.backend_table:
        parser.error("give --config or axis flags (and --out), or --backend-table FILE")

    try:
        import torch
    except ImportError as error:
        print(f"peers_torch.py: needs PyTorch ({error})", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("peers_torch.py: PyTorch sees no CUDA device (--device cpu runs its CPU backends)", file=sys.stderr)
        return 2
    peers = Peers(torch, measure, args.device, args.threads)
    if args.backend_table:
        backend_table(peers, args.backend_table)

    out = open(args.out, "a", encoding="utf-8") if args.out else None
    began, failed = time.perf_counter(), 0
    for case in cases:
        for backend in backends:
            if args.time_budget and time.perf_counter() - began > args.time_budget:
                record = {"impl": f"torch.{backend}", "device": peers.device, "case": case, "status": "skipped",
                          "reason": f"--time-budget {args.time_budget:g} s spent", "time_s": None}
            else:
                record = peers.record(backend, case)
            failed += record["status"] == "failed"
            if out:
                out.write(json.dumps(record) + "\n")
                out.flush()
            median = (record.get("time_s") or {}).get("median")
            rate = (f"{record.get('tflops', 0):7.1f} TFLOP/s" if args.device == "cuda"
                    else f"{record.get('gflops', 0):7.1f} GFLOP/s")
            timing = f"{median * 1e3:10.3f} ms {rate}" if median else " " * 29
            peak = (record.get("memory") or {}).get("peak_bytes")
            print(f"{record['impl']:<16} {label(case):<34} {record['status']:<11} {timing} "
                  f"{fmt_bytes(peak) if peak else '-':>9}  {record['reason'][:100]}", flush=True)
    if out:
        out.close()
        print(f"wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
