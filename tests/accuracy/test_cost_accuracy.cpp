// How far the uncalibrated cost models are from real A100 measurements (tests/data/a100/, copied
// from ../shared/data/measured/a100 with provenance). Prints MAPE and max error per op class; the
// bounds are loose on purpose (these are datasheet defaults, not fits) but can fail if a change
// breaks the models. docs/validation.md records the printed figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "hardware/collectives.hpp"
#include "hardware/cost_model.hpp"

namespace moesim {
namespace {

std::vector<std::vector<std::string>> read_csv(const std::string& name) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  std::ifstream in(std::string(root ? root : ".") + "/tests/data/a100/" + name);
  EXPECT_TRUE(in) << name;
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    rows.push_back(cells);
  }
  return rows;
}

struct ErrorStats {
  double sum = 0.0, max = 0.0;
  int n = 0;
  void add(double predicted, double measured) {
    const double e = std::fabs(predicted - measured) / measured;
    sum += e;
    max = std::max(max, e);
    ++n;
  }
  double mape() const { return n ? 100.0 * sum / n : 0.0; }
  void print(const std::string& what) const {
    std::printf("accuracy %-44s n=%5d  MAPE %6.1f%%  max %7.1f%%\n", what.c_str(), n, mape(), 100.0 * max);
  }
  /// Prints the class with issue 16's target beside it, and checks the error against `bound`:
  /// the target where it is met, else today's value (rounded up), so a rise fails the test.
  void check(const std::string& what, double target, double bound) const {
    const double m = mape();
    char verdict[64];
    if (m <= target) std::snprintf(verdict, sizeof verdict, "met");
    else std::snprintf(verdict, sizeof verdict, "not met, %.1f points over", m - target);
    std::printf("accuracy %-44s n=%5d  MAPE %6.1f%%  max %7.1f%%  target <= %4.1f%%: %s\n", what.c_str(), n, m,
                100.0 * max, target, verdict);
    EXPECT_LE(m, bound) << what;
  }
};

const GpuSpec& a100() { return gpu_presets().get("A100-SXM4-80GB").value; }

}  // namespace

TEST(CostAccuracy, GemmAgainstA100Kernels) {
  const ComputeCostModel model(a100());
  ErrorStats mlp, bmm, large;
  for (const auto& r : read_csv("gemm_llama2_70b_mlp.csv")) {
    const Op op = make_gemm("g", std::stoll(r[1]), std::stoll(r[2]), std::stoll(r[3]), DType::kFp16);
    const double measured = std::stod(r[4]) * 1e-3;
    mlp.add(model.kernel_seconds(op), measured);
    if (op.m >= 512) large.add(model.kernel_seconds(op), measured);
  }
  for (const auto& r : read_csv("gemm_llmcompass_bmm.csv")) {
    const Op op = make_gemm("g", std::stoll(r[0]), std::stoll(r[1]), std::stoll(r[2]), DType::kFp16);
    bmm.add(model.kernel_seconds(op), std::stod(r[3]) * 1e-3);
  }
  // Targets of issue 16 (uncalibrated presets): GEMM <= 8% on the MLP shapes, <= 15% on the
  // LLMCompass sweep. Bounds: the target where met (MLP 8.0%, M >= 512 4.5% with wave
  // quantisation), else today's value rounded up (LLMCompass 26.2%; README: why).
  mlp.check("gemm: Llama-2-70B MLP up/down, M 1-4096", 8.0, 8.0);
  large.check("gemm: Llama-2-70B MLP, M >= 512", 8.0, 8.0);
  bmm.check("gemm: LLMCompass matmul sweep", 15.0, 27.0);
  EXPECT_GT(mlp.n, 1000);
}

ClusterSpec with_model(const char* preset, const char* collective_model) {
  ClusterSpec s = cluster_presets().get(preset).value;
  s.collective_model = collective_model;
  return s;
}

/// The vidur DGX A100 classes priced by one pair of clusters (one node, two nodes).
struct NcclClasses {
  ErrorStats ar_intra, ar_big, ar_inter, sr_intra, sr_inter;
  NcclClasses(const Cluster& dgx, const Cluster& two) {
    for (const auto& r : read_csv("nccl_all_reduce_a100_dgx.csv")) {
      const int n = std::stoi(r[0]), per_node = std::stoi(r[1]);
      const double bytes = std::stod(r[2]), measured = std::stod(r[3]) * 1e-3;
      if (n == per_node) {
        const double t = ticks_to_seconds(collective_time(dgx, CollectiveKind::kAllReduce, n, bytes));
        ar_intra.add(t, measured);
        if (bytes >= 8e6) ar_big.add(t, measured);
      } else if (n == 16 && per_node == 8) {
        ar_inter.add(ticks_to_seconds(collective_time(two, CollectiveKind::kAllReduce, 16, bytes)), measured);
      }
    }
    for (const auto& r : read_csv("nccl_send_recv_a100_dgx.csv")) {
      const int n = std::stoi(r[0]), per_node = std::stoi(r[1]);
      const double bytes = std::stod(r[2]), measured = std::stod(r[3]) * 1e-3;
      if (n != 2) continue;
      if (per_node == 2) sr_intra.add(ticks_to_seconds(collective_time(dgx, CollectiveKind::kSendRecv, 2, bytes)), measured);
      // GPU 0 to GPU 8: the first GPU of the second node.
      else sr_inter.add(ticks_to_seconds(collective_time(two, CollectiveKind::kSendRecv, 9, bytes)), measured);
    }
  }
};

