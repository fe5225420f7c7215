#!/usr/bin/env python3
"""Run every validation scenario through moesim and compare it with what the real engines measured.

Reads validation/serving/cases.json (written by make_scenarios.py), runs
`moesim run SCENARIO --out results/validation/<id> -q --jobs 1` for each case that has a scenario,
several at once, and writes validation/serving/results.md: one row per (case, metric) with the
measured value, moesim's and the signed error (moesim - measured) / measured, then the median and
mean |error| per metric (per model and overall) against the issue's targets. It also rewrites the
block of docs/validation.md between `<!-- validation:begin -->` and `<!-- validation:end -->`.

Skipped cases and failed runs stay in the table with their reason. The exit status is non-zero
only when a run failed (or moesim is missing), never for a miss against a target.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CASES_PATH = HERE / "cases.json"
RESULTS_MD = HERE / "results.md"
README = ROOT / "docs" / "validation.md"  # the validation page holds the table
BEGIN, END = "<!-- validation:begin -->", "<!-- validation:end -->"

# The targets (|error| in %), by metric. A metric without a target is still tabulated.
TARGETS = {
    "output_throughput": 10.0,
    "output_throughput_per_gpu": 10.0,
    "tpot_mean": 15.0,
    "tpot_p99": 15.0,
    "ttft_mean": 25.0,
    "ttft_p99": 25.0,
}
# Issue 48's targets for files of measured points (make_scenarios.py --points).
POINT_TARGETS = {"tpot_mean": 10.0, "ttft_mean": 20.0, "output_throughput": 10.0}
METRIC_ORDER = ["output_throughput", "output_throughput_per_gpu", "total_token_throughput",
                "total_token_throughput_per_gpu", "output_throughput_per_user", "request_latency_mean",
                "tpot_mean", "tpot_p99", "ttft_mean", "ttft_p99"]


def dist(m: dict, key: str, stat: str) -> float | None:
    d = m.get(key)
    return d.get(stat) if isinstance(d, dict) else None


def round_weighted(requests_csv: Path, clients: int, source_rounds: int) -> dict[str, float]:
    """The means of a `source_rounds`-round closed-loop benchmark estimated from a shorter run of
    the same loop (points.py's request rule): per-request TTFT and TPOT split by issue order into
    the first wave (the first `clients` requests), the closing tail (the last `clients`) and the
    rounds between, weighted 1, source_rounds - 2 and 1. Returns {"ttft_ms": .., "tpot_ms": ..}
    (a metric without per-request values is left out); an unreadable file gives {}."""
    try:
        lines = requests_csv.read_text().splitlines()
    except OSError:
        return {}
    head = lines[0].split(",") if lines else []
    if not {"id", "ttft_ms", "tpot_ms"} <= set(head):
        return {}
    col = {k: head.index(k) for k in ("id", "ttft_ms", "tpot_ms")}
    rows = sorted((int(f[col["id"]]), f) for f in (line.split(",") for line in lines[1:]) if len(f) == len(head))
    n = len(rows)
    out = {}
    for key in ("ttft_ms", "tpot_ms"):
        parts = [[], [], []]  # first wave, rounds between, closing tail
        for i, (_, f) in enumerate(rows):
            if f[col[key]] == "":
                continue
            parts[0 if i < clients else 2 if i >= n - clients else 1].append(float(f[col[key]]))
        if not all(parts) or n < 3 * clients:
            continue
        means = [statistics.fmean(p) for p in parts]
        out[key] = (means[0] + (source_rounds - 2) * means[1] + means[2]) / source_rounds
    return out


def point_metrics(case: dict, run_dir: Path, metrics: dict) -> dict:
    """A run's metrics, with TTFT and TPOT means replaced by the source protocol's estimate
    (round_weighted) when the case states its rounds (a measured serving point)."""
    rounds = case.get("rounds")
    if not rounds:
        return metrics
    est = round_weighted(run_dir / "requests.csv", int(case["clients"]), int(rounds["source"]))
    m = dict(metrics)
    for key, v in est.items():
        m[key] = {**(m.get(key) or {}), "mean": v}
    return m


def simulated(metric: str, m: dict, case: dict) -> tuple[float | None, str]:
    """moesim's value for a measured metric from a run's metrics, and a note (why none, or how derived)."""
    out = m.get("throughput_tokens_per_s")
    inp = m.get("input_throughput_tokens_per_s")
    gpus = case["num_gpus"]
    if metric == "output_throughput":
        return out, ""
    if metric == "output_throughput_per_gpu":
        return (out / gpus if out is not None else None), f"throughput_tokens_per_s / {gpus} GPUs"
    if metric == "total_token_throughput":
        return (out + inp if None not in (out, inp) else None), "output + input throughput"
    if metric == "total_token_throughput_per_gpu":
        return ((out + inp) / gpus if None not in (out, inp) else None), f"(output + input throughput) / {gpus} GPUs"
    if metric == "request_latency_mean":
        return dist(m, "e2e_ms", "mean"), "e2e_ms.mean"
    if metric == "output_throughput_per_user" and "trtllm-bench" in case["framework"]:
        # trtllm-bench's per-user output throughput includes the context phase ("[w/ ctx]"): a
        # request's output tokens over its latency. Approximated with the mean latency.
        e2e = dist(m, "e2e_ms", "mean")
        osl = case["output_tokens"]
        return (osl * 1000.0 / e2e if e2e else None), "derived: OSL x 1000 / e2e_ms.mean"
    mm = re.fullmatch(r"(ttft|tpot|itl)_(mean|p50|p90|p99)", metric)
    if mm:
        return dist(m, f"{mm.group(1)}_ms", mm.group(2)), ""
    return None, "not simulated"


def run_case(moesim: str, case: dict, out_dir: str, timeout: float | None, sets: tuple[str, ...] = ()) -> dict:
    """Run one scenario (in a worker process), with `moesim run --set` overrides; returns status,
    seconds, stderr's first line."""
    t0 = time.monotonic()
    scenario = case["scenario"]
    cmd = [moesim, "run", scenario, "--out", out_dir, "-q", "--jobs", "1"] + [a for kv in sets for a in ("--set", kv)]
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, err = -2, f"did not finish within the {timeout:g} s budget of a run (--timeout)"
    except OSError as e:
        rc, err = -1, str(e)
    first = next((line.strip() for line in err.splitlines() if line.strip()), "")
    if first.startswith(scenario + ":"):  # file:line:col: error: ... -> line:col: error: ...
        first = first[len(scenario) + 1:]
    if len(first) > 200:
        first = first[:197] + "..."
    ok = rc == 0 and (ROOT / out_dir / "result.json").is_file()
    if rc == 0 and not ok:
        first = "no result.json written"
    # Exit 2 is moesim refusing the scenario with a located error: a point it cannot express
    # (listed with that reason), not a failure of the run.
    return {"id": case["id"], "ok": ok, "rc": rc, "refused": rc == 2, "timed_out": rc == -2,
            "seconds": time.monotonic() - t0,
            "error": first or f"exit status {rc}"}


def fmt(v: float | None) -> str:
    if v is None:
        return ""
    a = abs(v)
    if a >= 1000:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_measured(v: float) -> str:
    return f"{v:g}" if abs(v) < 1e6 else f"{v:.0f}"


def md_cell(s: object) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    return out


# The mechanism behind a (metric, group) of the measured points that misses its target, where one
# has been traced to a cause (docs/validation.md says how); a miss without one reads "not traced yet".
POINT_MECHANISMS = {
    ("tpot_mean", "DeepSeek-R1, b200_sxm, sglang, agg"):
        "fused MoE at decode sizes: 144 us at 8 tokens, 250 at 16 (experts TP8) where SGLang's kernel table measures "
        "36-84 us: the dense DeepGEMM fit's memory efficiency (0.52 of HBM) on a grouped kernel streaming near HBM rate",
    ("ttft_mean", "GLM-5, b200_sxm, sglang, agg"):
        "SGLang's prefill-first rounds: 64 prompts of 8,192 tokens, one per prefill step, ~210 ms each in moesim; the "
        "measured 2.0 s would need 63 ms each, and mixed steps read -63%: neither explains the point",
    ("tpot_mean", "DeepSeek-R1, b200_sxm, sglang, disagg"):
        "the engine's prefill worker throttled decode (75 s TTFT); moesim's prefill is ~10x faster, its decode pool full",
}


def summary(records: list[dict], targets: dict, mechanisms: dict | None = None) -> list[str]:
    """Median and mean |error| per metric, per group (model and GPU; for points model, system, engine
    and mode) and over all of them, beside the targets; with `mechanisms`, a column naming the
    traced cause of each group that misses."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in records:
        if r["error"] is None:
            continue
        groups.setdefault((r["metric"], r["model"]), []).append(abs(r["error"]))
        groups.setdefault((r["metric"], "all models"), []).append(abs(r["error"]))
    metrics = sorted({m for m, _ in groups}, key=lambda m: (METRIC_ORDER.index(m) if m in METRIC_ORDER else 99, m))
    rows = []
    for metric in metrics:
        models = sorted(mod for m, mod in groups if m == metric and mod != "all models")
        for model in models + ["all models"]:
            if model == "all models" and len(models) == 1:
                continue  # the same numbers again
            errs = groups[(metric, model)]
            med, mean = statistics.median(errs), statistics.fmean(errs)
            target = targets.get(metric)
            met = "" if target is None else ("yes" if med <= target else "no")
            name = f"**{model}**" if model == "all models" else model
            rows.append([metric, name, len(errs), f"{med:.1f}", f"{mean:.1f}",
                         f"<= {target:g}" if target is not None else "", met])
            if mechanisms is not None:
                rows[-1].append("" if met != "no" or model == "all models"
                                else mechanisms.get((metric, model), "not traced yet"))
    head = ["metric", "model, GPU", "cases", "median \\|error\\| %", "mean \\|error\\| %", "target %", "met (median)"]
    return table(head + (["mechanism of the miss"] if mechanisms is not None else []), rows)


def write_readme(summary_lines: list[str], counts: str, begin: str = BEGIN, end: str = END,
                 results_link: str = "../validation/serving/results.md", regenerate: str = "make validate") -> None:
    if not README.is_file():
        print(f"warning: {README} not found; validation page not updated", file=sys.stderr)
        return
    text = README.read_text()
    if begin not in text or end not in text or text.index(begin) > text.index(end):
        print(f"warning: docs/validation.md lacks the markers {begin} ... {end}; validation page not updated", file=sys.stderr)
        return
    block = "\n".join([begin, "", counts, "",
                       "Median and mean |error| of moesim against the measured runs (per case: "
                       f"[{results_link.split('../', 1)[-1]}]({results_link}); "
                       f"regenerate with `{regenerate}`):", "", *summary_lines, "", end])
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    new = head + block + tail
    if new != text:
        README.write_text(new)
        print("docs/validation.md validation block updated")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--moesim", default="./build/moesim", help="the moesim binary (default ./build/moesim)")
    ap.add_argument("--only", metavar="REGEX", help="only cases whose id matches (re.search); the table then "
                    "goes to results/validation/results.md and docs/validation.md is left alone")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="scenarios run at once (default: CPUs)")
    ap.add_argument("--no-readme", action="store_true", help="leave docs/validation.md alone")
    ap.add_argument("--cases", type=Path, default=CASES_PATH, help="cases.json (default: the generated one)")
    ap.add_argument("--results-dir", default="results/validation", help="run outputs, relative to the repository")
    ap.add_argument("--reuse", action="store_true",
                    help="keep a case's result.json when it is newer than its scenario and the binary")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per run (default: none)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scenario key in every run (moesim run --set; repeatable), e.g. "
                         "serving.engine.eager_layer_us=0 for the runs fit_serving.py refits from")
    ap.add_argument("--sample", action="store_true",
                    help="only the cases make_scenarios.py --points marked as the stratified sample")
    ap.add_argument("--results-md", type=Path, default=None,
                    help="the per-case table (default validation/serving/results.md; for points, beside cases.json)")
    ap.add_argument("--doc-block", default=None, metavar="NAME",
                    help="the docs/validation.md block to rewrite, between <!-- NAME:begin --> and <!-- NAME:end --> "
                         "(default: validation; for points, none unless given)")
    args = ap.parse_args()

    moesim = str(Path(args.moesim).resolve()) if os.sep in args.moesim else args.moesim
    if os.sep in args.moesim and not os.access(moesim, os.X_OK):
        print(f"error: {args.moesim} is not an executable (build it: make build)", file=sys.stderr)
        return 2
    doc = json.loads(args.cases.read_text())
    points = "--points" in doc.get("generated_by", "")
    targets = POINT_TARGETS if points else TARGETS
    cases = [c for c in doc["cases"] if (not args.only or re.search(args.only, c["id"])) and
             (not args.sample or c.get("sample"))]
    if not cases:
        print(f"error: no case matches {args.only!r}", file=sys.stderr)
        return 2

    to_run = []
    for c in cases:
        if "scenario" not in c:
            continue
        out = f"{args.results_dir}/{c['id']}"
        c["_out"] = out
        res = ROOT / out / "result.json"
        if args.reuse and res.is_file():
            newest = max((ROOT / c["scenario"]).stat().st_mtime, Path(moesim).stat().st_mtime if os.sep in moesim else 0)
            if res.stat().st_mtime > newest:
                continue
        to_run.append(c)

    status: dict[str, dict] = {}
    if to_run:
        # Longest first (prompt + output tokens x requests), so the slow ones do not start last.
        to_run.sort(key=lambda c: -(c["requests"] * (c["input_tokens"] + 4 * c["output_tokens"])))
        print(f"running {len(to_run)} scenarios with {args.moesim}, {args.jobs} at a time", file=sys.stderr)
        with cf.ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futs = {pool.submit(run_case, moesim, c, c["_out"], args.timeout, tuple(args.set)): c for c in to_run}
            for i, fut in enumerate(cf.as_completed(futs), 1):
                s = fut.result()
                status[s["id"]] = s
                tag = "ok" if s["ok"] else f"FAILED: {s['error']}"
                print(f"[{i}/{len(to_run)}] {s['id']}: {tag} ({s['seconds']:.1f} s)", file=sys.stderr)

    records, failed, refused, timed_out, version = [], [], [], [], None
    for c in cases:
        reason, metrics = c.get("skip_reason", ""), None
        if not reason:
            st = status.get(c["id"])
            if st and st.get("refused"):
                reason = f"refused by moesim: {st['error']}"
                refused.append(c["id"])
            elif st and st.get("timed_out"):
                # Listed, not a failure: a budget the caller set (make validate's sample), not a crash.
                reason = st["error"]
                timed_out.append(c["id"])
            elif st and not st["ok"]:
                reason = f"run failed: {st['error']}"
                failed.append(c["id"])
            else:
                try:
                    res = json.loads((ROOT / c["_out"] / "result.json").read_text())
                    metrics = point_metrics(c, ROOT / c["_out"], res["runs"][0]["metrics"])
                    version = version or res.get("moesim")
                except (OSError, ValueError, KeyError, IndexError) as e:
                    reason = f"run failed: unreadable result.json ({e})"
                    failed.append(c["id"])
        for metric, measured in c["measured"].items():
            sim, note = (None, "") if metrics is None else simulated(metric, metrics, c)
            err = (sim - measured) / measured * 100.0 if sim is not None and measured else None
            model = c.get("group") or f"{re.split(r' *[(]', c['model'])[0]}, {c['gpu_short']}"
            records.append({"case": c, "metric": metric, "model": model, "measured": measured, "sim": sim,
                            "error": err, "reason": reason or note})

    rows = []
    for r in records:
        c = r["case"]
        isl_osl = f"{c['input_tokens']}/{c['output_tokens']}" if c["input_tokens"] else "not stated"
        conc = c["concurrency"].split(";")[0].replace("max_concurrency=", "").replace("concurrency=", "")
        rows.append([c["id"], c["engine"], f"{re.split(r' *[(]', c['model'])[0]} ({c['precision'].split(' ')[0]})",
                     f"{c['num_gpus']}x {c['gpu_short']}", c["deployment"], isl_osl, conc, r["metric"],
                     fmt_measured(r["measured"]), fmt(r["sim"]),
                     f"{r['error']:+.1f}" if r["error"] is not None else "", r["reason"]])
    n_cases, n_skip = len(cases), sum("skip_reason" in c for c in cases)
    n_cmp = sum(r["error"] is not None for r in records)
    counts = (f"{n_cases} measured {'points' if points else 'configurations'} ({len(records)} metric rows): "
              f"{n_cases - n_skip - len(refused) - len(timed_out)} simulated, {n_skip + len(refused)} listed with a reason ({n_skip} "
              f"before running, {len(refused)} refused by moesim), {len(timed_out)} past the run budget, "
              f"{len(failed)} failed runs; "
              f"{n_cmp} metric rows compared.")
    summ = summary(records, targets, POINT_MECHANISMS if points else None)
    ver = f"moesim {version['version']} ({version['commit']})" if version else "moesim"
    if points:
        intro = [f"Generated by `validation/serving/validate.py` from `{args.cases.name}` (`make_scenarios.py --points "
                 f"{doc.get('points')}`) and the runs under `{args.results_dir}/`; do not edit by hand. The points' "
                 "provenance: ../shared/data/kernels/MANIFEST.md; how a point becomes a scenario: "
                 "validation/serving/points.py.", "",
                 f"{counts} Simulated with {ver}. Error = (moesim - measured) / measured. Targets (issue 48): "
                 "TPOT <= 10%, TTFT <= 20% (met when the median |error| is within).", ""]
    else:
        intro = ["Generated by `validation/serving/validate.py` (`make validate`) from `cases.json` and the runs under "
                 f"`{args.results_dir}/`; do not edit by hand. Measurements and their provenance: "
                 "[measurements.csv](measurements.csv), [MANIFEST.md](MANIFEST.md); how the cases are built: "
                 "[../README.md](../README.md).", "",
                 f"{counts} Simulated with {ver}. Error = (moesim - measured) / measured. Targets (issue 25): "
                 "output throughput <= 10%, TPOT <= 15%, TTFT <= 25% (met when the median |error| is within).", ""]
    lines = ["# Validation: moesim against measured MoE serving runs", "", *intro,
             "## Summary", "", *summ, "", "## Every case and metric", "",
             *table(["case", "engine", "model", "GPUs", "deployment", "ISL/OSL", "concurrency", "metric", "measured",
                     "moesim", "error %", "reason / note"], rows), ""]
    out_md = (ROOT / args.results_md if args.results_md else
              args.cases.resolve().parent / "results.md" if points else RESULTS_MD)
    if args.only:
        out_md = ROOT / args.results_dir / "results.md"
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text("\n".join(lines))
    print(f"wrote {out_md.relative_to(ROOT)}", file=sys.stderr)
    print("\n".join([counts, "", *summ]))
    block = args.doc_block or (None if points else "validation")
    if block and not args.no_readme and not args.only:
        write_readme(summ, counts, f"<!-- {block}:begin -->", f"<!-- {block}:end -->",
                     "../" + os.path.relpath(out_md, ROOT) if out_md.is_relative_to(ROOT) else str(out_md),
                     "make validate-all" if points and not args.sample else "make validate")
    if failed:
        print(f"{len(failed)} runs failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
