// Kernel tables (issue 47): bad tables are located errors; the GEMM fits meet their targets on
// their own rows and on held-out shapes; the fitted formula obeys the physics it claims (K
// doubles the plateau time, bandwidth halves a streaming GEMM, skew never makes a grouped GEMM
// cheaper); the compiled-in profiles are a fit of the carried table, not a copy gone stale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>

#include "calibrate/kernel_tables.hpp"
#include "core/diagnostics.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"
#include "models/model_spec.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/source_files.hpp"

namespace moesim::calibration {
namespace {

using testing_support::source_root;

std::string read(const std::string& path) { return testing_support::read_text(path); }

const std::vector<GemmTableRow>& shipped_rows() {
  static const std::vector<GemmTableRow> rows = [] {
    const std::string path = source_root() + "/data/kernels/gemm.csv";
    return read_gemm_table(read(path), path);
  }();
  return rows;
}

GpuSpec gpu(const char* name) { return gpu_presets().get(name).value; }

constexpr const char* kHeader = "system,backend,version,kernel_source,gemm_dtype,m,n,k,latency_ms\n";

SourceLocation error_at(const std::string& text) {
  try {
    read_gemm_table(text, "t.csv");
  } catch (const InputError& e) {
    return e.diagnostics().front().where;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return {};
}

}  // namespace

TEST(KernelTables, RecognisesEveryShippedFormatByItsHeader) {
  const std::string dir = source_root() + "/../shared/data/kernels/";
  for (const char* kind : {"gemm", "moe", "generation_attention", "context_attention", "generation_mla", "context_mla",
                           "nccl", "custom_allreduce", "deepep_ll", "deepep_normal"}) {
    std::ifstream in(dir + kind + ".csv");
    if (!in) GTEST_SKIP() << "no shared/data/kernels beside the checkout";
    std::string head, first;
    std::getline(in, head);
    std::getline(in, first);
    EXPECT_EQ(kernel_table_kind(head + "\n" + first + "\n").value_or("?"), kind);
  }
  EXPECT_FALSE(kernel_table_kind("a,b,c\n1,2,3\n").has_value());
}

TEST(KernelTables, BadTablesAreLocatedErrors) {
  // A missing column: the header.
  EXPECT_EQ(error_at("system,backend,kernel_source,gemm_dtype,m,n,k\nh100_sxm,trtllm,x,fp8,1,2,3\n").line, 1);
  // Negative, zero and non-numeric latencies: the cell.
  for (const char* lat : {"-0.1", "0", "fast", "nan", "inf"}) {
    const SourceLocation at = error_at(std::string(kHeader) + "h100_sxm,trtllm,1,x,fp8,16,256,256," + lat + "\n");
    EXPECT_EQ(at.line, 2) << lat;
    EXPECT_EQ(at.column, 36) << lat;  // latency_ms is the ninth cell
  }
  EXPECT_EQ(error_at(std::string(kHeader) + "h100_sxm,trtllm,1,x,fp8,0,256,256,0.1\n").column, 25);
  EXPECT_EQ(error_at(std::string(kHeader) + "h100_sxm,trtllm,1,x,int3,1,256,256,0.1\n").column, 21);
  EXPECT_EQ(error_at(std::string(kHeader) + "h100_sxm,trtllm,1,x,fp8,1,256\n").line, 2);
  // The same shape twice with different times: the second.
  const std::string dup = std::string(kHeader) + "h100_sxm,trtllm,1,x,fp8,1,256,256,0.1\n" +
                          "h100_sxm,trtllm,1,x,fp8,1,256,512,0.1\n" + "h100_sxm,trtllm,1,x,fp8,1,256,256,0.2\n";
  EXPECT_EQ(error_at(dup).line, 4);
  // The same time twice is one measurement.
  EXPECT_EQ(read_gemm_table(std::string(kHeader) + "h100_sxm,trtllm,1,x,fp8,1,256,256,0.1\n" +
                                "h100_sxm,trtllm,1,x,fp8,1,256,256,0.1\n",
                            "t.csv")
                .size(),
            1u);
  EXPECT_EQ(error_at(kHeader).line, 1);  // no rows
}

TEST(KernelTables, HeldOutRuleTakesInteriorGridValues) {
  const std::vector<char> held = held_out_rows(shipped_rows());
  std::size_t n = 0;
  for (std::size_t i = 0; i < held.size(); ++i) {
    if (!held[i]) continue;
    ++n;
    const auto& r = shipped_rows()[i];
    const bool interior = [](std::int64_t v) { return v == 1024 || v == 4096 || v == 8192; }(r.n) ||
                          [](std::int64_t v) { return v == 1024 || v == 4096 || v == 8192; }(r.k);
    ASSERT_TRUE(interior) << r.n << " " << r.k;
  }
  const double fraction = static_cast<double>(n) / static_cast<double>(held.size());
  EXPECT_GE(fraction, 0.2);  // the floor
  EXPECT_NEAR(fraction, 1.0 - (10.0 / 13.0) * (10.0 / 13.0), 0.01);
}

// Every H100 and B200 family: the fit reproduces its training rows and its held-out shapes
// within the GEMM target (8% median), and beats the datasheet roofline on held-out shapes.
TEST(KernelTables, GemmFitsMeetTheirTargetOnHeldOutShapes) {
  for (const auto& [system, preset] : {std::pair<const char*, const char*>{"h100_sxm", "H100-SXM-80GB"},
                                       {"b200_sxm", "B200-180GB"}}) {
    std::vector<GemmFitScore> scores;
    const auto fits = fit_gemm_tables(shipped_rows(), system, gpu(preset), true, &scores);
    // vLLM's fp8-block tables are host-bound (kMaxGemmKernelOverheadUs): scored, refused.
    const auto refused = std::count_if(scores.begin(), scores.end(), [](const auto& s) { return !s.refused.empty(); });
    EXPECT_EQ(refused, 1) << system;
    ASSERT_EQ(fits.size() + static_cast<std::size_t>(refused), scores.size());
    EXPECT_GE(fits.size(), 8u) << system;  // bf16, fp8, fp8-block per engine (and nvfp4 on B200)
    for (const auto& s : scores) {
      SCOPED_TRACE(std::string(system) + " " + s.engine + " " + gemm_family_name(s.family));
      if (!s.refused.empty()) {
        EXPECT_EQ(s.engine, "vllm");
        EXPECT_EQ(s.family, GemmFamily::kFp8Block);
        continue;
      }
      EXPECT_LE(s.train_median, 8.0);
      EXPECT_LE(s.held_median, 8.0);
      EXPECT_LT(s.held_median, s.reference_held_median);
      EXPECT_GT(s.held_rows, s.train_rows / 2);
    }
  }
}

TEST(KernelTables, BuiltinProfilesAreAFitOfTheCarriedTable) {
  for (const char* system : {"h100_sxm", "b200_sxm"}) {
    const auto builtin = builtin_profile(system);
    ASSERT_NE(builtin, nullptr) << system;
    const auto fits = fit_gemm_tables(shipped_rows(), system, gpu(measured_gpu_preset(system).c_str()), false);
    ASSERT_EQ(fits.size(), builtin->gemm_fits.size()) << system << ": refit with `make profiles`";
    for (std::size_t i = 0; i < fits.size(); ++i) {
      const GemmKernelFit& a = fits[i];
      const GemmKernelFit& b = builtin->gemm_fits[i];
      SCOPED_TRACE(std::string(system) + " " + a.engine + " " + gemm_family_name(a.family));
      EXPECT_EQ(a.engine, b.engine);
      EXPECT_EQ(a.family, b.family);
      EXPECT_NEAR(a.compute_efficiency, b.compute_efficiency, 1e-6 * a.compute_efficiency);
      EXPECT_NEAR(a.overhead_us, b.overhead_us, 1e-6 * (1 + a.overhead_us));
      ASSERT_EQ(a.residual.value.size(), b.residual.value.size());
      for (std::size_t j = 0; j < a.residual.value.size(); ++j) ASSERT_NEAR(a.residual.value[j], b.residual.value[j], 1e-6);
    }
    // The YAML the binary was compiled from reads back to the same fits.
    const HardwareCalibration yaml = load_calibration(source_root() + "/hardware/profiles/" + system + ".yaml");
    ASSERT_EQ(yaml.gemm_fits.size(), builtin->gemm_fits.size());
    EXPECT_NEAR(yaml.gemm_fits[0].memory_efficiency, builtin->gemm_fits[0].memory_efficiency, 1e-9);
  }
}

// A table whose every shape takes the same ~150 us is host time, not a kernel's: the fit is
// refused, and the engine's GEMMs of that family are priced by another engine's kernel.
TEST(KernelTables, HostBoundTablesAreRefusedAndPricedByAnotherEngine) {
  std::vector<GemmTableRow> rows;
  for (const char* engine : {"sglang", "vllm"})
    for (std::int64_t m : {1, 4, 16, 64, 256, 1024, 4096})
      for (std::int64_t n : {1024, 2048, 4096, 8192})
        for (std::int64_t k : {1024, 4096, 7168}) {
          GemmTableRow r;
          r.system = "h100_sxm", r.engine = engine, r.kernel_source = engine, r.family = GemmFamily::kFp8Block;
          r.m = m, r.n = n, r.k = k;
          const double kernel_us = 5.0 + 2.0 * static_cast<double>(m * n * k) / 1.2e15 * 1e6 +
                                   static_cast<double>(n * k) / 3.35e12 * 1e6 / 0.7;
          r.time_us = std::string(engine) == "vllm" ? 150.0 + 0.01 * kernel_us : kernel_us;
          rows.push_back(r);
        }
  std::vector<GemmFitScore> scores;
  const auto fits = fit_gemm_tables(rows, "h100_sxm", gpu("H100-SXM-80GB"), false, &scores);
  ASSERT_EQ(scores.size(), 2u);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].engine, "sglang");
  EXPECT_TRUE(scores[0].refused.empty());
  EXPECT_NE(scores[1].refused.find("host time"), std::string::npos) << scores[1].refused;
  HardwareCalibration h;
  h.gemm_fits = fits;
  ASSERT_NE(h.gemm_fit("vllm", GemmFamily::kFp8Block), nullptr);
  EXPECT_EQ(h.gemm_fit("vllm", GemmFamily::kFp8Block)->engine, "sglang");
}

