#!/usr/bin/env python3
"""Runs the paper-reproduction scenarios over the grids their papers evaluate and prints one
markdown table per experiment (the numbers behind scenarios/papers/README.md).

    python3 scenarios/papers/reproduce.py [--moesim build/moesim] [--out results/papers] [--only NAME]

Every number comes from running moesim on the scenario files in this folder; nothing here
computes a metric itself beyond ratios between runs.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> (scenario file, grid: list of (point label, --set overrides))
EXPERIMENTS = {
    "harmoeny-switch128-skew": ("harmoeny/switch128-skew.yaml",
                                [(f"alpha={a}", [f"workload.routing.alpha={a}"]) for a in (0.0, 0.5, 0.9)]),
    "harmoeny-qwen-skew": ("harmoeny/qwen-skew.yaml",
                           [(f"alpha={a}", [f"workload.routing.alpha={a}"]) for a in (0.0, 0.5, 0.9)]),
    # 32K tokens per batch leave Algorithm 2 per-source slices of ~370 tokens of each hot expert,
    # under Eq. 4's q = 1994; 256K tokens (the scale at which the paper's static layer takes
    # ~290 ms, §III) give slices above it.
    "harmoeny-switch128-ablation": ("harmoeny/switch128-ablation.yaml",
                                    [(f"batch {b}x128", [f"workload.batch_size={b}"]) for b in (256, 2048)]),
    "harmoeny-switch128-fluctuating": ("harmoeny/switch128-fluctuating.yaml", [("alpha~U[0,0.95] per batch", [])]),
    "moeshard-batch": ("moeshard/switch-base-a100.yaml",
                       [(f"batch={b}", [f"workload.batch_size={b}"]) for b in (10, 50, 100, 250, 450)]),
    # MoE-GPS §4 (Fig. 6): each predictor driving expert duplication, NVLink vs PCIe, by skewness.
    "moe-gps-mixtral": ("moe-gps/mixtral-a100.yaml",
                        [(f"{hw} skew={s}", [f"hardware={hw}", f"workload.routing.skewness={s}"])
                         for hw in ("hgx-a100-4gpu-nvlink", "a100-4gpu-pcie") for s in (1.4, 2.0, 3.0)]),
    # DeepSpeed's capacity factor is min(E, 50) (MoEShard §4.1).
    "moeshard-experts": ("moeshard/switch-base-a100.yaml",
                         [(f"experts={e}", [f"model.experts={e}", f"policy.0.capacity_factor={min(e, 50)}"])
                          for e in (8, 16, 32, 64, 128, 256)]),
}

COLUMNS = [
    ("layer ms", lambda m: m["layer_latency_ms"]["mean"]),
    ("TTFT ms", lambda m: m["ttft_ms"]["mean"]),
    ("tokens/s", lambda m: m["throughput_tokens_per_s"]),
    ("idle", lambda m: m["gpu_idle_fraction"]["mean"]),
    ("waiting", lambda m: m["gpu_time_breakdown"]["mean_fraction"]["waiting"]),
    ("GPU max/mean", lambda m: m["load"]["gpu_max_over_mean"]),
    ("dropped", lambda m: m["tokens_dropped"]),
    # Throughput across batches (HarMoEny §V-B, Fig. 8): coefficient of variation and the
    # largest drop between consecutive batches.
    ("tput CV", lambda m: m["throughput_tokens_per_s_variance"] ** 0.5 / m["throughput_tokens_per_s_per_batch"]["mean"]),
    ("max drop", lambda m: m["throughput_tokens_per_s_per_batch"]["max_drop_fraction"]),
]


def run_point(moesim, scenario, overrides, out):
    cmd = [moesim, "run", str(HERE / scenario), "--out", str(out), "-q"]
    for o in overrides:
        cmd += ["--set", o]
    subprocess.run(cmd, check=True)
    return json.loads((out / "result.json").read_text())


def fmt(v):
    if isinstance(v, int):
        return str(v)
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def table(name, points):
    """One markdown table: a row per (grid point, policy label)."""
    lines = [f"### {name}", "", "| point | policy | " + " | ".join(c for c, _ in COLUMNS) + " |",
             "|---|---|" + "---:|" * len(COLUMNS)]
    for label, result in points:
        for run in result["runs"]:
            m = run["metrics"]
            cells = [fmt(get(m)) for _, get in COLUMNS]
            who = run["label"]
            if run.get("predictor", "none") != "none" or len(result["runs"]) > len({r["label"] for r in result["runs"]}):
                who += f" / {run.get('predictor_label', run.get('predictor'))}"
            lines.append(f"| {label} | {who} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moesim", default="build/moesim")
    ap.add_argument("--out", default="results/papers")
    ap.add_argument("--only", action="append", help="experiment name (repeatable); default all")
    args = ap.parse_args()
    out_root = Path(args.out)
    names = args.only or list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        sys.exit(f"unknown experiment(s) {unknown}; valid: {', '.join(EXPERIMENTS)}")
    report = []
    for name in names:
        scenario, grid = EXPERIMENTS[name]
        points = []
        for i, (label, overrides) in enumerate(grid):
            points.append((label, run_point(args.moesim, scenario, overrides, out_root / name / str(i))))
        report.append(table(name, points))
        print(report[-1], flush=True)
    (out_root / "summary.md").write_text("\n".join(report))


if __name__ == "__main__":
    main()
