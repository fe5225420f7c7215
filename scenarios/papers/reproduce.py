#!/usr/bin/env python3
"""Runs the paper-reproduction scenarios over the grids their papers evaluate, prints one markdown
table per experiment, and computes the claims table: every claim of claims.yaml with moesim's
number and a verdict (rule in claims.py and README.md).

    python3 scenarios/papers/reproduce.py [--moesim build/moesim] [--out results/papers]
                                          [--only EXPERIMENT] [--claims ID,...] [--no-readme]

Writes results/papers/summary.md (the per-experiment tables), results/papers/claims.md (the claims
table, its sensitivity rows and the set-ups) and, unless --no-readme or a partial run, the
generated sections of scenarios/papers/README.md and of the top-level README.md.

Every number comes from running moesim on the scenario files in this folder; nothing here
computes a metric itself beyond ratios between runs.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import claims as C  # noqa: E402
import guideline_runs as GL  # noqa: E402

TRACE = "routing/switch_base_128_expert_counts.json"


def shared_data():
    return Path(os.environ.get("MOESIM_SHARED_DATA", ROOT.parent / "shared" / "data"))


def exp(scenario, grid, policies=None, needs=None):
    return {"scenario": scenario, "grid": grid, "policies": policies, "needs": needs}


HARMOENY_SYSTEMS = ["deepspeed", "fastmoe", "fastermoe", "exflow", "round-robin", "harmoeny"]
MOESHARD_BATCHES = (10, 50, 100, 250, 450)
GPS_HW = {"nvlink": "hgx-a100-4gpu-nvlink", "pcie": "a100-4gpu-pcie"}
GPS_SKEW = (1.0, 1.4, 2.0, 3.0, 4.0)

# name -> scenario file, grid: list of (point label, --set overrides), optionally the policy labels
# to run (a subset of the file's) and a data file it needs under ../shared/data.
EXPERIMENTS = {
    "harmoeny-switch128-skew": exp("harmoeny/switch128-skew.yaml",
                                   [(f"alpha={a}", [f"workload.routing.alpha={a}"]) for a in (0.0, 0.5, 0.9)]),
    "harmoeny-qwen-skew": exp("harmoeny/qwen-skew.yaml",
                              [(f"alpha={a}", [f"workload.routing.alpha={a}"]) for a in (0.0, 0.5, 0.9)]),
    # Sensitivity to the batch size, which HarMoEny does not state (the scenarios' rule picks
    # 256 x 128 for Switch, 512 x 128 for Qwen).
    "harmoeny-switch128-batch": exp("harmoeny/switch128-skew.yaml",
                                    [(f"batch={b}", ["workload.routing.alpha=0.9", f"workload.batch_size={b}"])
                                     for b in (32, 64, 128, 512, 1024, 2048)], policies=HARMOENY_SYSTEMS),
    "harmoeny-qwen-batch": exp("harmoeny/qwen-skew.yaml",
                               [(f"alpha={a} batch={b}", [f"workload.routing.alpha={a}", f"workload.batch_size={b}"])
                                for a in (0.5, 0.9) for b in (128, 256, 1024)], policies=HARMOENY_SYSTEMS),
    # §V-C1: the batch is picked by claims.yaml's rule (the layer without rebalancing closest to
    # the paper's latency); the other batches are the sensitivity rows.
    "harmoeny-switch128-ablation": exp("harmoeny/switch128-ablation.yaml",
                                       [(f"batch={b}", [f"workload.batch_size={b}"]) for b in (256, 512, 1024, 2048, 4096)]),
    "harmoeny-qwen-ablation": exp("harmoeny/qwen-ablation.yaml",
                                  [(f"batch={b}", [f"workload.batch_size={b}"]) for b in (128, 256, 512, 1024)]),
    "harmoeny-switch128-fluctuating": exp("harmoeny/switch128-fluctuating.yaml", [("alpha~U[0,0.95] per batch", [])]),
    "harmoeny-switch128-real": exp("harmoeny/switch128-real.yaml",
                                   [(f"batch={b}", [f"workload.batch_size={b}"]) for b in (256, 2048)], needs=TRACE),
    # MoEShard's batch is per GPU (switch-base-a100.yaml): moesim batch_size = 4 x the paper's.
    "moeshard-batch": exp("moeshard/switch-base-a100.yaml",
                          [(f"batch={b}", [f"workload.batch_size={4 * b}"]) for b in MOESHARD_BATCHES]),
    # The other reading (the paper's batch over all four GPUs), for sensitivity.
    "moeshard-batch-total": exp("moeshard/switch-base-a100.yaml",
                                [(f"batch={b}", [f"workload.batch_size={b}"]) for b in MOESHARD_BATCHES]),
    # DeepSpeed's capacity factor is min(E, 50) (MoEShard §4.1), for both capacity-factor baselines.
    "moeshard-experts": exp("moeshard/switch-base-a100.yaml",
                            [(f"experts={e}", [f"model.experts={e}", f"policy.0.capacity_factor={min(e, 50)}",
                                               f"policy.1.capacity_factor={min(e, 50)}"])
                             for e in (8, 16, 32, 64, 128, 256)]),
    "moeshard-real": exp("moeshard/switch-base-a100-real.yaml", [("batch=250", [])], needs=TRACE),
    # AMoE §5.1 (Fig. 9, short workload, top-1) over Poisson rates, and at a low load for the ITL
    # comparison.
    "amoe-mixtral-mqa": exp("amoe/mixtral-mqa-a100.yaml",
                            [(f"short, {r} req/s", [f"workload.arrival.rate_per_s={r}"]) for r in (50, 100, 200)]),
    # The medium and reasonable workloads of §5 at the same offered output rate as the short
    # workload's 200 requests/s (~20k tokens/s): 133 and 67 requests/s.
    "amoe-mixtral-mqa-lengths": exp("amoe/mixtral-mqa-a100.yaml",
                                    [("medium, 133 req/s", ["workload.arrival.rate_per_s=133",
                                                            "workload.prompt_tokens={dist: uniform, min: 50, max: 150}",
                                                            "workload.output_tokens={dist: uniform, min: 50, max: 250}"]),
                                     ("reasonable, 67 req/s", ["workload.arrival.rate_per_s=67", "workload.requests=2000",
                                                               "workload.warmup_requests=500",
                                                               "workload.prompt_tokens={dist: uniform, min: 100, max: 300}",
                                                               "workload.output_tokens={dist: uniform, min: 100, max: 500}"])],
                                    policies=["sglang-ep", "amoe-defrag"]),
    "amoe-mixtral-mqa-lowload": exp("amoe/mixtral-mqa-a100.yaml",
                                    [("short, 5 req/s", ["workload.arrival={process: poisson, rate_per_s: 5}",
                                                         "workload.requests=200", "workload.warmup_requests=50"])],
                                    policies=["sglang-ep", "amoe-defrag"]),
    # MoE-GPS §4 (Fig. 6, 7): each predictor driving expert duplication, NVLink vs PCIe, by skewness.
    "moe-gps-mixtral": exp("moe-gps/mixtral-a100.yaml",
                           [(f"{hw} skew={s}", [f"hardware={preset}", f"workload.routing.skewness={s}"])
                            for hw, preset in GPS_HW.items() for s in GPS_SKEW]),
    # The same at 16 x 512 tokens (sensitivity to the workload size; §4 states 1 x 512).
    "moe-gps-mixtral-16x512": exp("moe-gps/mixtral-a100.yaml",
                                  [(f"nvlink skew={s}", [f"hardware={GPS_HW['nvlink']}", f"workload.routing.skewness={s}",
                                                         "workload.batch_size=16"]) for s in (1.4,)]),
}

COLUMNS = [
    ("layer ms", lambda m: m["layer_latency_ms"]["mean"]),
    ("TTFT ms", lambda m: m["ttft_ms"]["mean"]),
    ("ITL ms", lambda m: m["itl_ms"]["mean"]),
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

UNFIT = re.compile(r"policy '([^']+)': the model does not fit in GPU memory: (.*)")


def _label(entry):
    return entry.get("label", entry["name"]) if isinstance(entry, dict) else entry


def _policies(scenario, overrides):
    """The scenario's policy list with the experiment's policy.N.key overrides applied."""
    doc = yaml.safe_load((HERE / scenario).read_text())
    pols = [dict(p) if isinstance(p, dict) else {"name": p} for p in doc["policy"]]
    rest = []
    for o in overrides:
        m = re.match(r"policy\.(\d+)\.([\w]+)=(.*)", o)
        if m:
            pols[int(m.group(1))][m.group(2)] = yaml.safe_load(m.group(3))
        else:
            rest.append(o)
    return pols, rest


def run_point(moesim, scenario, overrides, out, keep=None, extra=()):
    """Runs one grid point; a policy that does not fit in GPU memory is left out (and reported)
    and the rest run. Returns a claims.PointResult."""
    pols, rest = _policies(scenario, overrides)
    if keep:
        pols = [p for p in pols if _label(p) in keep]
    unfit = {}
    out.mkdir(parents=True, exist_ok=True)
    while pols:
        cmd = [moesim, "run", str(HERE / scenario), "--out", str(out), "-q", "--jobs", "1"]
        for o in list(rest) + list(extra) + ["policy=" + json.dumps(pols)]:
            cmd += ["--set", o]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode == 0:
            return C.PointResult(json.loads((out / "result.json").read_text()), unfit)
        m = UNFIT.search(p.stderr)
        if not m:
            sys.exit(f"moesim failed: {' '.join(cmd)}\n{p.stderr}")
        unfit[m.group(1)] = m.group(2).strip()
        pols = [q for q in pols if _label(q) != m.group(1)]
    return C.PointResult(None, unfit, "no policy fits in GPU memory at this point")


def fmt(v):
    if isinstance(v, int):
        return str(v)
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _cell(get, metrics):
    """A column's value, or — where the run has no such metric (prefill vs serving runs)."""
    try:
        return fmt(get(metrics))
    except KeyError:
        return "—"


