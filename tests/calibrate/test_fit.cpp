// The fitter recovers known parameters from synthetic measurements; profiles round-trip through
// YAML and change what scenarios and `moesim cost` predict, in the expected direction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "app/cli/cli.hpp"
#include "tests/support/run_cli.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "calibrate/fit.hpp"
#include "calibrate/profile.hpp"
#include "calibrate/report.hpp"
#include "hardware/collectives.hpp"
#include "hardware/cost_model.hpp"

namespace moesim::calibration {
namespace {

ClusterSpec preset(const char* name) { return cluster_presets().get(name).value; }

// A profile whose every collective runs at efficiency `eff` with launch `launch_us`.
HardwareCalibration uniform_collectives(double eff, double launch_us) {
  HardwareCalibration h;
  h.base = "dgx-a100";
  for (const char* op : {"all_reduce", "all_gather", "all_to_all", "send_recv"})
    for (int g : {2, 4, 8}) h.collectives[{op, CollectiveScope::kIntraNode}][g] = {launch_us, false, {{1.0}, {eff}}};
  return h;
}

}  // namespace

TEST(Fit, LeastSquaresRecoversALine) {
  std::vector<std::vector<double>> X;
  std::vector<double> y;
  for (int i = 1; i <= 10; ++i) {
    X.push_back({1.0, static_cast<double>(i)});
    y.push_back(3.0 + 0.5 * i);
  }
  const auto beta = least_squares(X, y, {});
  EXPECT_NEAR(beta[0], 3.0, 1e-9);
  EXPECT_NEAR(beta[1], 0.5, 1e-9);
  EXPECT_THROW(least_squares({{1.0, 2.0}}, {1.0}, {}), std::runtime_error);
}

TEST(Fit, HoldoutIsDeterministicAndInterior) {
  int held = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    if (is_held_out(i, 20, 0.2)) {
      ++held;
      EXPECT_NE(i, 0u);
      EXPECT_NE(i, 19u);
    }
  }
  EXPECT_EQ(held, 4);
  EXPECT_FALSE(is_held_out(1, 2, 0.2));
  EXPECT_FALSE(is_held_out(2, 20, 0.0));
}

TEST(Fit, RecoversDefaultCurveEfficienciesFromSyntheticGemms) {
  // Ground truth: the default curve with η_c = 0.6 and η_m = 0.7 on an A100.
  const ClusterSpec base = preset("dgx-a100");
  ComputeEfficiency truth;
  truth.gemm_peak = 0.6;
  truth.memory = 0.7;
  const ComputeCostModel model(base.gpu, truth);
  Measurements m;
  for (std::int64_t n : {1024, 4096, 14336})
    for (std::int64_t mm : {1, 4, 16, 64, 256, 1024, 2048, 4096, 8192})
      m.gemm.push_back({"bf16", mm, n, 4096, {}, model.kernel_seconds(make_gemm("g", mm, n, 4096, DType::kBf16)) * 1e6});
  const HardwareCalibration h = fit_profile(m, base, "dgx-a100", 0.2);
  ASSERT_TRUE(h.gemm_peak && h.memory_efficiency);
  EXPECT_NEAR(*h.gemm_peak, 0.6, 0.01);
  EXPECT_NEAR(*h.memory_efficiency, 0.7, 0.01);
  // The per-shape curves reproduce held-out points of the truth.
  ClusterSpec calibrated = base;
  apply_calibration(calibrated, h);
  const auto report = calibration_report(calibrated, base, m);
  ASSERT_EQ(report["classes"].size(), 1u);
  EXPECT_GT(report["classes"][0]["samples"].get<int>(), 0);
  EXPECT_LT(report["classes"][0]["calibrated"]["mape_pct"].get<double>(), 5.0);
}

TEST(Fit, RecoversCollectiveLaunchAndEfficiency) {
  ClusterSpec truth = preset("dgx-a100");
  apply_calibration(truth, uniform_collectives(0.75, 12.0));
  SamplePredictor gen(truth);
  Measurements m;
  for (double b = 1024; b <= 256e6; b *= 2) {
    CollectiveSample s{"all_reduce", 8, 1, b, 0.0};
    s.time_us = *gen.us(s);
    m.collectives.push_back(s);
  }
  const HardwareCalibration h = fit_profile(m, preset("dgx-a100"), "dgx-a100", 0.0);
  const CollectiveCalibration* c = h.collective("all_reduce", CollectiveScope::kIntraNode, 8);
  ASSERT_NE(c, nullptr);
  EXPECT_NEAR(c->launch_us, 12.0, 0.5);
  EXPECT_NEAR(c->efficiency.at(64e6), 0.75, 0.01);
  EXPECT_NEAR(c->efficiency.at(1e6), 0.75, 0.02);
}

