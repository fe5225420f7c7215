#!/usr/bin/env python3
"""moesim's DeepEP cost model against DeepEP's published H800 tables.

Runs `moesim cost dispatch|combine` for every H800 row of DeepEP's README (published.csv: the
normal kernels at 4096 tokens EP8-64 and the low-latency kernels at 128 tokens EP8-256), writes
validation/deepep/results.md and puts its table into docs/validation.md between the deepep markers.

The rows compared are the tables as they stand at DeepEP 567632d (the last V1 commit): normal
EP8/EP16 from ebfe47e, EP32/EP64 from 3b1045d ("Fix the performance data"), low-latency from
d8dd185 (after PR #173, NVLink for same-node peers). The superseded low-latency rows of the first
release (all RDMA) are compared too, with `--ll-nvlink off`, in a second table.

Settings as DeepEP's tests run them (tests/test_internode.py, test_low_latency.py at 567632d):
hidden 7168, top-8, 256 experts, FP8 dispatch and BF16 combine; normal kernels with 24 SMs and
node-limited routing to min(nodes, 4) nodes; low-latency with plain top-8 routing.
Nothing here is fitted: every constant of the model is in hardware/deepep.cpp with its source.

Usage: validation/deepep/compare.py [--moesim build/moesim] [--hardware dgx-h800]
"""
import argparse
import csv
import json
import math
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
WITHIN = 0.15  # |error| at most this: "within 15%"
ROUGH = 0.30   # at most this: "within 30%"; beyond: "misses"


def moesim_cmd(args, row, hardware, extra):
    ep = int(row["ep"])
    kernel = "deepep-normal" if row["kernel"] == "normal" else "deepep-ll"
    cmd = [args.moesim, "cost", row["op"], "--kernel", kernel, "--hardware", hardware, *extra,
           "--nodes", str(math.ceil(ep / 8)), "--ep", str(ep), "--tokens", row["tokens"],
           "--hidden", row["hidden"], "--top-k", row["topk"], "--experts", row["experts"], "--json",
           # The closed form with its published constants: the fits to the collectors' tables are
           # scored on their own held-out rows (validation/kernels/kernel_table.py).
           "--calibration", "none"]
    if row["op"] == "dispatch":
        cmd += ["--dtype", row["dispatch_dtype"]]
    if kernel == "deepep-normal":
        cmd += ["--sms", "24", "--topk-groups", "4"]
    else:
        cmd += ["--ll-nvlink", "on" if row["current_at_567632d"] == "yes" else "off"]
    return cmd


def pick_hardware(args):
    listed = subprocess.run([args.moesim, "list", "hardware"], capture_output=True, text=True, check=True).stdout
    if args.hardware in listed.split():
        return args.hardware, []
    if args.hardware != "dgx-h800":
        sys.exit(f"compare.py: {args.hardware} is not a moesim hardware preset")
    # Until the dgx-h800 preset lands: DGX H100 with H800's NVLink (8 links, 200 GB/s per direction).
    return "dgx-h100", ["--nvlink-bandwidth", "200"]


def verdict(err):
    a = abs(err)
    return "within 15%" if a <= WITHIN else "within 30%" if a <= ROUGH else "misses"


def reason(row, ours):
    """Why a row misses: what the published number implies on the model's bottleneck link."""
    published_us = ours["counted_bytes"] / (float(row["bandwidth_GBps"]) * 1e3)
    link = ours["bottleneck"]
    bytes_ = {"nvlink": ours["nvlink_bytes"], "rdma": ours["rdma_bytes"], "sm": ours["counted_bytes"]}[link]
    rate = {"nvlink": ours["nvlink_GBps"], "rdma": ours["rdma_GBps"], "sm": ours["sm_GBps"]}[link]
    implied = bytes_ / max(published_us - ours["fixed_us"], 1e-9) / 1e3
    return f"{link}-bound: published implies {implied:.0f} GB/s on it, model {rate:.0f}"


def compare(args, rows, hardware, extra):
    out = []
    for row in rows:
        res = subprocess.run(moesim_cmd(args, row, hardware, extra), capture_output=True, text=True)
        if res.returncode != 0:
            out.append((row, None, res.stderr.strip()))
            continue
        out.append((row, json.loads(res.stdout), ""))
    return out


