// Scenario loading: presets, overrides, and every kind of bad input reported as file:line:col.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "tests/support/diagnostics.hpp"
#include "tests/support/run_cli.hpp"

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

using testing_support::mentions;

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

TEST(Scenario, NetworkModelDefaultsToFlowAndIsAChoice) {
  EXPECT_EQ(load_scenario_text(kGood, "s.yaml").hardware.network_model, "flow");
  EXPECT_EQ(load_scenario_text(kGood, "s.yaml", {"hardware.network_model=analytic"}).hardware.network_model,
            "analytic");
  const auto d = errors_of(kGood, {"hardware.network_model=packet"});
  ASSERT_FALSE(d.empty());
  EXPECT_TRUE(mentions(d, "network_model"));
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

// `predictor:` takes what `policy:` takes: a name, a mapping with options and a label, or a list.
TEST(ScenarioPredictors, NamesMappingsAndListsWithOptions) {
  const Scenario s = load_scenario_text(std::string(kGood) +
                                            "predictor:\n"
                                            "  - oracle\n"
                                            "  - {name: token-to-expert, label: t2e-0.8, accuracy: 0.8}\n"
                                            "  - {name: distribution-only, window: 4, online: true}\n",
                                        "s.yaml");
  ASSERT_EQ(s.predictors.size(), 3u);
  EXPECT_EQ(s.predictors[0].name, "oracle");
  EXPECT_EQ(s.predictors[0].label, "oracle");
  EXPECT_EQ(s.predictors[1].name, "token-to-expert");
  EXPECT_EQ(s.predictors[1].label, "t2e-0.8");
  EXPECT_DOUBLE_EQ(s.predictors[1].params.get_float("accuracy"), 0.8);
  EXPECT_EQ(s.predictors[1].where.line, 14);
  EXPECT_EQ(s.predictors[2].params.get_int("window"), 4);
  EXPECT_TRUE(s.predictors[2].params.get_bool("online"));
  // The resolved scenario spells out every option, defaults included, with name and label.
  const YAML::Node r = s.resolved["predictor"];
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1]["label"].as<std::string>(), "t2e-0.8");
  EXPECT_EQ(r[1]["accuracy"].as<double>(), 0.8);
  EXPECT_EQ(r[1]["error_model"].as<std::string>(), "typical");
  EXPECT_TRUE(r[1]["overhead_c1"]);
  EXPECT_EQ(r[2]["name"].as<std::string>(), "distribution-only");
  EXPECT_EQ(r[2]["window"].as<int>(), 4);
  // One mapping is a one-entry list, and `--set` reaches its options.
  const Scenario one = load_scenario_text(std::string(kGood) + "predictor: {name: token-to-expert, accuracy: 0.7}\n",
                                          "s.yaml", {"predictor.accuracy=0.6"});
  ASSERT_EQ(one.predictors.size(), 1u);
  EXPECT_DOUBLE_EQ(one.predictors[0].params.get_float("accuracy"), 0.6);
  // An entry written as a bare name takes options from `--set` too.
  const Scenario bare = load_scenario_text(std::string(kGood) + "predictor: [none, token-to-expert]\n", "s.yaml",
                                           {"predictor.1.accuracy=0.5", "policy.0.capacity_factor=1.5"});
  EXPECT_EQ(bare.predictors[1].name, "token-to-expert");
  EXPECT_DOUBLE_EQ(bare.predictors[1].params.get_float("accuracy"), 0.5);
  EXPECT_DOUBLE_EQ(bare.policies[0].params.get_float("capacity_factor"), 1.5);
}

TEST(ScenarioPredictors, UnlabeledRepeatsAreLabelledByTheOptionsThatDiffer) {
  const Scenario s = load_scenario_text(std::string(kGood) +
                                            "predictor: [token-to-expert, {name: token-to-expert, accuracy: 0.8, "
                                            "error_model: typical}, {name: token-to-expert, label: mine}]\n",
                                        "s.yaml");
  ASSERT_EQ(s.predictors.size(), 3u);
  EXPECT_EQ(s.predictors[0].label, "token-to-expert-accuracy=0.9");  // the default, spelled out
  EXPECT_EQ(s.predictors[1].label, "token-to-expert-accuracy=0.8");  // error_model is the same: left out
  EXPECT_EQ(s.predictors[2].label, "mine");
  // The same rule labels policies: kGood's unlabeled static-ep stays "static-ep" (the other has
  // a label), and two unlabeled ones are told apart by placement.
  const Scenario p = load_scenario_text(kGood, "s.yaml", {"policy.1={name: static-ep, placement: round-robin}"});
  EXPECT_EQ(p.policies[0].label, "static-ep-placement=contiguous");
  EXPECT_EQ(p.policies[1].label, "static-ep-placement=round-robin");
}

TEST(ScenarioPredictors, UnknownOptionIsAnErrorAtItsKeyWithSuggestion) {
  const auto d = errors_of(std::string(kGood) + "predictor:\n  - none\n  - {name: token-to-expert, acuracy: 0.8}\n");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].where.file, "s.yaml");
  EXPECT_EQ(d[0].where.line, 14);
  EXPECT_EQ(d[0].where.column, 29);
  EXPECT_TRUE(mentions(d, "unknown option 'acuracy'"));
  EXPECT_TRUE(mentions(d, "did you mean 'accuracy'"));
}

TEST(ScenarioPredictors, BadNamesValuesAndLabelsAreErrors) {
  const auto d = errors_of(std::string(kGood) +
                           "predictor:\n"
                           "  - {name: token-to-expert, label: x, accuracy: 1.5}\n"
                           "  - {name: oracle, label: x}\n"
                           "  - orakle\n"
                           "  - {name: distribution-only, window: 0, error_model: gloomy}\n"
                           "  - none\n"
                           "  - none\n");
  EXPECT_TRUE(mentions(d, "s.yaml:13:49: error: 'accuracy' must be <= 1"));
  EXPECT_TRUE(mentions(d, "s.yaml:14:5: error: duplicate predictor label 'x'"));
  EXPECT_TRUE(mentions(d, "unknown predictor 'orakle'; did you mean 'oracle'?"));
  EXPECT_TRUE(mentions(d, "'window' must be >= 1"));
  EXPECT_TRUE(mentions(d, "gloomy"));
  EXPECT_TRUE(mentions(d, "s.yaml:18:5: error: duplicate predictor label 'none'"));  // identical: no option tells them apart
}

}  // namespace moesim

namespace moesim {

// Every shipped scenario must stay valid, so examples cannot rot.
TEST(Scenario, EveryShippedScenarioValidates) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  const std::filesystem::path dir = std::filesystem::path(root ? root : ".") / "scenarios";
  const char* shared = std::getenv("MOESIM_SHARED_DATA");
  const bool shared_data_present = shared && std::filesystem::is_directory(shared);
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    if (entry.path().filename() == "claims.yaml") continue;  // scenarios/papers/: the claims table, not a scenario
    // Scenarios on real routing traces from ../shared/data (outside the repository) validate
    // only where that data is present, as the data-driven tests run only there.
    if (!shared_data_present && testing_support::slurp(entry.path()).find("shared/data/") != std::string::npos) continue;
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