// The fitted formula, with no residual: laws of its physics.
TEST(KernelTables, FittedGemmObeysItsPhysics) {
  const auto builtin = builtin_profile("h100_sxm");
  ASSERT_NE(builtin, nullptr);
  ComputeCostModel h100(gpu("H100-SXM-80GB"), {}, builtin);
  const GemmKernelFit* fit = h100.gemm_fit(DType::kFp8);
  ASSERT_NE(fit, nullptr);
  // Twice the K on the compute plateau: about twice the time.
  const double t1 = h100.fitted_seconds(*fit, make_gemm("g", 8192, 8192, 4096, DType::kFp8), true);
  const double t2 = h100.fitted_seconds(*fit, make_gemm("g", 8192, 8192, 8192, DType::kFp8), true);
  EXPECT_NEAR(t2 / t1, 2.0, 0.15);
  // A streaming (m = 1) GEMM on a GPU with twice the bandwidth and the same compute: at most
  // half the memory time (the fixed overhead stays).
  GpuSpec wide = gpu("H100-SXM-80GB");
  wide.hbm_bandwidth_Bps *= 2.0;
  GemmKernelFit no_overhead = *fit;
  no_overhead.overhead_us = 0.0;
  no_overhead.quantises_activation = false;
  no_overhead.sm_bandwidth_GBps = 1e4;  // bandwidth-, not SM-limited
  const ComputeCostModel fast(wide, {}, builtin);
  const Op skinny = make_gemm("g", 1, 16384, 16384, DType::kFp8);
  EXPECT_NEAR(fast.fitted_seconds(no_overhead, skinny, true) / h100.fitted_seconds(no_overhead, skinny, true), 0.5, 0.02);
  // A skewed grouped GEMM costs at least the balanced one with the same tokens.
  const Op balanced = make_grouped_gemm("e", std::vector<std::int64_t>(8, 64), 4096, 7168, DType::kFp8);
  const Op skewed = make_grouped_gemm("e", {449, 9, 9, 9, 9, 9, 9, 9}, 4096, 7168, DType::kFp8);
  EXPECT_GE(h100.kernel_seconds(skewed), h100.kernel_seconds(balanced));
}

