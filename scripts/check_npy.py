#!/usr/bin/env python3
"""Check outputs saved by `faprobe run --save DIR` with NumPy alone, independently of faprobe's checker.

Usage: scripts/check_npy.py DIR [DIR ...]

Each DIR holds q.npy, o.npy (layout (batch, seq, heads, head_dim); bf16 saved as float32), case.json
({"impl", "case": {..., "dtype", "mask"}}) and K, V either as k.npy, v.npy (batch, seq_k, kv_heads,
head_dim) or, for a paged or variable-length case, as the KV cache flash-attention's flash_attn_with_kvcache
takes: k_cache.npy, v_cache.npy, cache_seqlens.npy (int32 (batch,), each entry's key length) and, when
paged, block_table.npy (int32 (batch, max_blocks_per_seq)). A paged cache is a pool (num_blocks, page_size,
kv_heads, head_dim) whose entry b holds key j at [block_table[b, j // page_size], j % page_size]; without a
block table it is padded, (batch, max_seq_k, kv_heads, head_dim), key j of entry b at [b, j]. Only keys
below cache_seqlens[b] are read (the rest is NaN padding).

The reference is computed in float64 from the saved inputs, entry by entry: scale 1/sqrt(head_dim), GQA
head h reads KV head h // (heads / kv_heads), causal bottom-right aligned (row i sees keys
j <= i + seq_k - seq_q), a row that sees no key is zero. The tolerance is the project's rule, recomputed
here: 2 * max|plain - reference| + floor(dtype), where plain is the same attention computed as a framework
would in the case's precision (fp32 dot products rounded to the dtype, softmax in fp32, probabilities
rounded to the dtype, P.V accumulated in fp32, output rounded).

Prints one line per DIR. Exit status: 0 all pass; 1 an output is wrong or not finite, or an input the
reference reads is not finite; 2 missing or malformed files.
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


def load_entries(directory):
    """q, o, each batch entry's (k, v) shaped (1, seq_k of the entry, kv_heads, head_dim), the page size (0: none)."""
    import numpy as np

    def load(name):
        return np.load(os.path.join(directory, name))

    q, o = load("q.npy"), load("o.npy")
    if os.path.exists(os.path.join(directory, "k.npy")):
        k, v = load("k.npy"), load("v.npy")
        if k.shape != v.shape or q.shape[0] != k.shape[0]:
            raise ValueError(f"inconsistent shapes q{q.shape} k{k.shape} v{v.shape}")
        return q, o, [(k[b:b + 1], v[b:b + 1]) for b in range(k.shape[0])], 0
    k_cache, v_cache, lengths = load("k_cache.npy"), load("v_cache.npy"), load("cache_seqlens.npy")
    paged = os.path.exists(os.path.join(directory, "block_table.npy"))
    table = load("block_table.npy") if paged else None
    if k_cache.ndim != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(f"inconsistent caches k_cache{k_cache.shape} v_cache{v_cache.shape}")
    if lengths.dtype != np.int32 or lengths.shape != (q.shape[0],):
        raise ValueError(f"cache_seqlens must be int32 (batch,), got {lengths.dtype} {lengths.shape}")
    if paged and (table.dtype != np.int32 or table.ndim != 2 or table.shape[0] != q.shape[0]):
        raise ValueError(f"block_table must be int32 (batch, max_blocks_per_seq), got {table.dtype} {table.shape}")
    if not paged and k_cache.shape[0] != q.shape[0]:
        raise ValueError(f"a padded cache has one entry per batch entry: k_cache{k_cache.shape} q{q.shape}")
    page = k_cache.shape[1]
    capacity = table.shape[1] * page if paged else page
    entries = []
    for b, length in enumerate(int(n) for n in lengths):
        if not 1 <= length <= capacity:
            raise ValueError(f"cache_seqlens[{b}] = {length} is outside 1..{capacity}")
        if paged:
            blocks = table[b, :(length + page - 1) // page]
            if blocks.min() < 0 or blocks.max() >= k_cache.shape[0]:
                raise ValueError(f"block_table row {b} leaves the pool of {k_cache.shape[0]} blocks: {blocks}")
            rows = (blocks[:, None] * page + np.arange(page)[None, :]).reshape(-1)[:length]
            flat = (-1,) + k_cache.shape[2:]
            entries.append((k_cache.reshape(flat)[rows][None], v_cache.reshape(flat)[rows][None]))
        else:
            entries.append((k_cache[b:b + 1, :length], v_cache[b:b + 1, :length]))
    return q, o, entries, page if paged else 0


def check(directory):
    """(passed, line) for one saved case; raises ValueError on missing or malformed files."""
    import numpy as np

    try:
        with open(os.path.join(directory, "case.json"), encoding="utf-8") as file:
            saved = json.load(file)
        case = saved["case"]
        q, o, entries, page_size = load_entries(directory)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"{directory}: {error}")
    kv_heads = entries[0][0].shape[2]
    if o.shape != q.shape or len(entries) != q.shape[0] or q.shape[2] % kv_heads or \
            any(k.shape[2:] != (kv_heads, q.shape[3]) for k, _ in entries):
        raise ValueError(f"{directory}: inconsistent shapes q{q.shape} o{o.shape} k{entries[0][0].shape}")
    dtype, causal = case.get("dtype", "fp32"), case.get("mask") == "causal"
    inputs_finite = bool(np.isfinite(q).all()) and all(np.isfinite(k).all() and np.isfinite(v).all()
                                                       for k, v in entries)
    reference, plain_error = [], 0.0
    for b, (k, v) in enumerate(entries):
        reference.append(attention(q[b:b + 1], k, v, causal))
        plain = attention(q[b:b + 1], k, v, causal, dtype)
        plain_error = max(plain_error, float(np.abs(plain - reference[-1]).max(initial=0)))
    reference = np.concatenate(reference)
    tolerance = 2 * plain_error + FLOOR.get(dtype, 1e-3)
    finite = inputs_finite and bool(np.isfinite(o).all())
    error = float(np.abs(o.astype(np.float64) - reference).max(initial=0)) if finite else float("inf")
    passed = finite and error <= tolerance
    lengths = [k.shape[1] for k, _ in entries]
    keys = f"k{lengths[0]}" if len(set(lengths)) == 1 else "k[" + ",".join(map(str, lengths)) + "]"
    shape = (f"b{q.shape[0]} h{q.shape[2]}:{kv_heads} q{q.shape[1]} {keys} d{q.shape[3]} {dtype}"
             f"{' causal' if causal else ''}{f' page{page_size}' if page_size else ''}")
    why = "" if finite else " (non-finite input)" if not inputs_finite else " (non-finite output)"
    line = (f"{saved.get('impl', '?'):<20} {shape:<34} {'pass' if passed else 'FAIL'}  max|o-ref| {error:.2e}"
            f" {'<=' if passed else '>'} tolerance {tolerance:.2e} (plain {dtype} {plain_error:.2e}){why}")
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
