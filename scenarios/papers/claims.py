"""The claims table of the paper reproductions: what each claim's moesim number is, computed from
result.json metrics, and the verdict rule. reproduce.py runs the scenarios and calls this module;
claims.yaml beside it lists the claims. Nothing here runs moesim except `cost` queries through the
callback reproduce.py passes in.

The verdict rule is RULE below (README.md states the same).
"""
import ast
import math
import operator

RULE = """  ratio     - the paper's number is a ratio "A over B" (> 1: A wins). Ours is computed the same way.
              reproduced: same winner (both on the same side of 1) and |ours/paper - 1| <= 0.25;
              direction only: same winner, outside 25%; not reproduced: the winner differs.
  value     - the paper's number is a value (a fraction, a reduction, a time ratio).
              reproduced: |ours/paper - 1| <= 0.25; otherwise direction only when the claim has a
              direction component (e.g. "a reduction": ours > 0) that ours satisfies; otherwise not
              reproduced.
  direction - a qualitative claim ("A faster than B", "the optimum is interior"): reproduced when it
              holds (at every listed point unless the claim says "most"), not reproduced otherwise.
  trend     - "y grows (falls) with x": the direction test is the sign of the least-squares slope of
              y over the listed points; a fitted change across the grid under 5% of the mean of y
              counts as flat (matches neither). Wrong sign or flat: not reproduced. Right sign:
              reproduced, unless the paper gives a size (growth = y_last / y_first), which is then
              held to the 25% rule (or, for a lower bound, ours >= 0.75 x bound); outside it:
              direction only.
  not-run   - no number (a policy or data moesim lacks); the reason says why.
A paper number given as a range [lo, hi] is met within 25% of its nearest end (0 inside it)."""

TOLERANCE = 0.25
FLAT = 0.05

REPRODUCED = "reproduced"
DIRECTION_ONLY = "direction only"
NOT_REPRODUCED = "not reproduced"
NOT_RUN = "not run"
VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_REPRODUCED, NOT_RUN)

# name -> (getter on a run's metrics, higher is better, unit)
METRICS = {
    "throughput": (lambda m: m["throughput_tokens_per_s"], True, "tok/s"),
    "ttft": (lambda m: m["ttft_ms"]["mean"], False, "ms"),
    "itl": (lambda m: m["itl_ms"]["mean"], False, "ms"),
    "alltoall": (lambda m: m["alltoall_ms"], False, "ms"),
    "idle": (lambda m: m["gpu_idle_fraction"]["mean"], False, "%"),
    "inter_node_bytes": (lambda m: m["bytes"]["inter_node"], False, "B"),
    "intra_node_bytes": (lambda m: m["bytes"]["intra_node"], False, "B"),
    # A serving run's span from its first arrival to its last completion: a fixed batch's
    # end-to-end latency (GRACE-MoE §5.2).
    "makespan": (lambda m: m["makespan_ms"], False, "ms"),
    "gpu_load_std": (lambda m: m["load"]["gpu_load_std"], False, ""),
    "layer": (lambda m: m["layer_latency_ms"]["mean"], False, "ms"),
    "waiting": (lambda m: m["gpu_time_breakdown"]["mean_fraction"]["waiting"], False, "%"),
    # Mean waiting fraction of GPUs 1..G-1, the GPUs HarMoEny's §III / §V-C1 report ("GPUs 1–7
    # spend on average 85.7% of the time waiting"); GPU 0 holds the hot experts.
    "waiting_gpus_1_on": (lambda m: _mean_waiting(m["gpu_time_breakdown"]["per_gpu_ms"][1:]), False, "%"),
    "tput_variance": (lambda m: m["throughput_tokens_per_s_variance"], False, "tok²/s²"),
    "max_drop": (lambda m: m["throughput_tokens_per_s_per_batch"]["max_drop_fraction"], False, "%"),
    "dropped": (lambda m: m["tokens_dropped"], False, "tokens"),
    "gpu_max_over_mean": (lambda m: m["load"]["gpu_max_over_mean"], False, ""),
    "ffn": (lambda m: m["layer_breakdown_ms"]["ffn"], False, "ms"),
    "attention": (lambda m: m["layer_breakdown_ms"]["attention"], False, "ms"),
    "communication": (lambda m: m["layer_breakdown_ms"]["communication"], False, "ms"),
    # Communication against the larger of the two compute parts of the layer (> 1: dominant).
    "comm_share": (lambda m: m["layer_breakdown_ms"]["communication"]
                   / max(m["layer_breakdown_ms"]["ffn"], m["layer_breakdown_ms"]["attention"]), False, ""),
}

