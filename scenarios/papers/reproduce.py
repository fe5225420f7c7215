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
from experiments import EXPERIMENTS, TRACE, _label, shared_data  # noqa: E402,F401
from report import (COLUMNS, claims_tables, fmt, replace_between, setups_text, status_sentence,  # noqa: E402,F401
                    table)

UNFIT = re.compile(r"policy '([^']+)': the model does not fit in GPU memory: (.*)")


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
