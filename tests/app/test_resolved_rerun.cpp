// scenario.resolved.yaml re-runs: every shipped scenario's resolved form loads again, resolves to
// itself (a fixpoint), and, run from its results folder, gives the same result; file references
// (routing and request traces, calibration profiles) are written as absolute paths.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "core/diagnostics.hpp"
#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

std::string emit(const YAML::Node& n) {
  YAML::Emitter em;
  em << n;
  return std::string(em.c_str()) + "\n";
}

fs::path source_root() {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  return root ? fs::path(root) : fs::current_path();
}

TEST(ResolvedScenario, EveryShippedScenarioReloadsToItself) {
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(source_root() / "scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    Scenario first;
    try {
      first = load_scenario(e.path().string());
    } catch (const InputError&) {
      continue;  // a fragment meant for --set or a sweep (not a whole scenario)
    }
    const std::string text = emit(first.resolved);
    // Loaded from another folder: nothing may depend on the original scenario's location.
    Scenario again;
    try {
      again = load_scenario_text(text, "scenario.resolved.yaml", {}, fs::temp_directory_path().string());
    } catch (const InputError& err) {
      ADD_FAILURE() << err.diagnostics()[0].to_string();
      continue;
    } catch (const std::exception& err) {
      ADD_FAILURE() << "internal error: " << err.what() << "\n" << text;
      continue;
    }
    EXPECT_EQ(emit(again.resolved), text);
    ++checked;
  }
  // Scenarios that read ../shared/data are skipped where it is absent (a clean clone): 19 remain.
  EXPECT_GE(checked, 15);
}

TEST(ResolvedScenario, ReRunsFromItsResultsFolderWithTheSameResult) {
  const fs::path dir = fs::temp_directory_path() / ("moesim-resolved-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir / "in" / "traces");
  fs::copy_file(source_root() / "tests" / "data" / "routing" / "expert_counts_excerpt.csv", dir / "in" / "traces" / "counts.csv");
  std::ofstream(dir / "in" / "s.yaml")
      << "name: rerun\nmodel: {preset: olmoe-1b-7b, layers: 2}\nhardware: hgx-a100-4gpu-nvlink\n"
         "workload: {batch_size: 1, seq_len: 64, batches: 2,\n"
         "  routing: {kind: trace, file: traces/counts.csv, model: olmoe, dataset: arxiv, layer: 0}}\n"
         "policy: [static-ep, eplb]\n";
  ASSERT_EQ(testing_support::run_cli_captured({"run", (dir / "in" / "s.yaml").string(), "-q", "--out", (dir / "a").string()}).code, 0);
  const std::string resolved = testing_support::slurp(dir / "a" / "scenario.resolved.yaml");
  EXPECT_NE(resolved.find("file: " + (dir / "in" / "traces" / "counts.csv").lexically_normal().string()), std::string::npos)
      << resolved;
  const auto r = testing_support::run_cli_captured({"run", (dir / "a" / "scenario.resolved.yaml").string(), "-q", "--out", (dir / "b").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto a = nlohmann::json::parse(testing_support::slurp(dir / "a" / "result.json"));
  const auto b = nlohmann::json::parse(testing_support::slurp(dir / "b" / "result.json"));
  EXPECT_EQ(a["runs"], b["runs"]);
  EXPECT_EQ(a["scenario"], b["scenario"]);
  EXPECT_EQ(testing_support::slurp(dir / "b" / "scenario.resolved.yaml"), resolved);
  fs::remove_all(dir);
}

TEST(ResolvedScenario, ADirectoryAsARoutingTraceIsALocatedError) {
  const std::string text =
      "model: {preset: olmoe-1b-7b, layers: 2}\nhardware: hgx-a100-4gpu-nvlink\n"
      "workload: {batch_size: 1, seq_len: 64, routing: {kind: trace, file: ., model: olmoe}}\npolicy: [static-ep]\n";
  try {
    const Scenario s = load_scenario_text(text, "s.yaml", {}, fs::temp_directory_path().string());
    check_scenario_fits(s);
    ADD_FAILURE() << "accepted a directory as a routing trace";
  } catch (const InputError& e) {
    EXPECT_NE(e.diagnostics()[0].to_string().find("s.yaml:3:69: error: routing trace"), std::string::npos)
        << e.diagnostics()[0].to_string();
    EXPECT_NE(e.diagnostics()[0].message.find("is a directory, not a CSV or JSON file"), std::string::npos)
        << e.diagnostics()[0].message;
  }
}

TEST(ResolvedScenario, AnOptionalValueWrittenAsNullMeansNoneNotAnInternalError) {
  // Before: yaml-cpp's "bad conversion", exit 1. Now `~` is what the key's absence means.
  const std::string text =
      "model: {preset: switch-base-8, layers: 2}\nhardware: hgx-a100-4gpu-nvlink\n"
      "workload: {kind: serving, requests: 4, prompt_tokens: 16, output_tokens: 2}\n"
      "serving: {slo: {ttft_ms: ~, tpot_ms: 50}}\npolicy: [static-ep]\n";
  const Scenario s = load_scenario_text(text, "s.yaml");
  EXPECT_EQ(emit(s.resolved["serving"]["slo"]), "tpot_ms: 50\nttft_ms: ~\n");
  // A value that needs one is still an error at its key.
  try {
    load_scenario_text("model: {preset: switch-base-8, layers: ~}\nhardware: hgx-a100-4gpu-nvlink\npolicy: [static-ep]\n", "s.yaml");
    ADD_FAILURE() << "accepted layers: ~";
  } catch (const InputError& e) {
    EXPECT_EQ(e.diagnostics()[0].to_string().rfind("s.yaml:1:40: error: 'layers' has no value", 0), 0u)
        << e.diagnostics()[0].to_string();
  }
}

}  // namespace
}  // namespace moesim
