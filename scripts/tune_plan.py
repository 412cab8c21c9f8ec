#!/usr/bin/env python3
"""What scripts/device-tune.sh tunes, and the configs it runs, from `faprobe list --variants --json`.

Usage:
  scripts/tune_plan.py implementations LIST.json TARGET [--notes FILE]
  scripts/tune_plan.py config CONFIG.json TARGET [--family KERNEL] IMPL...

TARGET is cuda (a GPU) or emu (the same kernels under the emulator, emu.*, for CI).

implementations: the names to tune, one a line, in the listing's order: the plain TARGET.fa3 and
TARGET.fa2 where listed, every variant whose variant_of is one of them (TARGET.fa3@<block_q>x<block_k>,
...), and cuda.cudnn where listed (TARGET cuda only: it has no emulated twin). What is missing is said in
--notes (appended, one line each), for the table.

config: CONFIG (configs/tune-verify.json or configs/tune-bench.json) for this run, as JSON on stdout. With
--family, only the parts whose impl names that kernel (cuda.fa3 → fa3), each part's impl replaced by the
IMPLs of the family: the plain kernel, its variants, and its companions (cuda.cudnn beside fa3, whose
targets are against it); without, every part, and impl the IMPLs (device-tune.sh names one with --impl).
For TARGET emu the shapes are made tiny, since the emulator runs microseconds per warp instruction: each
part's sequence length, batch and heads become EMULATED_BENCH's (with --family: a benchmark config) or the parts become
EMULATED_VERIFY (without: a verify config), so every (dtype, head_dim, mask) of the GPU's plan is
still run once; parts that became equal are merged. Exit status 2 when the family has no implementation.
"""

import argparse
import json
import sys

KERNELS = ("fa3", "fa2")
COMPANIONS = {"fa3": ("cudnn",)}  # implementations timed in a kernel's process, on its cases
EMULATED_BENCH = {"seq": 256, "batch": 1, "heads": 2}
EMULATED_VERIFY = [{"seq": 129, "seq_q": "17,129", "batch": 1, "heads": 2, "kv_heads": 1}]
SHAPE_KEYS = ("seq", "seq_q", "batch", "heads", "kv_heads", "seqlens", "page_size")


def kernel_of(name, target):
    """fa3 for TARGET.fa3 and TARGET.fa3@128x176; the companion's kernel for a companion; else None."""
    prefix = target + "."
    if not name.startswith(prefix):
        return None
    base = name[len(prefix):].split("@", 1)[0]
    if base in KERNELS:
        return base
    return next((kernel for kernel, others in COMPANIONS.items() if base in others), None)


def implementations(listing, target, notes):
    names = [entry["name"] for entry in listing.get("implementations", [])]
    variants = listing.get("variants")
    if variants is None:
        notes.append("faprobe list --json has no \"variants\" (a faprobe without variants): plain kernels only")
        variants = []
    chosen = []
    for kernel in KERNELS:
        plain = f"{target}.{kernel}"
        if plain in names:
            chosen.append(plain)
        else:
            notes.append(f"{plain}: not listed by this faprobe")
        mine = [entry["name"] for entry in variants if entry.get("variant_of") == plain]
        chosen += mine
        if not mine:
            notes.append(f"{plain}: no variants listed (plain {plain} only)")
    if target != "cuda":
        notes.append("cuda.cudnn: skipped, it has no emulated twin (cuDNN runs on a GPU only)")
    elif "cuda.cudnn" in names:
        chosen.append("cuda.cudnn")
    else:
        notes.append("cuda.cudnn: not listed by this faprobe; the FA-3 targets use PyTorch's cuDNN (torch.cudnn)")
    return chosen


def config(base, target, family, impls):
    derived = {key: value for key, value in base.items() if key != "parts"}
    parts = base.get("parts") or [{}]
    if family:
        parts = [part for part in parts if kernel_of(part.get("impl", ""), "cuda") == family
                 or kernel_of(part.get("impl", ""), target) == family]
        impls = [name for name in impls if kernel_of(name, target) == family]
        if not impls or not parts:
            raise LookupError(f"no {'implementation' if not impls else 'part'} of the {family} family")
    if target == "emu":
        for key in SHAPE_KEYS:
            derived.pop(key, None)
        if not family:  # a verify config
            parts = [dict(part) for part in EMULATED_VERIFY]
        else:
            parts = [dict({k: v for k, v in part.items() if k not in SHAPE_KEYS}, **EMULATED_BENCH) for part in parts]
    merged, seen = [], set()
    for part in parts:
        part = {key: value for key, value in part.items() if key != "impl"}
        key = json.dumps(part, sort_keys=True)
        if key not in seen:
            seen.add(key)
            merged.append(part)
    derived["impl"] = ",".join(impls)
    derived["description"] = (f"Derived by scripts/tune_plan.py for target {target}"
                              + (f", the {family} family" if family else "") + ". " + base.get("description", ""))
    derived["parts"] = merged
    return derived


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tune_plan.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    listed = sub.add_parser("implementations", help="the names to tune, one a line")
    listed.add_argument("listing", metavar="LIST.json")
    listed.add_argument("target", choices=("cuda", "emu"))
    listed.add_argument("--notes", help="append what is missing to this file")
    derived = sub.add_parser("config", help="a config for this run, on stdout")
    derived.add_argument("config", metavar="CONFIG.json")
    derived.add_argument("target", choices=("cuda", "emu"))
    derived.add_argument("--family", choices=KERNELS)
    derived.add_argument("impls", nargs="+", metavar="IMPL")
    args = parser.parse_args(argv)
    try:
        if args.command == "implementations":
            with open(args.listing, encoding="utf-8") as file:
                listing = json.load(file)
            notes = []
            for name in implementations(listing, args.target, notes):
                print(name)
            if args.notes:
                with open(args.notes, "a", encoding="utf-8") as file:
                    file.writelines(note + "\n" for note in notes)
        else:
            with open(args.config, encoding="utf-8") as file:
                base = json.load(file)
            print(json.dumps(config(base, args.target, args.family, args.impls), indent=2))
    except (OSError, ValueError, LookupError) as error:
        print(f"tune_plan.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
