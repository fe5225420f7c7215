#!/usr/bin/env python3
"""Turn validation/serving/measurements.csv into one moesim scenario per measured configuration.

A configuration is every row that shares model, precision, GPU, GPU count, parallelism, framework,
version, input/output lengths and concurrency (or rate): the rows differ only in the metric they
report. For each configuration moesim can express, this writes
validation/serving/scenarios/<id>.yaml; for the others it records why not. Either way the
configuration is listed in validation/serving/cases.json, which validate.py reads.

Standard library only (no PyYAML): the scenarios are written by a tiny emitter. The output is
deterministic (CSV order, no timestamps), so re-running it changes nothing unless the CSV or this
file changed.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CSV_PATH = HERE / "measurements.csv"
SCENARIO_DIR = HERE / "scenarios"
CASES_PATH = HERE / "cases.json"

# Columns that identify a configuration (everything but the metric, its value and unit).
CONFIG_COLUMNS = ("model", "precision", "gpu", "num_gpus", "parallelism", "framework", "framework_version",
                  "input_tokens", "output_tokens", "concurrency_or_rate")

# The request-count rule, the same for every case and never tuned to a result (validation/README.md).
INFINITE_RATE_CONCURRENCY = 1024  # engines cap the running batch, so "all at once" acts like this many clients
REQUESTS_PER_CLIENT = 4
# MTP draft acceptance: DeepSeek-V3 report §5.4.3, "the acceptance rate of the second token
# prediction ranges between 85% and 90%": the lower end, for every draft position. Not a fit: the
# sources' datasets (and so their acceptance) are not published.
MTP_ACCEPTANCE = 0.85
MIN_REQUESTS = 500
UNKNOWN_COUNT_REQUESTS_PER_CLIENT = 10
UNKNOWN_COUNT_MIN_REQUESTS = 200

SOURCES = {
    "TRTLLM-PERF-v0.17": "TensorRT-LLM 0.17 performance overview (docs/source/performance/perf-overview.md)",
    "TRTLLM-DSR1-BLOG": "TensorRT-LLM blog 'How to get best performance on DeepSeek-R1 in TensorRT LLM'",
    "INFERENCEX-870": "SemiAnalysis InferenceX issue #870 (DeepSeek-R1-0528, SGLang v0.5.7, H200)",
}

MODEL_PRESETS = (  # (pattern on the CSV's model column, moesim preset, comment)
    (r"^Mixtral-8x7B", "mixtral-8x7b", ""),
    (r"^Mixtral-8x22B", "mixtral-8x22b", ""),
    (r"^DeepSeek-R1", "deepseek-v3", "DeepSeek-R1 has DeepSeek-V3's architecture (671B, MLA, 256 routed experts "
                                     "top-8 + 1 shared, first 3 layers dense), so the deepseek-v3 preset stands for it"),
)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def engine_of(framework: str) -> str | None:
    f = framework.lower()
    if "tensorrt-llm" in f or "trtllm" in f:
        return "trtllm"
    if "sglang" in f:
        return "sglang"
    if "vllm" in f:
        return "vllm"
    return None


def gpu_short(gpu: str) -> str:
    m = re.search(r"\b([ABHL]\d{2,3}S?)\b", gpu)
    return m.group(1) if m else gpu.split()[0]


def hardware_of(gpu: str) -> tuple[object | None, str | None]:
    """The moesim hardware for the CSV's GPU column, or a skip reason."""
    g = gpu_short(gpu)
    if g == "H100":
        return "dgx-h100", None
    if g == "A100":
        return "dgx-a100", None
    if g == "H200":  # an HGX/DGX H200 is a DGX H100 chassis (NVSwitch 4, 900 GB/s NVLink) with H200 GPUs
        return {"preset": "dgx-h100", "gpu": "H200-141GB"}, None
    if g == "B200":
        return "dgx-b200", None
    return None, f"GPU {gpu}"


