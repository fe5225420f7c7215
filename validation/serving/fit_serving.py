#!/usr/bin/env python3
"""Fits what each engine spends outside the simulated kernels to measured serving points, on a split
stated before fitting, and reports the fitted and held-back points apart (issue 48, section 3).

    python3 validation/serving/fit_serving.py --cases results/validation-points/cases.json \\
        --results-dir results/validation-points/runs [--holdout every-other-model | model:NAME,... | none] \\
        [--sample] [--out validation/serving/serving_fit.md] [--doc-block serving-fit]

The runs are moesim's (validate.py) with the engine presets' host costs. Two fits per engine, each
least squares on relative error over the fit split with every coefficient >= 0 (host time cannot be
negative; a coefficient that comes out 0 says the residuals are not host time: moesim is already
slower than measured there, the kernels or the batching are off). Kernel parameters are never
refitted here. The split rule is applied to the cases before anything is fitted; the held-back
points are scored with the coefficients of the fit split only.

1. Host time per step and per request (BLIS fits per-step, per-sequence and per-token
   coefficients against vLLM runs the same way):

       TPOT = simulated TPOT + step_ms + seq_ms x B           B: clients per attention-DP rank
       TTFT = simulated TTFT + request_ms + prompt_ms_per_k x ISL / 1000

   step_ms, where a preset takes it, is serving.engine.host_serial_us (host time the overlap
   scheduler does not hide). The additive form is the first-order effect of a host cost on a run.

2. The host time to issue an eager step's kernels (serving.engine.eager_layer_us and
   eager_moe_layer_us): D = a x layers + b x MoE layers per eager step, before its kernels. A run
   tells how many eager steps each request waited through: the prefill steps (those that gave some
   request its first token) that ended between its arrival and its first token, and for an
   aggregated deployment those that ended while it decoded. With these counts n_ttft and n_tpot
   (weighted over the rounds as validate.py weighs the metrics),

       TTFT = simulated TTFT + n_ttft x D        TPOT = simulated TPOT + n_tpot x D / (OSL - 1)

   The counts are the run's; the feedback of slower steps on the closed loop is not modelled.

The runs include whatever the presets already carry, so on runs with the presets' values each fit
is the increment still missing. The presets' values were fitted in two rounds: the eager issue
times on runs without any (validate.py --set serving.engine.eager_layer_us=0 --set
serving.engine.eager_moe_layer_us=0 --set serving.engine.host_serial_us=0), then vLLM's serial step
time on runs with those issue times (docs/validation.md, "Engine host time, fitted").
"""
import argparse
import bisect
import json
import re
import statistics
import sys
from itertools import product
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from validate import point_metrics  # noqa: E402  (one definition of how a point's metric is read)

ENGINES = ("trtllm", "sglang", "vllm")


def least_squares_nonneg(rows: list[list[float]], targets: list[float]) -> list[float]:
    """argmin_x sum (a.x - t)^2 over x >= 0, for a handful of columns: the unconstrained solution
    of every subset of free columns (the others at 0), the best feasible one kept."""
    n = len(rows[0]) if rows else 0
    best, best_cost = [0.0] * n, sum(t * t for t in targets)
    for free in product((False, True), repeat=n):
        idx = [j for j in range(n) if free[j]]
        if not idx:
            continue
        # Normal equations (A_f^T A_f) x = A_f^T t, solved by Gauss-Jordan elimination.
        k = len(idx)
        m = [[sum(r[idx[i]] * r[idx[j]] for r in rows) for j in range(k)] +
             [sum(r[idx[i]] * t for r, t in zip(rows, targets))] for i in range(k)]
        singular = False
        for c in range(k):
            p = max(range(c, k), key=lambda i: abs(m[i][c]))
            if abs(m[p][c]) < 1e-12:
                singular = True
                break
            m[c], m[p] = m[p], m[c]
            for i in range(k):
                if i != c:
                    f = m[i][c] / m[c][c]
                    m[i] = [a - f * b for a, b in zip(m[i], m[c])]
        if singular:
            continue
        x = [0.0] * n
        for i, j in enumerate(idx):
            x[j] = m[i][k] / m[i][i]
        if any(v < 0 for v in x):
            continue
        cost = sum((sum(a * v for a, v in zip(r, x)) - t) ** 2 for r, t in zip(rows, targets))
        if cost < best_cost - 1e-15:
            best, best_cost = x, cost
    return best


