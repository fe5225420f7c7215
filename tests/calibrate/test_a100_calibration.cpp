// Calibration on real A100 data (../shared/data/measured/a100, imported as measured elsewhere):
// fit on 80%, report on the held-out 20%. Prints the table the README records.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "calibrate/profile.hpp"
#include "calibrate/report.hpp"

namespace moesim::calibration {
namespace {

std::string shared(const std::string& rel) {
  const char* d = std::getenv("MOESIM_SHARED_DATA");
  const std::string p = std::string(d ? d : "../shared/data") + "/measured/a100/" + rel;
  return std::filesystem::exists(p) ? p : std::string();
}

const nlohmann::json* row(const nlohmann::json& report, const std::string& cls) {
  for (const auto& c : report["classes"])
    if (c["class"] == cls) return &c;
  return nullptr;
}

}  // namespace

TEST(A100Calibration, HeldOutErrorDropsAfterFitting) {
  const std::vector<std::string> files = {shared("mlp_llama2_70b_a100.csv"), shared("matmul_a100_torch_bmm.csv"),
                                          shared("nccl_all_reduce_a100_dgx.csv"), shared("nccl_send_recv_a100_dgx.csv")};
  for (const auto& f : files)
    if (f.empty()) GTEST_SKIP() << "../shared/data/measured/a100 not present";
  Measurements m;
  for (const auto& f : files) m.append(load_measurements(f));
  const ClusterSpec base = cluster_presets().get("dgx-a100").value;
  ClusterSpec calibrated = base;
  apply_calibration(calibrated, fit_profile(m, base, "dgx-a100", 0.2));
  const auto report = calibration_report(calibrated, base, m);
  print_report(std::cout, report);

  const auto* gemm = row(report, "gemm fp16");
  ASSERT_NE(gemm, nullptr);
  EXPECT_GT((*gemm)["samples"].get<int>(), 100);
  EXPECT_LT((*gemm)["calibrated"]["mape_pct"].get<double>(), 5.0);
  EXPECT_LT((*gemm)["calibrated"]["mape_pct"].get<double>(), (*gemm)["uncalibrated"]["mape_pct"].get<double>());
  for (const char* cls : {"all_reduce intra 8", "all_reduce intra 4", "send_recv intra 2", "send_recv inter 2"}) {
    const auto* r = row(report, cls);
    ASSERT_NE(r, nullptr) << cls;
    EXPECT_LT((*r)["calibrated"]["mape_pct"].get<double>(), (*r)["uncalibrated"]["mape_pct"].get<double>()) << cls;
  }
}

// Calibration that transfers (issue 16): fit on one data set, predict another. Fit on the
// Llama-2-70B MLP GEMMs and the 8-GPU one-node all-reduce only; predict LLMCompass's GEMM sweep
// (other shapes) and the all-reduce at 2 and 4 GPUs and over 2 nodes (other GPU counts). Prints
// the table the README records; the bounds are today's measured errors, not the targets
// (GEMM <= 8%, collectives <= 10%), which are not met yet.
TEST(A100Calibration, ProfileFittedOnOneDataSetPredictsAnother) {
  const std::vector<std::string> files = {shared("mlp_llama2_70b_a100.csv"), shared("matmul_a100_torch_bmm.csv"),
                                          shared("nccl_all_reduce_a100_dgx.csv")};
  for (const auto& f : files)
    if (f.empty()) GTEST_SKIP() << "../shared/data/measured/a100 not present";
  Measurements train, test;
  train.gemm = load_measurements(files[0]).gemm;
  test.gemm = load_measurements(files[1]).gemm;
  for (const auto& c : load_measurements(files[2]).collectives) {
    const bool fit_on = c.op == "all_reduce" && c.gpus == 8 && c.nodes == 1;
    (fit_on ? train : test).collectives.push_back(c);
  }
  ASSERT_FALSE(test.collectives.empty());
  const ClusterSpec base = cluster_presets().get("dgx-a100").value;
  ClusterSpec calibrated = base;
  apply_calibration(calibrated, fit_profile(train, base, "dgx-a100", 0.0));
  const auto report = calibration_report(calibrated, base, test);
  std::cout << "transfer: fitted on the Llama-2-70B MLP GEMMs and the 8-GPU all-reduce; predicting:\n";
  print_report(std::cout, report);
  const auto* gemm = row(report, "gemm fp16");
  ASSERT_NE(gemm, nullptr);
  // Measured 29.4% (the preset: 25.1%): the MLP-fitted efficiency does not carry to LLMCompass's
  // shapes (their tiny GEMMs carry ~30 us of torch.bmm call overhead; the large ones run at 0.89
  // of peak). Target: 8%.
  EXPECT_LT((*gemm)["calibrated"]["mape_pct"].get<double>(), 35.0);
  // Measured 13.9% (2 GPUs) and 11.6% (4 GPUs) from the 8-GPU curve, against the preset's 57.8% and
  // 50.0%. Target: 10%.
  for (const char* cls : {"all_reduce intra 2", "all_reduce intra 4"}) {
    const auto* r = row(report, cls);
    ASSERT_NE(r, nullptr) << cls;
    EXPECT_LT((*r)["calibrated"]["mape_pct"].get<double>(), 15.0) << cls;
    EXPECT_LT((*r)["calibrated"]["mape_pct"].get<double>(), (*r)["uncalibrated"]["mape_pct"].get<double>()) << cls;
  }
}

}  // namespace moesim::calibration