def dtypes_of(precision: str, model_preset: str | None) -> tuple[str | None, str | None, str, str | None]:
    """(dtype, kv_dtype, comment, skip) from the CSV's precision column."""
    p = precision.lower()
    if "fp4" in p:
        # nvidia/DeepSeek-R1-FP4: the routed experts in NVFP4 (W4A4 on Blackwell), the rest as the
        # FP8 checkpoint it was quantised from (the checkpoint's quantisation config is not in the
        # source; ModelOpt's NVFP4 DeepSeek checkpoints quantise the MoE layers: inferred).
        kv = "fp8" if "fp8 kv" in p else "bf16"
        return "fp8", kv, ("routed experts NVFP4 (expert_dtype nvfp4), the rest fp8 as the FP8 checkpoint it was "
                           "quantised from (inferred: the FP4 checkpoint's quantisation config is not in the source); "
                           f"KV cache {kv}"), None
    if p.startswith("fp8"):
        if "fp8 kv" in p:
            return "fp8", "fp8", "", None
        # DeepSeek-R1's native block-FP8 checkpoint: the engines' default KV dtype ("auto") follows the
        # checkpoint's activations, bf16; the source states no KV quantisation.
        return "fp8", "bf16", ("KV cache bf16: the source states no KV quantisation, and the engines' default "
                               "(auto) follows the FP8 checkpoint's bf16 activations (inferred)"), None
    if p.startswith("fp16"):
        return "fp16", "fp16", "", None
    if p.startswith("bf16"):
        return "bf16", "bf16", "", None
    return None, None, "", f"precision {precision}"


def parse_int(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text, re.IGNORECASE)
    return int(m.group(1)) if m else None


def deployment_of(parallelism: str, num_gpus: int) -> tuple[dict | None, str, str | None]:
    """(deployment keys, human text, skip reason) from the CSV's parallelism column.

    TensorRT-LLM: tp_size is the GPU count; with enable_attention_dp attention runs data-parallel
    (attention TP = tp_size / DP); moe_expert_parallel_size = EP, and MoE TP = tp_size / EP (0.17's
    default for Mixtral: EP 1, experts tensor-parallel). SGLang "TP=8, EP=1": attention and experts
    tensor-parallel over 8 GPUs.
    """
    tp = parse_int(r"\bTP\s*=?\s*(\d+)", parallelism) or 1
    ep = parse_int(r"\bEP\s*=?\s*(\d+)", parallelism) or 1
    pp = parse_int(r"\bPP\s*=?\s*(\d+)", parallelism) or 1
    adp = parse_int(r"attention\s+DP\s*(\d+)", parallelism)
    if pp > 1:
        return None, parallelism, f"pipeline parallelism ({parallelism})"
    if adp:
        if tp % adp:
            return None, parallelism, f"attention DP {adp} does not divide TP {tp}"
        att_tp, dp = tp // adp, adp
        text = f"attention DP{dp}" + (f" x TP{att_tp}" if att_tp > 1 else "")
    else:
        att_tp, dp = tp, 1
        text = f"TP{tp}"
    gpus = att_tp * dp
    if gpus != num_gpus:
        return None, parallelism, f"{parallelism} uses {gpus} GPUs, the row lists {num_gpus}"
    if ep == 1:
        expert_parallel = False
        text += (f", experts TP{gpus}" if gpus > 1 else "")
    elif ep == gpus:
        expert_parallel = True
        text += f" + EP{ep}"
    elif att_tp % ep == 0 and dp == 1:
        # TensorRT-LLM moe_ep_size x moe_tp_size inside the attention group.
        dep = {"tensor_parallel": att_tp, "data_parallel": dp, "expert_parallel": False,
               "moe_expert_parallel": ep, "instances": 1}
        return dep, text + f", experts EP{ep} x TP{gpus // ep}", None
    else:
        return None, parallelism, f"mixed MoE parallelism EP{ep} x TP{gpus // ep} ({parallelism})"
    dep = {"tensor_parallel": att_tp, "data_parallel": dp, "expert_parallel": expert_parallel, "instances": 1}
    return dep, text, None


def concurrency_of(row: dict) -> tuple[int | None, bool, int | None]:
    """(concurrency C, infinite rate?, measured request count or None)."""
    c = row["concurrency_or_rate"]
    infinite = bool(re.search(r"rate\s*=\s*inf", c))
    conc = parse_int(r"concurrency\s*=\s*(\d+)", c)
    n = parse_int(r"num_requests\s*=\s*(\d+)", c) or parse_int(r"(\d+)\s+requests\b", row["workload"])
    return conc, infinite, n