def fit_engine(points: list[dict]) -> dict:
    """Coefficients (ms) of one engine from its points (each: measured and simulated tpot/ttft,
    batch B, isl), fitted to relative error."""
    tp = [p for p in points if p["sim_tpot"] is not None]
    tt = [p for p in points if p["sim_ttft"] is not None]
    # Relative residual (sim + x.a - meas) / meas: rows a / meas, targets (meas - sim) / meas.
    step, seq = least_squares_nonneg([[1.0 / p["tpot"], p["batch"] / p["tpot"]] for p in tp],
                                     [(p["tpot"] - p["sim_tpot"]) / p["tpot"] for p in tp]) if tp else (0.0, 0.0)
    req, per_k = least_squares_nonneg([[1.0 / p["ttft"], p["isl"] / 1000.0 / p["ttft"]] for p in tt],
                                      [(p["ttft"] - p["sim_ttft"]) / p["ttft"] for p in tt]) if tt else (0.0, 0.0)
    return {"step_ms": step, "seq_ms": seq, "request_ms": req, "prompt_ms_per_k": per_k}


def model_layers(resolved: str) -> tuple[int, int]:
    """(layers, MoE layers) of a run's resolved scenario (its model section comes first)."""
    def field(name: str) -> int:
        m = re.search(rf"^  {name}: (\d+)$", resolved, re.M)
        return int(m.group(1)) if m else 0
    layers = field("layers")
    if field("experts") == 0:
        return layers, 0
    return layers, (layers - field("first_dense_layers")) // max(1, field("moe_every"))


def eager_counts(requests_csv: Path, clients: int, source_rounds: int, agg: bool) -> tuple[float, float] | None:
    """Round-weighted means of the eager steps a request waited through before its first token,
    and per decoded token after it (agg only): the prefill steps are those whose end gave some
    request its first token (a prompt cut into chunks counts its last chunk only)."""
    try:
        lines = requests_csv.read_text().splitlines()
    except OSError:
        return None
    head = lines[0].split(",") if lines else []
    need = ("id", "arrived_s", "first_token_s", "finished_s", "output_tokens")
    if not set(need) <= set(head):
        return None
    col = {k: head.index(k) for k in need}
    rows = sorted((int(f[col["id"]]), f) for f in (line.split(",") for line in lines[1:]) if len(f) == len(head))
    ends = sorted({float(f[col["first_token_s"]]) for _, f in rows if f[col["first_token_s"]]})
    n = len(rows)
    if n < 3 * clients:
        return None
    parts = [[[], []], [[], []], [[], []]]  # first wave, rounds between, closing tail: (ttft, tpot)
    for i, (_, f) in enumerate(rows):
        if not f[col["first_token_s"]]:
            continue
        arrived, first = float(f[col["arrived_s"]]), float(f[col["first_token_s"]])
        done, osl = float(f[col["finished_s"]] or first), int(f[col["output_tokens"]])
        n_ttft = bisect.bisect_right(ends, first) - bisect.bisect_right(ends, arrived)
        n_tpot = (bisect.bisect_left(ends, done) - bisect.bisect_right(ends, first)) / (osl - 1) if agg and osl > 1 else 0.0
        k = 0 if i < clients else 2 if i >= n - clients else 1
        parts[k][0].append(n_ttft)
        parts[k][1].append(n_tpot)
    if not all(p[0] for p in parts):
        return None
    w = (1.0, source_rounds - 2.0, 1.0)
    return tuple(sum(wk * statistics.fmean(p[j]) for wk, p in zip(w, parts)) / source_rounds for j in (0, 1))


def fit_eager(points: list[dict]) -> dict:
    """a, b (us per layer, per MoE layer) of the eager issue time from points carrying counts."""
    rows, targets = [], []
    for p in points:
        if p.get("eager") is None:
            continue
        n_ttft, n_tpot = p["eager"]
        L, M = p["layers"]
        for meas, sim, n in ((p["ttft"], p["sim_ttft"], n_ttft), (p["tpot"], p["sim_tpot"], n_tpot)):
            if sim is None:
                continue
            rows.append([n * L / 1000.0 / meas, n * M / 1000.0 / meas])
            targets.append((meas - sim) / meas)
    a, b = least_squares_nonneg(rows, targets) if rows else (0.0, 0.0)
    return {"eager_layer_us": a, "eager_moe_layer_us": b}