// The bandwidth the measured inter-node send/recv reaches: its largest message over its time less
// NCCL's Simple send latency (8.4 + 14 us), the median over that size's rows.
double achieved_inter_node_GBps() {
  double largest = 0.0;
  std::vector<double> rates;
  for (const auto& r : read_csv("nccl_send_recv_a100_dgx.csv"))
    if (std::stoi(r[0]) == 2 && std::stoi(r[1]) == 1) largest = std::max(largest, std::stod(r[2]));
  for (const auto& r : read_csv("nccl_send_recv_a100_dgx.csv"))
    if (std::stoi(r[0]) == 2 && std::stoi(r[1]) == 1 && std::stod(r[2]) == largest)
      rates.push_back(largest / (std::stod(r[3]) * 1e-3 - 22.4e-6) / 1e9);
  std::sort(rates.begin(), rates.end());
  return rates.empty() ? 0.0 : rates[rates.size() / 2];
}

TEST(CostAccuracy, NcclAgainstDgxA100) {
  // Before (collective_model line-rate: rings at nominal link rates after a fixed 7 us launch) and
  // now (nccl: NCCL 2.19's algorithm/protocol choice, latencies and link rates), same rows.
  const NcclClasses old(Cluster(with_model("dgx-a100", "line-rate")), Cluster(with_model("2x-dgx-a100", "line-rate")));
  old.ar_intra.print("[line-rate] all-reduce intra-node (2/4/8 GPUs)");
  old.ar_big.print("[line-rate] all-reduce intra-node, >= 8 MB");
  old.ar_inter.print("[line-rate] all-reduce 2 nodes x 8 GPUs");
  old.sr_intra.print("[line-rate] send/recv intra-node");
  old.sr_inter.print("[line-rate] send/recv inter-node");
  const NcclClasses now(Cluster(with_model("dgx-a100", "nccl")), Cluster(with_model("2x-dgx-a100", "nccl")));
  // Targets of issue 16: <= 15% within a node, <= 20% across nodes. Bounds: the target where met,
  // else today's value rounded up (35.5, 32.7, 87.8, 64.8, 79.6; README: why they are not met).
  now.ar_intra.check("[nccl] all-reduce intra-node (2/4/8 GPUs), 2KB-64MB", 15.0, 36.0);
  now.ar_big.check("[nccl] all-reduce intra-node, >= 8 MB", 15.0, 33.0);
  now.sr_intra.check("[nccl] send/recv intra-node", 15.0, 15.0);
  now.ar_inter.check("[nccl] all-reduce 2 nodes x 8 GPUs (8x HDR datasheet)", 20.0, 88.0);
  now.sr_inter.check("[nccl] send/recv inter-node (8x HDR datasheet)", 20.0, 65.0);
  // The measured cluster's network is far slower than 8 HDR NICs with GPUDirect (24 GB/s each):
  // the same preset with its NICs at the rate the inter-node send/recv achieves. That rate comes
  // from those rows, so the send/recv class is not a prediction here; the all-reduce class is.
  const double achieved = achieved_inter_node_GBps();
  std::printf("accuracy achieved inter-node bandwidth (send/recv, largest size): %.2f GB/s\n", achieved);
  EXPECT_GT(achieved, 1.0);
  ClusterSpec slow = with_model("2x-dgx-a100", "nccl");
  slow.nic_bandwidth_Gbps = achieved * 8.0;
  const NcclClasses measured_net(Cluster(with_model("dgx-a100", "nccl")), Cluster(slow));
  measured_net.ar_inter.check("[nccl] all-reduce 2x8, NICs at achieved rate", 20.0, 80.0);
  measured_net.sr_inter.check("[nccl] send/recv inter, NICs at achieved rate", 20.0, 20.0);
  EXPECT_GT(now.ar_intra.n, 100);
}

TEST(CostAccuracy, AllReduceOn4xA100NvLink) {
  ErrorStats all, big, old_all, old_big;
  const Cluster c(with_model("hgx-a100-4gpu-nvlink", "nccl"));
  const Cluster line(with_model("hgx-a100-4gpu-nvlink", "line-rate"));
  for (const auto& r : read_csv("all_reduce_4xa100_nvlink3.csv")) {
    const double bytes = std::stod(r[0]), measured = std::stod(r[1]) * 1e-6;
    const double t = ticks_to_seconds(collective_time(c, CollectiveKind::kAllReduce, 4, bytes));
    const double t_old = ticks_to_seconds(collective_time(line, CollectiveKind::kAllReduce, 4, bytes));
    all.add(t, measured);
    old_all.add(t_old, measured);
    if (bytes >= 1e6) big.add(t, measured), old_big.add(t_old, measured);
  }
  old_all.print("[line-rate] all-reduce 4x A100 NVLink3, 8B-16GB");
  old_big.print("[line-rate] all-reduce 4x A100 NVLink3, >= 1 MB");
  // Target of issue 16: <= 15%. Bounds: today's 25.7% and 18.0%, rounded up.
  all.check("[nccl] all-reduce 4x A100 NVLink3, 8B-16GB", 15.0, 26.0);
  big.check("[nccl] all-reduce 4x A100 NVLink3, >= 1 MB", 15.0, 18.5);
}

}  // namespace moesim