def request_plan(conc: int | None, infinite: bool, measured_n: int | None) -> tuple[int, int, str]:
    """(requests, clients, the rule as a sentence)."""
    if infinite:
        c_eff = INFINITE_RATE_CONCURRENCY
        req = min(measured_n, max(REQUESTS_PER_CLIENT * c_eff, MIN_REQUESTS)) if measured_n else \
            max(REQUESTS_PER_CLIENT * c_eff, MIN_REQUESTS)
        return req, req, (f"requests = min(measured {measured_n}, max({REQUESTS_PER_CLIENT} x {c_eff}, {MIN_REQUESTS})) "
                          f"= {req} (infinite rate: concurrency bound {c_eff}); all issued at once (clients = requests)")
    assert conc
    if measured_n:
        req = min(measured_n, max(REQUESTS_PER_CLIENT * conc, MIN_REQUESTS))
        return req, conc, (f"requests = min(measured {measured_n}, max({REQUESTS_PER_CLIENT} x {conc}, {MIN_REQUESTS})) "
                           f"= {req}; {conc} closed-loop clients")
    req = max(UNKNOWN_COUNT_REQUESTS_PER_CLIENT * conc, UNKNOWN_COUNT_MIN_REQUESTS)
    return req, conc, (f"request count not published: requests = max({UNKNOWN_COUNT_REQUESTS_PER_CLIENT} x {conc}, "
                       f"{UNKNOWN_COUNT_MIN_REQUESTS}) = {req}; {conc} closed-loop clients")


# trtllm-bench build's batch-limit heuristic (TensorRT-LLM tensorrt_llm/bench/build/tuning.py,
# calc_engine_setting and finetune_setting): when the benchmark builds an engine from a dataset it
# sizes max_batch_size and max_num_tokens from the GPUs' total memory, the engine's weight bytes and
# the dataset's ISL/OSL. Ported line by line; the inputs are the model's config (HF config.json) and
# the GPU's total memory as NVML reports it. The stored versions differ in whether engine size
# divides by 1000^3 or 1024^3; the 1024^3 variant (with NVFP4 in BYTES_PER_ELEM) is the one of the
# Blackwell/NVFP4 release, which 0.17 is: used here (the choice moves max_num_seqs by <= 1 rounding step).
TRTLLM_BENCH_MODELS = {  # HF config.json: num_hidden_layers, num_key_value_heads, head_dim; parameter count
    "mixtral-8x7b": {"layers": 32, "kv_heads": 8, "head_size": 128, "params": 46_702_792_704},
}
NVML_TOTAL_MIB = {"H100": 81559, "A100": 81920}  # nvidia-smi "Total" of H100 SXM 80GB and A100-SXM4-80GB
TRTLLM_BENCH_KV_FRACTION = 0.95