TEST(Profile, YamlRoundTrip) {
  HardwareCalibration h = uniform_collectives(0.8, 9.0);
  h.device = "NVIDIA A100-SXM4-80GB";
  h.holdout = 0.2;
  h.gemm_peak = 0.7;
  h.gemm[{DType::kFp16, 4096, 4096}] = {{1.0, 64.0, 4096.0}, {0.01, 0.4, 0.8}};
  h.links["h2d_pinned"] = {8.0, 24.5};
  h.host_speed = 1.5;
  const HardwareCalibration back = HardwareCalibration::from_yaml(YAML::Load(YAML::Dump(h.to_yaml())));
  ASSERT_TRUE(back.host_speed);
  EXPECT_DOUBLE_EQ(*back.host_speed, 1.5);
  EXPECT_EQ(back.device, h.device);
  EXPECT_DOUBLE_EQ(*back.gemm_peak, 0.7);
  ASSERT_NE(back.gemm_curve(DType::kFp16, 4096, 4096), nullptr);
  EXPECT_DOUBLE_EQ(back.gemm_curve(DType::kFp16, 4096, 4096)->at(64.0), 0.4);
  EXPECT_DOUBLE_EQ(back.collective("send_recv", CollectiveScope::kIntraNode, 2)->launch_us, 9.0);
  EXPECT_DOUBLE_EQ(back.links.at("h2d_pinned").bandwidth_GBps, 24.5);
  EXPECT_THROW(HardwareCalibration::from_yaml(YAML::Load("format: other")), std::runtime_error);
}

TEST(Profile, CurveInterpolatesInLogSpaceAndClamps) {
  const EfficiencyCurve c{{10.0, 1000.0}, {0.2, 0.6}};
  EXPECT_DOUBLE_EQ(c.at(1.0), 0.2);
  EXPECT_DOUBLE_EQ(c.at(1e6), 0.6);
  EXPECT_NEAR(c.at(100.0), std::sqrt(0.2 * 0.6), 1e-12);  // halfway in log-log space
}

// Profile → YAML file → scenario `hardware.calibration` → the simulation and `moesim cost` use it,
// and a slower measured all-to-all makes the scenario's all-to-all slower.
TEST(Profile, CalibratedScenarioAndCostMoveInTheExpectedDirection) {
  const auto dir = std::filesystem::temp_directory_path() / "moesim-profile-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "slow.yaml") << YAML::Dump(uniform_collectives(0.4, 30.0).to_yaml());
  const std::string scenario =
      "name: cal\nmodel: {preset: mixtral-8x7b, layers: 2}\nhardware: {preset: dgx-a100, calibration: slow.yaml}\n"
      "workload: {batch_size: 8, seq_len: 256, routing: uniform}\n";
  const Scenario calibrated = load_scenario_text(scenario, (dir / "s.yaml").string(), {}, dir.string());
  ASSERT_TRUE(calibrated.hardware.calibration);
  const Scenario plain = load_scenario_text(scenario, "s.yaml", {"hardware.calibration=~"}, dir.string());
  const double a2a_cal = run_scenario(calibrated)["runs"][0]["metrics"]["alltoall_ms"].get<double>();
  const double a2a_plain = run_scenario(plain)["runs"][0]["metrics"]["alltoall_ms"].get<double>();
  EXPECT_GT(a2a_cal, 1.5 * a2a_plain);

  // A profile's efficiencies are fractions of line rate: compare with the line-rate model.
  ClusterSpec line_rate = preset("dgx-a100");
  line_rate.collective_model = "line-rate";
  const Cluster slow(calibrated.hardware), fast(line_rate);
  const double t_slow = ticks_to_us(collective_time(slow, CollectiveKind::kAllReduce, 8, 64e6));
  const double t_fast = ticks_to_us(collective_time(fast, CollectiveKind::kAllReduce, 8, 64e6));
  EXPECT_NEAR(t_slow / t_fast, 1.0 / 0.4, 0.1);

  const auto bad = [&] {
    return load_scenario_text("name: x\nmodel: mixtral-8x7b\nhardware: {preset: dgx-a100, calibration: nope.yaml}\n",
                              "s.yaml", {}, dir.string());
  };
  EXPECT_THROW(bad(), InputError);
  std::filesystem::remove_all(dir);
}

}  // namespace moesim::calibration

