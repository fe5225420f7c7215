// The `grace` policy (GRACE-MoE §4, first version): with co-activation structure in the routing
// its grouping and one-copy-per-GPU sends cut cross-node bytes, while static-ep's are unchanged;
// replicas count in memory; every ablation switch runs.
#include <gtest/gtest.h>

#include <string>

#include "app/runner.hpp"
#include "app/scenario.hpp"

namespace moesim {
namespace {

nlohmann::json run(double intra, const std::string& policies) {
  const std::string text =
      "model: {preset: olmoe-1b-7b, layers: 2}\n"
      "hardware: grace-rtx4090-2x2\n"
      "workload:\n"
      "  kind: prefill\n"
      "  batch_size: 32\n"
      "  seq_len: 64\n"
      "  batches: 2\n"
      "  routing: {kind: coactivation, groups: 4, intra: " + std::to_string(intra) + "}\n"
      "policy: " + policies + "\n";
  return run_scenario(load_scenario_text(text, "grace.yaml"));
}

double inter_node(const nlohmann::json& r, std::size_t run) {
  return r["runs"][run]["metrics"]["bytes"]["inter_node"].get<double>();
}

}  // namespace

TEST(GracePolicy, CoActivationStructureCutsCrossNodeBytesUnderGraceOnly) {
  const std::string policies = "[static-ep, {name: grace, replication: none, routing: home}]";
  const auto loose = run(0.0, policies);
  const auto tight = run(0.95, policies);
  // static-ep sends every selection: its cross-node bytes do not depend on which experts a token
  // picks together (the shares are uniform either way).
  EXPECT_NEAR(inter_node(tight, 0) / inter_node(loose, 0), 1.0, 0.05);
  // grace sends a token once per GPU: experts chosen together, grouped together, cost fewer rows.
  EXPECT_LT(inter_node(tight, 1), 0.8 * inter_node(loose, 1));
  EXPECT_LT(inter_node(tight, 1), inter_node(tight, 0));
}

double bytes(const nlohmann::json& r, std::size_t run, const char* kind) {
  return r["runs"][run]["metrics"]["bytes"][kind].get<double>();
}

TEST(GracePolicy, HierarchicalAllToAllCrossesEachNodeOnceAndKeepsTheSameLocalRows) {
  const auto r = run(0.5, "[{name: grace, replication: none, routing: home, alltoall: flat}, "
                          "{name: grace, replication: none, routing: home, alltoall: hierarchical}]");
  // A token bound for both GPUs of the other node crosses 25 GbE once instead of twice, so the
  // cross-node bytes fall; the forwarding adds as many bytes inside that node.
  EXPECT_LT(bytes(r, 1, "inter_node"), 0.95 * bytes(r, 0, "inter_node"));
  EXPECT_NEAR(bytes(r, 1, "inter_node") + bytes(r, 1, "intra_node"),
              bytes(r, 0, "inter_node") + bytes(r, 0, "intra_node"), 1.0);
  // Same placement, same selections: the rows that stay home are the same, and there are some.
  EXPECT_GT(bytes(r, 0, "intra_gpu"), 0.0);
  EXPECT_EQ(bytes(r, 0, "intra_gpu"), bytes(r, 1, "intra_gpu"));
  EXPECT_LT(r["runs"][1]["metrics"]["alltoall_ms"].get<double>(), r["runs"][0]["metrics"]["alltoall_ms"].get<double>());
}

TEST(GracePolicy, EveryAblationRunsAndIsDeterministic) {
  const std::string policies =
      "[{name: grace, grouping: uniform, replication: none, routing: home}, "
      "{name: grace, grouping: hierarchical, replication: fixed, routing: wrr}, "
      "{name: grace, grouping: hierarchical, replication: dynamic, routing: topology-aware, ratio: 0.25}]";
  const auto a = run(0.8, policies);
  const auto b = run(0.8, policies);
  ASSERT_EQ(a["runs"].size(), 3u);
  EXPECT_EQ(a.dump(), b.dump());
  for (const auto& r : a["runs"]) EXPECT_GT(r["metrics"]["layer_latency_ms"]["mean"].get<double>(), 0.0);
}

}  // namespace moesim
