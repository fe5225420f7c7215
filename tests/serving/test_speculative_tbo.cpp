// Speculative decoding (MTP) and two-batch overlap (issue 26), against their closed forms on
// small runs: acceptance 0 is today's decode plus the drafts' cost; acceptance 1 gives
// 1 + draft_tokens tokens per step; two micro-batches gain nothing without communication.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "app/scenario/scenario.hpp"
#include "app/run/serving_run.hpp"
#include "serve_metrics.hpp"

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

nlohmann::json serve(const std::string& text) { return testing::serve_metrics(text, "spec.yaml"); }

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

// Expert parallelism over two nodes, one prefill step whose all-to-alls take about as long as
// its kernels: with two micro-batches one's dispatch and combine run beside the other's kernels.
// Of the plain step's exposed communication, less than half stays exposed, and the step gains at
// least half of min(communication, compute), although each half re-reads the expert weights.
TEST(TwoBatchOverlap, HidesMostOfTheAllToAllWhenItIsAsLongAsTheCompute) {
  // The datasheet roofline (calibration: none) is what makes this case's all-to-all as long as
  // its compute; with the measured kernels the experts take ~1.4x longer and the balance moves.
  const auto run = [](bool tbo) {
    return serve("name: tbo\nseed: 3\nmodel: {preset: deepseek-v3, layers: 4, first_dense_layers: 1}\n"
                 "hardware: {preset: dgx-h100, nodes: 2, calibration: none}\n"
                 "workload: {kind: serving, requests: 64, arrival: {process: closed, clients: 64}, prompt_tokens: 512, "
                 "output_tokens: 1, routing: {kind: uniform}}\n"
                 "serving: {max_batched_tokens: 16384, two_batch_overlap: " + std::string(tbo ? "true" : "false") + "}\n"
                 "policy: static-ep\n");
  };
  const nlohmann::json plain = run(false), tbo = run(true);
  ASSERT_EQ(steps(plain), 1);
  ASSERT_EQ(steps(tbo), 1);
  const auto part = [](const nlohmann::json& m, const char* k) { return m["gpu_time_breakdown"]["per_gpu_ms"][0][k].get<double>(); };
  const double comm = part(plain, "communication"), compute = part(plain, "compute");
  ASSERT_GT(comm, 0.5 * compute);  // the case is one where communication matters
  EXPECT_LT(part(tbo, "communication"), 0.5 * comm);
  EXPECT_LT(step_ms(tbo), step_ms(plain) - 0.5 * std::min(comm, compute));
  EXPECT_GE(part(tbo, "compute"), compute);  // two half batches cost at least the whole one
}

}  // namespace
}  // namespace moesim
