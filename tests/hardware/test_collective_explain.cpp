// `moesim cost --explain`: the explanation names the algorithm, channels, bottleneck link and
// efficiency the simulation uses, and its closed-form estimate equals the simulated time of a
// collective on an idle cluster (where nothing but the formula's own terms is at work).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hardware/collective_explain.hpp"
#include "hardware/cost_model.hpp"
#include "tests/support/run_cli.hpp"

namespace moesim {
namespace {

Cluster preset(const char* name) { return Cluster(cluster_presets().get(name).value); }
Cluster line_rate(const char* name) {
  ClusterSpec s = cluster_presets().get(name).value;
  s.collective_model = "line-rate";
  return Cluster(s);
}

TEST(CollectiveExplain, RingAllReduceOnNvSwitchIsBoundByTheGpuUplink) {
  const Cluster c = line_rate("dgx-a100");
  for (const double bytes : {1024.0, 64.0 * 1024 * 1024}) {
    const CollectiveExplanation e = explain_collective(c, CollectiveKind::kAllReduce, 8, bytes);
    EXPECT_EQ(e.algorithm, "ring");
    EXPECT_EQ(e.steps, 14);  // 2(n-1)
    EXPECT_DOUBLE_EQ(e.step_bytes, bytes / 8);
    EXPECT_FALSE(e.calibrated);
    EXPECT_DOUBLE_EQ(e.efficiency, 1.0);
    EXPECT_EQ(e.bottleneck_class, "nvlink");
    EXPECT_DOUBLE_EQ(e.bottleneck_Bps, 300e9);
    EXPECT_DOUBLE_EQ(e.launch_us, c.spec().collective_launch_us);
    EXPECT_DOUBLE_EQ(e.hop_latency_us, 2 * c.spec().nvlink_latency_us);  // GPU → NVSwitch → GPU
    // launch + 14 × (1.4 µs + bytes/8 / 300 GB/s), to the picosecond tick.
    EXPECT_NEAR(e.estimate_us, c.spec().collective_launch_us + 14 * (1.4 + bytes / 8 / 300e9 * 1e6), 1e-6);
    EXPECT_NEAR(e.simulated_us, e.estimate_us, 1e-3 * e.estimate_us) << bytes;
  }
}

TEST(CollectiveExplain, CrossNodeTrafficIsBoundByTheNic) {
  const Cluster c = line_rate("2x-dgx-a100");
  const CollectiveExplanation sr = explain_collective(c, CollectiveKind::kSendRecv, 16, 1e6);
  EXPECT_EQ(sr.algorithm, "point-to-point");
  EXPECT_EQ(sr.bottleneck_class, "network");
  EXPECT_DOUBLE_EQ(sr.bottleneck_Bps, c.spec().nic_bandwidth_Gbps * 1e9 / 8);
  EXPECT_NEAR(sr.simulated_us, sr.estimate_us, 1e-6);
  const CollectiveExplanation a2a = explain_collective(c, CollectiveKind::kAllToAll, 16, 64e6);
  EXPECT_EQ(a2a.algorithm, "pairwise");
  EXPECT_EQ(a2a.bottleneck_class, "network");
  EXPECT_TRUE(a2a.channels.empty());
  EXPECT_NEAR(a2a.simulated_us, a2a.estimate_us, 1e-3 * a2a.estimate_us);
}

// Under the default nccl model the explanation is NCCL's choice, and its estimate is NCCL's
// formula, which the simulation reproduces on an idle cluster.
TEST(CollectiveExplain, NcclModelNamesTheChoiceAndEveryCandidate) {
  const Cluster c = preset("dgx-a100");
  const CollectiveExplanation e = explain_collective(c, CollectiveKind::kAllReduce, 8, 64e6);
  EXPECT_EQ(e.model, "nccl");
  EXPECT_EQ(e.algorithm, "ring");
  EXPECT_EQ(e.protocol, "Simple");
  EXPECT_EQ(e.candidates.size(), 9u);  // 3 algorithms x 3 protocols, NVLS off on Ampere
  EXPECT_EQ(e.topology.ring_channels, 12);
  EXPECT_DOUBLE_EQ(e.topology.ring_bw_GBps, 20.0);
  EXPECT_DOUBLE_EQ(e.bus_GBps, 240.0);
  EXPECT_DOUBLE_EQ(e.launch_us, 8.4 + 14 * 3.4);  // ring Simple: base + 2(n-1) NVLink steps
  EXPECT_DOUBLE_EQ(e.hop_latency_us, 0.0);
  EXPECT_NEAR(e.efficiency, 240.0 / 300.0, 1e-9);  // NCCL's 20 GB/s per 25 GB/s NVLink link
  EXPECT_EQ(e.bottleneck_class, "nvlink");
  EXPECT_NEAR(e.estimate_us, 8.4 + 14 * 3.4 + 64e6 / (1000.0 * 240.0 * 8 / 14), 1e-9);
  EXPECT_NEAR(e.simulated_us, e.estimate_us, 1e-5 * e.estimate_us);
  const CollectiveExplanation sr = explain_collective(preset("2x-dgx-a100"), CollectiveKind::kSendRecv, 16, 1e6);
  EXPECT_EQ(sr.protocol, "Simple");
  EXPECT_DOUBLE_EQ(sr.alg_GBps, 24.0);  // HDR NIC behind PCIe gen4: NCCL's 24 GB/s step
  EXPECT_NEAR(sr.efficiency, 24.0 / 25.0, 1e-9);
  EXPECT_NEAR(sr.simulated_us, sr.estimate_us, 1e-5 * sr.estimate_us);
}

TEST(CollectiveExplain, ACalibratedEfficiencyScalesTheWireBytes) {
  ClusterSpec spec = cluster_presets().get("dgx-a100").value;
  HardwareCalibration profile;
  profile.base = "dgx-a100";
  CollectiveCalibration cal;
  cal.launch_us = 20.0;
  cal.efficiency = {{1.0, 1e9}, {0.5, 0.5}};
  profile.collectives[{"all_reduce", CollectiveScope::kIntraNode}][8] = cal;
  apply_calibration(spec, profile);
  const Cluster c(spec);
  const CollectiveExplanation e = explain_collective(c, CollectiveKind::kAllReduce, 8, 8e6);
  EXPECT_TRUE(e.calibrated);
  EXPECT_DOUBLE_EQ(e.efficiency, 0.5);
  EXPECT_DOUBLE_EQ(e.launch_us, 20.0);
  EXPECT_NE(e.protocol.find("measured efficiency"), std::string::npos);
  EXPECT_DOUBLE_EQ(e.bottleneck_bytes, 2 * 8e6 / 8);  // bytes / η
  EXPECT_NEAR(e.simulated_us, e.estimate_us, 1e-3 * e.estimate_us);
}

TEST(GemmExplain, EfficiencyIsThePeakTimesTileUseTimesTheKLoop) {
  const ComputeCostModel model(gpu_presets().get("A100-SXM4-80GB").value);
  const GemmEfficiencyParts p = model.gemm_efficiency_parts(100, 4096, 4096);
  EXPECT_EQ(p.tile_m, 128);
  EXPECT_DOUBLE_EQ(p.use_m, 100.0 / 128);
  EXPECT_EQ(p.tile_n, 128);
  EXPECT_DOUBLE_EQ(p.use_n, 1.0);
  EXPECT_DOUBLE_EQ(p.k_loop, 1.0);
  EXPECT_EQ(p.tiles, 32);  // 1 x 32 tiles, split 3 ways over k: 96 of the 108 SMs busy
  EXPECT_EQ(p.split_k, 3);
  EXPECT_DOUBLE_EQ(p.wave_use, 96.0 / 108);
  EXPECT_DOUBLE_EQ(p.efficiency, 0.8 * 100.0 / 128 * 96.0 / 108);
  EXPECT_DOUBLE_EQ(p.efficiency, model.gemm_efficiency(100, 4096, 4096));
  // A small m takes a 16-row tile; a short k loses to the main loop's fixed cost.
  const GemmEfficiencyParts small = model.gemm_efficiency_parts(1, 4096, 32);
  EXPECT_EQ(small.tile_m, 16);
  EXPECT_DOUBLE_EQ(small.use_m, 1.0 / 16);
  EXPECT_DOUBLE_EQ(small.k_loop, 1.5 * 32 / (32 + 64.0));  // k tile 32: halves at 2 x 32
}

TEST(CostExplainCli, PrintsTheAlgorithmBottleneckAndEstimate) {
  auto r = testing_support::run_cli_captured({"cost", "allreduce", "--hardware", "dgx-a100", "--gpus", "8", "--bytes", "1024",
                                              "--explain"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"model       nccl", "algorithm   ring, 14 steps of 128 bytes per GPU, flows over 1 ring",
                        "protocol    LL (NCCL 2.19's tuning", "channels    12 x 20 GB/s", "ring/LL: 15, 60,",
                        "nvls/Simple: off", "bottleneck  n0.gpu0->n0.nvswitch (nvlink, 300 GB/s)",
                        "launch      15 us (NCCL's latency, hops included)", "simulated 15.0299 us"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  r = testing_support::run_cli_captured({"cost", "gemm", "--gpu", "A100-SXM4-80GB", "--m", "1", "--n", "4096", "--k", "4096",
                                         "--explain", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["explain"]["bound"], "memory");  // one row streams the whole weight matrix
  EXPECT_EQ(j["explain"]["tile_m"], 16);
  EXPECT_DOUBLE_EQ(j["explain"]["memory_us"].get<double>(), j["kernel_us"].get<double>());
}

}  // namespace
}  // namespace moesim