def _mean_waiting(per_gpu):
    return sum(g["waiting"] / sum(g.values()) for g in per_gpu) / len(per_gpu)


OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


class Unavailable(Exception):
    """A number the claim needs was not produced (a policy did not fit, data is missing)."""


# ---------------------------------------------------------------------------------------------
# Paper numbers: a number, a range [lo, hi], or an arithmetic expression over the paper's own
# numbers ("186/106"), so that derived values are computed, not typed.

def _eval_expr(node):
    if isinstance(node, ast.Expression):
        return _eval_expr(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult, ast.Div):
        a, b = _eval_expr(node.left), _eval_expr(node.right)
        return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b, ast.Div: a / b if b else math.nan}[type(node.op)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_expr(node.operand)
    raise ValueError(f"not an arithmetic expression: {ast.dump(node)}")


def paper_number(v):
    """A paper number as a float or a (lo, hi) tuple."""
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        lo, hi = (paper_number(x) for x in v)
        return (min(lo, hi), max(lo, hi))
    if isinstance(v, (int, float)):
        return float(v)
    return _eval_expr(ast.parse(str(v), mode="eval"))


def deviation(ours, paper):
    """|ours/paper - 1|, measured from the nearest end of a range (0 inside it)."""
    if isinstance(paper, tuple):
        lo, hi = paper
        if lo <= ours <= hi:
            return 0.0
        return min(deviation(ours, lo), deviation(ours, hi))
    if paper == 0:
        return math.inf if ours != 0 else 0.0
    return abs(ours / paper - 1.0)


def _side(x):
    return 1 if x > 1 else (-1 if x < 1 else 0)


def holds(value, cond):
    op, thr = cond
    return OPS[op](value, float(thr))


# ---------------------------------------------------------------------------------------------
# Verdicts (pure functions: the unit test exercises these).

def verdict_ratio(ours, paper, tol=TOLERANCE):
    """Ratio claim: paper and ours are 'A over B' ratios (> 1: A wins)."""
    mid = paper if not isinstance(paper, tuple) else (paper[0] * paper[1]) ** 0.5
    if _side(ours) != _side(mid):
        return NOT_REPRODUCED
    return REPRODUCED if deviation(ours, paper) <= tol + 1e-12 else DIRECTION_ONLY


def verdict_value(ours, paper, direction=None, tol=TOLERANCE):
    """Value claim; `direction` is an optional (op, threshold) that the paper's value satisfies."""
    if deviation(ours, paper) <= tol + 1e-12:
        return REPRODUCED
    if direction is not None and holds(ours, direction):
        return DIRECTION_ONLY
    return NOT_REPRODUCED


def verdict_direction(results):
    """Qualitative claim: `results` is one bool, or a list of them (every one must hold)."""
    if isinstance(results, bool):
        results = [results]
    return REPRODUCED if results and all(results) else NOT_REPRODUCED


def slope(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def trend_sign(xs, ys, flat=FLAT):
    """+1 increasing, -1 decreasing, 0 flat: the sign of the least-squares slope, flat when the
    fitted change across the x range is under `flat` of the mean |y|."""
    s = slope(xs, ys)
    scale = sum(abs(y) for y in ys) / len(ys)
    change = s * (max(xs) - min(xs))
    if scale == 0 or abs(change) < flat * scale:
        return 0
    return 1 if s > 0 else -1


def verdict_trend(xs, ys, expect, growth=None, growth_bound="exact", tol=TOLERANCE):
    """Trend claim: expect 'increasing' or 'decreasing'; growth is the paper's y_last / y_first."""
    want = {"increasing": 1, "decreasing": -1}[expect]
    if trend_sign(xs, ys) != want:
        return NOT_REPRODUCED
    if growth is None:
        return REPRODUCED
    ours = ys[-1] / ys[0] if ys[0] else math.inf
    if growth_bound == "lower":
        ok = ours >= growth * (1 - tol) if want > 0 else ours <= growth * (1 + tol)
    else:
        ok = deviation(ours, growth) <= tol + 1e-12
    return REPRODUCED if ok else DIRECTION_ONLY


# ---------------------------------------------------------------------------------------------
# Results of the runs, as reproduce.py collects them.

class PointResult:
    def __init__(self, result=None, unfit=None, error=None):
        self.result = result            # the parsed result.json, or None
        self.unfit = unfit or {}        # policy label -> why it was left out (memory)
        self.error = error              # why the whole point has no result
        self.runs = {}
        if result:
            labels = [r["label"] for r in result["runs"]]
            for r in result["runs"]:
                self.runs[f"{r['label']}/{r.get('predictor_label', 'none')}"] = r
                if labels.count(r["label"]) == 1:
                    self.runs[r["label"]] = r

    def metrics(self, key):
        if key in self.runs:
            return self.runs[key]["metrics"]
        if key in self.unfit:
            raise Unavailable(f"{key} does not fit in GPU memory at this point")
        if self.error:
            raise Unavailable(self.error)
        raise KeyError(f"no run '{key}' (runs: {', '.join(sorted(self.runs))})")


class Results:
    """experiment -> point label -> PointResult; `cost` answers moesim cost queries."""

    def __init__(self, points, cost=None, skipped=None):
        self.points = points
        self.cost = cost
        self.skipped = skipped or {}    # experiment -> why it was not run

    def point(self, exp, point):
        if exp in self.skipped:
            raise Unavailable(self.skipped[exp])
        if exp not in self.points:
            raise Unavailable(f"experiment {exp} was not run")
        if point not in self.points[exp]:
            raise KeyError(f"experiment {exp} has no point '{point}' (points: {', '.join(self.points[exp])})")
        return self.points[exp][point]


# ---------------------------------------------------------------------------------------------
# Computing a claim's number.

class Ref:
    def __init__(self, spec, exp, point):
        if isinstance(spec, str):
            spec = {"policy": spec}
        self.key = spec["policy"]
        self.exp = spec.get("experiment", exp)
        self.point = spec.get("point", point)

    def metric(self, results, metric):
        get = METRICS[metric][0]
        return float(get(results.point(self.exp, self.point).metrics(self.key)))


def _refs(spec, exp, point):
    if spec is None:
        return []
    if isinstance(spec, list):
        return [Ref(s, exp, point) for s in spec]
    return [Ref(spec, exp, point)]


def _values(results, refs, metric):
    """(value, ref) of every ref that ran. Of several, those that did not run (a policy that does
    not fit in memory) are left out; if none ran, the first one's reason is raised."""
    vals, missing = [], []
    for r in refs:
        try:
            vals.append((r.metric(results, metric), r))
        except Unavailable as e:
            missing.append(e)
    if not vals:
        raise missing[0]
    return vals


def _pick(results, refs, metric, best=True):
    """The best (or worst) of several refs by the metric: (value, ref)."""
    higher = METRICS[metric][1]
    vals = _values(results, refs, metric)
    pick_max = higher if best else not higher
    return (max if pick_max else min)(vals, key=lambda t: t[0])


def _combine(results, refs, metric, how):
    if len(refs) == 1:
        return refs[0].metric(results, metric), refs[0]
    if how in ("max", "min"):
        vals = _values(results, refs, metric)
        return (max if how == "max" else min)(vals, key=lambda t: t[0])
    return _pick(results, refs, metric, best=(how != "worst"))


def point_value(results, claim, point):
    """(value, detail) of the claim's measure at one point."""
    exp = claim["experiment"]
    metric = claim.get("metric")
    measure = claim.get("measure", "advantage")
    a_refs = _refs(claim.get("a"), exp, point)
    b_refs = _refs(claim.get("b"), exp, point)

    if measure == "interior_best":
        # The best of an ordered list (e.g. accuracies) lies strictly inside it (a U-shape).
        higher = METRICS[metric][1]
        vals = [r.metric(results, metric) for r in a_refs]
        i = (max if higher else min)(range(len(vals)), key=lambda k: vals[k])
        return float(0 < i < len(vals) - 1), f"best: {a_refs[i].key}"
    if measure == "attention_over_copy":
        # Attention time of one layer over the time of one expert copy between two GPUs.
        ref = a_refs[0]
        attn = ref.metric(results, "attention")
        scen = results.point(ref.exp, ref.point).result["scenario"]
        nbytes = expert_bytes(scen["model"])
        if results.cost is None:
            raise Unavailable("no moesim cost query available")
        copy_ms = results.cost("sendrecv", scen["hardware"]["preset"], 2, nbytes)
        return attn / copy_ms, f"attention {fmt_num(attn)} ms vs one {nbytes / 1e6:.0f} MB expert copy {fmt_num(copy_ms)} ms"

    how_a = claim.get("combine", "best")
    va, ra = _combine(results, a_refs, metric, how_a)
    unit = METRICS[metric][2]
    if not b_refs:
        if measure != "value":
            raise ValueError(f"{claim['id']}: measure {measure} needs b")
        return va, f"{ra.key} {fmt_metric(va, unit)}"
    # Of several b refs (baselines), the best by default; `combine_b: worst` takes the worst (a
    # "maximum speedup over the baselines").
    vb, rb = _pick(results, b_refs, metric, best=claim.get("combine_b", "best") != "worst")
    higher = METRICS[metric][1]
    na, nb = ra.key, rb.key
    if (ra.exp, ra.point) != (rb.exp, rb.point):
        na, nb = f"{na} at {ra.point}", f"{nb} at {rb.point}"
    detail = f"{na} {fmt_metric(va, unit)} vs {nb} {fmt_metric(vb, unit)}"
    if measure == "advantage":
        v = (va / vb) if higher else (vb / va)
    elif measure == "gain":
        v = ((va / vb) if higher else (vb / va)) - 1.0
    elif measure == "reduction":
        v = 1.0 - va / vb
    elif measure == "increase":
        v = va / vb - 1.0
    elif measure == "difference":
        v = vb - va
    elif measure == "raw_ratio":
        v = va / vb
    else:
        raise ValueError(f"{claim['id']}: unknown measure {measure}")
    return v, detail


def expert_bytes(model):
    mats = 3 if model.get("activation") in ("swiglu", "geglu") else 2
    dtype = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}[model["dtype"]]
    return mats * model["hidden"] * model["expert_ffn"] * dtype


def resolve_point(results, claim):
    """The claim's point: a label, or a rule ({closest: ...}) evaluated on the runs."""
    p = claim.get("point")
    if not isinstance(p, dict):
        return p, None
    rule = p["closest"]
    target = paper_number(rule["target"])
    ref_key, metric = rule["policy"], rule["metric"]
    best = None
    for label in rule["among"]:
        try:
            v = Ref(ref_key, claim["experiment"], label).metric(results, metric)
        except (Unavailable, KeyError):
            continue
        d = abs(math.log(v / target))
        if best is None or d < best[0]:
            best = (d, label, v)
    if best is None:
        raise Unavailable("no point of the rule's grid ran")
    _, label, v = best
    unit = METRICS[metric][2]
    return label, (f"{label} by rule: {ref_key}'s {metric} {fmt_metric(v, unit)} is the grid's "
                   f"closest to the paper's {fmt_num(target)} {unit}")


def evaluate(results, claim):
    """A row: dict with ours (text), value, verdict, note. Never raises for missing runs."""
    kind = claim["kind"]
    row = {"id": claim["id"], "verdict": NOT_RUN, "ours": "—", "value": None, "note": None}
    if kind == "not-run":
        return row
    try:
        point, note = resolve_point(results, claim)
        row["note"] = note
        row["point"] = point
        paper = paper_number(claim.get("paper_value"))
        if kind == "trend":
            xs = [float(x) for x in claim["x"]]
            ys = [point_value(results, claim, p)[0] for p in claim["points"]]
            growth = paper_number(claim.get("growth"))
            row["verdict"] = verdict_trend(xs, ys, claim["expect"], growth, claim.get("growth_bound", "exact"))
            sign = {1: "rising", -1: "falling", 0: "flat"}[trend_sign(xs, ys)]
            row["value"] = ys
            row["ours"] = (" → ".join(fmt_value(y, claim) for y in ys)
                           + f" ({sign}; last/first {ys[-1] / ys[0]:.2f})")
            return row
        points = claim.get("points") or [point]
        vals = [point_value(results, claim, p) for p in points]
        if kind == "direction":
            cond = claim.get("holds", [">", 1])
            oks = [holds(v, cond) for v, _ in vals]
            if claim.get("aggregate") == "most":
                row["verdict"] = REPRODUCED if sum(oks) * 2 > len(oks) else NOT_REPRODUCED
            elif claim.get("aggregate") == "peak_inside":
                # A peak followed by a decline: the maximum is not the last point and the last
                # point is more than FLAT below it (a smaller dip is flat).
                i = max(range(len(vals)), key=lambda k: vals[k][0])
                peak, last = vals[i][0], vals[-1][0]
                oks = [i < len(vals) - 1 and (peak - last) > FLAT * abs(peak)]
                row["verdict"] = verdict_direction(oks)
            else:
                row["verdict"] = verdict_direction(oks)
            row["value"] = [v for v, _ in vals]
            if claim.get("measure") == "interior_best":
                row["ours"] = "; ".join(d for _, d in vals)
            elif len(vals) == 1:
                row["ours"] = f"{fmt_value(vals[0][0], claim)} ({vals[0][1]})"
            else:
                row["ours"] = ", ".join(f"{p}: {fmt_value(v, claim)}" for p, (v, _) in zip(points, vals))
                if claim.get("aggregate") == "most":
                    row["ours"] += f" — holds at {sum(oks)} of {len(oks)}"
            return row
        if len(vals) > 1:
            agg = claim.get("aggregate", "max")
            if agg == "mean":
                v = sum(x for x, _ in vals) / len(vals)
                detail = "mean of " + "; ".join(f"{p}: {fmt_value(x, claim)}" for p, (x, _) in zip(points, vals))
            else:
                i = (max if agg == "max" else min)(range(len(vals)), key=lambda k: vals[k][0])
                v, detail = vals[i]
                detail = f"{agg} at {points[i]}: {detail}"
        else:
            v, detail = vals[0]
        row["value"] = v
        row["ours"] = f"{fmt_value(v, claim)} ({detail})"
        if kind == "ratio":
            row["verdict"] = verdict_ratio(v, paper)
        elif kind == "value":
            d = claim.get("direction")
            row["verdict"] = verdict_value(v, paper, tuple(d) if d else None)
        else:
            raise ValueError(f"{claim['id']}: unknown kind {kind}")
    except Unavailable as e:
        row["verdict"] = NOT_RUN
        row["ours"] = "—"
        row["note"] = str(e)
    return row


# ---------------------------------------------------------------------------------------------
# Formatting.

def fmt_num(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    a = abs(v)
    if a >= 10_000_000:
        return f"{v:.3g}"
    if a >= 100_000:
        return f"{v / 1000:,.0f} k"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 0.01:
        return f"{v:.3g}"
    return f"{v:.2g}"


def fmt_metric(v, unit):
    if unit == "%":
        return f"{100 * v:.1f}%"
    return f"{fmt_num(v)} {unit}".rstrip()


def fmt_value(v, claim):
    unit = claim.get("unit", "x" if claim.get("measure", "advantage") in ("advantage", "raw_ratio", "attention_over_copy") else "")
    if unit == "x":
        return f"{v:.2f}×"
    if unit == "%":
        return f"{100 * v:.1f}%"
    if unit == "pp":
        return f"{100 * v:.1f} pp"
    return f"{fmt_num(v)} {unit}".rstrip()


def fmt_paper(claim):
    if claim.get("paper_text"):
        return claim["paper_text"]
    p = paper_number(claim.get("paper_value"))
    if p is None:
        return "—"
    fake = dict(claim)
    if isinstance(p, tuple):
        return f"{fmt_value(p[0], fake)} – {fmt_value(p[1], fake)}"
    return fmt_value(p, fake)
