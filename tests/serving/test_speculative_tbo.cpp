// Speculative decoding (MTP) and two-batch overlap (issue 26), against their closed forms on
// small runs: acceptance 0 is today's decode plus the drafts' cost; acceptance 1 gives
// 1 + draft_tokens tokens per step; two micro-batches gain nothing without communication.
#include <gtest/gtest.h>

#include <string>

#include "app/scenario.hpp"
#include "app/serving_run.hpp"

namespace moesim {
namespace {

// DeepSeek-V3 cut to 4 layers (one dense, three MoE) on one DGX H100.
std::string scenario(const std::string& serving, const std::string& deployment = "{}", int output = 9) {
  return "name: spec\n"
         "seed: 3\n"
         "model: {preset: deepseek-v3, layers: 4, first_dense_layers: 1}\n"
         "hardware: dgx-h100\n"
         "workload: {kind: serving, requests: 8, arrival: {process: closed, clients: 8}, prompt_tokens: 128, "
         "output_tokens: " + std::to_string(output) + ", prompt_cached: true, routing: {kind: uniform}}\n"
         "serving: " + serving + "\n"
         "deployment: " + deployment + "\n"
         "policy: static-ep\n"
         "predictor: none\n";
}

nlohmann::json serve(const std::string& text) {
  const Scenario s = load_scenario_text(text, "spec.yaml");
  std::string csv;
  return run_serving(s, s.policies.front(), s.predictors.front(), "", csv)["metrics"];
}

std::int64_t steps(const nlohmann::json& m) { return m["steps"]["count"].get<std::int64_t>(); }
double step_ms(const nlohmann::json& m) { return m["steps"]["step_ms"]["mean"].get<double>(); }

TEST(Speculative, AcceptanceOneGivesOnePlusDraftTokensPerStep) {
  // 8 outputs after the first (prompt cached: the first decode step gives token 1): 9 plain
  // decode steps; with 2 drafts always accepted, 3 tokens per step: ceil(9 / 3) = 3 steps.
  const nlohmann::json plain = serve(scenario("{}"));
  const nlohmann::json all = serve(scenario("{speculative: {method: mtp, draft_tokens: 2, acceptance_rate: 1}}"));
  EXPECT_EQ(steps(plain), 9);
  EXPECT_EQ(steps(all), 3);
  EXPECT_EQ(all["requests_completed"].get<std::int64_t>(), 8);
}

TEST(Speculative, AcceptanceZeroIsTodaysDecodePlusTheDraftCost) {
  const nlohmann::json plain = serve(scenario("{}"));
  const nlohmann::json none = serve(scenario("{speculative: {method: mtp, draft_tokens: 2, acceptance_rate: 0}}"));
  EXPECT_EQ(steps(none), steps(plain));
  // Each step verifies 3 tokens per sequence and runs two MTP passes: longer, but by less than
  // the four layers it repeats twice plus three-wide verification would cost at full price
  // (decode is memory-bound: the weights are read once per step either way).
  EXPECT_GT(step_ms(none), step_ms(plain));
  EXPECT_LT(step_ms(none), 3.0 * step_ms(plain));
}

TEST(Speculative, BadInputIsRefused) {
  EXPECT_THROW(load_scenario_text(scenario("{speculative: {method: mtp, draft_tokens: 0}}"), "s.yaml"), InputError);
  EXPECT_THROW(load_scenario_text(scenario("{speculative: {method: mtp, acceptance_rate: 1.5}}"), "s.yaml"), InputError);
  EXPECT_THROW(load_scenario_text(scenario("{speculative: {method: draft-model}}"), "s.yaml"), InputError);
  EXPECT_THROW(load_scenario_text(
                   "name: x\nmodel: {preset: mixtral-8x7b, layers: 2}\nhardware: dgx-h100\n"
                   "workload: {kind: serving, requests: 2, prompt_tokens: 8, output_tokens: 4}\n"
                   "serving: {speculative: {method: mtp}}\n",
                   "s.yaml"),
               InputError);  // no MTP module
}

// One GPU: no dispatch or combine leaves the GPU, so the two micro-batches only take turns on its
// compute stream: the step gains nothing (it may lose: each half re-reads the weights).
TEST(TwoBatchOverlap, NoCommunicationNoGain) {
  const std::string one_gpu = "{tensor_parallel: 1, data_parallel: 1, instances: 1}";
  const std::string single = "hardware: {preset: dgx-h100, gpus_per_node: 1, gpus_per_pcie_switch: 1, nics_per_node: 1}";
  std::string a = scenario("{}", one_gpu, 5), b = scenario("{two_batch_overlap: true}", one_gpu, 5);
  for (std::string* t : {&a, &b}) t->replace(t->find("hardware: dgx-h100"), 18, single);
  EXPECT_GE(step_ms(serve(b)), step_ms(serve(a)) * (1.0 - 1e-9));
}

// Expert parallelism over 8 GPUs: the dispatch and combine of one micro-batch run beside the
// other's kernels, so the step is shorter than its two halves back to back.
TEST(TwoBatchOverlap, OverlapsDispatchWithTheOtherHalfsCompute) {
  const double plain = step_ms(serve(scenario("{}")));
  const double tbo = step_ms(serve(scenario("{two_batch_overlap: true}")));
  EXPECT_LT(tbo, 2.0 * plain);
  EXPECT_GT(tbo, 0.0);
}

}  // namespace
}  // namespace moesim
