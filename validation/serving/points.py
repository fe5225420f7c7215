"""Measured serving points (the `serving_points.csv` format of ../shared/data/kernels/, MANIFEST.md)
as validation cases: one point, one scenario, by rules written once here (issue 48).

A point is one benchmark run: a model (a Hugging Face name), a system, an engine and its version,
a precision, an aggregated deployment (`mode: agg`) or prefill and decode workers (`disagg`),
ISL/OSL, a client `concurrency`, and the measured TTFT and TPOT. `point_case` turns it into the
case entry validate.py reads and a scenario, or a case with a `skip_reason` naming what moesim
cannot express. Nothing is dropped silently; a malformed file is a located error (exit 2).

Standard library only, like make_scenarios.py, whose YAML emitter it uses.
"""
from __future__ import annotations

import csv
import math
import random
import sys
from pathlib import Path

REQUIRED = ("id", "backend", "backend_version", "model_path", "system", "precision", "mode", "isl", "osl",
            "gemm_quant_mode", "moe_quant_mode", "tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
            "silicon_ttft_ms", "silicon_tpot_ms", "concurrency")
POOL_FIELDS = ("num_workers", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")

# Hugging Face name -> (moesim preset, note). The presets carry the architecture; the point's
# quantisation modes set the dtypes.
MODELS = {
    "deepseek-ai/DeepSeek-R1": ("deepseek-r1", ""),
    "deepseek-ai/DeepSeek-V3": ("deepseek-v3", ""),
    "nvidia/DeepSeek-R1-NVFP4": ("deepseek-r1", "NVIDIA's NVFP4 quantisation of DeepSeek-R1 (same architecture)"),
    "nvidia/DeepSeek-V3.1-NVFP4": ("deepseek-v3", "DeepSeek-V3.1 has DeepSeek-V3's architecture"),
    "moonshotai/Kimi-K2.5": ("kimi-k2", "Kimi-K2.5's text model is Kimi-K2's architecture (DeepSeek-V3's, 384 "
                                        "experts, 64 MLA heads); its vision encoder is not simulated"),
    "openai/gpt-oss-120b": ("gpt-oss-120b", "GPT-OSS ships its experts in MXFP4: a point's 4-bit mode is that "
                                            "checkpoint, run as the preset's mxfp4 experts and bf16 attention"),
    "Qwen/Qwen3-235B-A22B-FP8": ("qwen3-235b-a22b", ""),
    "MiniMaxAI/MiniMax-M2.5": ("minimax-m2.5", ""),
    "meta-llama/Llama-3.1-70B": ("llama-3.1-70b", "dense: no MoE layer"),
    "meta-llama/Llama-3.1-8B-Instruct": ("llama-3.1-8b", "dense: no MoE layer (the Instruct model has the base "
                                                         "model's architecture)"),
    "Qwen/Qwen3-32B": ("qwen3-32b", "dense: no MoE layer"),
    "nvidia/Qwen3-32B-NVFP4": ("qwen3-32b", "dense: no MoE layer; NVIDIA's NVFP4 quantisation of Qwen3-32B"),
    "Qwen/Qwen3.5-397B-A17B": ("qwen3.5-397b-a17b", "hybrid: Gated DeltaNet in 45 layers, gated attention in 15; "
                                                    "the vision tower is not simulated"),
    "zhipuai/GLM-5": ("glm-5", "MLA with DeepSeek Sparse Attention (top-2048 keys); fp8 points run per-tensor "
                               "fp8 GEMMs as their gemm_quant_mode says (the preset's checkpoint is bf16)"),
}
# Dense models: no experts, so no expert type, expert parallelism or expert policy.
DENSE = {"llama-3.1-70b", "llama-3.1-8b", "qwen3-32b"}
# Models whose checkpoint is already 4-bit: the collectors label it nvfp4, the engines run the
# checkpoint's own format (GPT-OSS: MXFP4 experts, bf16 attention, on Hopper and Blackwell alike).
NATIVE_4BIT = {"openai/gpt-oss-120b"}
# Architectures the points ran that moesim has no model for yet (issue 48 section 2).
UNSUPPORTED_MODELS: dict[str, str] = {}
SYSTEMS = {"h100_sxm": "dgx-h100", "b200_sxm": "dgx-b200"}
GPUS_PER_NODE = 8
ENGINES = ("trtllm", "sglang", "vllm")
# The engine presets of the points' versions (serving/engine_profile.cpp): every TensorRT-LLM point
# is of the 1.x PyTorch backend (versions 1.0-1.3, or Dynamo 0.8 containers of TRT-LLM 1.2-1.3;
# the unstated ones are of the same 2026 dumps), SGLang 0.5.x, vLLM 0.11-0.19.
ENGINE_PRESETS = {"trtllm": "trtllm-pytorch", "sglang": "sglang", "vllm": "vllm"}
CHECKPOINT = "checkpoint"  # no precision stated: the checkpoint's own (the preset's dtypes)
# Quantisation modes -> moesim dtypes. fp8_block is FP8 with 128-block scales: the model's fp8
# dtype, whose block-scaled checkpoints run block kernels (models/quantisation).
QUANT = {"fp8": "fp8", "fp8_block": "fp8", "nvfp4": "nvfp4", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16"}
# Weight-only INT4 (int4_wo): a checkpoint whose routed experts are INT4 in groups of 32 and the
# rest bf16 (Kimi-K2.5's compressed-tensors config ignores attention, shared experts and dense
# MLPs), run by W4A16 kernels: bf16 everywhere, int4 expert weights, weight-only math. The
# collectors label the GEMMs int4_wo too; the checkpoint says which GEMMs are INT4.
INT4_WEIGHT_ONLY = "int4_wo"

# The request rule, the same for every point and never tuned to a result, is the source's own
# benchmark protocol: aiconfigurator's generated benchmark (generator/config/backend_templates/
# benchmark/bench_run.sh.j2, and sflow.py's MULTI_ROUND, both 20) runs aiperf at `concurrency`
# clients with --num-requests 20 x concurrency after a warm-up phase of 2 x concurrency requests.
# aiperf runs its phases one after the other and waits for every warm-up request to return before
# the profiling phase starts (aiperf/timing/credit_issuing_strategy.py, _execute_phases), so the
# measured phase starts cold: all clients send at once (a first wave), then each sends again as
# its request finishes, and the last requests drain with fewer clients left (a closing tail). The
# warm-up removes the engine's cold start, which a simulation has not.
# moesim runs SIMULATED_ROUNDS x concurrency requests of that closed loop (more rounds when
# concurrency is small, for at least MIN_REQUESTS) and estimates the source's 20-round means from
# the three parts: the first wave (the first `concurrency` requests issued) weighs 1/20, the
# closing tail (the last `concurrency` issued) 1/20, the rounds between 18/20
# (validate.py's round_weighted). Until this revision the means were those of three rounds, the
# first wave weighing 1/3.
LAYER_SAMPLING = 256
SIMULATED_ROUNDS = 4
SOURCE_ROUNDS = 20
MIN_REQUESTS = 16


class PointsError(Exception):
    """A malformed points file, located at FILE:LINE:COL."""


def _num(row: dict, key: str) -> float | None:
    v = (row.get(key) or "").strip()
    if v == "":
        return None
    try:
        return float(v)
    except ValueError:
        return math.nan


def read_points(path: Path) -> list[dict]:
    """The file's rows, each with its `_line`; PointsError at FILE:LINE:COL when a required column is
    missing, a latency is not a positive number, ISL/OSL or a parallel size is not a whole number >= 0,
    or a concurrency is given and below 1."""
    with path.open(newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise PointsError(f"{path}:1:1: error: empty file (expected the serving_points.csv header)")
        for col in REQUIRED:
            if col not in header:
                raise PointsError(f"{path}:1:1: error: missing column '{col}' (the serving_points.csv format: "
                                  f"../shared/data/kernels/MANIFEST.md)")
        rows, seen = [], {}
        for lineno, cells in enumerate(reader, start=2):
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise PointsError(f"{path}:{lineno}:1: error: {len(cells)} cells, the header has {len(header)}")
            row = dict(zip(header, cells))
            col_of = {c: header.index(c) + 1 for c in header}

            def bad(col: str, what: str) -> PointsError:
                return PointsError(f"{path}:{lineno}:{col_of[col]}: error: {col} {row[col]!r}: {what}")

            for col in ("silicon_ttft_ms", "silicon_tpot_ms"):
                v = _num(row, col)
                if v is None or not (v > 0) or not math.isfinite(v):
                    raise bad(col, "expected a positive latency in ms")
            for col in ("isl", "osl"):
                v = _num(row, col)
                if v is None or not math.isfinite(v) or v < 1 or v != int(v) or v > 10_000_000:
                    raise bad(col, "expected a whole number of tokens in [1, 10,000,000]")
            c = _num(row, "concurrency")
            if c is not None and (not math.isfinite(c) or c < 1 or c != int(c) or c > 1_000_000):
                raise bad("concurrency", "expected a whole number of clients in [1, 1,000,000] (or empty)")
            for col in [f"{p}{f}" for p in ("", "prefill_", "decode_") for f in POOL_FIELDS] + ["batch_size"]:
                if col in row:
                    v = _num(row, col)
                    if v is not None and (not math.isfinite(v) or v < 0 or v != int(v) or v > 65536):
                        raise bad(col, "expected a whole number in [0, 65,536] (or empty)")
            if row["id"] in seen:
                raise bad("id", f"the same id as line {seen[row['id']]}")
            seen[row["id"]] = lineno
            row["_line"] = lineno
            rows.append(row)
    return rows


def _int(row: dict, key: str, default: int = 1) -> int:
    v = _num(row, key)
    return default if v is None or v == 0 else int(v)


def pool_deployment(row: dict, prefix: str, dense: bool = False) -> tuple[dict | None, str, str | None]:
    """(deployment keys, text, skip reason) of the aggregated deployment (prefix "") or one pool.

    The source's attention runs tensor-parallel over tp_size GPUs in attention_dp_size data-parallel
    groups; its MoE layers run over the same tp x dp GPUs as moe_tp_size x moe_ep_size (TensorRT-LLM
    moe_tp_size/moe_ep_size, SGLang --ep-size, vLLM --enable-expert-parallel). A dense model has no
    MoE layer: its moe_* columns (1, 0 or empty in the source) say nothing and are not read."""
    tp, dp = _int(row, prefix + "tp_size"), _int(row, prefix + "attention_dp_size")
    pp = _int(row, prefix + "pp_size")
    workers = _int(row, prefix + "num_workers") if prefix else 1
    gpus = tp * dp
    text = f"TP{tp}" if dp == 1 else f"attention DP{dp}" + (f" x TP{tp}" if tp > 1 else "")
    if pp > 1:
        return None, text, f"pipeline parallelism (pp {pp})"
    dep = {"tensor_parallel": tp, "data_parallel": dp}
    if dense:
        dep["expert_parallel"] = False
        mtp = mep = 0
    else:
        mtp, mep = _int(row, prefix + "moe_tp_size"), _int(row, prefix + "moe_ep_size")
    if not dense and mtp * mep != gpus:
        return None, text, f"MoE TP{mtp} x EP{mep} over {gpus} attention GPUs"
    if dense:
        pass
    elif mep == gpus and gpus > 1:
        dep["expert_parallel"] = True
        text += f" + EP{mep}"
    elif mep == 1:
        if dp > 1:
            return None, text, f"experts tensor-parallel over {gpus} GPUs across attention DP{dp}"
        dep["expert_parallel"] = False
        text += f", experts TP{mtp}" if mtp > 1 else ""
    elif dp == 1 and tp % mep == 0:
        dep.update({"expert_parallel": False, "moe_expert_parallel": mep})
        text += f", experts EP{mep} x TP{mtp}"
    else:
        return None, text, f"MoE TP{mtp} x EP{mep} across attention DP{dp}"
    if prefix:
        dep = {"gpus": gpus * workers, **dep, "instances": workers}
        text = f"{workers}x ({text})" if workers > 1 else text
    else:
        # One copy of the model on the point's GPUs: the node's other GPUs stay idle (left to
        # `instances: auto`, a TP4 point on a DGX would run two copies and halve each one's load).
        dep["instances"] = 1
    return dep, text, None


def generator_graph_sizes(bs: int) -> list[int]:
    """The decode CUDA-graph batch sizes the deployment generator captures for a worker of
    max_batch_size `bs` (trtllm.rule and sglang.rule, agg_decode cuda_graph_batch_sizes): 1-16,
    then steps of 4 to 32, 8 to 64, 16 to 128, 32 to 256, 64 to 512, and bs - 8 .. bs + 8."""
    sizes = set(range(1, 17)) | set(range(16, 33, 4)) | set(range(32, 65, 8)) | set(range(64, 129, 16))
    sizes |= set(range(128, 257, 32)) | set(range(256, 513, 64)) | set(range(1 if bs <= 8 else bs - 8, bs + 9))
    return sorted(sizes)


def ceil_to(n: int, q: int) -> int:
    return (n + q - 1) // q * q


def engine_section(engine: str, system: str, mode: str, isl: int, bs: int) -> dict:
    """The serving section of a point. The points are AIConfigurator's silicon runs (MANIFEST.md;
    their ids carry its config ids), whose deployments its generator writes
    (src/aiconfigurator/generator/rule_plugin/{trtllm,sglang,vllm}.rule at 095f58a): the settings
    below are those rules, for a worker of max_batch_size `bs` (per
    attention-DP rank: the clients' share; the decode worker's for disagg). Everything else is the engine preset's
    default of the points' versions. The engines' bare defaults cannot be what ran: TensorRT-LLM's
    max_num_tokens 8192 without chunked prefill rejects the points' 15,000-token prompts and
    starves an 8,192-token prompt behind running decodes.

    One serving section serves both pools of a disaggregated point: max_num_seqs is the decode
    worker's and the token budget the prefill worker's (a decode step never reaches it)."""
    preset = ENGINE_PRESETS[engine]
    graphs = generator_graph_sizes(bs)
    section: dict = {"engine": preset, "layer_sampling": LAYER_SAMPLING}
    if preset == "trtllm-pytorch":
        # max_batch_size bs; max_num_tokens ceil32(bs + isl + 500) agg, ceil32(isl + 500) prefill;
        # graphs with enable_padding true; kv_cache_config.free_gpu_memory_fraction 0.80
        # (extra_engine_args templates' default); chunked prefill off (the template's default).
        section["engine"] = {"preset": preset, "graph_batch_sizes": graphs, "graph_padding": True}
        section["max_num_seqs"] = bs
        section["max_batched_tokens"] = ceil_to((bs if mode == "agg" else 0) + isl + 500, 32)
        section["kv_cache_free_memory_fraction"] = 0.8
    elif preset == "sglang":
        # --cuda-graph-bs the list above; max_running_requests 512, or 2 x bs above 512;
        # --max-prefill-tokens isl + 1500 (a prefill step takes whole prompts while they fit in
        # it, the first one always, cut to chunked_prefill_size, which stays SGLang's: 8192 below
        # 160 GB of GPU memory, 16384 above (B200)): the step's budget is the smaller of the two.
        # The rule also passes --enable-mixed-chunk in agg, but the points do not behave as if
        # prefills shared steps with decodes: on the fit split's SGLang agg points (DeepSeek-R1,
        # GLM-5, Qwen3-32B, Qwen3.5: validation/serving/MANIFEST.md, "SGLang's step mix") moesim's
        # mixed steps put the median TTFT error at 69% and SGLang's own prefill-first rule at 49%
        # (the four Qwen3-32B points within 13% TTFT and 17% TPOT, against 70-88% mixed), so the
        # preset's prefill-first stands.
        section["engine"] = {"preset": preset, "graph_batch_sizes": graphs}
        section["max_num_seqs"] = 512 if bs < 512 else 2 * bs
        chunk = 16384 if system == "b200_sxm" else 8192
        section["max_batched_tokens"] = min(isl + 1500, chunk)
    else:
        # max_num_seqs 512, or 2 x bs above 512; max_num_batched_tokens bs + isl + 1500 agg,
        # isl + 1500 prefill. Capture sizes are vLLM's own (the rule sets none).
        section["max_num_seqs"] = 512 if bs < 512 else 2 * bs
        section["max_batched_tokens"] = (bs if mode == "agg" else 0) + isl + 1500
    return section


def point_case(row: dict, source: str, scenario_dir: str) -> tuple[dict, str | None]:
    """The case entry and its scenario text (None, with case['skip_reason'], when not expressible)."""
    from make_scenarios import emit, slug, wrap  # the one YAML emitter of the validation folder

    cid = slug(row["id"])
    model_name, system, engine, mode = row["model_path"], row["system"], row["backend"], row["mode"]
    preset, model_note = MODELS.get(model_name, (None, ""))
    reasons = []
    if preset is None:
        arch = UNSUPPORTED_MODELS.get(model_name)
        reasons.append(f"model {model_name}: " + (f"no moesim model of its architecture yet ({arch})" if arch
                                                   else "unknown (no preset or config.json for it)"))
    if system not in SYSTEMS:
        reasons.append(f"system {system}: unknown (known: {', '.join(SYSTEMS)})")
    if engine not in ENGINES:
        reasons.append(f"engine {engine}: unknown (known: {', '.join(ENGINES)})")
    # A point without quantisation modes runs its checkpoint's precision everywhere.
    # A point that states no precision at all ran its checkpoint as shipped: the preset's dtypes.
    as_shipped = not (row["gemm_quant_mode"] or row["moe_quant_mode"] or row["precision"])
    dtype = CHECKPOINT if as_shipped else QUANT.get(row["gemm_quant_mode"] or row["precision"])
    expert_dtype = CHECKPOINT if as_shipped else QUANT.get(row["moe_quant_mode"] or row["precision"])
    int4 = row["moe_quant_mode"] == INT4_WEIGHT_ONLY and row["gemm_quant_mode"] in (INT4_WEIGHT_ONLY, "", "bf16")
    if int4:
        dtype, expert_dtype = "bf16", "int4"
    conc = _num(row, "concurrency")
    dep, dep_text, gpus = None, mode, 0
    if not reasons:  # without a model, system and engine the rest of the point reads against nothing
        if dtype is None or expert_dtype is None:
            reasons.append(f"quantisation {row['gemm_quant_mode']}/{row['moe_quant_mode']} is not one moesim "
                           "maps")
        if conc is None:
            reasons.append("no concurrency: the point's load is not stated")
        if mode == "agg":
            dep, dep_text, why = pool_deployment(row, "", preset in DENSE)
            gpus = dep["tensor_parallel"] * dep["data_parallel"] if dep else 0
            # batch_size is the clients per attention-DP rank of one copy (2,482 of the 2,496
            # aggregated points); where it is not, the copies the clients spread over are unknown.
            bs = _num(row, "batch_size")
            if dep and bs and conc and bs * dep["data_parallel"] != conc:
                why = (why + "; " if why else "") + (
                    f"batch_size {int(bs)} x attention DP{dep['data_parallel']} is not the concurrency {int(conc)}: "
                    "how many copies of the deployment served the clients is not stated")
        elif mode == "disagg":
            pre, pre_text, why_p = pool_deployment(row, "prefill_", preset in DENSE)
            dec, dec_text, why_d = pool_deployment(row, "decode_", preset in DENSE)
            why = "; ".join(f"{k} {w}" for k, w in (("prefill", why_p), ("decode", why_d)) if w) or None
            dep = {"prefill": pre, "decode": dec} if pre and dec else None
            dep_text = f"prefill {pre_text} / decode {dec_text}"
            gpus = pre["gpus"] + dec["gpus"] if dep else 0
            if dep and pre["expert_parallel"] != dec["expert_parallel"]:
                why = (why + "; " if why else "") + ("one pool's experts expert-parallel, the other's tensor-parallel "
                                                     "(one policy serves both pools)")
            if dep and gpus > GPUS_PER_NODE and (pre["gpus"] % GPUS_PER_NODE or dec["gpus"] % GPUS_PER_NODE):
                why = (why + "; " if why else "") + (f"pools of {pre['gpus']} and {dec['gpus']} GPUs over "
                                                     f"{math.ceil(gpus / GPUS_PER_NODE)} nodes (moesim's pools "
                                                     "are whole nodes, or share one)")
        else:
            why = f"mode {mode!r} (expected agg or disagg)"
        if why:
            reasons.append(why)
    isl, osl = int(_num(row, "isl")), int(_num(row, "osl"))
    group = f"{model_name.split('/')[-1]}, {system}, {engine}, {mode}"
    case = {
        "id": cid, "rows": [row["id"]], "source": source, "line": row["_line"], "group": group,
        "engine": engine, "framework": f"{engine} {row['backend_version']}", "model": model_name,
        "precision": f"{row['precision']} ({row['gemm_quant_mode']}/{row['moe_quant_mode']})",
        "gpu": system, "gpu_short": system.split("_")[0].upper(), "num_gpus": gpus,
        "parallelism": dep_text, "deployment": dep_text, "input_tokens": isl, "output_tokens": osl,
        "concurrency": str(int(conc)) if conc else "not stated",
        "measured": {"ttft_mean": float(row["silicon_ttft_ms"]), "tpot_mean": float(row["silicon_tpot_ms"])},
        "units": {"ttft_mean": "ms", "tpot_mean": "ms"},
    }
    if reasons:
        case["skip_reason"] = "; ".join(reasons)
        return case, None
    clients = int(conc)
    rounds = max(SIMULATED_ROUNDS, math.ceil(MIN_REQUESTS / clients))
    requests = rounds * clients
    # A worker's max_batch_size: its attention-DP ranks' share of the clients (the decode workers'
    # when disaggregated). The batch_size column is that share in 2,482 of the 2,496 aggregated
    # points, but per GPU in the nvidia_* rows (56 at TP4 and concurrency 224), so it is not read.
    ranks = dep["data_parallel"] if mode == "agg" else dep["decode"]["data_parallel"] * dep["decode"]["instances"]
    batch = math.ceil(clients / ranks)
    nodes = math.ceil(gpus / GPUS_PER_NODE)
    hardware = SYSTEMS[system] if nodes == 1 else {"preset": SYSTEMS[system], "nodes": nodes}
    if (model_name in NATIVE_4BIT and expert_dtype == "nvfp4") or dtype == CHECKPOINT:
        model = {"preset": preset}
    else:
        model = {"preset": preset, "dtype": dtype}
        if expert_dtype != dtype and preset not in DENSE:
            model["expert_dtype"] = expert_dtype
        if int4:
            model["expert_quantization"] = "weight-only"
    expert_parallel = any(d.get("expert_parallel") for d in ([dep] if mode == "agg" else dep.values()))
    doc = {
        "name": f"point-{cid}",
        "seed": 1,
        "model": model,
        "hardware": hardware,
        "workload": {"kind": "serving", "requests": requests, "warmup_requests": 0,
                     "arrival": {"process": "closed", "clients": clients},
                     "prompt_tokens": isl, "output_tokens": osl, "routing": {"kind": "uniform"}},
        # One MoE layer planned per step, standing for all (serving.layer_sampling, issue 27): within
        # 0.5% of the exact run on TTFT and TPOT here, and 10-30x faster.
        "serving": engine_section(engine, system, mode, isl, batch),
        "deployment": dep,
        "policy": "static-ep" if expert_parallel else "tp-experts",
    }
    case.update({"scenario": f"{scenario_dir}/{cid}.yaml", "requests": requests, "clients": clients,
                 "batch_per_rank": batch, "rounds": {"simulated": rounds, "source": SOURCE_ROUNDS}})
    head = [f"Validation point {cid}", "generated by validation/serving/make_scenarios.py --points (edit the "
            "generator, not this file)", f"from {source} line {row['_line']}.", ""]
    head += wrap(f"Measured: {model_name}, {row['precision']} ({row['gemm_quant_mode']} GEMMs, "
                 f"{row['moe_quant_mode']} experts), {system}, {engine} {row['backend_version']}, {mode} "
                 f"{dep_text}; ISL {isl} / OSL {osl}, concurrency {clients}; TTFT {row['silicon_ttft_ms']} ms, "
                 f"TPOT {row['silicon_tpot_ms']} ms.")
    if model_note:
        head += wrap(model_note + ".")
    head += wrap(f"Requests (validation/serving/points.py's rule, the same for every point): {rounds} rounds of "
                 f"{clients} clients, {requests} in all, closed loop; the source's {SOURCE_ROUNDS}-round means are "
                 "estimated from the first wave, the rounds between and the closing tail; batch "
                 "limits and CUDA graphs as the source's deployment generator writes them for a worker of "
                 f"max_batch_size {batch}, the engine preset's defaults for the rest.")
    return case, emit(doc, head)


def stratified_sample(cases: list[dict], per_group: int, seed: int) -> set[str]:
    """Ids of `per_group` expressible cases of every (model, system, engine, mode) group (all of a
    smaller group), chosen by a shuffle of the group's ids in sorted order seeded by the seed and
    the group's name: a group's sample does not change when other groups join or leave."""
    groups: dict[str, list[str]] = {}
    for c in cases:
        if "scenario" in c:
            groups.setdefault(c["group"], []).append(c["id"])
    chosen = set()
    for g in sorted(groups):
        ids = sorted(groups[g])
        random.Random(f"{seed}:{g}").shuffle(ids)
        chosen.update(ids[:per_group])
    return chosen


def points_cases(path: Path, named: str, scenario_dir: str, per_group: int,
                 seed: int) -> tuple[list[dict], dict[str, str]]:
    """Every point of the file as a case (sorted by id), and the scenarios by file name; `named` is
    how the cases and scenarios name the file."""
    try:
        rows = read_points(path)
    except PointsError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        print(f"{path}:1:1: error: {e}", file=sys.stderr)
        sys.exit(2)
    cases, scenarios = [], {}
    for row in rows:
        case, text = point_case(row, named, scenario_dir)
        cases.append(case)
        if text is not None:
            scenarios[f"{case['id']}.yaml"] = text
    sample = stratified_sample(cases, per_group, seed)
    for c in cases:
        c["sample"] = c["id"] in sample
    cases.sort(key=lambda c: c["id"])
    return cases, scenarios