namespace moesim {

namespace {
int run(std::vector<std::string> args, std::string* out = nullptr) {
  const auto r = testing_support::run_cli_captured(std::move(args));
  if (out) *out = r.out;
  return r.code;
}
}  // namespace

TEST(CalibrateCli, HostLinkFitRecoversLatencyAndBandwidth) {
  calibration::Measurements m;
  for (double b = 4096; b <= 1e9; b *= 4) m.memcpy.push_back({"h2d_pinned", 0, 0, b, 10.0 + b / 20e3});  // 20 GB/s
  const auto h = calibration::fit_profile(m, cluster_presets().get("dgx-a100").value, "dgx-a100", 0.0);
  ASSERT_EQ(h.links.count("h2d_pinned"), 1u);
  EXPECT_NEAR(h.links.at("h2d_pinned").latency_us, 10.0, 0.01);
  EXPECT_NEAR(h.links.at("h2d_pinned").bandwidth_GBps, 20.0, 0.01);
  ClusterSpec spec = cluster_presets().get("dgx-a100").value;
  apply_calibration(spec, h);
  EXPECT_DOUBLE_EQ(spec.pcie_bandwidth_GBps, 20.0);
}

// `calibrate fit DIR/*` over a folder with a README, a licence and a subfolder: those are skipped,
// each named in a warning; a folder of nothing usable is exit 2.
TEST(CalibrateCli, FitSkipsFilesItDoesNotRecogniseNamingThem) {
  namespace fs = std::filesystem;
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  const std::string data = std::string(root ? root : ".") + "/tests/data/";
  const fs::path dir = fs::temp_directory_path() / "moesim-fit-skip";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "README.md") << "# measurements\n";
  std::ofstream(dir / "LICENSE") << "MIT\n";
  const auto profile = (dir / "p.yaml").string();
  auto r = testing_support::run_cli_captured({"calibrate", "fit", (dir / "README.md").string(), (dir / "LICENSE").string(),
                                              (dir / "sub").string(), data + "a100/all_reduce_4xa100_nvlink3.csv",
                                              "--base", "hgx-a100-4gpu-nvlink", "--out", profile});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find((dir / "README.md").string() + ": warning: skipped: not a measurement format moesim reads"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find((dir / "LICENSE").string() + ": warning: skipped"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((dir / "sub").string() + ": warning: skipped: a directory"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("from 0 GEMM, 32 collective"), std::string::npos) << r.out;
  r = testing_support::run_cli_captured({"calibrate", "fit", (dir / "README.md").string(), "--base", "dgx-a100", "--out", profile});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("none of the 1 file(s) is a measurement file moesim reads"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// fit → profile YAML → report → `moesim cost --calibration` reflects the measured all-reduce.
TEST(CalibrateCli, FitReportAndCostRoundTrip) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  const std::string data = std::string(root ? root : ".") + "/tests/data/calibration/";
  const auto profile = (std::filesystem::temp_directory_path() / "moesim-cli-profile.yaml").string();
  ASSERT_EQ(run({"calibrate", "fit", data + "nccl_tests_all_reduce_8xa100.txt", data + "vidur_mlp_excerpt.csv",
                 "--base", "dgx-a100", "--out", profile, "--holdout", "0"}),
            0);
  std::string out;
  ASSERT_EQ(run({"calibrate", "report", profile, data + "nccl_tests_all_reduce_8xa100.txt", "--json"}, &out), 0);
  const auto report = nlohmann::json::parse(out);
  ASSERT_FALSE(report["classes"].empty());
  for (const auto& c : report["classes"])
    EXPECT_LT(c["calibrated"]["mape_pct"].get<double>(), c["uncalibrated"]["mape_pct"].get<double>()) << c["class"];

  ASSERT_EQ(run({"cost", "allreduce", "--hardware", "dgx-a100", "--gpus", "8", "--bytes", "33554432", "--json"}, &out), 0);
  const double plain = nlohmann::json::parse(out)["time_us"].get<double>();
  ASSERT_EQ(run({"cost", "allreduce", "--hardware", "dgx-a100", "--gpus", "8", "--bytes", "33554432", "--json",
                 "--calibration", profile},
                &out),
            0);
  const double calibrated = nlohmann::json::parse(out)["time_us"].get<double>();
  EXPECT_NE(plain, calibrated);
  EXPECT_EQ(run({"cost", "allreduce", "--hardware", "dgx-a100", "--gpus", "8", "--bytes", "1", "--calibration",
                 "/nonexistent.yaml"}),
            2);
  EXPECT_EQ(run({"calibrate", "fit", "/nonexistent.csv", "--base", "dgx-a100", "--out", profile}), 2);
  std::filesystem::remove(profile);
}

}  // namespace moesim
