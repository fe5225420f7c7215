"""The paper-reproduction experiments: which scenario, over which grid of --set overrides, with
which policies, and the shared data some need. reproduce.py runs them; report.py describes them."""
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

TRACE = "routing/switch_base_128_expert_counts.json"


def shared_data():
    return Path(os.environ.get("MOESIM_SHARED_DATA", ROOT.parent / "shared" / "data"))


def exp(scenario, grid, policies=None, needs=None):
    return {"scenario": scenario, "grid": grid, "policies": policies, "needs": needs}


HARMOENY_SYSTEMS = ["deepspeed", "fastmoe", "fastermoe", "exflow", "round-robin", "harmoeny"]
MOESHARD_BATCHES = (10, 50, 100, 250, 450)
GPS_HW = {"nvlink": "hgx-a100-4gpu-nvlink", "pcie": "a100-4gpu-pcie"}
GPS_SKEW = (1.0, 1.4, 2.0, 3.0, 4.0)
GRACE_MODELS = [("OLMoE", "olmoe-1b-7b"), ("DeepSeek-V2-Lite", "deepseek-v2-lite"), ("Qwen3-30B-A3B", "qwen3-30b-a3b")]
GRACE_HW = [("1x8 RTX 3090", "grace-rtx3090-8x"), ("2x2 RTX 4090", "grace-rtx4090-2x2"),
            ("2x4 RTX 4090", "grace-rtx4090-2x4")]

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
    # AMoE §5.1 (Fig. 9, short workload, top-1) over Poisson rates (130 req/s offers ~80% of the
    # 16.3k tokens/s defrag serves at 200: §5.3's operating point), and at a low load for the ITL
    # comparison.
    "amoe-mixtral-mqa": exp("amoe/mixtral-mqa-a100.yaml",
                            [(f"short, {r} req/s", [f"workload.arrival.rate_per_s={r}"]) for r in (50, 100, 130, 200)]),
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
    # §5.1 (Fig. 9a vs 9d): top-1 against top-2, short workload at 200 requests/s.
    "amoe-mixtral-mqa-topk": exp("amoe/mixtral-mqa-a100.yaml",
                                 [(f"top-{k}, 200 req/s", [f"model.top_k={k}"]) for k in (1, 2)],
                                 policies=["sglang-ep", "amoe-defrag"]),
    # Beyond the paper: the attention:expert split (AMoE and ping-pong), short workload at 200 req/s.
    "amoe-mixtral-mqa-split": exp("amoe/mixtral-mqa-a100.yaml",
                                  [(f"{a}+{8 - a} GPUs, 200 req/s", [f"policy.1.attention_gpus={a}", f"policy.4.attention_gpus={a}"])
                                   for a in (2, 6)],
                                  policies=["sglang-ep", "amoe-defrag", "pingpong-2"]),
    # GRACE-MoE §5.3 (Fig. 5): the ablation ladder on 2 x 2 RTX 4090, for the three models.
    "grace-ablation-2x2": exp("grace/ablation-2x2.yaml",
                              [(name, [f"model={{preset: {preset}, dtype: bf16}}"]) for name, preset in GRACE_MODELS]),
    # §5.2 (Fig. 4): GRACE-MoE against the baselines, three models on three clusters.
    "grace-e2e": exp("grace/e2e.yaml",
                     [(f"{name}, {hw}", [f"model={{preset: {preset}, dtype: bf16}}", f"hardware={hw_preset}"])
                      for name, preset in GRACE_MODELS for hw, hw_preset in GRACE_HW]),
    # §5.2 (Fig. 10): 16 experts on two p4d nodes, and the one-node, 8-expert reference.
    "amoe-mixtral16-2node": exp("amoe/mixtral16-2node.yaml",
                                [("16 experts, 2 nodes", []),
                                 ("8 experts, 1 node", ["model.experts=8",
                                                        "hardware={preset: dgx-a100, gpu: {preset: A100-SXM4-40GB}}"])]),
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


def _label(entry):
    return entry.get("label", entry["name"]) if isinstance(entry, dict) else entry