// The transfer rule: H200 is priced by H100's fits at its own bandwidth; an A100 by none.
TEST(KernelTables, SiblingsArePricedByTheirArchitecturesFits) {
  ClusterSpec h200 = cluster_presets().get("dgx-h200").value;
  apply_calibration_choice(h200, "builtin");
  ASSERT_NE(h200.calibration, nullptr);
  EXPECT_EQ(h200.calibration->gemm_fits.front().system, "h100_sxm");
  ClusterSpec h100 = cluster_presets().get("dgx-h100").value;
  apply_calibration_choice(h100, "builtin");
  const ComputeCostModel a = ComputeCostModel::for_cluster(h100), b = ComputeCostModel::for_cluster(h200);
  const Op big = make_gemm("g", 8192, 8192, 8192, DType::kFp8);
  EXPECT_NEAR(b.kernel_seconds(big) / a.kernel_seconds(big), 1.0, 0.05);  // same compute (the FP8 quantisation pass is faster)
  const Op skinny = make_gemm("g", 4, 16384, 16384, DType::kBf16);
  EXPECT_LT(b.kernel_seconds(skinny), a.kernel_seconds(skinny));  // 4.8 against 3.35 TB/s
  ClusterSpec a100 = cluster_presets().get("dgx-a100").value;
  apply_calibration_choice(a100, "builtin");
  EXPECT_EQ(a100.calibration, nullptr);
  apply_calibration_choice(h100, "none");
  EXPECT_EQ(h100.calibration, nullptr);
}

