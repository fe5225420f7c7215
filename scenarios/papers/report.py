"""The markdown of the paper reproductions: per-experiment tables, the claims tables with their
verdicts and sensitivity rows, and the set-ups. reproduce.py calls these on its results."""
import os
from pathlib import Path

import yaml

import claims as C
import guideline_runs as GL
from experiments import EXPERIMENTS, HERE, _label

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


def esc(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def setup_text(results, claim, row):
    exp_name = claim.get("experiment")
    if not exp_name:
        return "—"
    point = row.get("point") or ""
    pts = claim.get("points")
    where = ", ".join(pts) if pts and claim["kind"] != "trend" else (f"{pts[0]} … {pts[-1]}" if pts else point)
    if pts and len(pts) > 4 and claim["kind"] != "trend":
        where = f"{len(pts)} points ({pts[0]} … {pts[-1]})"
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
            txt = f"{'worst' if claim.get('combine_b') == 'worst' else 'best'} of {txt}"
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


