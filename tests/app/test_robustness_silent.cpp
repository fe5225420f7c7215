// Issue 30's reproducers, class 3 (nothing accepted silently): keys written with no value,
// contradictory model fields, length distributions past their range, traces read loosely,
// implausible calibration measurements and profiles, outputs that overwrite each other, and
// options a policy ignores. Each is a located error (or, for the last, a warning).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <cstdlib>

#include "tests/support/hostile_inputs.hpp"
#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;
using namespace testing_support;
constexpr const char* kBase = kHostileBase;
fs::path scratch(const std::string& name) { return scratch_dir("silent-" + name); }

std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

// `moesim validate` of `text` (and `sets`): exit 2 with an error containing `says`.
void expect_refused(const std::string& text, const std::string& says, const std::vector<std::string>& sets = {}) {
  const fs::path dir = scratch("v");
  std::vector<std::string> args{"validate", write(dir, "s.yaml", text).string()};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  const auto r = run_cli_captured(args);
  EXPECT_EQ(r.code, 2) << says << "\n" << r.err;
  EXPECT_TRUE(has(r.err, says)) << says << "\n" << r.err;
}

}  // namespace

TEST(Silent, KeysWrittenWithNoValueAreErrors) {
  expect_refused(with(kBase, "arrival: {process: poisson, rate_per_s: 50}", "arrival: ~"),
                 "s.yaml:5:70: error: 'arrival' has no value");
  expect_refused(with(kBase, "prompt_tokens: 64", "prompt_tokens: ~"), "'prompt_tokens' has no value");
  expect_refused(with(kBase, "routing: {kind: uniform}", "routing: ~"), "'routing' has no value");
  expect_refused(std::string(kBase) + "serving: {engine: ~}\n", "s.yaml:7:19: error: 'engine' has no value");
}

TEST(Silent, ContradictoryModelFieldsNameBoth) {
  expect_refused(kBase, "attention 'kind: mla' needs 'kv_lora_rank' > 0", {"model.attention={kind: mla}"});
  expect_refused(kBase, "attention 'kind: mla' needs 'kv_lora_rank' > 0",
                 {"model={preset: deepseek-v3, attention: {kv_lora_rank: 0}}"});
  expect_refused(kBase, "'kind: mqa' has one key/value head: 'kv_heads' must be 1, got 8",
                 {"model.attention={kind: mqa, kv_heads: 8}"});
  expect_refused(kBase, "'kv_heads' (1) must equal 'heads' (32)", {"model.attention={kind: mha, kv_heads: 1}"});
  expect_refused(kBase, "'shared_experts' (1) needs 'shared_expert_ffn' > 0", {"model.shared_experts=1"});
  expect_refused(kBase, "1 dense layer(s) ('first_dense_layers', 'moe_every'): 'dense_ffn' must be > 0",
                 {"model.moe_every=2"});
}

TEST(Silent, LengthDistributionsPastTheirRangeAreErrors) {
  expect_refused(kBase, "'mean' must be <= 1e+08", {"workload.prompt_tokens={dist: normal, mean: 1e300, std: 1e300}"});
  expect_refused(kBase, "'prompt_tokens' must be at most 100000000 tokens", {"workload.prompt_tokens=1000000000"});
  // Found by fuzz_lengths (regressions/fuzz_lengths/normal-default-max-past-the-limit): without
  // 'max' a normal is truncated at mean + 4 std, which passed the limit though each field kept it.
  expect_refused(kBase, "truncated at mean + 4 std = 100003999 tokens, past the 100000000-token limit",
                 {"workload.prompt_tokens={dist: normal, mean: 99999999, std: 1000}"});
  expect_refused(kBase, "past the 100000000-token limit", {"workload.output_tokens={dist: normal, mean: 1e8, std: 1e8}"});
}