def trtllm_bench_limits(preset: str, gpu: str, dtype: str, kv_dtype: str, tp: int, isl: int, osl: int):
    """(max_num_seqs, max_batched_tokens, note) as trtllm-bench build would choose them, or None."""
    import math
    m = TRTLLM_BENCH_MODELS.get(preset)
    mib = NVML_TOTAL_MIB.get(gpu_short(gpu))
    if m is None or mib is None:
        return None
    byte_per_elem = 1 if dtype == "fp8" else 2
    byte_per_kv = 1 if kv_dtype == "fp8" else 2
    total_gib = mib / 1024 * tp
    engine_size = m["params"] * byte_per_elem / 1024 ** 3
    available = total_gib - engine_size
    byte_per_token = 2 * m["layers"] * max(tp, m["kv_heads"]) * m["head_size"] * byte_per_kv / 1024 ** 3
    kv_tokens = available * TRTLLM_BENCH_KV_FRACTION / byte_per_token
    max_requests = kv_tokens / (isl + osl)
    raw_bs = min(max_requests, 4096)
    raw_token = min(raw_bs * (1 + isl / osl), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_token < 4096:
        tokens = max(2048, 256 * math.ceil(raw_token / 256))
    elif raw_token < 8192:
        tokens = 512 * math.ceil(raw_token / 512)
    else:
        tokens = 1024 * math.ceil(raw_token / 1024)
    note = (f"batch limits as trtllm-bench build's heuristic (tensorrt_llm/bench/build/tuning.py) sets them for this "
            f"dataset: {total_gib:.2f} GiB total - {engine_size:.2f} GiB engine, x{TRTLLM_BENCH_KV_FRACTION} over "
            f"{byte_per_token * 1024 ** 3:.0f} B/token -> {max_requests:.0f} requests of {isl}+{osl} -> "
            f"max_batch_size {bs}, max_num_tokens {tokens}")
    return bs, tokens, note


def serving_limits(workload: str) -> tuple[dict, list[str]]:
    """Batch limits only where the source states them; other stated engine settings as comments."""
    limits, comments = {}, []
    mbs = parse_int(r"max_batch_size\s+(\d+)", workload)
    mnt = parse_int(r"max_num_tokens\s+(\d+)", workload)
    if mbs is not None:
        limits["max_num_seqs"] = mbs
    if mnt is not None:
        limits["max_batched_tokens"] = mnt
    if mbs is not None or mnt is not None:
        comments.append("batch limits from the source's command (--max_batch_size -> max_num_seqs, "
                        "--max_num_tokens -> max_batched_tokens; TensorRT-LLM applies them per attention-DP rank)")
    m = re.search(r"kv_cache_free_gpu_mem_fraction\s+([\d.]+)", workload)
    if m:
        limits["kv_cache_free_memory_fraction"] = float(m.group(1))
        comments.append(f"source sets kv_cache_free_gpu_mem_fraction {m.group(1)} -> kv_cache_free_memory_fraction")
    return limits, comments


# ---------------------------------------------------------------------------------------------- YAML


def scalar(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    if re.fullmatch(r"[A-Za-z0-9_.\-/]+", s) and s not in ("true", "false", "null", "yes", "no", "on", "off"):
        return s
    return json.dumps(s)  # a JSON string is a valid double-quoted YAML scalar


def flow(v: object) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return scalar(v)


def emit(doc: dict, comments: list[str]) -> str:
    """Top-level keys in block style, nested maps in flow style (as the project's scenarios do)."""
    out = [f"# {c}" if c else "#" for c in comments]
    for key, value in doc.items():
        if isinstance(value, dict) and any(isinstance(x, dict) for x in value.values()) or key == "workload":
            out.append(f"{key}:")
            for k, x in value.items():
                out.append(f"  {k}: {flow(x)}")
        else:
            out.append(f"{key}: {flow(value)}")
    return "\n".join(out) + "\n"


def wrap(text: str, width: int = 110, indent: str = "") -> list[str]:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = indent + w
        else:
            cur = f"{cur} {w}" if cur else w
    if cur:
        lines.append(cur)
    return lines


# ---------------------------------------------------------------------------------------------- cases


def case_id(first: dict, engine: str | None, dep_text: str) -> str:
    model = re.split(r"\s*\(", first["model"])[0]
    prec = re.match(r"(fp\d+|bf16)", first["precision"].lower())
    par = re.sub(r"\bPP1\b", "", re.sub(r"attention\s*DP", "adp", first["parallelism"], flags=re.IGNORECASE))
    parts = [first["id"], model, gpu_short(first["gpu"]), prec.group(1) if prec else first["precision"],
             engine or first["framework"], par]
    if first["input_tokens"] and first["output_tokens"]:
        parts.append(f"{first['input_tokens']}-{first['output_tokens']}")
    conc, infinite, _ = concurrency_of(first)
    parts.append("inf" if infinite else f"c{conc}" if conc else first["concurrency_or_rate"])
    return slug("-".join(parts))


def build_case(rows: list[dict]) -> tuple[dict, str | None]:
    """The case entry for cases.json and its scenario text (None when skipped)."""
    first = rows[0]
    engine = engine_of(first["framework"])
    num_gpus = int(first["num_gpus"])
    text_all = " ".join(first[c] for c in ("parallelism", "workload", "notes"))
    needs, other = [], []  # reasons that need issue 26's features; anything else

    hardware, hw_skip = hardware_of(first["gpu"])
    preset, model_note = None, ""
    for pattern, p, note in MODEL_PRESETS:
        if re.search(pattern, first["model"]):
            preset, model_note = p, note
            break
    dtype, kv_dtype, dtype_note, dt_skip = dtypes_of(first["precision"], preset)
    if hw_skip and dt_skip:
        needs.append(f"{hw_skip} / {dt_skip}")
    elif hw_skip or dt_skip:
        needs.append(hw_skip or dt_skip)
    mtp = parse_int(r"num_nextn_predict_layers\s*(\d+)", text_all) if re.search(
        r"\bMTP\b|num_nextn_predict_layers|decoding_type", text_all) else None
    if preset is None:
        needs.append("model preset")
    dep, dep_text, dep_skip = deployment_of(first["parallelism"], num_gpus)
    if dep_skip:
        other.append(dep_skip)
    if engine is None:
        other.append(f"engine {first['framework']}")
    if int(first["nodes"] or 1) > 1:
        other.append(f"{first['nodes']} nodes")
    nominal = re.search(r"ISL\s*(\d+)K\s*/\s*OSL\s*(\d+)K", first["workload"])
    lengths_note = ""
    if not (first["input_tokens"] and first["output_tokens"]):
        if nominal:
            # A real dataset whose lengths the source gives only as nominal "ISL = 1K, OSL = 2K".
            first = dict(first, input_tokens=str(1024 * int(nominal.group(1))), output_tokens=str(1024 * int(nominal.group(2))))
            lengths_note = (f"input/output lengths: the source's nominal ISL {nominal.group(1)}K / OSL {nominal.group(2)}K "
                            "of a real dataset it does not publish (fixed lengths here)")
        else:
            other.append("input/output lengths not stated by the source")
    conc, infinite, measured_n = concurrency_of(first)
    if not infinite and not conc:
        other.append(f"load {first['concurrency_or_rate']!r} not understood")

    cid = case_id(first, engine, dep_text)
    measured, units = {}, {}
    for r in rows:
        if r["metric"] in measured:
            sys.exit(f"{r['id']}: metric {r['metric']} twice in one configuration")
        measured[r["metric"]] = float(r["value"])
        units[r["metric"]] = r["unit"]
    case = {
        "id": cid,
        "rows": [r["id"] for r in rows],
        "source": first["source_id"],
        "engine": engine or first["framework"],
        "framework": f"{first['framework']} {first['framework_version']}",
        "model": first["model"],
        "precision": first["precision"],
        "gpu": first["gpu"],
        "gpu_short": gpu_short(first["gpu"]),
        "num_gpus": num_gpus,
        "parallelism": first["parallelism"],
        "deployment": dep_text,
        "input_tokens": int(first["input_tokens"]) if first["input_tokens"] else None,
        "output_tokens": int(first["output_tokens"]) if first["output_tokens"] else None,
        "concurrency": first["concurrency_or_rate"],
        "measured": measured,
        "units": units,
    }
    reasons = ([f"needs issue 26: {', '.join(needs)}"] if needs else []) + other
    if reasons:
        case["skip_reason"] = "; ".join(reasons)
        return case, None

    requests, clients, rule = request_plan(conc, infinite, measured_n)
    limits, serving_notes = serving_limits(first["workload"])
    if not limits and first["source_id"] == "TRTLLM-PERF-v0.17":
        bench = trtllm_bench_limits(preset, first["gpu"], dtype, kv_dtype, dep["tensor_parallel"],
                                    case["input_tokens"], case["output_tokens"])
        if bench:
            limits = {"max_num_seqs": bench[0], "max_batched_tokens": bench[1]}
            serving_notes.append(bench[2])
    policy = "static-ep" if dep["expert_parallel"] else "tp-experts"
    model = {"preset": preset, "dtype": dtype, "kv_dtype": kv_dtype}
    if "fp4" in first["precision"].lower():
        model["expert_dtype"] = "nvfp4"
    doc = {
        "name": f"val-{cid}",
        "seed": 1,
        "model": model,
        "hardware": hardware,
        "workload": {
            "kind": "serving",
            "requests": requests,
            "warmup_requests": 0,
            "arrival": {"process": "closed", "clients": clients},
            "prompt_tokens": case["input_tokens"],
            "output_tokens": case["output_tokens"],
            "routing": {"kind": "uniform"},
        },
        "serving": {"engine": engine, **limits,
                    **({"speculative": {"method": "mtp", "draft_tokens": mtp, "acceptance_rate": MTP_ACCEPTANCE}}
                       if mtp else {})},
        "deployment": dep,
        "policy": policy,
    }
    rel = f"validation/serving/scenarios/{cid}.yaml"
    case.update({"scenario": rel, "requests": requests, "clients": clients})

    head = [f"Validation case {cid}",
            f"generated by validation/serving/make_scenarios.py (edit the generator, not this file) from",
            f"validation/serving/measurements.csv rows {', '.join(case['rows'])}.", ""]
    head += wrap(f"Source {first['source_id']}: {SOURCES.get(first['source_id'], first['source_id'])}; "
                 "provenance and quotes in validation/serving/MANIFEST.md.")
    version = first["framework_version"]
    version = "(version not stated)" if version.startswith("not stated") else version
    head += wrap(f"Measured: {first['model']}, {first['precision']}, {num_gpus}x {first['gpu']}, {first['parallelism']}, "
                 f"{first['framework']} {version}; {first['workload']}; {first['concurrency_or_rate']}.")
    head += wrap("Metrics: " + ", ".join(f"{k} = {v:g} {units[k]}" for k, v in measured.items()) + ".")
    head.append("")
    if model_note:
        head += wrap(model_note + ".")
    if lengths_note:
        head += wrap(lengths_note + ".")
    if mtp:
        head += wrap(f"MTP: num_nextn_predict_layers {mtp} = {mtp} draft tokens per decode step; acceptance "
                     f"{MTP_ACCEPTANCE} per draft (DeepSeek-V3 report §5.4.3: 85-90% for the second token).")
    if dtype_note:
        head += wrap(dtype_note + ".")
    head += wrap(f"Deployment: {first['parallelism']} -> tensor_parallel {dep['tensor_parallel']}, data_parallel "
                 f"{dep['data_parallel']}, expert_parallel {scalar(dep['expert_parallel'])} ({dep_text}); policy {policy}.")
    if engine == "trtllm" and not dep["expert_parallel"]:
        head += wrap("TensorRT-LLM's default MoE mode is tensor-parallel experts (moe_tp_size = tp_size).")
    head += wrap(f"Requests (validation/README.md's rule, the same for every case): {rule}.")
    if not limits:
        head += wrap("Batch limits: not stated by the source, so the engine preset's defaults apply.")
    for n in serving_notes:
        head += wrap(n[0].upper() + n[1:] + ".")
    if first["source_id"] == "TRTLLM-PERF-v0.17":
        head += wrap("The source: kv_cache_free_gpu_mem_fraction 0.95 'in majority of cases' (the runtime's default is "
                     "0.90, the trtllm engine preset's); batch limits from trtllm-bench build's heuristic, above.")
    return case, emit(doc, head)


POINTS_PER_GROUP = 1
POINTS_SEED = 48


def write_points(args) -> int:
    """--points: every point of the file as a case in OUT/cases.json, the expressible ones as
    OUT/scenarios/<id>.yaml, a stratified sample marked; stale scenarios removed."""
    from points import points_cases
    out = args.out.resolve()
    scen_dir = out / "scenarios"
    rel = str(scen_dir.relative_to(ROOT)) if scen_dir.is_relative_to(ROOT) else str(scen_dir)
    points = args.points.resolve()
    named = os.path.relpath(points, ROOT) if points.is_relative_to(ROOT.parent) else str(points)
    cases, scenarios = points_cases(args.points, named, rel, args.per_group, args.seed)
    if len({c["id"] for c in cases}) != len(cases):
        print(f"{args.points}:1:1: error: two points' ids give the same case id", file=sys.stderr)
        return 2
    scen_dir.mkdir(parents=True, exist_ok=True)
    existing = {p.name for p in scen_dir.glob("*.yaml")}
    for name in sorted(existing - set(scenarios)):
        (scen_dir / name).unlink()
    for name, text in sorted(scenarios.items()):
        path = scen_dir / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    (out / "cases.json").write_text(json.dumps({
        "generated_by": "validation/serving/make_scenarios.py --points", "points": named,
        "sample_rule": {"per_group": args.per_group, "seed": args.seed}, "cases": cases}, indent=1) + "\n")
    skipped = [c for c in cases if "skip_reason" in c]
    print(f"{len(cases)} points -> {len(scenarios)} scenarios in {rel}/ ({sum(c['sample'] for c in cases)} in the "
          f"sample), {len(skipped)} listed with a reason")
    reasons: dict[str, int] = {}
    for c in skipped:
        for r in c["skip_reason"].split("; "):
            reasons[r] = reasons.get(r, 0) + 1
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {n:5d}  {reason}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", type=Path, default=CSV_PATH)
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if the outputs are out of date")
    ap.add_argument("--points", type=Path, metavar="FILE",
                    help="a file of measured serving points (the serving_points.csv format) instead of --csv")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "validation-points",
                    help="with --points: where cases.json and scenarios/ go (default results/validation-points)")
    ap.add_argument("--per-group", type=int, default=POINTS_PER_GROUP,
                    help=f"with --points: points per (model, system, engine, mode) in the sample make validate "
                         f"runs (default {POINTS_PER_GROUP})")
    ap.add_argument("--seed", type=int, default=POINTS_SEED, help=f"with --points: the sample's seed ({POINTS_SEED})")
    args = ap.parse_args()
    if args.points:
        return write_points(args)

    with args.csv.open(newline="") as f:
        rows = list(csv.DictReader(f))
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[c] for c in CONFIG_COLUMNS), []).append(r)

    cases, scenarios = [], {}
    for key in groups:  # CSV order (dicts keep insertion order)
        case, text = build_case(groups[key])
        if any(c["id"] == case["id"] for c in cases):
            sys.exit(f"duplicate case id {case['id']}")
        cases.append(case)
        if text is not None:
            scenarios[f"{case['id']}.yaml"] = text
    cases.sort(key=lambda c: c["id"])
    cases_text = json.dumps({"generated_by": "validation/serving/make_scenarios.py",
                             "csv": "validation/serving/measurements.csv",
                             "request_rule": {"infinite_rate_concurrency": INFINITE_RATE_CONCURRENCY,
                                              "requests_per_client": REQUESTS_PER_CLIENT,
                                              "min_requests": MIN_REQUESTS,
                                              "unknown_count_requests_per_client": UNKNOWN_COUNT_REQUESTS_PER_CLIENT,
                                              "unknown_count_min_requests": UNKNOWN_COUNT_MIN_REQUESTS},
                             "cases": cases}, indent=1) + "\n"

    existing = {p.name: p.read_text() for p in SCENARIO_DIR.glob("*.yaml")} if SCENARIO_DIR.is_dir() else {}
    current = CASES_PATH.read_text() if CASES_PATH.exists() else None
    if args.check:
        stale = existing != scenarios or current != cases_text
        print("out of date" if stale else "up to date")
        return 1 if stale else 0
    SCENARIO_DIR.mkdir(parents=True, exist_ok=True)
    for name in sorted(set(existing) - set(scenarios)):
        (SCENARIO_DIR / name).unlink()
    for name, text in sorted(scenarios.items()):
        if existing.get(name) != text:
            (SCENARIO_DIR / name).write_text(text)
    if current != cases_text:
        CASES_PATH.write_text(cases_text)

    skipped = [c for c in cases if "skip_reason" in c]
    print(f"{len(rows)} rows -> {len(cases)} configurations: {len(scenarios)} scenarios in "
          f"{SCENARIO_DIR.relative_to(ROOT)}/, {len(skipped)} skipped")
    reasons: dict[str, list[str]] = {}
    for c in skipped:
        reasons.setdefault(c["skip_reason"], []).append(c["id"])
    for reason, ids in sorted(reasons.items()):
        print(f"  skipped ({reason}): {', '.join(ids)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
