#!/usr/bin/env python3
"""Scale benchmark (`make bench`, docs/benchmarks.md "Scale"): DeepSeek-V3 prefill with static expert
parallelism on 16 ... 1,024 H100s (DGX H100 nodes; its fp8 weights need 99 GB per GPU on one
node, so 8 GPUs do not fit), one batch through every layer, for both
network backends. Each case is one `moesim run` child; its CPU time and peak RSS come from
wait4() on that child alone. Prints a markdown table and the growth exponents (least-squares
slope of log time and log memory against log GPUs at fixed tokens per GPU, and against log
tokens at 64 GPUs).

    python3 tests/bench/scale_table.py --moesim build/moesim [--large]

--large adds the flow model at 128 and 256 GPUs (minutes each)."""
import argparse
import math
import os
import subprocess
import sys
import tempfile

SCENARIO = "scenarios/scale/deepseek-v3-64gpu.yaml"  # 2x-dgx-h100 preset, seq_len 512
SEQ_LEN = 512


def run_case(moesim, backend, gpus, tokens):
    nodes = gpus // 8
    batch = tokens // SEQ_LEN
    with tempfile.TemporaryDirectory() as out:
        cmd = [moesim, "run", SCENARIO, "-q", "--out", out,
               "--set", f"hardware.nodes={nodes}", "--set", f"workload.batch_size={batch}",
               "--set", f"hardware.network_model={backend}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read().decode()
        proc.stderr.close()
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"scale_table: {' '.join(cmd)} failed:\n{err}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0  # s, MB


def slope(points):
    """Least-squares slope of log y against log x."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moesim", default="build/moesim")
    ap.add_argument("--large", action="store_true", help="flow model at 128 and 256 GPUs too")
    args = ap.parse_args()

    per_gpu = 2048
    flow_gpus = [16, 32, 64] + ([128, 256] if args.large else [])
    cases = [("flow", g, g * per_gpu) for g in flow_gpus]
    cases += [("analytic", g, g * per_gpu) for g in [16, 32, 64, 128, 256, 1024]]
    cases += [(b, 64, t) for b in ("flow", "analytic") for t in (16384, 32768)]
    cases += [("analytic", 1024, 1024 * 4096)]  # the 1,024-GPU target: 4,096 per GPU

    results = {}
    print("| backend | GPUs | tokens per batch | CPU time | peak RSS |")
    print("| --- | --- | --- | --- | --- |")
    for backend, gpus, tokens in cases:
        cpu, rss = run_case(args.moesim, backend, gpus, tokens)
        results[(backend, gpus, tokens)] = (cpu, rss)
        print(f"| {backend} | {gpus} | {tokens // 1024} k | {cpu:.2f} s | {rss:.0f} MB |", flush=True)

    print()
    for backend in ("flow", "analytic"):
        by_gpus = [(g, results[(b, g, t)]) for (b, g, t) in results if b == backend and t == g * per_gpu]
        by_tokens = [(t, results[(b, g, t)]) for (b, g, t) in results if b == backend and g == 64]
        print(f"{backend}: time ~ G^{slope([(g, r[0]) for g, r in by_gpus]):.2f}, "
              f"memory ~ G^{slope([(g, r[1]) for g, r in by_gpus]):.2f} (at {per_gpu} tokens per GPU, "
              f"G = {min(g for g, _ in by_gpus)}..{max(g for g, _ in by_gpus)}); "
              f"at 64 GPUs time ~ T^{slope([(t, r[0]) for t, r in by_tokens]):.2f}, "
              f"memory ~ T^{slope([(t, r[1]) for t, r in by_tokens]):.2f} (T = tokens per batch)")


if __name__ == "__main__":
    main()