TEST(Silent, TracesAreReadStrictly) {
  const fs::path dir = scratch("trace");
  const auto traced = [](const std::string& file, const std::string& requests) {
    return with(with(kBase, "arrival: {process: poisson, rate_per_s: 50}, prompt_tokens: 64, output_tokens: 8",
                     "arrival: {process: trace, file: " + file + "}"),
                "requests: 20, warmup_requests: 2", requests);
  };
  write(dir, "hex.csv", "arrived_at_s,prompt_tokens,output_tokens\n0x10,64,8\n");
  write(dir, "dup.csv", "arrived_at_s,prompt_tokens,output_tokens,arrived_at_s\n0,64,8,5\n");
  write(dir, "two.csv", "arrived_at_s,prompt_tokens,output_tokens\n0,64,8\n1,64,8\n");
  const auto check = [&](const std::string& text, const std::string& says) {
    const auto r = run_cli_captured({"validate", write(dir, "s.yaml", text).string()});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(has(r.err, says)) << says << "\n" << r.err;
  };
  check(traced("hex.csv", "requests: 1"), "hex.csv:2:1: error: 'arrived_at_s' '0x10' is not a number");
  check(traced("dup.csv", "requests: 1"), "dup.csv:1:42: error: column 'arrived_at_s' appears twice");
  check(traced("two.csv", "requests: 100"), "'requests' (100) is more than the trace's 2 rows");
  const auto r = run_cli_captured({"cost", "allreduce", "--hardware", "dgx-a100", "--gpus", "8", "--bytes", "0x10"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "moesim: error: --bytes: not a decimal number: 0x10")) << r.err;
}