def predict_eager(p: dict, c: dict) -> tuple[float | None, float | None]:
    if p.get("eager") is None:
        return p["sim_tpot"], p["sim_ttft"]
    n_ttft, n_tpot = p["eager"]
    d_ms = (c["eager_layer_us"] * p["layers"][0] + c["eager_moe_layer_us"] * p["layers"][1]) / 1000.0
    tpot = None if p["sim_tpot"] is None else p["sim_tpot"] + n_tpot * d_ms
    ttft = None if p["sim_ttft"] is None else p["sim_ttft"] + n_ttft * d_ms
    return tpot, ttft


def predict(p: dict, c: dict) -> tuple[float | None, float | None]:
    tpot = None if p["sim_tpot"] is None else p["sim_tpot"] + c["step_ms"] + c["seq_ms"] * p["batch"]
    ttft = None if p["sim_ttft"] is None else p["sim_ttft"] + c["request_ms"] + c["prompt_ms_per_k"] * p["isl"] / 1000
    return tpot, ttft


def held_back(points: list[dict], rule: str) -> set[str]:
    """Ids of the held-back points. every-other-model: the models in sorted order, every second
    one (the 2nd, 4th, ...) held back; model:A,B: those models; none: nothing."""
    models = sorted({p["model"] for p in points})
    if rule == "none":
        names = set()
    elif rule == "every-other-model":
        names = set(models[1::2])
    elif rule.startswith("model:"):
        names = {n.strip() for n in rule[len("model:"):].split(",") if n.strip()}
        unknown = names - set(models)
        if unknown:
            raise ValueError(f"--holdout {rule}: no point of {', '.join(sorted(unknown))} "
                             f"(models: {', '.join(models)})")
    else:
        raise ValueError(f"--holdout {rule!r}: expected every-other-model, model:NAME[,NAME...] or none")
    return {p["id"] for p in points if p["model"] in names}


def load_points(cases_path: Path, results_dir: Path, sample: bool) -> list[dict]:
    """The simulated points (the sample's only with `sample`): measured and simulated TPOT/TTFT,
    engine, model, B and ISL. A result older than its scenario is stale and not read."""
    doc = json.loads(cases_path.read_text())
    out = []
    for c in doc["cases"]:
        res = results_dir / c["id"] / "result.json"
        if "scenario" not in c or c["engine"] not in ENGINES or not res.is_file() or (sample and not c.get("sample")):
            continue
        scenario = ROOT / c["scenario"]
        if scenario.is_file() and res.stat().st_mtime < scenario.stat().st_mtime:
            continue
        try:
            m = point_metrics(c, res.parent, json.loads(res.read_text())["runs"][0]["metrics"])
        except (OSError, ValueError, KeyError, IndexError):
            continue
        meas = c["measured"]
        rounds = c.get("rounds") or {}
        clients = int(c.get("clients") or 0)
        eager = eager_counts(res.parent / "requests.csv", clients, int(rounds.get("source", 0)),
                             not str(c.get("deployment", "")).startswith("prefill")) \
            if clients and rounds.get("source") else None
        try:
            layers = model_layers((res.parent / "scenario.resolved.yaml").read_text())
        except OSError:
            layers, eager = (0, 0), None
        out.append({"id": c["id"], "engine": c["engine"], "model": c["model"].split("/")[-1],
                    "eager": eager, "layers": layers,
                    "batch": float(c.get("batch_per_rank") or c.get("clients") or 1), "isl": float(c["input_tokens"]),
                    "tpot": meas["tpot_mean"], "ttft": meas["ttft_mean"],
                    "sim_tpot": (m.get("tpot_ms") or {}).get("mean"), "sim_ttft": (m.get("ttft_ms") or {}).get("mean")})
    return out


def median_abs(errors: list[float]) -> str:
    return f"{statistics.median(abs(e) for e in errors):.1f}" if errors else "-"


