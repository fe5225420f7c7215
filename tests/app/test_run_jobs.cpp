// `moesim run --jobs N`: the (policy, predictor) runs go on N threads, and result.json,
// requests.csv and every trace are byte-identical to a serial run; a failing run is reported as
// a serial run would report it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "core/diagnostics.hpp"
#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

using testing_support::slurp;

// Every file of `dir`, by name.
std::vector<std::pair<std::string, std::string>> files_of(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& e : fs::directory_iterator(dir)) files.emplace_back(e.path().filename().string(), slurp(e.path()));
  std::sort(files.begin(), files.end());
  return files;
}

// Three policies x two predictors.
const char* kRuns =
    "policy:\n"
    "  - static-ep\n"
    "  - {name: static-ep, label: rr, placement: round-robin}\n"
    "  - {name: static-ep, label: cap, capacity_factor: 1.25}\n"
    "predictor: [none, oracle]\n"
    "output: {trace: true}\n";

class RunJobs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("moesim-run-jobs-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                       "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  // Runs `text` with --jobs 1 and --jobs 3 and expects the same files, byte for byte.
  void expect_same_output(const std::string& text, std::size_t runs, std::size_t files) {
    const std::string file = (dir / "s.yaml").string();
    std::ofstream(file) << text;
    for (const char* jobs : {"1", "3"}) {
      const auto r = testing_support::run_cli_captured({"run", file, "--out", (dir / jobs).string(), "-q", "--jobs", jobs});
      ASSERT_EQ(r.code, 0) << r.err;
    }
    const auto serial = files_of(dir / "1");
    EXPECT_EQ(serial.size(), files);
    EXPECT_EQ(nlohmann::json::parse(slurp(dir / "1" / "result.json"))["runs"].size(), runs);
    const auto parallel = files_of(dir / "3");
    ASSERT_EQ(parallel.size(), serial.size());
    for (std::size_t i = 0; i < serial.size(); ++i) {
      EXPECT_EQ(parallel[i].first, serial[i].first);
      EXPECT_TRUE(parallel[i].second == serial[i].second) << serial[i].first << " differs";
    }
  }

  fs::path dir;
};

}  // namespace

TEST_F(RunJobs, PrefillIsByteIdenticalWhateverTheJobs) {
  expect_same_output(std::string("name: jobs\nseed: 7\nmodel: {preset: switch-base-8, layers: 4}\nhardware: hgx-a100-4gpu-nvlink\n"
                                 "workload: {batch_size: 4, seq_len: 32, batches: 3, routing: {kind: zipf, s: 1.2}}\n") +
                         kRuns,
                     6, 6 + 2);  // six traces, result.json, scenario.resolved.yaml
}

TEST_F(RunJobs, ServingIsByteIdenticalWhateverTheJobs) {
  expect_same_output(std::string("name: jobs-serving\nseed: 9\nmodel: {preset: mixtral-8x7b, layers: 2}\nhardware: dgx-a100\n"
                                 "workload: {kind: serving, requests: 40, warmup_requests: 5, arrival: {process: poisson, "
                                 "rate_per_s: 50}, prompt_tokens: {dist: uniform, min: 32, max: 300}, output_tokens: "
                                 "{dist: uniform, min: 1, max: 30}}\n"
                                 "serving: {max_num_seqs: 16, max_batched_tokens: 1024}\n") +
                         kRuns,
                     6, 6 + 3);  // and requests.csv
}

TEST_F(RunJobs, BadInputExitsTwoAndWritesNoResult) {
  const std::string file = (dir / "s.yaml").string();
  std::ofstream(file) << "name: jobs\nmodel: {preset: switch-base-8, layers: 4}\nhardware: hgx-a100-4gpu-nvlink\n"
                         "workload: {batch_size: 4, seq_len: 32, batches: 1}\n" << kRuns;
  const auto r = testing_support::run_cli_captured(
      {"run", file, "--out", (dir / "bad").string(), "--jobs", "3", "--set", "model.top_k=99"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: 'top_k' (99) exceeds the number of experts (8)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "bad" / "result.json"));
  EXPECT_EQ(testing_support::run_cli_captured({"run", file, "--jobs", "0"}).code, 2);
}

// Runs that fail (here at their policy's setup) report the first failing run in result order,
// located at its policy entry, whichever thread failed first.
TEST(RunScenarioJobs, TheFirstFailingRunIsReported) {
  const char* text = R"(name: jobs
seed: 3
model: {preset: switch-base-8, layers: 4}
hardware: hgx-a100-4gpu-nvlink
workload: {batch_size: 4, seq_len: 32, batches: 1}
policy:
  - static-ep
  - {name: harmoeny, q: 0}
  - {name: moegps-dup, max_copies: 0}
)";
  const Scenario s = load_scenario_text(text, "jobs.yaml");
  for (unsigned jobs : {1u, 3u}) {
    try {
      run_scenario(s, {}, {}, jobs);
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("jobs.yaml:8:"), std::string::npos) << jobs << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("'q' must be"), std::string::npos) << jobs << ": " << e.what();
    }
  }
}

}  // namespace moesim
