#!/usr/bin/env python3
"""Serving speed benchmark (`make bench`, docs/benchmarks.md "Serving speed"): the serving cases of the speed
issue against their targets, then the serving scale table.

Each case is one `moesim run` (or `moesim sweep`) child, run 7 times (the median CPU time) when it takes
under 2 CPU seconds. Its CPU time and peak RSS come from
wait4() on that child alone; the simulated time is the run's makespan. A case gets a wall-clock
budget and an address-space cap: one that passes either is reported as such, never dropped.

    python3 tests/bench/serving_speed.py --moesim build/moesim [--budget S] [--only targets|scale]

Targets (the issue's, not timed tests): x real time = simulated seconds per CPU second."""
import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_table import slope  # noqa: E402  (the prefill scale table's growth exponent)

MIXTRAL = "scenarios/serving/bench-mixtral-dgx-h100.yaml"
H200 = "scenarios/serving/bench-deepseek-v3-h200.yaml"
EP72 = "scenarios/serving/bench-deepseek-v3-ep72-decode.yaml"
SKEWED = "scenarios/scale/deepseek-v3-64gpu-skewed.yaml"
MEMORY_CAP = 16 << 30  # bytes of address space per child (the machine has 23 GB)


def ep_decode(nodes, seqs_per_gpu, output_tokens, redundant=None):
    """Overrides turning the EP72 decode case into DeepSeek-V3 decode on `nodes` H100 nodes."""
    gpus = nodes * 8
    sets = [f"hardware.nodes={nodes}", f"deployment.data_parallel={gpus}",
            f"workload.requests={gpus * seqs_per_gpu}", f"workload.arrival.clients={gpus * seqs_per_gpu}",
            f"serving.max_num_seqs={seqs_per_gpu}", f"workload.output_tokens={output_tokens}"]
    if redundant is not None:
        sets.append(f"policy.redundant_experts={redundant}")
    return sets


# (label, scenario, overrides, backend, target): target ("x", v) = at least v x real time;
# ("wall", v) = at most v CPU seconds; ("per_min", v) = at most v CPU seconds per simulated minute.
# Each serving case runs exact, then with serving.layer_sampling 16 and 256 (an approximation, off
# by default; 256 is past every model's MoE layer count: one MoE layer planned per step, standing
# for all of them); its error against the exact run is printed beside it.
EP1024 = ep_decode(128, 128, 600, redundant=768)
TARGETS = [
    ("Mixtral-8x7B, 1 DGX H100, 1,000 x 256 (flow)", MIXTRAL, [], "flow", ("x", 100)),
    ("Mixtral-8x7B, 1 DGX H100, 1,000 x 256 (analytic)", MIXTRAL, [], "analytic", ("x", 300)),
    ("DeepSeek-V3, 8x H200, ADP8 + EP8, 640 x 1024/512, c512 (flow)", H200, [], "flow", ("x", 50)),
    ("DeepSeek-V3 decode, 9 DGX H100, EP72, 256 seqs/GPU, 64 out (flow)", EP72, [], "flow", ("x", 10)),
    ("DeepSeek-V3 decode, 9 DGX H100, EP72, 256 seqs/GPU, 64 out (analytic)", EP72, [], "analytic", ("x", 10)),
    ("DeepSeek-V3 decode, 128 DGX H100, EP1024, 128 seqs/GPU (analytic)", EP72, EP1024, "analytic", ("per_min", 60)),
]
PREFILL = ("DeepSeek-V3 prefill, 8 DGX H100, EP64, 128k tokens, 30% on 16 hot experts (flow)", SKEWED, [], "flow",
           ("wall", 5))
# The prefill case also runs with hardware.flow_completion_window_us (an approximation, off by
# default: flows due within the window of the earliest completion finish with it, one max-min
# recomputation for all of them); its error against the exact run is printed beside it.
PREFILL_WINDOWS_US = (1, 10)
SAMPLINGS = (16, 256)
# Every serving case also runs with hardware.all_to_all_model closed-form (an approximation, off by
# default: one task per GPU for each all-to-all, its end worked out from the link loads when the
# step is planned), alone and with one MoE layer per step.
CLOSED_FORM = "hardware.all_to_all_model=closed-form"
SWEEP_SAMPLING = 16