def table(name, points):
    """One markdown table: a row per (grid point, policy label)."""
    lines = [f"### {name}", "", "| point | policy | " + " | ".join(c for c, _ in COLUMNS) + " |",
             "|---|---|" + "---:|" * len(COLUMNS)]
    for label, pr in points:
        runs = pr.result["runs"] if pr.result else []
        for run in runs:
            m = run["metrics"]
            cells = [_cell(get, m) for _, get in COLUMNS]
            who = run["label"]
            if run.get("predictor", "none") != "none" or len(runs) > len({r["label"] for r in runs}):
                who += f" / {run.get('predictor_label', run.get('predictor'))}"
            lines.append(f"| {label} | {who} | " + " | ".join(cells) + " |")
        for who, why in pr.unfit.items():
            lines.append(f"| {label} | {who} | does not fit in GPU memory: {why} |" + " |" * (len(COLUMNS) - 1))
    return "\n".join(lines) + "\n"


def cost_query(moesim):
    cache = {}

    def cost(op, hardware, gpus, nbytes):
        key = (op, hardware, gpus, nbytes)
        if key not in cache:
            p = subprocess.run([moesim, "cost", op, "--hardware", hardware, "--gpus", str(gpus),
                                "--bytes", str(nbytes), "--json"], capture_output=True, text=True, check=True)
            cache[key] = float(json.loads(p.stdout)["time_us"]) / 1000.0
        return cache[key]
    return cost


