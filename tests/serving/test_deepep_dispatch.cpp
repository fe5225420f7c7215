// DeepEP as the dispatch and combine of expert-parallel policies (deployment.alltoall, issue 26):
// the layer's selections reach the GPUs the policy's Dispatch names, and the call is priced by
// hardware/deepep.hpp's per-GPU traffic on exactly those destinations.
#include <gtest/gtest.h>

#include <string>

#include "app/scenario/scenario.hpp"
#include "app/run/serving_run.hpp"
#include "serve_metrics.hpp"
#include "policies/deepep_dispatch.hpp"

namespace moesim {
namespace {

// 8 GPUs of one DGX H100, 16 experts top-2, two owned per GPU (expert e on GPU e / 2).
TEST(DeepEpDispatch, PricesTheDestinationsTheDispatchNames) {
  ModelSpec m = model_presets().get("mixtral-8x7b").value;
  m.experts = 16;
  m.top_k = 2;
  const Cluster cluster(cluster_presets().get("dgx-h100").value);
  PrefillWorkload wl;
  PolicyContext ctx{m, cluster, wl};
  ctx.alltoall = MoeAllToAll::kDeepEpNormal;
  const int G = 8, per_gpu = 5;
  LayerRouting r;
  r.top_k = 2;
  r.num_experts = 16;
  std::vector<int> token_home;
  std::vector<std::vector<int>> dests;
  std::vector<int> home;
  Dispatch d(G, 16);
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < per_gpu; ++i) {
      const int a = (g * 3 + i * 5) % 16, b = (a + 1 + i) % 16;
      r.experts.push_back(a);
      r.experts.push_back(b);
      token_home.push_back(g);
      home.push_back(g);
      dests.push_back({a / 2, b / 2});
      ++d.load[static_cast<std::size_t>(a / 2)][static_cast<std::size_t>(a)];
      ++d.load[static_cast<std::size_t>(b / 2)][static_cast<std::size_t>(b)];
    }
  r.num_tokens = static_cast<std::int64_t>(token_home.size());
  MoeLayerInput in;
  in.routing = &r;
  in.token_home = &token_home;
  in.home_tokens.assign(G, per_gpu);
  for (const DeepEpOp op : {DeepEpOp::kDispatch, DeepEpOp::kCombine}) {
    const std::vector<double> us = deepep_layer_us(ctx, in, d, op);
    const auto expected = deepep_traffic(cluster, deepep_params(m, ctx.alltoall, G, op), home, dests);
    ASSERT_EQ(us.size(), expected.size());
    for (int g = 0; g < G; ++g) EXPECT_DOUBLE_EQ(us[static_cast<std::size_t>(g)], expected[static_cast<std::size_t>(g)].finish_us);
  }
}

std::string scenario(const std::string& deployment, const std::string& policy = "static-ep") {
  return "name: deepep\n"
         "seed: 2\n"
         "model: {preset: deepseek-v3, layers: 3, first_dense_layers: 1}\n"
         "hardware: dgx-h100\n"
         "workload: {kind: serving, requests: 16, arrival: {process: closed, clients: 16}, prompt_tokens: 256, "
         "output_tokens: 4, routing: {kind: uniform}}\n"
         "deployment: " + deployment + "\n"
         "policy: " + policy + "\n";
}

nlohmann::json serve(const std::string& text) { return testing::serve_metrics(text, "d.yaml"); }

// Every request completes with either kernel family, and the dispatch is no longer NCCL's.
TEST(DeepEpDispatch, ServingRunsWithEitherKernelAndTheyDiffer) {
  const nlohmann::json nccl = serve(scenario("{}"));
  const nlohmann::json normal = serve(scenario("{alltoall: deepep-normal}"));
  const nlohmann::json ll = serve(scenario("{alltoall: deepep-ll}"));
  for (const auto* m : {&nccl, &normal, &ll}) EXPECT_EQ((*m)["requests_completed"].get<std::int64_t>(), 16);
  EXPECT_NE(normal["makespan_ms"].get<double>(), nccl["makespan_ms"].get<double>());
  EXPECT_NE(ll["makespan_ms"].get<double>(), normal["makespan_ms"].get<double>());
}

TEST(DeepEpDispatch, PoliciesWithTheirOwnCollectivesAreRefused) {
  try {
    load_scenario_text(scenario("{alltoall: deepep-normal, tensor_parallel: 8, expert_parallel: false}", "tp-experts"),
                       "d.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("runs its own collectives"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_scenario_text(scenario("{alltoall: nvshmem}"), "d.yaml"), InputError);
}

}  // namespace
}  // namespace moesim
