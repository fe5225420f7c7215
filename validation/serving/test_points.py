#!/usr/bin/env python3
"""Tests of the points pipeline (issue 48): a malformed points file is a located error (exit 2); a
point of each mode becomes the scenario the rule says; a point moesim cannot express is listed with
its reason; a file the project has never seen goes through make_scenarios.py --points unchanged and
its scenarios validate; every point of the shipped file is a case.

    python3 validation/serving/test_points.py [--moesim build/moesim]
"""
import argparse
import csv
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import fit_serving as FS  # noqa: E402
import points as P  # noqa: E402
import validate as V  # noqa: E402

HEADER = list(P.REQUIRED) + ["pp_size", "batch_size"] + [f"{p}{f}" for p in ("prefill_", "decode_")
                                                          for f in P.POOL_FIELDS]
MOESIM = None


def point(**kw) -> dict:
    row = {c: "" for c in HEADER}
    row.update({"id": "p1", "backend": "trtllm", "backend_version": "1.2.0", "model_path": "deepseek-ai/DeepSeek-R1",
                "system": "b200_sxm", "precision": "fp8", "mode": "agg", "isl": "1024", "osl": "256",
                "gemm_quant_mode": "fp8_block", "moe_quant_mode": "fp8_block", "tp_size": "8",
                "attention_dp_size": "1", "moe_tp_size": "1", "moe_ep_size": "8", "pp_size": "1",
                "silicon_ttft_ms": "120.5", "silicon_tpot_ms": "14.2", "concurrency": "32"})
    row.update({k: str(v) for k, v in kw.items()})
    return row


def write(rows: list[dict], header=HEADER) -> Path:
    f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, newline="")
    w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    f.close()
    return Path(f.name)


def case_of(**kw) -> tuple[dict, str | None]:
    row = dict(point(**kw), _line=2)
    return P.point_case(row, "t.csv", "scen")


class MalformedFiles(unittest.TestCase):
    def error(self, path: Path) -> str:
        with self.assertRaises(P.PointsError) as e:
            P.read_points(path)
        return str(e.exception)

    def test_missing_column_is_located_on_the_header(self):
        path = write([point()], [c for c in HEADER if c != "silicon_tpot_ms"])
        self.assertRegex(self.error(path), rf"^{path}:1:1: error: missing column 'silicon_tpot_ms'")

    def test_bad_cells_are_located_at_their_line_and_column(self):
        col = HEADER.index("silicon_ttft_ms") + 1
        path = write([point(), point(id="p2", silicon_ttft_ms="-3")])
        self.assertRegex(self.error(path), rf"^{path}:3:{col}: error: silicon_ttft_ms '-3'")
        col = HEADER.index("concurrency") + 1
        path = write([point(concurrency="0")])
        self.assertRegex(self.error(path), rf"^{path}:2:{col}: error: concurrency '0'")
        path = write([point(osl="1e400")])
        self.assertIn(":2:", self.error(path))
        path = write([point(), point()])
        self.assertIn("the same id as line 2", self.error(path))

    def test_the_cli_exits_2_with_the_location(self):
        path = write([point(isl="twelve")])
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run([sys.executable, str(HERE / "make_scenarios.py"), "--points", str(path), "--out", out],
                               capture_output=True, text=True)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertRegex(p.stderr, rf"{path}:2:\d+: error: isl 'twelve'")