TEST(KernelTables, CostGemmAnswersEveryFlag) {
  using testing_support::run_cli_captured;
  const auto r = run_cli_captured({"cost", "gemm", "--gpu", "H100-SXM-80GB", "--m", "2048", "--n", "7168", "--k",
                                   "2048", "--dtype", "fp8-block", "--engine", "sglang", "--json", "--explain"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["priced_by"], "fit");
  EXPECT_EQ(j["explain"]["family"], "fp8-block");
  EXPECT_EQ(j["explain"]["engine"], "sglang");
  EXPECT_GT(j["time_us"].get<double>(), j["kernel_us"].get<double>());
  const auto none = run_cli_captured({"cost", "gemm", "--gpu", "H100-SXM-80GB", "--m", "2048", "--n", "7168", "--k",
                                      "2048", "--dtype", "fp8", "--calibration", "none", "--json"});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(nlohmann::json::parse(none.out)["priced_by"], "datasheet");
  const auto bad = run_cli_captured({"cost", "gemm", "--gpu", "H100-SXM-80GB", "--m", "1", "--n", "1", "--k", "1",
                                     "--engine", "tgi"});
  EXPECT_EQ(bad.code, 2);
}

// The fused MoE layer's loads: token copies conserved, none past the token count, the timed rank
// of a skewed routing the busiest (the kernel tables' collector times that rank).
TEST(KernelTables, MoeLoadsFollowTheCollectorsRules) {
  const auto sum = [](const std::vector<std::int64_t>& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{0}); };
  const auto balanced = moe_local_loads(1024, 8, 256, 8, 0.0);
  EXPECT_EQ(balanced.size(), 32u);
  EXPECT_EQ(sum(balanced), 1024 * 8 / 8);
  for (double alpha : {0.6, 1.2}) {
    const auto skewed = moe_local_loads(1024, 8, 256, 8, alpha);
    EXPECT_EQ(skewed.size(), 32u);
    EXPECT_GE(sum(skewed), sum(balanced)) << alpha;  // the busiest of 8 ranks has at least the mean
    for (auto l : skewed) EXPECT_LE(l, 1024);
    EXPECT_EQ(skewed, moe_local_loads(1024, 8, 256, 8, alpha));  // deterministic
  }
  // Every rank together holds every copy.
  EXPECT_EQ(sum(moe_local_loads(16, 8, 256, 1, 1.2)), 16 * 8);
  const auto r = testing_support::run_cli_captured({"cost", "moe", "--gpu", "B200-180GB", "--tokens", "256", "--hidden",
                                                    "7168", "--inter", "2048", "--top-k", "8", "--experts", "256",
                                                    "--ep", "8", "--dtype", "nvfp4", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["time_us"].get<double>(), 0.0);
  const auto bad = testing_support::run_cli_captured({"cost", "moe", "--gpu", "B200-180GB", "--tokens", "256", "--hidden",
                                                      "7168", "--inter", "2048", "--top-k", "8", "--experts", "256",
                                                      "--ep", "3"});
  EXPECT_EQ(bad.code, 2);
}

// DeepSeek-style FP8 checkpoints run the 128-block kernels: the scenario says so to the cost model.
TEST(KernelTables, BlockScaledCheckpointsRunBlockKernels) {
  ModelSpec v3 = model_presets().get("deepseek-v3").value;
  EXPECT_TRUE(v3.fp8_block_scales);
  ClusterSpec h100 = cluster_presets().get("dgx-h100").value;
  apply_calibration_choice(h100, "builtin");
  h100.fp8_block_scales = true;
  const ComputeCostModel block = ComputeCostModel::for_cluster(h100);
  ASSERT_NE(block.gemm_fit(DType::kFp8), nullptr);
  EXPECT_EQ(block.gemm_fit(DType::kFp8)->family, GemmFamily::kFp8Block);
  h100.fp8_block_scales = false;
  EXPECT_EQ(ComputeCostModel::for_cluster(h100).gemm_fit(DType::kFp8)->family, GemmFamily::kFp8);
}

}  // namespace moesim::calibration