TEST(Silent, ImplausibleMeasurementsAndProfilesAreRefused) {
  const fs::path dir = scratch("calibrate");
  const fs::path meas = write(dir, "m.json",
                              "{\"format\": \"moesim-measurements/1\", \"device\": \"x\", \"gemm\": [{\"dtype\": \"bf16\", "
                              "\"m\": 4096, \"n\": 4096, \"k\": 4096, \"time_us\": 1e-300}], \"memcpy\": [{\"kind\": "
                              "\"h2d_pinned\", \"bytes\": 1000000, \"time_us\": 1e-200}]}");
  const fs::path out = dir / "p.yaml";
  auto r = run_cli_captured({"calibrate", "fit", meas.string(), "--base", "dgx-a100", "--out", out.string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "m.json: error: gemm[0]:")) << r.err;
  EXPECT_TRUE(has(r.err, "faster than twice A100-SXM4-80GB's peak allows")) << r.err;
  EXPECT_TRUE(has(r.err, "m.json: error: memcpy[0]:")) << r.err;
  EXPECT_FALSE(fs::exists(out));
  // A kernel table is a measurement file too: the same rule, located at its row (issue 52).
  const fs::path table = write(dir, "gemm.csv",
                               "system,backend,version,kernel_source,gemm_dtype,m,n,k,latency_ms\n"
                               "h100_sxm,trtllm,1.3,torch_flow,bfloat16,1,4096,4096,0.02\n"
                               "h100_sxm,trtllm,1.3,torch_flow,bfloat16,4096,4096,4096,0.000001\n"
                               "b200_sxm,trtllm,1.3,torch_flow,bfloat16,4096,4096,4096,0.000001\n");
  r = run_cli_captured({"calibrate", "fit", table.string(), "--base", "dgx-h100", "--out", out.string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "gemm.csv:3:0: error: h100_sxm trtllm GEMM m=4096 n=4096 k=4096")) << r.err;
  EXPECT_TRUE(has(r.err, "faster than twice H100-SXM-80GB's peak allows")) << r.err;
  EXPECT_FALSE(has(r.err, "gemm.csv:4:")) << r.err;  // another GPU's row is not this GPU's to judge
  EXPECT_FALSE(fs::exists(out));
  // --out a directory: an error, and no .tmp left beside it.
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  const std::string nccl = std::string(root ? root : ".") + "/tests/data/calibration/nccl_tests_all_reduce_8xa100.txt";
  fs::create_directories(dir / "d");
  r = run_cli_captured({"calibrate", "fit", nccl, "--base", "dgx-a100", "--out", (dir / "d").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_FALSE(has(r.out, "wrote")) << r.out;
  EXPECT_FALSE(fs::exists(dir / "d.tmp"));
  // A fitted profile with a NaN efficiency is refused by a scenario.
  r = run_cli_captured({"calibrate", "fit", nccl, "--base", "dgx-a100", "--out", out.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string profile = testing_support::slurp(out);
  const std::size_t first = profile.find("efficiency: [") + 13;
  profile.replace(first, profile.find(',', first) - first, ".nan");
  write(dir, "nan.yaml", profile);
  expect_refused(kBase, "invalid profile: all_reduce: an efficiency outside (0, 2] or not finite",
                 {"hardware.calibration=" + (dir / "nan.yaml").string()});
}

TEST(Silent, OutputsThatWouldOverwriteEachOtherOrBeIgnored) {
  const fs::path dir = scratch("out");
  const std::string x = (dir / "x.csv").string();
  const auto r = run_cli_captured({"guideline", "--model", "switch-base-128", "--hardware", "dgx1-v100", "--out", x,
                                   "--curves", (dir / "." / "x.csv").string(), "--skewness", "1", "--bandwidth-GBps", "100"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "the same file as --out")) << r.err;
  EXPECT_FALSE(fs::exists(x));
  const auto v = run_cli_captured(
      {"validate", write(dir, "a.yaml", with(kBase, "policy: static-ep", "policy: amoe") + "output: {trace: true}\n").string()});
  EXPECT_EQ(v.code, 0) << v.err;
  // AMoE runs in the serving engine's layer-queue mode, which writes a trace like every mode.
  EXPECT_FALSE(has(v.err, "trace")) << v.err;
}

// Issue 52: a value a config.json supplies passes the range the model section declares for it,
// as the same value written in the scenario does (head_dim 0 priced a KV cache of 0 bytes).
TEST(Silent, ConfigJsonValuesPassTheDeclaredRanges) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  std::ifstream in(fs::path(root ? root : ".") / "tests/data/hf/qwen3-235b-a22b.json");
  std::stringstream text;
  text << in.rdbuf();
  const std::string config = text.str();
  ASSERT_FALSE(config.empty());
  const struct {
    const char* from;
    const char* to;
    const char* says;
  } cases[] = {
      {"\"head_dim\": 128", "\"head_dim\": 0", "hf_config (attention) sets 'head_dim' to 0, outside its range 1 .. 65536"},
      {"\"num_key_value_heads\": 4", "\"num_key_value_heads\": 0", "sets 'kv_heads' to 0, outside its range 1 .. 65536"},
      {"\"num_hidden_layers\": 94", "\"num_hidden_layers\": 5000", "sets 'layers' to 5000, outside its range 1 .. 4096"},
      {"\"num_experts\": 128", "\"num_experts\": 70000", "sets 'experts' to 70000, outside its range 0 .. 65536"},
      {"\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 1500", "sets 'top_k' to 1500, outside its range 0 .. 1024"},
      {"\"moe_intermediate_size\": 1536", "\"moe_intermediate_size\": 0", "'expert_ffn' must be >= 1 in an MoE model"},
  };
  for (const auto& c : cases) {
    const fs::path dir = scratch("hf");
    write(dir, "c.json", with(config, c.from, c.to));
    const auto r = run_cli_captured(
        {"validate", write(dir, "s.yaml", with(kBase, "{preset: mixtral-8x7b, layers: 2}", "{hf_config: c.json}")).string()});
    EXPECT_EQ(r.code, 2) << c.says << "\n" << r.err;
    EXPECT_TRUE(has(r.err, "s.yaml:3:")) << r.err;
    EXPECT_TRUE(has(r.err, c.says)) << c.says << "\n" << r.err;
  }
}

// A dense model is 'experts: 0': no layer is MoE and nothing is routed; a top_k beside it is a
// contradiction, not ignored.
TEST(Silent, DenseModelsRouteNothing) {
  const std::string dense = with(kBase, "{preset: mixtral-8x7b, layers: 2}", "{preset: llama-3.1-8b, layers: 2}");
  const fs::path dir = scratch("dense");
  const std::string file = write(dir, "s.yaml", with(dense, "policy: static-ep", "policy: tp-experts")).string();
  const auto ok = run_cli_captured({"validate", file});
  EXPECT_EQ(ok.code, 0) << ok.err;
  // And it runs: every layer dense, no routed token, a KV cache that fits.
  const auto run = run_cli_captured({"run", file, "--out", (dir / "out").string(), "-q"});
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "result.json"));
  expect_refused(dense, "a dense model ('experts: 0') routes no token: 'top_k' must be 0, got 2", {"model.top_k=2"});
  expect_refused(kBase, "the model has no MoE layer", {"model.first_dense_layers=2", "model.dense_ffn=100"});
}

}  // namespace moesim