def table(results):
    lines = ["| kernel | op | EP | published | moesim | error | verdict | bound / reason |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    counts = {}
    for row, ours, err_text in results:
        pub_bw = float(row["bandwidth_GBps"])
        pub = f"{pub_bw:g} GB/s"
        if row["latency_us"]:
            pub = f"{float(row['latency_us']):g} us, " + pub
        kernel = "normal" if row["kernel"] == "normal" else "low-latency"
        if ours is None:
            lines.append(f"| {kernel} | {row['op']} | {row['ep']} | {pub} | failed | | misses | {err_text} |")
            counts["misses"] = counts.get("misses", 0) + 1
            continue
        mine = f"{ours['bandwidth_GBps']:.0f} GB/s ({ours['bandwidth_label']})"
        if row["latency_us"]:
            mine = f"{ours['time_us']:.0f} us, " + mine
            err = ours["time_us"] / float(row["latency_us"]) - 1  # the latency column, where published
        else:
            err = ours["bandwidth_GBps"] / pub_bw - 1
        v = verdict(err)
        counts[v] = counts.get(v, 0) + 1
        why = ours["bottleneck"] if v == "within 15%" else reason(row, ours)
        lines.append(f"| {kernel} | {row['op']} | {row['ep']} | {pub} | {mine} | {err:+.1%} | {v} | {why} |")
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return lines, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moesim", default=str(ROOT / "build" / "moesim"))
    ap.add_argument("--hardware", default="dgx-h800")
    ap.add_argument("--readme", default=str(ROOT / "docs" / "validation.md"))
    args = ap.parse_args()
    hardware, extra = pick_hardware(args)
    rows = list(csv.DictReader(open(HERE / "published.csv")))
    current = [r for r in rows if r["current_at_567632d"] == "yes"]
    old_ll = [r for r in rows if r["current_at_567632d"] == "no" and r["kernel"] == "low_latency"]
    cur_lines, cur_sum = table(compare(args, current, hardware, extra))
    old_lines, old_sum = table(compare(args, old_ll, hardware, extra))
    hw_text = hardware + (" with NVLink at 200 GB/s per direction (H800)" if extra else "")
    errors = ("Error is moesim / published - 1 on the latency where DeepEP publishes one (low-latency rows; "
              "the bandwidth error is its inverse), else on the bandwidth. Verdict: within 15%, within 30%, "
              "or misses.")
    readme_block = "\n".join([
        f"DeepEP's H800 tables as they stand at DeepEP V1 567632d (normal: README 3b1045d; low-latency: "
        f"d8dd185, after PR #173) against `moesim cost dispatch|combine` on {hw_text}: {cur_sum}. "
        f"{errors} Generated by `validation/deepep/compare.py`; the superseded all-RDMA low-latency rows are "
        "in `validation/deepep/results.md`.", "", *cur_lines])
    md = "\n".join([
        "# DeepEP dispatch and combine: moesim against DeepEP's published H800 numbers", "",
        "Generated by `validation/deepep/compare.py` from `published.csv` (provenance per row). "
        f"Hardware: {hw_text}. Settings as DeepEP's tests: hidden 7168, top-8, 256 experts, FP8 dispatch, "
        "BF16 combine; normal kernels at 24 SMs with node-limited routing (min(nodes, 4) nodes per token); "
        "low-latency with plain top-8. No constant is fitted to these rows (hardware/deepep.cpp cites each). "
        + errors + " The reason column gives what the published number implies on the link moesim finds "
        "to be the bottleneck.", "",
        f"## Current tables (normal: 3b1045d; low-latency: d8dd185): {cur_sum}", "", *cur_lines, "",
        f"## Superseded low-latency rows (ebfe47e, every message over RDMA; `--ll-nvlink off`): {old_sum}", "",
        *old_lines, ""])
    (HERE / "results.md").write_text(md)
    readme = pathlib.Path(args.readme)
    text = readme.read_text()
    begin, end = "<!-- deepep:begin -->", "<!-- deepep:end -->"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        readme.write_text(head + begin + "\n" + readme_block + "\n" + end + tail)
    print(md)


if __name__ == "__main__":
    main()