def load_claims(path=HERE / "claims.yaml"):
    doc = yaml.safe_load(Path(path).read_text())
    return doc["papers"], doc["claims"]


def claim_experiments(claim):
    """Every experiment a claim (with its variants) reads."""
    out = set()
    for c in [claim] + [dict(claim, **v) for v in claim.get("variants", [])]:
        if c.get("experiment"):
            out.add(c["experiment"])
        for key in ("a", "b"):
            refs = c.get(key)
            for r in (refs if isinstance(refs, list) else [refs]):
                if isinstance(r, dict) and "experiment" in r:
                    out.add(r["experiment"])
    return out


def claim_points(claim, variants=True):
    """{experiment: {point labels}} that a claim (and its variants) reads."""
    need = {}
    for c in [claim] + ([dict(claim, **v) for v in claim.get("variants", [])] if variants else []):
        exp_name = c.get("experiment")
        if not exp_name:
            continue
        p = c.get("point")
        labels = list(c.get("points") or [])
        if isinstance(p, dict):
            labels += p["closest"]["among"]
        elif p:
            labels.append(p)
        need.setdefault(exp_name, set()).update(labels)
        for key in ("a", "b"):
            refs = c.get(key)
            for r in (refs if isinstance(refs, list) else [refs]):
                if isinstance(r, dict):
                    need.setdefault(r.get("experiment", exp_name), set()).add(r.get("point", p))
    return need


