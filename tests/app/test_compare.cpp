// `moesim compare`: runs of several results side by side with ratios to the first run, as a table
// or CSV; bad files and unknown metrics are located errors (exit 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;
using testing_support::run_cli_captured;

// Two hand-written results: `base` (one run) and `fast` (two runs), metrics chosen so every ratio
// is exact.
class CompareCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("moesim-compare-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                       "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir / "base");
    fs::create_directories(dir / "fast");
    std::ofstream(dir / "base" / "result.json")
        << R"({"runs": [{"policy": "static-ep", "label": "ep", "predictor": "none", "predictor_label": "none",
               "metrics": {"makespan_ms": 8.0, "load": {"gpu_max_over_mean": 2.0, "skewness": 3.0},
                           "bytes": {"inter_node": 0}, "per_batch": [{"x": 1}]}}]})";
    std::ofstream(dir / "fast" / "result.json")
        << R"({"runs": [{"policy": "eplb", "label": "eplb", "predictor": "none", "predictor_label": "none",
                         "metrics": {"makespan_ms": 4.0, "load": {"gpu_max_over_mean": 1.5, "skewness": 3.0},
                                     "bytes": {"inter_node": 0}}},
                        {"policy": "harmoeny", "label": "h", "predictor": "oracle", "predictor_label": "oracle",
                         "metrics": {"makespan_ms": 2.0, "load": {"gpu_max_over_mean": 1.0, "skewness": 3.0}}}]})";
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

TEST_F(CompareCli, TableListsRunsSideBySideWithRatiosToTheFirst) {
  const auto r = run_cli_captured({"compare", (dir / "base").string(), (dir / "fast" / "result.json").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("[1] base/ep\n[2] fast/eplb\n[3] fast/h/oracle\n"), std::string::npos) << r.out;
  // Default metrics present in some run, in the default order; bytes.inter_node is missing in run 3.
  EXPECT_NE(r.out.find("metric                  [1]           [2]         [3]\n"
                       "makespan_ms               8    4 (0.500x)  2 (0.250x)\n"
                       "load.gpu_max_over_mean    2  1.5 (0.750x)  1 (0.500x)\n"
                       "bytes.inter_node          0             0           -\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("ttft_ms"), std::string::npos);       // in no run
  EXPECT_EQ(r.out.find("load.skewness"), std::string::npos);  // not a default
}

TEST_F(CompareCli, CsvHasARowPerRunWithEachMetricAndItsRatio) {
  const auto r = run_cli_captured({"compare", (dir / "base").string(), (dir / "fast").string(), "--csv", "--metric",
                                   "load.skewness", "--metric", "makespan_ms"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "result,policy,label,predictor,predictor_label,load.skewness,load.skewness.vs_first,makespan_ms,makespan_ms."
            "vs_first\n"
            "base,static-ep,ep,none,none,3.0,1.000,8.0,1.000\n"
            "fast,eplb,eplb,none,none,3.0,1.000,4.0,0.500\n"
            "fast,harmoeny,h,oracle,oracle,3.0,1.000,2.0,0.250\n");
}

TEST_F(CompareCli, UnknownMetricsGroupsAndBadFilesAreLocatedErrors) {
  auto r = run_cli_captured({"compare", (dir / "base").string(), "--metric", "makespan"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--metric makespan: error: no run has metric 'makespan'; metrics: bytes.inter_node, "
                       "load.gpu_max_over_mean, load.skewness, makespan_ms"),
            std::string::npos)
      << r.err;
  r = run_cli_captured({"compare", (dir / "base").string(), "--metric", "load"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'load' is a group of metrics; choose one of: load.gpu_max_over_mean, load.skewness"),
            std::string::npos)
      << r.err;
  r = run_cli_captured({"compare", (dir / "base").string(), "--metric", "per_batch"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("an array: not compared"), std::string::npos) << r.err;

  std::ofstream(dir / "broken.json") << "{\"runs\": [\n  {\"metrics\": }]}";
  r = run_cli_captured({"compare", (dir / "broken.json").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("broken.json:2:15: error: not JSON"), std::string::npos) << r.err;
  std::ofstream(dir / "other.json") << "{\"name\": 1}";
  r = run_cli_captured({"compare", (dir / "other.json").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("other.json:1:1: error: not a moesim result"), std::string::npos) << r.err;
  r = run_cli_captured({"compare", (dir / "missing.json").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.json: error: cannot read file"), std::string::npos) << r.err;
  fs::create_directories(dir / "empty");
  r = run_cli_captured({"compare", (dir / "empty").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("result.json: error: cannot read file"), std::string::npos) << r.err;
}

TEST(CompareCliRun, ComparesWhatMoesimRunWrote) {
  const fs::path dir = fs::temp_directory_path() / ("moesim-compare-run-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "s.yaml") << "name: s\nmodel: {preset: switch-base-8, layers: 2}\nhardware: hgx-a100-4gpu-nvlink\n"
                                   "workload: {batch_size: 1, seq_len: 32, batches: 1}\npolicy: [static-ep]\n";
  for (const char* out : {"a", "b"})
    ASSERT_EQ(run_cli_captured({"run", (dir / "s.yaml").string(), "-q", "--out", (dir / out).string(), "--set",
                                std::string("workload.seq_len=") + (out[0] == 'a' ? "32" : "64")})
                  .code,
              0);
  const auto r = run_cli_captured({"compare", (dir / "a").string(), (dir / "b").string(), "--csv", "--metric", "tokens"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("a,static-ep,static-ep,none,none,32,1.000\nb,static-ep,static-ep,none,none,64,2.000\n"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace moesim
