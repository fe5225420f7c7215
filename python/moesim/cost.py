"""What the cost model predicts for one operation, as `moesim cost ... --json` prints it.

    moesim.cost.gemm("h100-sxm", 4096, 4096, 4096, dtype="fp8")["time_us"]
    moesim.cost.alltoall("dgx-h100", gpus=8, bytes=64 << 20)["busbw_GBps"]
    moesim.cost.dispatch("dgx-h100", tokens=4096, hidden=7168, top_k=8, experts=256)["time_us"]

Bad arguments raise moesim.ScenarioError, located at the CLI option they correspond to.
"""
import json

try:
    from . import _moesim
except ImportError:
    import _moesim


def _call(fn, *args):
    from . import ScenarioError  # the package's, so `except moesim.ScenarioError` catches it
    try:
        return json.loads(fn(*args))
    except _moesim.InputError as e:
        raise ScenarioError(str(e).splitlines()) from None


def gemm(gpu, m, n, k, *, dtype="bf16", calibration=None, engine="trtllm", explain=False):
    """Time of C[m,n] = A[m,k]·B[k,n] on one GPU (`gpu`: a GPU preset, or a cluster preset
    meaning its GPU): kernel_us, time_us (with launch), tflops, efficiency, priced_by[, explain].
    `calibration`: None or "builtin" (the measured kernels of the GPU's architecture), "none"
    (datasheet roofline) or a profile path; `engine`: whose kernels (trtllm, sglang, vllm)."""
    return _call(_moesim.cost_gemm, gpu, int(m), int(n), int(k), dtype, str(calibration or ""), bool(explain),
                 str(engine))


def _collective(kind, hardware, gpus, bytes, nodes, network_model, calibration, explain):
    return _call(_moesim.cost_collective, kind, hardware, int(nodes), int(gpus), float(bytes), str(calibration or ""),
                 network_model, bool(explain))


def allreduce(hardware, gpus, bytes, *, nodes=0, network_model="flow", calibration=None, explain=False):
    """One all-reduce of `bytes` per GPU over GPUs 0..gpus-1 of an idle cluster: time_us, algbw_GBps, busbw_GBps."""
    return _collective("allreduce", hardware, gpus, bytes, nodes, network_model, calibration, explain)


def allgather(hardware, gpus, bytes, *, nodes=0, network_model="flow", calibration=None, explain=False):
    """One all-gather (`bytes`: the output per GPU)."""
    return _collective("allgather", hardware, gpus, bytes, nodes, network_model, calibration, explain)


def alltoall(hardware, gpus, bytes, *, nodes=0, network_model="flow", calibration=None, explain=False):
    """One all-to-all (`bytes`: what each GPU sends in total)."""
    return _collective("alltoall", hardware, gpus, bytes, nodes, network_model, calibration, explain)


def sendrecv(hardware, gpus, bytes, *, nodes=0, network_model="flow", calibration=None, explain=False):
    """One message of `bytes` from GPU 0 to GPU gpus-1."""
    return _collective("sendrecv", hardware, gpus, bytes, nodes, network_model, calibration, explain)


def _deepep(op, hardware, tokens, hidden, top_k, experts, options):
    from . import _cli, _flags
    args = ["cost", op, "--hardware", hardware, "--tokens", int(tokens), "--hidden", int(hidden), "--top-k", int(top_k),
            "--experts", int(experts), "--json"] + _flags(options)
    return json.loads(_cli(args))


def dispatch(hardware, tokens, hidden, top_k, experts, **options):
    """One expert-parallel dispatch through DeepEP's kernels (or NCCL's all-to-all), as DeepEP's
    tables report it (`moesim cost dispatch --json`). Options: kernel (deepep-normal, deepep-ll,
    nccl), nodes, nvlink_bandwidth, ep, dtype, topk_groups, sms, ll_nvlink."""
    return _deepep("dispatch", hardware, tokens, hidden, top_k, experts, options)


def combine(hardware, tokens, hidden, top_k, experts, **options):
    """One expert-parallel combine (`moesim cost combine --json`); options as dispatch's."""
    return _deepep("combine", hardware, tokens, hidden, top_k, experts, options)


def _verb(op, gpu, required, options):
    from . import _cli, _flags
    options = dict(options)
    explain = options.pop("explain", False)  # a bare CLI flag
    args = ["cost", op, "--gpu", gpu] + _flags(required) + _flags(options) + ["--json"] + (["--explain"] if explain else [])
    return json.loads(_cli(args))


def moe(gpu, tokens, hidden, inter, top_k, experts, **options):
    """One GPU's fused MoE layer at the loads its experts get (`moesim cost moe --json`). Options:
    tp, ep, dtype (bf16, fp16, fp8, fp8-block, nvfp4), distribution ("balanced" or
    "power-law:ALPHA"), engine, calibration, explain."""
    return _verb("moe", gpu, {"tokens": int(tokens), "hidden": int(hidden), "inter": int(inter), "top_k": int(top_k),
                              "experts": int(experts)}, options)


def attention(gpu, phase, batch, seq, heads, kv_heads, head_dim, **options):
    """One GPU's MHA/GQA attention core (`moesim cost attention --json`): `phase` "prefill"
    (prompts of `seq` tokens) or "decode" (one token over `seq` cached). Options: window, dtype,
    kv_dtype, engine, calibration, explain."""
    return _verb("attention", gpu, {"phase": phase, "batch": int(batch), "seq": int(seq), "heads": int(heads),
                                    "kv_heads": int(kv_heads), "head_dim": int(head_dim)}, options)


def mla(gpu, phase, batch, seq, heads, **options):
    """One GPU's MLA attention core with DeepSeek's dimensions (`moesim cost mla --json`).
    Options: kv_dtype, engine, calibration, explain."""
    return _verb("mla", gpu, {"phase": phase, "batch": int(batch), "seq": int(seq), "heads": int(heads)},
                 options)