def run_experiments(moesim, names, out_root, verbose=True, only_points=None):
    """Runs every grid point of the named experiments (or, with only_points {experiment: labels},
    just those points)."""
    points, skipped, report = {}, {}, []
    data = shared_data()
    for name in names:
        if name in GL.GUIDELINES:
            points[name] = GL.run(moesim, name, out_root / name)
            report.append(GL.table(name, points[name]))
            if verbose:
                print(report[-1], flush=True)
            continue
        e = EXPERIMENTS[name]
        extra = []
        if e["needs"]:
            f = data / e["needs"]
            if not f.exists():
                skipped[name] = f"needs {e['needs']} from ../shared/data, which is absent"
                continue
            extra.append(f"workload.routing.file={f}")
        pts = []
        for i, (label, overrides) in enumerate(e["grid"]):
            if only_points is not None and label not in only_points.get(name, ()):
                continue
            pts.append((label, run_point(moesim, e["scenario"], overrides, out_root / name / str(i), e["policies"], extra)))
        points[name] = dict(pts)
        report.append(table(name, pts))
        if verbose:
            print(report[-1], flush=True)
    return C.Results(points, cost_query(moesim), skipped), report


# ---------------------------------------------------------------------------------------------
# The claims table.

def esc(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def setup_text(results, claim, row):
    exp_name = claim.get("experiment")
    if not exp_name:
        return "—"
    point = row.get("point") or ""
    pts = claim.get("points")
    where = ", ".join(pts) if pts and claim["kind"] != "trend" else (f"{pts[0]} … {pts[-1]}" if pts else point)
    who = []
    for key in ("a", "b"):
        refs = claim.get(key)
        if refs is None:
            continue
        refs = refs if isinstance(refs, list) else [refs]
        names = [r if isinstance(r, str) else r["policy"] for r in refs]
        if len(names) > 4:
            names = [os.path.commonprefix(names).rstrip("=") + "…" if os.path.commonprefix(names) else names[0] + " …"]
        txt = " / ".join(dict.fromkeys(names))
        if key == "b" and len(refs) > 1:
            txt = f"best of {txt}"
        who.append(txt)
    size = ""
    try:
        w = results.point(exp_name, point or (pts[0] if pts else None)).result["scenario"]["workload"]
        size = f" ({w['batch_size']} × {w['seq_len']})"
    except (C.Unavailable, KeyError, TypeError):
        pass
    s = f"`{exp_name}`{size} {where}".rstrip()
    if who:
        s += ": " + " vs ".join(who)
    return s


def evaluate_all(results, claims):
    rows, sens = [], []
    for c in claims:
        row = C.evaluate(results, c)
        rows.append((c, row))
        for v in c.get("variants", []):
            vc = dict(c, **{k: val for k, val in v.items() if k != "label"})
            vc["id"] = c["id"]
            sens.append((c, v["label"], vc, C.evaluate(results, vc)))
    return rows, sens


def counts(rows):
    n = {v: 0 for v in C.VERDICTS}
    for _, r in rows:
        n[r["verdict"]] += 1
    return n


def status_sentence(rows):
    n = counts(rows)
    return (f"{len(rows)} claims: {n[C.REPRODUCED]} reproduced, {n[C.DIRECTION_ONLY]} direction only, "
            f"{n[C.NOT_REPRODUCED]} not reproduced, {n[C.NOT_RUN]} not run")


def verdict_cell(v):
    return {C.REPRODUCED: "**reproduced**", C.DIRECTION_ONLY: "direction only",
            C.NOT_REPRODUCED: "**not reproduced**", C.NOT_RUN: "not run"}[v]


def claims_tables(results, papers, rows, sens):
    out = []
    for p in papers:
        prow = [(c, r) for c, r in rows if c["paper"] == p["id"]]
        n = counts(prow)
        out += [f"#### {p['name']}", "",
                f"{len(prow)} claims: {n[C.REPRODUCED]} reproduced, {n[C.DIRECTION_ONLY]} direction only, "
                f"{n[C.NOT_REPRODUCED]} not reproduced, {n[C.NOT_RUN]} not run.", "",
                "| id | claim | where | paper | set-up we ran | moesim | verdict | why the gap |",
                "|---|---|---|---|---|---|---|---|"]
        for c, r in prow:
            why = ""
            if r["verdict"] != C.REPRODUCED:
                why = c.get("reason", "")
                if r["verdict"] == C.NOT_RUN and r.get("note") and c["kind"] != "not-run":
                    why = f"{r['note']}. {why}".strip()
            setup = setup_text(results, c, r)
            if r.get("note") and r["verdict"] != C.NOT_RUN:
                setup += f" ({r['note']})"
            out.append("| " + " | ".join(esc(x) for x in (
                c["id"], c["claim"], c["where"], C.fmt_paper(c), setup, r["ours"], verdict_cell(r["verdict"]), why or "—")) + " |")
        out.append("")
    if sens:
        out += ["#### Sensitivity", "",
                "The same claims with another setting the paper does not state (batch size, the reading of "
                "the batch size, the workload size) or another stand-in for the paper's baseline. These rows "
                "are not counted above.", "",
                "| id | paper | variant | set-up we ran | moesim | verdict |", "|---|---|---|---|---|---|"]
        for c, label, vc, r in sens:
            setup = setup_text(results, vc, r)
            ours = r["ours"] if r["verdict"] != C.NOT_RUN else f"— ({r.get('note')})"
            out.append("| " + " | ".join(esc(x) for x in (
                c["id"], C.fmt_paper(c), label, setup, ours, verdict_cell(r["verdict"]))) + " |")
        out.append("")
    return "\n".join(out)


def yv(v):
    """A YAML value as the scenario file writes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {yv(x)}" for k, x in v.items()) + "}"
    return str(v)


def setups_text(results, names):
    lines = ["#### Set-ups", "",
             "batch × seq is moesim's batch_size (sequences over all GPUs) × tokens per sequence; every "
             "grid point overrides the file as its label says.", ""]
    for name in names:
        if name in GL.GUIDELINES:
            lines.append(GL.setup_line(name))
            continue
        e = EXPERIMENTS[name]
        doc = yaml.safe_load((HERE / e["scenario"]).read_text())
        w = doc["workload"]
        model = yv(doc["model"])
        hw = yv(doc["hardware"])
        routing = ", ".join(f"{k}: {Path(str(v)).name if k == 'file' else v}" for k, v in w["routing"].items())
        pols = []
        keep = e["policies"]
        for pe in doc["policy"]:
            pe = pe if isinstance(pe, dict) else {"name": pe}
            if keep and _label(pe) not in keep:
                continue
            opts = ", ".join(f"{k}: {yv(v)}" for k, v in pe.items() if k not in ("name", "label"))
            pols.append(f"`{_label(pe)}`" + (f" ({pe['name']}{'; ' + opts if opts else ''})" if opts or _label(pe) != pe["name"] else ""))
        preds = doc.get("predictor")
        pred_txt = ""
        if isinstance(preds, list):
            pred_txt = "; predictors: " + ", ".join(p if isinstance(p, str) else f"{p['name']}({', '.join(f'{k}={v}' for k, v in p.items() if k != 'name')})" for p in preds)
        grid = ", ".join(lbl for lbl, _ in e["grid"])
        skipped = f" — not run: {results.skipped[name]}" if name in results.skipped else ""
        size = (f"serving {w['requests']} requests ({w.get('warmup_requests', 0)} warm-up), arrival {yv(w['arrival'])}, "
                f"prompt {yv(w['prompt_tokens'])}, output {yv(w['output_tokens'])}" if w.get("kind") == "serving"
                else f"{w['batch_size']} × {w['seq_len']} tokens, {w['batches']} batches")
        lines.append(f"- `{name}` — [{e['scenario']}]({e['scenario']}): {model}; {hw}; "
                     f"{size}; routing {routing}; "
                     f"policies {', '.join(pols)}{pred_txt}. Grid: {grid}.{skipped}")
    return "\n".join(lines) + "\n"


def replace_between(text, begin, end, body):
    i, j = text.index(begin), text.index(end)
    return text[:i + len(begin)] + body + text[j:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moesim", default="build/moesim")
    ap.add_argument("--out", default="results/papers")
    ap.add_argument("--only", action="append", help="experiment name (repeatable); default all")
    ap.add_argument("--claims", help="comma-separated claim ids: run only what they need")
    ap.add_argument("--no-readme", action="store_true", help="do not rewrite the READMEs' generated sections")
    ap.add_argument("--quiet", action="store_true", help="do not print the per-experiment tables")
    args = ap.parse_args()
    out_root = Path(args.out)
    papers, claims = load_claims()
    names = args.only or list(EXPERIMENTS) + list(GL.GUIDELINES)
    if args.claims:
        ids = args.claims.split(",")
        claims = [c for c in claims if c["id"] in ids]
        missing = set(ids) - {c["id"] for c in claims}
        if missing:
            sys.exit(f"unknown claim(s) {sorted(missing)}")
    only_points = None
    if args.claims:
        only_points = {}
        for c in claims:
            for e, labels in claim_points(c).items():
                only_points.setdefault(e, set()).update(labels)
        names = [n for n in list(EXPERIMENTS) + list(GL.GUIDELINES) if n in only_points]
    unknown = [n for n in names if n not in EXPERIMENTS and n not in GL.GUIDELINES]
    if unknown:
        sys.exit(f"unknown experiment(s) {unknown}; valid: {', '.join(list(EXPERIMENTS) + list(GL.GUIDELINES))}")
    results, report = run_experiments(args.moesim, names, out_root, verbose=not args.quiet, only_points=only_points)
    out_root.mkdir(parents=True, exist_ok=True)
    (out_root / "summary.md").write_text("\n".join(report))

    partial = bool(args.only or args.claims)
    if partial:
        claims = [c for c in claims if claim_experiments(c) <= set(names) or c["kind"] == "not-run"]
    rows, sens = evaluate_all(results, claims)
    body = claims_tables(results, papers, rows, sens)
    status = status_sentence(rows)
    doc = ["# Paper claims", "", f"Generated by `scenarios/papers/reproduce.py` from `scenarios/papers/claims.yaml`. {status}.",
           "", "Verdict rule (claims.py):", "", "```", C.RULE, "```", "", body, setups_text(results, names)]
    (out_root / "claims.md").write_text("\n".join(doc))
    print(f"claims: {status} ({out_root / 'claims.md'})")
    for c, r in rows:
        print(f"  {r['verdict']:15s} {c['id']}: {r['ours']}")

    if not args.no_readme and not partial:
        readme = HERE / "README.md"
        text = readme.read_text()
        text = replace_between(text, "<!-- claims:begin -->", "<!-- claims:end -->",
                               "\n" + body + "\n" + setups_text(results, names))
        text = replace_between(text, "<!-- claims-status:begin -->", "<!-- claims-status:end -->", status)
        text = replace_between(text, "<!-- gps-mislead:begin -->", "<!-- gps-mislead:end -->",
                               "\n" + GL.mislead_map(results))
        readme.write_text(text)
        top = ROOT / "README.md"
        t = top.read_text()
        if "<!-- claims-status:begin -->" in t:
            top.write_text(replace_between(t, "<!-- claims-status:begin -->", "<!-- claims-status:end -->", status))


if __name__ == "__main__":
    main()