class Rules(unittest.TestCase):
    def test_an_aggregated_point_is_its_deployment_and_load(self):
        case, text = case_of(tp_size=1, attention_dp_size=8, moe_tp_size=1, moe_ep_size=8, concurrency=64)
        self.assertIsNotNone(text, case.get("skip_reason"))
        self.assertIn("deployment: {tensor_parallel: 1, data_parallel: 8, expert_parallel: true, instances: 1}", text)
        self.assertIn("arrival: {process: closed, clients: 64}", text)
        # The source's protocol: a cold closed loop (aiperf waits out its warm-up phase), rounds
        # of all clients; the case says how many rounds the source ran.
        self.assertIn(f"requests: {P.SIMULATED_ROUNDS * 64}", text)
        self.assertIn("warmup_requests: 0", text)
        case, few = case_of(concurrency=2)
        self.assertIn(f"requests: {P.MIN_REQUESTS}", few)
        self.assertEqual(case["rounds"], {"simulated": P.MIN_REQUESTS // 2, "source": P.SOURCE_ROUNDS})
        self.assertIn("prompt_tokens: 1024", text)
        self.assertIn("output_tokens: 256", text)
        self.assertIn("engine: {preset: trtllm-pytorch, ", text)  # TRT-LLM 1.x
        self.assertIn("max_num_seqs: 8\n", text)  # the batch of one of the 8 attention-DP ranks
        self.assertIn("policy: static-ep", text)
        self.assertEqual(case["measured"], {"ttft_mean": 120.5, "tpot_mean": 14.2})
        self.assertEqual(case["num_gpus"], 8)
        self.assertEqual(case["group"], "DeepSeek-R1, b200_sxm, trtllm, agg")

    def test_tensor_parallel_experts_and_moe_ep_inside_the_group(self):
        _, text = case_of(tp_size=4, moe_tp_size=4, moe_ep_size=1)
        self.assertIn("deployment: {tensor_parallel: 4, data_parallel: 1, expert_parallel: false, instances: 1}", text)
        self.assertIn("policy: tp-experts", text)
        _, text = case_of(moe_tp_size=2, moe_ep_size=4)
        self.assertIn("expert_parallel: false, moe_expert_parallel: 4, instances: 1}", text)

    def test_a_disaggregated_point_has_two_pools(self):
        case, text = case_of(mode="disagg", tp_size="", attention_dp_size="", moe_tp_size="", moe_ep_size="",
                             prefill_num_workers=1, prefill_tp_size=1, prefill_attention_dp_size=8,
                             prefill_moe_tp_size=1, prefill_moe_ep_size=8, decode_num_workers=2, decode_tp_size=1,
                             decode_attention_dp_size=8, decode_moe_tp_size=1, decode_moe_ep_size=8)
        self.assertIsNotNone(text, case.get("skip_reason"))
        self.assertIn("prefill: {gpus: 8, tensor_parallel: 1, data_parallel: 8, expert_parallel: true, instances: 1}",
                      text)
        self.assertIn("decode: {gpus: 16, tensor_parallel: 1, data_parallel: 8, expert_parallel: true, instances: 2}",
                      text)
        self.assertIn("hardware: {preset: dgx-b200, nodes: 3}", text)
        self.assertEqual(case["num_gpus"], 24)

    def test_the_engine_settings_are_the_generators(self):
        # TensorRT-LLM (trtllm.rule): max_batch_size = the point's batch_size, max_num_tokens
        # ceil32(bs + isl + 500), padded graphs 1-16 ... 512 and bs +- 8, KV fraction 0.8.
        _, text = case_of(batch_size=32, concurrency=32)
        self.assertIn("engine: {preset: trtllm-pytorch, graph_batch_sizes: [1, 2, 3,", text)
        self.assertIn("graph_padding: true}", text)
        self.assertIn("max_num_seqs: 32\n  max_batched_tokens: 1568\n  kv_cache_free_memory_fraction: 0.8\n", text)
        sizes = P.generator_graph_sizes(100)
        self.assertTrue({1, 16, 20, 40, 80, 92, 108, 128, 160, 512} <= set(sizes))
        self.assertNotIn(109, sizes)
        # SGLang (sglang.rule): max_running_requests 512; a prefill step takes max_prefill_tokens
        # isl + 1500 unless the chunk (16384 on B200, 8192 on H100) is smaller; the preset's
        # prefill-first step mix (no step_mix key: points.py says why the rule's mixed chunks are not).
        _, text = case_of(backend="sglang", batch_size=16, concurrency=16)
        self.assertIn("max_num_seqs: 512\n  max_batched_tokens: 2524\n", text)
        self.assertNotIn("step_mix", text)
        _, text = case_of(backend="sglang", batch_size=16, concurrency=16, isl="15000", system="h100_sxm")
        self.assertIn("max_batched_tokens: 8192\n", text)
        # vLLM (vllm.rule): max_num_batched_tokens bs + isl + 1500; 2 x bs above 512.
        _, text = case_of(backend="vllm", batch_size=1024, concurrency=1024)
        self.assertIn("serving: {engine: vllm, layer_sampling: 256, max_num_seqs: 2048, max_batched_tokens: 3548}", text)

    def test_a_dense_point_ignores_its_moe_columns(self):
        # The source writes 1, 0 or nothing in a dense model's moe_* columns: none is read.
        for mtp, mep in (("1", "1"), ("0", "0"), ("", "")):
            case, text = case_of(model_path="meta-llama/Llama-3.1-70B", gemm_quant_mode="fp8", moe_quant_mode="",
                                 tp_size=4, moe_tp_size=mtp, moe_ep_size=mep)
            self.assertIsNotNone(text, case.get("skip_reason"))
            self.assertIn("model: {preset: llama-3.1-70b, dtype: fp8}", text)
            self.assertIn("deployment: {tensor_parallel: 4, data_parallel: 1, expert_parallel: false, instances: 1}",
                          text)
            self.assertIn("policy: tp-experts", text)

    def test_a_point_without_a_precision_runs_its_checkpoint(self):
        case, text = case_of(model_path="Qwen/Qwen3-32B", precision="", gemm_quant_mode="", moe_quant_mode="",
                             tp_size=2, moe_tp_size="", moe_ep_size="")
        self.assertIsNotNone(text, case.get("skip_reason"))
        self.assertIn("model: {preset: qwen3-32b}", text)

    def test_checkpoint_precisions(self):
        _, text = case_of(gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4")
        self.assertIn("model: {preset: deepseek-r1, dtype: nvfp4}", text)
        _, text = case_of(gemm_quant_mode="fp8", moe_quant_mode="nvfp4")
        self.assertIn("model: {preset: deepseek-r1, dtype: fp8, expert_dtype: nvfp4}", text)
        _, text = case_of(model_path="openai/gpt-oss-120b", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4",
                          moe_tp_size=8, moe_ep_size=1)
        self.assertIn("model: {preset: gpt-oss-120b}", text)  # its own MXFP4 checkpoint

    def test_weight_only_int4_runs_int4_experts_under_bf16(self):
        _, text = case_of(model_path="moonshotai/Kimi-K2.5", gemm_quant_mode="int4_wo", moe_quant_mode="int4_wo")
        self.assertIn("model: {preset: kimi-k2, dtype: bf16, expert_dtype: int4, expert_quantization: weight-only}", text)

    def test_hybrid_and_sparse_attention_models_are_scenarios(self):
        # Qwen3.5 (Gated DeltaNet) and GLM-5 (DeepSeek Sparse Attention) run as their presets.
        _, text = case_of(model_path="Qwen/Qwen3.5-397B-A17B", backend="sglang", gemm_quant_mode="fp8",
                          moe_quant_mode="fp8_block")
        self.assertIn("model: {preset: qwen3.5-397b-a17b, dtype: fp8}", text)
        _, text = case_of(model_path="zhipuai/GLM-5", backend="sglang", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4")
        self.assertIn("model: {preset: glm-5, dtype: nvfp4}", text)

    def test_what_cannot_be_expressed_is_listed_with_its_reason(self):
        for kw, reason in [({"model_path": "acme/Unknown-1T"}, "model acme/Unknown-1T: unknown"),
                           ({"system": "gb300_nvl72"}, "system gb300_nvl72: unknown"),
                           ({"backend": "lmdeploy"}, "engine lmdeploy: unknown"),
                           ({"gemm_quant_mode": "int8_sq", "moe_quant_mode": "int8_sq"}, "int8_sq/int8_sq is not one"),
                           ({"concurrency": ""}, "no concurrency"),
                           ({"pp_size": 2}, "pipeline parallelism"),
                           ({"attention_dp_size": 4, "tp_size": 2, "moe_tp_size": 8, "moe_ep_size": 1},
                            "across attention DP4"),
                           ({"mode": "spec"}, "mode 'spec'"),
                           ({"batch_size": 10, "concurrency": 80}, "how many copies of the deployment")]:
            case, text = case_of(**kw)
            self.assertIsNone(text, kw)
            self.assertIn(reason, case["skip_reason"], kw)
            self.assertIn("measured", case)  # listed, never dropped

    def test_the_sample_takes_every_group(self):
        cases = [case_of(id=f"p{i}", backend=b, concurrency=c)[0] for i, (b, c) in
                 enumerate((b, c) for b in ("trtllm", "sglang", "vllm") for c in (1, 2, 4, 8))]
        for c, i in zip(cases, range(len(cases))):
            c["id"] = f"p{i}"
        chosen = P.stratified_sample(cases, 2, 48)
        self.assertEqual(len(chosen), 6)
        self.assertEqual(chosen, P.stratified_sample(cases, 2, 48))
        self.assertEqual({c["group"] for c in cases if c["id"] in chosen}, {c["group"] for c in cases})
        # A group's sample stays when another group leaves (models added later move nothing).
        others = [c for c in cases if c["group"] != cases[0]["group"]]
        self.assertEqual(P.stratified_sample(others, 2, 48), {i for i in chosen if i in {c["id"] for c in others}})


class RoundWeighting(unittest.TestCase):
    def test_first_wave_and_tail_weigh_one_round_each(self):
        # 2 clients, 5 rounds: ids 0-1 the first wave (TTFT 100), 8-9 the tail (TTFT 10), the six
        # between 40; out of issue order in the file, as several runs' rows can be.
        rows = [(i, 100.0 if i < 2 else 10.0 if i >= 8 else 40.0, 5.0 + (i >= 8)) for i in range(10)]
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "requests.csv"
            f.write_text("run,id,ttft_ms,tpot_ms\n" + "".join(f"x,{i},{t},{p}\n" for i, t, p in reversed(rows)))
            est = V.round_weighted(f, 2, 20)
            self.assertAlmostEqual(est["ttft_ms"], (100 + 18 * 40 + 10) / 20)
            self.assertAlmostEqual(est["tpot_ms"], (5 + 18 * 5 + 6) / 20)
            # Source rounds equal to the simulated ones: the plain mean of the three parts' means.
            self.assertAlmostEqual(V.round_weighted(f, 2, 3)["ttft_ms"], (100 + 40 + 10) / 3)
            # Fewer than three rounds: no estimate, never a mean of the first wave alone.
            self.assertEqual(V.round_weighted(f, 4, 20), {})
            case = {"rounds": {"simulated": 5, "source": 20}, "clients": 2}
            m = V.point_metrics(case, Path(d), {"ttft_ms": {"mean": 1.0, "p50": 2.0}})
            self.assertAlmostEqual(m["ttft_ms"]["mean"], (100 + 18 * 40 + 10) / 20)
            self.assertEqual(m["ttft_ms"]["p50"], 2.0)
            self.assertEqual(V.point_metrics({}, Path(d), {"x": 1}), {"x": 1})


class Summary(unittest.TestCase):
    def test_every_miss_names_its_mechanism_or_says_it_is_not_traced(self):
        import validate as V
        recs = [{"metric": "tpot_mean", "model": g, "error": e} for g, e in
                (("A, b200_sxm, sglang, agg", 40.0), ("B, h100_sxm, vllm, agg", 5.0), ("C, h100_sxm, trtllm, agg", -30.0))]
        lines = V.summary(recs, {"tpot_mean": 10.0}, {("tpot_mean", "A, b200_sxm, sglang, agg"): "fused MoE"})
        row = {l.split("|")[2].strip(): l.split("|")[-2].strip() for l in lines[2:]}
        self.assertEqual(row["A, b200_sxm, sglang, agg"], "fused MoE")
        self.assertEqual(row["B, h100_sxm, vllm, agg"], "")  # met: nothing to explain
        self.assertEqual(row["C, h100_sxm, trtllm, agg"], "not traced yet")
        self.assertNotIn("mechanism", "".join(V.summary(recs, {"tpot_mean": 10.0})))  # the old table has no column


class FitServing(unittest.TestCase):
    """The host-time fit (fit_serving.py) recovers known coefficients and respects its split."""

    def synthetic(self, coef: dict, n: int = 24) -> list[dict]:
        pts = []
        for i in range(n):
            b, isl = [1, 4, 16, 64, 256][i % 5], [512, 1024, 4096, 8192][i % 4]
            sim_tpot, sim_ttft = 5.0 + 0.02 * b, 40.0 + 0.05 * isl
            tpot, ttft = FS.predict({"sim_tpot": sim_tpot, "sim_ttft": sim_ttft, "batch": b, "isl": isl}, coef)
            pts.append({"id": f"p{i}", "engine": "vllm", "model": f"m{i % 3}", "batch": b, "isl": isl,
                        "tpot": tpot, "ttft": ttft, "sim_tpot": sim_tpot, "sim_ttft": sim_ttft})
        return pts

    def test_known_coefficients_are_recovered(self):
        truth = {"step_ms": 1.5, "seq_ms": 0.03, "request_ms": 25.0, "prompt_ms_per_k": 4.0}
        got = FS.fit_engine(self.synthetic(truth))
        for k, v in truth.items():
            self.assertAlmostEqual(got[k], v, places=6, msg=k)

    def test_host_time_is_never_negative(self):
        # moesim slower than measured everywhere: no host time explains that, so every coefficient is 0.
        pts = self.synthetic({"step_ms": 0.0, "seq_ms": 0.0, "request_ms": 0.0, "prompt_ms_per_k": 0.0})
        for p in pts:
            p["sim_tpot"] *= 1.3
            p["sim_ttft"] *= 1.3
        self.assertEqual(FS.fit_engine(pts), {"step_ms": 0.0, "seq_ms": 0.0, "request_ms": 0.0, "prompt_ms_per_k": 0.0})

    def test_the_split_is_by_model_and_stated(self):
        pts = self.synthetic({"step_ms": 1.0, "seq_ms": 0.0, "request_ms": 0.0, "prompt_ms_per_k": 0.0})
        held = FS.held_back(pts, "every-other-model")
        self.assertEqual({p["model"] for p in pts if p["id"] in held}, {"m1"})
        self.assertEqual(FS.held_back(pts, "model:m0,m2"), {p["id"] for p in pts if p["model"] != "m1"})
        with self.assertRaises(ValueError):
            FS.held_back(pts, "model:nope")
        with self.assertRaises(ValueError):
            FS.held_back(pts, "random")


class FitEagerIssue(unittest.TestCase):
    """The eager issue time (fit_serving.py): eager steps counted from a run, a and b recovered."""

    def test_known_per_layer_and_per_moe_layer_times_are_recovered(self):
        truth = {"eager_layer_us": 400.0, "eager_moe_layer_us": 1200.0}
        pts = []
        for i in range(12):
            layers = [(64, 0), (61, 58), (94, 94)][i % 3]
            n_ttft, n_tpot = 1.0 + i % 4, 0.002 * (i % 5)
            p = {"id": f"p{i}", "engine": "trtllm", "model": f"m{i % 3}", "layers": layers, "eager": (n_ttft, n_tpot),
                 "sim_tpot": 8.0 + i, "sim_ttft": 50.0 + 10 * i}
            p["tpot"], p["ttft"] = FS.predict_eager(p, truth)
            pts.append(p)
        got = FS.fit_eager(pts)
        for k, v in truth.items():
            self.assertAlmostEqual(got[k], v, places=4, msg=k)
        # Nothing to explain (moesim already as slow as measured): no issue time.
        for p in pts:
            p["tpot"], p["ttft"] = p["sim_tpot"], p["sim_ttft"]
        self.assertEqual(FS.fit_eager(pts), {"eager_layer_us": 0.0, "eager_moe_layer_us": 0.0})

    def test_eager_steps_are_the_prefill_steps_a_request_waited_through(self):
        # 1 client, 3 rounds: each request's prefill step ends at its first token; request 1 also
        # sees none of the others' (a closed loop of one); with 2 clients request 1 waits through
        # request 0's prefill step as well, and request 0 decodes through request 1's.
        one = [(0, 0.0, 0.1, 1.0), (1, 1.0, 1.1, 2.0), (2, 2.0, 2.1, 3.0)]
        two = [(0, 0.0, 0.1, 1.0), (1, 0.0, 0.2, 1.2), (2, 1.0, 1.1, 2.0), (3, 1.2, 1.3, 2.2), (4, 2.0, 2.1, 3.0),
               (5, 2.2, 2.3, 3.2)]
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "requests.csv"
            head = "run,id,arrived_s,first_token_s,finished_s,output_tokens\n"
            f.write_text(head + "".join(f"x,{i},{a},{t},{e},11\n" for i, a, t, e in one))
            self.assertEqual(FS.eager_counts(f, 1, 3, agg=True), (1.0, 0.0))
            f.write_text(head + "".join(f"x,{i},{a},{t},{e},11\n" for i, a, t, e in two))
            n_ttft, n_tpot = FS.eager_counts(f, 2, 3, agg=True)
            # TTFT: the first wave 1 and 2 steps, then 1 each; TPOT: every request but the last
            # decodes through one other request's prefill step over its 10 decoded tokens.
            self.assertAlmostEqual(n_ttft, (1.5 + 1.0 + 1.0) / 3)
            self.assertAlmostEqual(n_tpot, (0.1 + 0.1 + 0.05) / 3)
            self.assertEqual(FS.eager_counts(f, 2, 3, agg=False)[1], 0.0)
            self.assertIsNone(FS.eager_counts(f, 4, 20, agg=True))  # fewer than three rounds

    def test_layers_are_read_from_the_resolved_model(self):
        moe = "model:\n  experts: 256\n  first_dense_layers: 3\n  layers: 61\n  moe_every: 1\n"
        self.assertEqual(FS.model_layers(moe), (61, 58))
        self.assertEqual(FS.model_layers("model:\n  experts: 0\n  layers: 64\n"), (64, 0))


class Files(unittest.TestCase):
    def test_an_unseen_file_runs_through_unchanged(self):
        path = write([point(), point(id="p2", model_path="acme/Unknown-1T"),
                      point(id="p3", backend="sglang", concurrency=4, isl=128, osl=16)])
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run([sys.executable, str(HERE / "make_scenarios.py"), "--points", str(path), "--out", out],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            doc = json.loads((Path(out) / "cases.json").read_text())
            self.assertEqual(len(doc["cases"]), 3)
            self.assertEqual(sum("scenario" in c for c in doc["cases"]), 2)
            self.assertIn("model acme/Unknown-1T: unknown", next(c for c in doc["cases"] if c["id"] == "p2")["skip_reason"])
            if MOESIM:
                for c in doc["cases"]:
                    if "scenario" in c:
                        v = subprocess.run([MOESIM, "validate", c["scenario"]], cwd=ROOT, capture_output=True, text=True)
                        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)

    def test_every_shipped_point_is_a_case(self):
        shipped = ROOT / "data" / "kernels" / "serving_points.csv"
        rows = P.read_points(shipped)
        with tempfile.TemporaryDirectory() as out:
            cases, scenarios = P.points_cases(shipped, "serving_points.csv", out, 2, 48)
        self.assertEqual(len(cases), len(rows))
        for c in cases:
            self.assertTrue(("scenario" in c) != ("skip_reason" in c), c["id"])
        self.assertEqual(len(scenarios), sum("scenario" in c for c in cases))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--moesim")
    args, rest = ap.parse_known_args()
    MOESIM = str(Path(args.moesim).resolve()) if args.moesim else None
    unittest.main(argv=[sys.argv[0], *rest], verbosity=1)
