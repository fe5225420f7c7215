// Roofline compute model and collectives as flows: closed-form answers.
#include <gtest/gtest.h>

#include "hardware/collectives.hpp"
#include "hardware/cost_model.hpp"

namespace moesim {
namespace {
const GpuSpec& gpu(const char* name) { return gpu_presets().get(name).value; }
}  // namespace

TEST(ComputeCostModel, LargeGemmIsComputeBound) {
  const ComputeCostModel m(gpu("A100-SXM4-80GB"));
  const Op op = make_gemm("g", 8192, 8192, 8192, DType::kBf16);
  // Tile-aligned, long k-loop: the peak efficiency, less the last wave's idle SMs (64 x 64 tiles
  // over 108 SMs: 38 waves, the last with 100 of 108 busy).
  const double eff = m.efficiency().gemm_peak * 4096.0 / (38 * 108);
  EXPECT_DOUBLE_EQ(m.gemm_efficiency(8192, 8192, 8192), eff);
  EXPECT_DOUBLE_EQ(m.kernel_seconds(op), op.flops / (312e12 * eff));
  EXPECT_GT(op.flops / (312e12 * eff), op.bytes / (2039e9 * m.efficiency().memory));
}

TEST(ComputeCostModel, GemvIsMemoryBound) {
  const ComputeCostModel m(gpu("A100-SXM4-80GB"));
  const Op op = make_gemm("g", 1, 8192, 8192, DType::kBf16);
  EXPECT_DOUBLE_EQ(m.kernel_seconds(op), op.bytes / (2039e9 * m.efficiency().memory));
}

TEST(ComputeCostModel, FewTokenExpertsStreamWeightsHotExpertsCompute) {
  const ComputeCostModel m(gpu("A100-SXM4-80GB"));
  // Mixtral expert up-projection (K=4096, N=2*14336): 4 tokens are weight-bound, 8192 compute-bound.
  const Op cold = make_grouped_gemm("up", {4, 4}, 28672, 4096, DType::kBf16);
  EXPECT_DOUBLE_EQ(m.kernel_seconds(cold), cold.bytes / (2039e9 * m.efficiency().memory));
  const Op hot = make_grouped_gemm("up", {8192}, 28672, 4096, DType::kBf16);
  EXPECT_GT(m.kernel_seconds(hot), hot.bytes / (2039e9 * m.efficiency().memory));
  // Experts with no tokens read no weights.
  const Op with_empty = make_grouped_gemm("up", {4, 0, 4}, 28672, 4096, DType::kBf16);
  EXPECT_DOUBLE_EQ(m.kernel_seconds(with_empty), m.kernel_seconds(cold));
}

// Wave quantisation: a GEMM with one 128 x 128 tile more than the A100's 108 SMs takes two waves,
// twice the time of one exactly a wave wide.
TEST(ComputeCostModel, OneTileOverAFullWaveTakesTwoWaves) {
  const ComputeCostModel m(gpu("A100-SXM4-80GB"));
  const GemmEfficiencyParts wave = m.gemm_efficiency_parts(128, 108 * 128, 8192);
  EXPECT_EQ(wave.tiles, 108);
  EXPECT_EQ(wave.waves, 1);
  EXPECT_DOUBLE_EQ(wave.wave_use, 1.0);
  const GemmEfficiencyParts over = m.gemm_efficiency_parts(128, 109 * 128, 8192);
  EXPECT_EQ(over.tiles, 109);
  EXPECT_EQ(over.waves, 2);
  EXPECT_DOUBLE_EQ(over.wave_use, 109.0 / 216.0);
  GpuSpec fast_memory = gpu("A100-SXM4-80GB");
  fast_memory.hbm_bandwidth_Bps = 1e18;  // compute-bound, so the time is the waves'
  const ComputeCostModel c(fast_memory);
  const double t1 = c.kernel_seconds(make_gemm("g", 128, 108 * 128, 8192, DType::kBf16));
  const double t2 = c.kernel_seconds(make_gemm("g", 128, 109 * 128, 8192, DType::kBf16));
  EXPECT_NEAR(t2 / t1, 2.0, 1e-12);
  // Below one wave, split-K over k fills the SMs: 32 tiles x 3 slices = 96 of 108 busy.
  const GemmEfficiencyParts few = m.gemm_efficiency_parts(128, 32 * 128, 8192);
  EXPECT_EQ(few.split_k, 3);
  EXPECT_DOUBLE_EQ(few.wave_use, 96.0 / 108.0);
  // A short k cannot be split (fewer than four k tiles per slice): 32 of 108 SMs work.
  EXPECT_DOUBLE_EQ(m.gemm_efficiency_parts(128, 32 * 128, 128).wave_use, 32.0 / 108.0);
}

// An expert FFN's grouped GEMM is one launch: the groups' tiles share the waves. Two experts of
// 54 tiles each (k too short to split) fill one wave together; apart, each leaves half idle.
TEST(ComputeCostModel, GroupedGemmSharesWavesAcrossGroups) {
  GpuSpec g = gpu("A100-SXM4-80GB");
  g.hbm_bandwidth_Bps = 1e18;  // keep both compute-bound
  const ComputeCostModel m(g);
  const Op grouped = make_grouped_gemm("up", {6 * 128, 6 * 128}, 9 * 128, 128, DType::kBf16);
  const Op one = make_gemm("g", 6 * 128, 9 * 128, 128, DType::kBf16);
  EXPECT_EQ(m.gemm_efficiency_parts(6 * 128, 9 * 128, 128).tiles, 54);
  EXPECT_NEAR(m.kernel_seconds(grouped), m.kernel_seconds(one), 1e-15);  // twice the work, same time
  // fp8 on Hopper: twice the fp16 peak and a 64-deep k tile.
  const ComputeCostModel h100(gpu("H100-SXM-80GB"));
  EXPECT_EQ(h100.gemm_efficiency_parts(8192, 8192, 8192, 1, DType::kFp8).tile_k, 64);
  EXPECT_NEAR(h100.kernel_seconds(make_gemm("g", 8192, 8192, 8192, DType::kFp16)) /
                  h100.kernel_seconds(make_gemm("g", 8192, 8192, 8192, DType::kFp8)),
              1978.9 / 989.4, 1e-9);  // the datasheet peaks
}

TEST(ComputeCostModel, PartialTilesCostFullTiles) {
  const ComputeCostModel m(gpu("A100-SXM4-80GB"));
  EXPECT_LT(m.gemm_efficiency(129, 8192, 8192), m.gemm_efficiency(128, 8192, 8192));
  EXPECT_NEAR(m.gemm_efficiency(129, 8192, 8192) / m.gemm_efficiency(256, 8192, 8192), 129.0 / 256.0, 1e-12);
}

// compute_model flops-only (MoE-GPS §2, §5): time proportional to FLOPs at the peak efficiencies,
// so a weight-bound expert GEMM and a partial tile cost their FLOPs and no more.
TEST(ComputeCostModel, FlopsOnlyIsProportionalToWork) {
  ComputeEfficiency eff;
  eff.flops_only = true;
  const ComputeCostModel m(gpu("A100-SXM4-80GB"), eff);
  const ComputeCostModel roofline(gpu("A100-SXM4-80GB"));
  const Op cold = make_grouped_gemm("up", {4, 4}, 28672, 4096, DType::kBf16);
  EXPECT_DOUBLE_EQ(m.kernel_seconds(cold), cold.flops / (312e12 * eff.gemm_peak));
  EXPECT_LT(m.kernel_seconds(cold), roofline.kernel_seconds(cold) / 10);  // weight-bound: ~36x
  const Op a = make_gemm("g", 65, 8192, 8192, DType::kBf16), b = make_gemm("g", 130, 8192, 8192, DType::kBf16);
  EXPECT_DOUBLE_EQ(m.kernel_seconds(b), 2 * m.kernel_seconds(a));
  ClusterSpec spec = cluster_presets().get("hgx-a100-4gpu-nvlink").value;
  EXPECT_FALSE(ComputeCostModel::for_cluster(spec).efficiency().flops_only);
  spec.compute_model = "flops-only";
  EXPECT_TRUE(ComputeCostModel::for_cluster(spec).efficiency().flops_only);
}

TEST(ComputeCostModel, LaunchOverheadAndDtypeFallback) {
  const ComputeCostModel v100(gpu("V100-SXM2-32GB"));
  const Op bf16 = make_gemm("g", 4096, 4096, 4096, DType::kBf16);
  const Op fp32 = make_gemm("g", 4096, 4096, 4096, DType::kFp32);
  // V100 has no bf16 tensor cores: bf16 runs at the fp32 rate (memory differs by dtype size).
  EXPECT_NEAR(v100.kernel_seconds(bf16), v100.kernel_seconds(fp32), 1e-12);
  EXPECT_EQ(v100.op_time(bf16), seconds_to_ticks(v100.kernel_seconds(bf16)) + us_to_ticks(v100.gpu().kernel_launch_us));
}

ClusterSpec line_rate(const char* preset) {
  ClusterSpec s = cluster_presets().get(preset).value;
  s.collective_model = "line-rate";
  return s;
}

TEST(Collectives, SendRecvIsLaunchPlusLatencyPlusBytesOverBandwidth) {
  const Cluster c(line_rate("dgx-a100"));
  const double bytes = 300e6;
  const Tick t = collective_time(c, CollectiveKind::kSendRecv, 2, bytes);
  const double expect = c.spec().collective_launch_us * 1e-6 + ticks_to_seconds(c.route_latency(0, 1)) +
                        bytes / (c.spec().nvlink_bandwidth_GBps * 1e9);
  EXPECT_NEAR(ticks_to_seconds(t), expect, 1e-9);
}

TEST(Collectives, RingAllReduceOnNvSwitch) {
  const Cluster c(line_rate("dgx-a100"));
  const double bytes = 1e9;
  const int n = 8;
  const Tick t = collective_time(c, CollectiveKind::kAllReduce, n, bytes);
  // 2(n-1) steps of bytes/n at the 300 GB/s GPU-to-switch rate, each step paying the route latency.
  const double expect = c.spec().collective_launch_us * 1e-6 +
                        2.0 * (n - 1) * (ticks_to_seconds(c.route_latency(0, 1)) + bytes / n / 300e9);
  EXPECT_NEAR(ticks_to_seconds(t), expect, expect * 1e-6);
}

TEST(Collectives, RingChannelsUseTheMeshLinks) {
  // On a 4-GPU NVLink mesh one ring uses a third of each GPU's links; the channels' balanced
  // shares load all 12 directed peer links evenly: 3 x 100 GB/s of bus bandwidth at line rate.
  const Cluster mesh(line_rate("hgx-a100-4gpu-nvlink"));
  const auto rings = ring_channels(mesh, {0, 1, 2, 3}, kMaxRingChannels);
  EXPECT_GE(rings.size(), 6u);
  double shares = 0.0;
  for (const auto& ch : rings) shares += ch.share;
  EXPECT_NEAR(shares, 1.0, 1e-12);
  const double bytes = 4e9;
  const double t = ticks_to_seconds(collective_time(mesh, CollectiveKind::kAllReduce, 4, bytes));
  EXPECT_NEAR(bytes / t * 1.5, 300e9, 0.02 * 300e9);
  // On DGX-1 the channels stay on NVLink: never slower than one PCIe gen3 link would allow.
  const Cluster dgx1(cluster_presets().get("dgx1-v100").value);
  for (const auto& ch : ring_channels(dgx1, {0, 1, 2, 3, 4, 5, 6, 7}, 8)) EXPECT_GE(ch.bottleneck_Bps, 25e9);
}

TEST(Collectives, AllToAllBottleneckedByNodeNics) {
  // 2 DGX A100 nodes: half of every GPU's all-to-all bytes cross 200 Gb/s NICs, not NVSwitch.
  const Cluster two(cluster_presets().get("2x-dgx-a100").value);
  const Cluster one(cluster_presets().get("dgx-a100").value);
  const double bytes = 256e6;
  const double inter = ticks_to_seconds(collective_time(two, CollectiveKind::kAllToAll, 16, bytes));
  const double intra = ticks_to_seconds(collective_time(one, CollectiveKind::kAllToAll, 8, bytes));
  EXPECT_GT(inter, 5.0 * intra);
  // Each GPU sends 8/16 of its bytes to the other node through its own 25 GB/s NIC.
  EXPECT_NEAR(inter, bytes / 2.0 / 25e9, 0.1 * bytes / 2.0 / 25e9);
}

}  // namespace moesim