def split_table(points: list[dict], held: set[str], what: str, prediction) -> list[str]:
    """Median |error| before (the runs) and after `prediction(point)` -> (tpot, ttft), per engine and split."""
    lines = ["", f"Median |error| % before (the runs) and after (runs + {what}), per split:", "",
             "| engine | split | points | TPOT before | TPOT after | TTFT before | TTFT after |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for e in ENGINES + ("all",):
        for name, part in (("fitted", False), ("held back", True)):
            ps = [p for p in points if (e == "all" or p["engine"] == e) and (p["id"] in held) == part]
            if not ps:
                continue
            b_tp, a_tp, b_tt, a_tt = [], [], [], []
            for p in ps:
                tpot, ttft = prediction(p)
                if tpot is not None:
                    b_tp.append((p["sim_tpot"] - p["tpot"]) / p["tpot"] * 100)
                    a_tp.append((tpot - p["tpot"]) / p["tpot"] * 100)
                if ttft is not None:
                    b_tt.append((p["sim_ttft"] - p["ttft"]) / p["ttft"] * 100)
                    a_tt.append((ttft - p["ttft"]) / p["ttft"] * 100)
            label = f"**{e}**" if e == "all" else e
            lines.append(f"| {label} | {name} | {len(ps)} | {median_abs(b_tp)} | {median_abs(a_tp)} | "
                         f"{median_abs(b_tt)} | {median_abs(a_tt)} |")
    return lines


def report(points: list[dict], held: set[str], rule: str) -> tuple[dict, list[str]]:
    fit_split = {e: [p for p in points if p["engine"] == e and p["id"] not in held] for e in ENGINES}
    coefs = {e: fit_engine(fit_split[e]) for e in ENGINES}
    lines = [f"{len(points)} simulated points; split `--holdout {rule}` stated before fitting: {len(held)} held back "
             f"({', '.join(sorted({p['model'] for p in points if p['id'] in held})) or 'none'}), "
             f"{len(points) - len(held)} fitted. Coefficients fitted on the fit split only (ms, >= 0):", "",
             "| engine | step_ms | seq_ms (x B) | request_ms | prompt_ms per 1k tokens |", "| --- | --- | --- | --- | --- |"]
    for e in ENGINES:
        c = coefs[e]
        lines.append(f"| {e} | {c['step_ms']:.3f} | {c['seq_ms']:.4f} | {c['request_ms']:.1f} | {c['prompt_ms_per_k']:.2f} |")
    lines += split_table(points, held, "fitted host time", lambda p: predict(p, coefs[p["engine"]]))
    eager = {e: fit_eager(fit_split[e]) for e in ENGINES}
    lines += ["", "Eager issue time (serving.engine.eager_layer_us, eager_moe_layer_us), fitted on the fit split "
              "only (us, >= 0; over what the runs' presets carry):", "",
              "| engine | eager_layer_us | eager_moe_layer_us |", "| --- | --- | --- |"]
    for e in ENGINES:
        lines.append(f"| {e} | {eager[e]['eager_layer_us']:.0f} | {eager[e]['eager_moe_layer_us']:.0f} |")
    lines += split_table(points, held, "fitted eager issue", lambda p: predict_eager(p, eager[p["engine"]]))
    return {"host": coefs, "eager": eager}, lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=Path, default=ROOT / "results/validation-points/cases.json")
    ap.add_argument("--results-dir", type=Path, default=ROOT / "results/validation-points/runs")
    ap.add_argument("--holdout", default="every-other-model")
    ap.add_argument("--sample", action="store_true", help="only the stratified sample's points (make validate's)")
    ap.add_argument("--out", type=Path, help="write the report (markdown) here")
    ap.add_argument("--json", type=Path, help="write the coefficients (JSON) here")
    ap.add_argument("--doc-block", help="also replace <!-- NAME:begin/end --> in docs/validation.md")
    args = ap.parse_args()
    try:
        points = load_points(args.cases, args.results_dir, args.sample)
        held = held_back(points, args.holdout)
    except (OSError, ValueError, KeyError) as e:
        print(f"fit_serving: error: {e}", file=sys.stderr)
        return 2
    if not points:
        print(f"fit_serving: error: no simulated point under {args.results_dir} (run validate.py first)", file=sys.stderr)
        return 2
    coefs, lines = report(points, held, args.holdout)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text("# Engine host time fitted to measured serving points\n\nGenerated by "
                            "`validation/serving/fit_serving.py`; do not edit by hand.\n\n" + text)
    if args.json:
        args.json.write_text(json.dumps({"holdout": args.holdout, "coefficients": coefs}, indent=2) + "\n")
    if args.doc_block:
        doc = ROOT / "docs/validation.md"
        s = doc.read_text()
        begin, end = f"<!-- {args.doc_block}:begin -->", f"<!-- {args.doc_block}:end -->"
        if begin not in s or end not in s:
            print(f"fit_serving: error: {doc} has no {begin} ... {end} block", file=sys.stderr)
            return 2
        s = s[:s.index(begin) + len(begin)] + "\n\n" + text + "\n" + s[s.index(end):]
        doc.write_text(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
