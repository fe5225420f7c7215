// Scenario loading: presets, overrides, and every kind of bad input reported as file:line:col.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "app/runner.hpp"
#include "app/scenario.hpp"

namespace moesim {
namespace {

const char* kGood = R"(name: t
seed: 3
model: switch-base-8
hardware: dgx1-v100
workload:
  batch_size: 8
  seq_len: 32
  routing: {kind: skewed, alpha: 0.5, hot_experts: 2}
policy:
  - static-ep
  - {name: static-ep, label: rr, placement: round-robin}
)";

// The diagnostics of loading `text`, or an empty list if it loads.
std::vector<Diagnostic> errors_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    const Scenario s = load_scenario_text(text, "s.yaml", sets);
    check_scenario_fits(s);
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  return {};
}

bool mentions(const std::vector<Diagnostic>& d, const std::string& what) {
  for (const auto& x : d)
    if (x.to_string().find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Scenario, LoadsPresetsAndPolicyEntries) {
  const Scenario s = load_scenario_text(kGood, "s.yaml");
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.seed, 3u);
  EXPECT_EQ(s.model.experts, 8);
  EXPECT_EQ(s.hardware.num_gpus(), 8);
  ASSERT_EQ(s.policies.size(), 2u);
  EXPECT_EQ(s.policies[0].label, "static-ep");
  EXPECT_EQ(s.policies[1].label, "rr");
  EXPECT_EQ(s.policies[1].params.get_string("placement"), "round-robin");
  ASSERT_EQ(s.predictors.size(), 1u);  // absent: `none`
  EXPECT_EQ(s.predictors[0].name, "none");
  EXPECT_EQ(s.predictors[0].label, "none");
  EXPECT_EQ(s.resolved["model"]["hidden"].as<int>(), 768);
}

TEST(Scenario, SetOverridesAnyKey) {
  const Scenario s = load_scenario_text(kGood, "s.yaml",
                                        {"seed=9", "model.layers=4", "hardware.nvlink_bandwidth_GBps=50",
                                         "workload.routing.alpha=0.9", "policy.1.placement=contiguous"});
  EXPECT_EQ(s.seed, 9u);
  EXPECT_EQ(s.model.layers, 4);
  EXPECT_DOUBLE_EQ(s.hardware.nvlink_bandwidth_GBps, 50.0);
  EXPECT_DOUBLE_EQ(s.routing.params.get_float("alpha"), 0.9);
  EXPECT_EQ(s.policies[1].params.get_string("placement"), "contiguous");
}

TEST(Scenario, MalformedYamlHasLineAndColumn) {
  const auto d = errors_of("name: x\nmodel: [unclosed\n");
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].where.file, "s.yaml");
  EXPECT_GT(d[0].where.line, 0);
  EXPECT_TRUE(mentions(d, "malformed YAML"));
}

TEST(Scenario, UnknownKeysAreNamedWithSuggestion) {
  std::string text = kGood;
  text += "workloda: {}\n";
  const auto d = errors_of(text);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].where.line, 12);
  EXPECT_EQ(d[0].where.column, 1);
  EXPECT_TRUE(mentions(d, "'workloda'"));
  EXPECT_TRUE(mentions(d, "did you mean 'workload'"));
}

TEST(Scenario, MisspelledPresetSuggestsClosest) {
  std::string text = kGood;
  text.replace(text.find("switch-base-8"), 13, "swtich-base-8");
  const auto d = errors_of(text);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].where.line, 3);
  EXPECT_EQ(d[0].where.column, 8);
  EXPECT_TRUE(mentions(d, "did you mean 'switch-base-8'"));
}

TEST(Scenario, EveryProblemIsReportedAtOnce) {
  std::string text = kGood;
  text.replace(text.find("batch_size: 8"), 13, "batch_size: -8");
  text.replace(text.find("seq_len: 32"), 11, "seq_len: ab");
  const auto d = errors_of(text);
  EXPECT_EQ(d.size(), 2u);
  EXPECT_TRUE(mentions(d, "s.yaml:6:15: error: 'batch_size' must be >= 1"));
  EXPECT_TRUE(mentions(d, "s.yaml:7:12: error: 'seq_len': expected an integer, got 'ab'"));
}

TEST(Scenario, ZeroBandwidthIsAnErrorAtTheKey) {
  const auto d = errors_of(kGood, {"hardware.pcie_bandwidth_GBps=0"});
  ASSERT_FALSE(d.empty());
  EXPECT_TRUE(mentions(d, "pcie_bandwidth_GBps"));
}

TEST(Scenario, TopKLargerThanExpertsIsAnError) {
  const auto d = errors_of(kGood, {"model.top_k=9"});
  ASSERT_FALSE(d.empty());
  EXPECT_TRUE(mentions(d, "'top_k' (9) exceeds the number of experts (8)"));
}

TEST(Scenario, UnknownPolicyAndOptionAreErrors) {
  const auto d = errors_of(kGood, {"policy.0=static-epp", "policy.1.placment=x"});
  EXPECT_TRUE(mentions(d, "unknown policy 'static-epp'; did you mean 'static-ep'?"));
  EXPECT_TRUE(mentions(d, "unknown option 'placment'"));
}

TEST(Scenario, ModelThatDoesNotFitIsAnErrorAtThePolicy) {
  // DeepSeek-V3 (671B parameters in fp8) cannot fit on one DGX A100 (8 x 80 GB).
  const auto d = errors_of("name: big\nmodel: deepseek-v3\nhardware: dgx-a100\npolicy: static-ep\n");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(mentions(d, "does not fit in GPU memory"));
  EXPECT_EQ(d[0].where.line, 4);
}

TEST(Scenario, BadOverrideSyntax) {
  const auto d = errors_of(kGood, {"no-equals-sign"});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(mentions(d, "expected key.path=value"));
}

}  // namespace moesim

namespace moesim {

// Every shipped scenario must stay valid, so examples cannot rot.
TEST(Scenario, EveryShippedScenarioValidates) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  const std::filesystem::path dir = std::filesystem::path(root ? root : ".") / "scenarios";
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    try {
      check_scenario_fits(load_scenario(entry.path().string()));
    } catch (const InputError& e) {
      ADD_FAILURE() << e.what();
    }
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

}  // namespace moesim
