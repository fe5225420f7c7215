// hardware.all_to_all_model closed-form in a serving run (an approximation, off by default): the
// same traffic as planning every pair (with one task per GPU instead of one per pair: the unit
// test counts them) and, on the analytic backend whose rule it takes, step times within a few
// percent (the calls start together at the latest launch).
#include <gtest/gtest.h>

#include <string>

#include "app/scenario/scenario.hpp"
#include "core/diagnostics.hpp"
#include "serve_metrics.hpp"

namespace moesim {
namespace {

// Mixtral cut to 8 layers on two DGX H100 nodes (EP16: half the pairs cross nodes), skewed.
std::string scenario(const std::string& hardware_extra, const std::string& serving = "{}") {
  return "name: closed-form\n"
         "seed: 9\n"
         "model: {preset: mixtral-8x7b, layers: 8}\n"
         "hardware: {preset: dgx-h100, nodes: 2, network_model: analytic" + hardware_extra + "}\n"
         "workload: {kind: serving, requests: 32, arrival: {process: closed, clients: 32}, prompt_tokens: 256, "
         "output_tokens: 12, routing: {kind: skewed, alpha: 0.4, hot_experts: 2}}\n"
         "serving: " + serving + "\n"
         "policy: static-ep\n"
         "predictor: none\n";
}

nlohmann::json serve(const std::string& text) { return testing::serve_metrics(text, "closed-form.yaml"); }

double ratio(const nlohmann::json& a, const nlohmann::json& b, const char* metric, const char* stat) {
  return a[metric][stat].get<double>() / b[metric][stat].get<double>();
}

TEST(ClosedFormAllToAllServing, SameTrafficAndCloseTimes) {
  const nlohmann::json flows = serve(scenario(""));
  EXPECT_EQ(serve(scenario(", all_to_all_model: flows")).dump(), flows.dump());  // the default
  for (const std::string serving : {"{}", "{layer_sampling: 4}"}) {
    const nlohmann::json exact = serving == "{}" ? flows : serve(scenario("", serving));
    const nlohmann::json closed = serve(scenario(", all_to_all_model: closed-form", serving));
    for (const char* cls : {"intra_node", "inter_node", "intra_gpu"}) {
      const double b = exact["bytes"][cls].get<double>();
      EXPECT_NEAR(closed["bytes"][cls].get<double>(), b, 1e-9 * b) << serving << " " << cls;
    }
    EXPECT_GT(exact["bytes"]["inter_node"].get<double>(), 0.0);
    EXPECT_NEAR(ratio(closed, exact, "tpot_ms", "mean"), 1.0, 0.03) << serving;
    EXPECT_NEAR(ratio(closed, exact, "ttft_ms", "mean"), 1.0, 0.03) << serving;
    EXPECT_EQ(closed["steps"]["count"], exact["steps"]["count"]) << serving;
  }
}

TEST(ClosedFormAllToAllServing, AnUnknownModelIsRefusedWithTheNames) {
  try {
    (void)load_scenario_text(scenario(", all_to_all_model: pairs"), "s.yaml");
    FAIL() << "accepted an unknown all_to_all_model";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("closed-form"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moesim