def run_child(cmd, budget):
    """Runs cmd; returns (status, cpu_s, wall_s, rss_MB) with status ok|over budget|out of memory|failed: ..."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
        os.setsid()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limit)
    timed_out = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > budget and not timed_out:
            os.killpg(proc.pid, signal.SIGKILL)
            timed_out = True
        time.sleep(0.05)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    cpu, rss = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0
    code = os.waitstatus_to_exitcode(status)
    if timed_out:
        return f"over budget ({budget:.0f} s)", cpu, wall, rss
    if code != 0:
        oom = "bad_alloc" in err or "memory" in err.lower() or code in (-signal.SIGKILL, -signal.SIGABRT)
        return ("out of memory (16 GB cap)" if oom else "failed: " + err.strip().splitlines()[-1] if err.strip()
                else f"failed: exit {code}"), cpu, wall, rss
    return "ok", cpu, wall, rss


# A case under this many CPU seconds is run REPEATS times and its median CPU time reported: a
# run of tens of milliseconds varies by 20% from one run to the next (page faults, the host).
SHORT_CPU_S = 2.0
REPEATS = 7


def run_case(moesim, scenario, sets, backend, budget):
    with tempfile.TemporaryDirectory() as out:
        cmd = [moesim, "run", scenario, "-q", "--jobs", "1", "--out", out, "--set", f"hardware.network_model={backend}"]
        for s in sets:
            cmd += ["--set", s]
        status, cpu, wall, rss = run_child(cmd, budget)
        if status == "ok" and cpu < SHORT_CPU_S:
            cpus = [cpu] + [run_child(cmd, budget)[1] for _ in range(REPEATS - 1)]
            cpu = sorted(cpus)[len(cpus) // 2]
        simulated, metrics = None, None
        if status == "ok":
            metrics = json.load(open(os.path.join(out, "result.json")))["runs"][0]["metrics"]
            simulated = metrics["makespan_ms"] / 1e3
    return status, cpu, simulated, rss, metrics


def verdict(target, cpu, simulated, status):
    kind, value = target
    if status != "ok":
        return "not met (" + status + ")"
    if kind == "x":
        return "met" if simulated / cpu >= value else "not met"
    if kind == "wall":
        return "met" if cpu <= value else "not met"
    return "met" if cpu / (simulated / 60.0) <= value else "not met"


def target_text(target):
    kind, value = target
    return {"x": f">= {value}x real time", "wall": f"<= {value} s", "per_min": f"<= {value} s per simulated minute"}[kind]


def relative_errors(exact, approx, metrics, digits=1):
    """Each named metric of the approximate run against the exact one, in percent."""
    if not exact or not approx:
        return "—"
    return ", ".join(f"{name} {100 * (get(approx) / get(exact) - 1):+.{digits}f}%" for name, get in metrics)


# Serving: output throughput, mean TPOT and TTFT, and p99 TPOT.
SERVING_ERRORS = (("throughput", lambda m: m["throughput_tokens_per_s"]), ("TPOT", lambda m: m["tpot_ms"]["mean"]),
                  ("TTFT", lambda m: m["ttft_ms"]["mean"]), ("TPOT p99", lambda m: m["tpot_ms"]["p99"]))
# Prefill: TTFT (the batch's latency), all-to-all time and the mean GPU idle fraction.
PREFILL_ERRORS = (("TTFT", lambda m: m["ttft_ms"]["mean"]), ("all-to-all", lambda m: m["alltoall_ms"]),
                  ("GPU idle", lambda m: m["gpu_idle_fraction"]["mean"]))


def error_text(exact, approx):
    return relative_errors(exact, approx, SERVING_ERRORS)


def row(label, target, status, cpu, simulated, rss, note=""):
    sim = f"{simulated:.1f} s" if simulated else "—"
    xr = f"{simulated / cpu:.2f}x" if simulated else "—"
    print(f"| {label} | {sim} | {cpu:.2f} s | {xr} | {rss:.0f} MB | {target_text(target)} | "
          f"{verdict(target, cpu, simulated, status)} | {note} |", flush=True)


def targets(moesim, budget):
    print("| case | simulated | CPU | x real time | peak RSS | target | verdict | approximation's error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, scenario, sets, backend, target in TARGETS:
        status, cpu, simulated, rss, exact = run_case(moesim, scenario, sets, backend, budget)
        row(label, target, status, cpu, simulated, rss)
        for sampling in SAMPLINGS:
            status, cpu, simulated, rss, approx = run_case(moesim, scenario,
                                                           sets + [f"serving.layer_sampling={sampling}"], backend, budget)
            what = " (one MoE layer per step)" if sampling == max(SAMPLINGS) else ""
            row(f"same, `layer_sampling: {sampling}`{what}", target, status, cpu, simulated, rss,
                error_text(exact, approx))
        for extra, what in (([CLOSED_FORM], "`all_to_all_model: closed-form`"),
                            ([CLOSED_FORM, f"serving.layer_sampling={max(SAMPLINGS)}"],
                             f"`all_to_all_model: closed-form`, `layer_sampling: {max(SAMPLINGS)}`")):
            status, cpu, simulated, rss, approx = run_case(moesim, scenario, sets + extra, backend, budget)
            row(f"same, {what}", target, status, cpu, simulated, rss, error_text(exact, approx))
    label, scenario, sets, backend, target = PREFILL
    status, cpu, simulated, rss, exact = run_case(moesim, scenario, sets, backend, budget)
    row(label, target, status, cpu, simulated, rss)
    for window in PREFILL_WINDOWS_US:
        status, cpu, simulated, rss, approx = run_case(
            moesim, scenario, sets + [f"hardware.flow_completion_window_us={window}"], backend, budget)
        row(f"same, `flow_completion_window_us: {window}`", target, status, cpu, simulated, rss,
            relative_errors(exact, approx, PREFILL_ERRORS, 3))
    # The sweep: 20 arrival rates x 3 policies of the Mixtral case, wall time at --jobs 2.
    for extra in ([], [f"serving.layer_sampling={SWEEP_SAMPLING}"]):
        with tempfile.TemporaryDirectory() as out:
            cmd = [moesim, "sweep", MIXTRAL, "--jobs", "2", "--out", os.path.join(out, "s"),
                   "--set", "policy=[static-ep, eplb, deepspeed]", "--grid", "workload.arrival.rate_per_s=5:100:5"]
            for e in extra:
                cmd += ["--set", e]
            status, cpu, wall, rss = run_child(cmd, budget)
        met = "met" if status == "ok" and wall <= 60 else "not met" + ("" if status == "ok" else f" ({status})")
        label = "`moesim sweep` of 20 arrival rates x 3 policies, Mixtral case, --jobs 2" if not extra else \
            f"same, `layer_sampling: {SWEEP_SAMPLING}`"
        print(f"| {label} | — | {cpu:.1f} s ({wall:.1f} s wall) | — | {rss:.0f} MB | <= 60 s wall | {met} | |",
              flush=True)


# The serving scale table's modes per backend, each with its GPU counts (nodes of 8) and the
# overrides it adds: exact; one MoE layer planned per step, and on the flow backend a 1 us
# completion window; on the analytic backend also closed-form all-to-alls (all off by default;
# the error against the exact run is printed where both finished). The flow backend's exact cost
# grows as ~G^2.9, so it stops at 72 GPUs exact and 128 with the approximations.
ALL_NODES = (1, 2, 4, 9, 16, 32, 64, 128)
SCALE_MODES = [
    ("exact", "flow", (1, 2, 4, 9), []),
    ("exact", "analytic", ALL_NODES, []),
    ("one MoE layer per step, 1 µs window", "flow", (1, 2, 4, 9, 16),
     ["serving.layer_sampling=256", "hardware.flow_completion_window_us=1"]),
    ("one MoE layer per step", "analytic", ALL_NODES, ["serving.layer_sampling=256"]),
    ("one MoE layer per step, closed-form all-to-all", "analytic", ALL_NODES,
     ["serving.layer_sampling=256", CLOSED_FORM]),
]


def scale(moesim, budget):
    """DeepSeek-V3 steady-state decode (prompt-cached, 2,000-token contexts, 8 output tokens), H200
    GPUs (its weights fit one 8-GPU node), attention DP over every GPU, EPLB over all of them; in
    each mode of SCALE_MODES."""
    print()
    print("| GPUs | sequences per GPU | backend | mode | simulated | CPU | x real time | peak RSS | error against exact |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    results, exact_metrics = {}, {}
    for mode, backend, all_nodes, extra in SCALE_MODES:
        for seqs in (32, 128):
            for nodes in all_nodes:
                sets = ep_decode(nodes, seqs, 8) + ["hardware.gpu=H200-141GB", "policy.redundant_experts=-1"] + extra
                status, cpu, simulated, rss, metrics = run_case(moesim, EP72, sets, backend, budget)
                gpus = nodes * 8
                key = (backend, seqs, gpus)
                note = ""
                if mode != "exact":
                    note = error_text(exact_metrics.get(key), metrics) if key in exact_metrics else "exact over budget"
                elif metrics:
                    exact_metrics[key] = metrics
                if status == "ok":
                    results[(mode,) + key] = (cpu, rss)
                    cells = f"{simulated:.2f} s | {cpu:.1f} s | {simulated / cpu:.3f}x | {rss:.0f} MB"
                else:
                    cells = f"— | {status} | — | {rss:.0f} MB"
                print(f"| {gpus} | {seqs} | {backend} | {mode} | {cells} | {note} |", flush=True)
    print()
    for mode, backend, _, _ in SCALE_MODES:
        for seqs in (32, 128):
            pts = [(g, r) for (m, b, s, g), r in results.items() if m == mode and b == backend and s == seqs]
            if len(pts) >= 2:
                print(f"{backend}, {mode}, {seqs} sequences per GPU: CPU time ~ "
                      f"G^{slope([(g, r[0]) for g, r in pts]):.2f}, memory ~ G^{slope([(g, r[1]) for g, r in pts]):.2f} "
                      f"(G = {min(g for g, _ in pts)}..{max(g for g, _ in pts)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moesim", default="build/moesim")
    ap.add_argument("--budget", type=float, default=300.0, help="wall seconds per case before it is stopped")
    ap.add_argument("--only", choices=["targets", "scale"], help="one of the two tables")
    args = ap.parse_args()
    if not os.path.exists(args.moesim):
        sys.exit(f"serving_speed: no moesim at {args.moesim}")
    if args.only != "scale":
        targets(args.moesim, args.budget)
    if args.only != "targets":
        scale(args.moesim, args.budget)


if __name__ == "__main__":
    main()