namespace moesim {

// Issue 48's hybrid models: linear attention (Qwen3.5) and sparse attention (GLM-5) run end to
// end, and half-declared forms of either are located errors, not a model priced without them.
TEST(Silent, HybridAttentionModelsRunAndHalfDeclaredFormsAreRefused) {
  for (const std::string preset : {"qwen3.5-397b-a17b", "glm-5"}) {
    const std::string text = with(kBase, "{preset: mixtral-8x7b, layers: 2}", "{preset: " + preset + ", layers: 4}");
    const fs::path dir = scratch("hybrid-" + preset);
    const std::string file = write(dir, "s.yaml", text).string();
    const auto run = run_cli_captured({"run", file, "--out", (dir / "out").string(), "-q"});
    EXPECT_EQ(run.code, 0) << preset << ": " << run.err;
    EXPECT_TRUE(fs::exists(dir / "out" / "result.json")) << preset;
  }
  expect_refused(kBase, "linear attention needs 'linear_value_heads' > 0", {"model.linear_key_heads=4"});
  expect_refused(kBase, "must be a multiple of 'linear_key_heads'",
                 {"model={preset: qwen3.5-397b-a17b, layers: 4, linear_value_heads: 24}"});
  expect_refused(kBase, "a model with linear attention has no sliding window",
                 {"model={preset: qwen3.5-397b-a17b, layers: 4, attention: {window: 128}}"});
  expect_refused(kBase, "DeepSeek Sparse Attention (index_*) selects keys for MLA", {"model.attention={index_topk: 64}"});
  expect_refused(kBase, "DeepSeek Sparse Attention needs 'index_heads' > 0",
                 {"model={preset: glm-5, layers: 4, attention: {index_heads: 0}}"});
  // INT4 is weight-only storage: only for experts, and only with weight-only math.
  expect_refused(kBase, "'expert_dtype: int4' needs 'expert_quantization: weight-only'", {"model.expert_dtype=int4"});
  expect_refused(kBase, "'dtype: int4' is a weight-only format", {"model.dtype=int4"});
  expect_refused(kBase, "'kv_dtype: int4' is a weight-only format", {"model.kv_dtype=int4"});
  {
    const fs::path d = scratch("int4");
    const auto ok = run_cli_captured({"validate", write(d, "s.yaml", kBase).string(), "--set", "model.expert_dtype=int4",
                                      "--set", "model.expert_quantization=weight-only"});
    EXPECT_EQ(ok.code, 0) << ok.err;
  }
  // AMoE's layer queues admit by KV blocks alone: a linear-attention model is refused there.
  const fs::path dir = scratch("hybrid-amoe");
  const std::string amoe = with(with(kBase, "{preset: mixtral-8x7b, layers: 2}", "{preset: qwen3.5-397b-a17b, layers: 4}"),
                                "policy: static-ep", "policy: amoe");
  const auto r = run_cli_captured({"run", write(dir, "a.yaml", amoe).string(), "--out", (dir / "out").string(), "-q"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "does not hold linear-attention state")) << r.err;
}

}  // namespace moesim
