#!/usr/bin/env python3
"""Check outputs saved by `faprobe run --save DIR` with NumPy alone, independently of faprobe's checker.

Usage: scripts/check_npy.py DIR [DIR ...]

Each DIR holds q.npy, k.npy, v.npy, o.npy (layout (batch, seq, heads, head_dim); bf16 saved as float32)
and case.json ({"impl", "case": {..., "dtype", "mask"}}). The reference is computed in float64 from the
saved inputs: scale 1/sqrt(head_dim), GQA head h reads KV head h // (heads / kv_heads), causal bottom-right
aligned (row i sees keys j <= i + seq_k - seq_q), a row that sees no key is zero. The tolerance is the
project's rule, recomputed here: 2 * max|plain - reference| + floor(dtype), where plain is the same
attention computed as a framework would in the case's precision (fp32 dot products rounded to the dtype,
softmax in fp32, probabilities rounded to the dtype, P.V accumulated in fp32, output rounded).

Prints one line per DIR. Exit status: 0 all pass; 1 an output is wrong or not finite; 2 missing or
malformed files.
"""

import json
import os
import sys

FLOOR = {"fp32": 1e-6, "fp16": 1e-4, "bf16": 1e-3}


def round_to(x, dtype):
    """float32 array rounded to dtype and back (round to nearest even), as float32."""
    import numpy as np

    x = np.asarray(x, dtype=np.float32)
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":  # NumPy has no bfloat16: round the float32 bits to their top 16
        bits = x.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32)
    return x


def attention(q, k, v, causal, dtype=None):
    """(batch, seq_q, heads, d) output; in float64 when dtype is None, else 'plain' in that precision."""
    import numpy as np

    heads, kv_heads = q.shape[2], k.shape[2]
    seq_q, seq_k, head_dim = q.shape[1], k.shape[1], q.shape[3]
    work = np.float64 if dtype is None else np.float32
    rnd = (lambda x: x) if dtype is None else (lambda x: round_to(x, dtype))
    qh = q.astype(work).transpose(0, 2, 1, 3)                                  # (b, h, sq, d)
    kh = np.repeat(k.astype(work).transpose(0, 2, 1, 3), heads // kv_heads, axis=1)
    vh = np.repeat(v.astype(work).transpose(0, 2, 1, 3), heads // kv_heads, axis=1)
    scores = rnd(qh @ kh.transpose(0, 1, 3, 2)) * work(1.0 / np.sqrt(head_dim))
    visible = np.ones((seq_q, seq_k), dtype=bool)
    if causal:
        visible = np.arange(seq_k)[None, :] <= np.arange(seq_q)[:, None] + (seq_k - seq_q)
    scores = np.where(visible, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0)                       # rows that see no key
    probs = np.where(visible, np.exp(scores - row_max), 0)
    row_sum = probs.sum(axis=-1, keepdims=True)
    probs = rnd(probs / np.where(row_sum > 0, row_sum, 1))
    out = rnd(probs @ vh)
    return out.transpose(0, 2, 1, 3)


def check(directory):
    """(passed, line) for one saved case; raises ValueError on missing or malformed files."""
    import numpy as np

    try:
        with open(os.path.join(directory, "case.json"), encoding="utf-8") as file:
            saved = json.load(file)
        case = saved["case"]
        q, k, v, o = (np.load(os.path.join(directory, f"{name}.npy")) for name in "qkvo")
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"{directory}: {error}")
    if o.shape != q.shape or k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2] % k.shape[2]:
        raise ValueError(f"{directory}: inconsistent shapes q{q.shape} k{k.shape} v{v.shape} o{o.shape}")
    dtype, causal = case.get("dtype", "fp32"), case.get("mask") == "causal"
    reference = attention(q, k, v, causal)
    plain_error = float(np.abs(attention(q, k, v, causal, dtype) - reference).max(initial=0))
    tolerance = 2 * plain_error + FLOOR.get(dtype, 1e-3)
    finite = bool(np.isfinite(o).all())
    error = float(np.abs(o.astype(np.float64) - reference).max(initial=0)) if finite else float("inf")
    passed = finite and error <= tolerance
    shape = (f"b{q.shape[0]} h{q.shape[2]}:{k.shape[2]} q{q.shape[1]} k{k.shape[1]} d{q.shape[3]} {dtype}"
             f"{' causal' if causal else ''}")
    line = (f"{saved.get('impl', '?'):<20} {shape:<34} {'pass' if passed else 'FAIL'}  max|o-ref| {error:.2e}"
            f" {'<=' if passed else '>'} tolerance {tolerance:.2e} (plain {dtype} {plain_error:.2e})"
            f"{'' if finite else ' (non-finite output)'}")
    return passed, line


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("check_npy.py: needs numpy", file=sys.stderr)
        return 2
    status = 0
    for directory in argv:
        try:
            passed, line = check(directory)
        except ValueError as error:
            print(f"check_npy.py: {error}", file=sys.stderr)
            status = max(status, 2)
            continue
        print(line)
        if not passed:
            status = max(status, 1)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
