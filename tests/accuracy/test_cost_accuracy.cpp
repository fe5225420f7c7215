// How far the uncalibrated cost models are from real A100 measurements (tests/data/a100/, copied
// from ../shared/data/measured/a100 with provenance). Prints MAPE and max error per op class; the
// bounds are loose on purpose (these are datasheet defaults, not fits) but can fail if a change
// breaks the models. The README records the printed figures.
#include <gtest/gtest.h>

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
  // LLMCompass sweep. Bounds: today's values (8.5%, 6.7%, 25.1%), rounded up.
  mlp.check("gemm: Llama-2-70B MLP up/down, M 1-4096", 8.0, 9.0);
  large.check("gemm: Llama-2-70B MLP, M >= 512", 8.0, 8.0);
  bmm.check("gemm: LLMCompass matmul sweep", 15.0, 26.0);
  EXPECT_GT(mlp.n, 1000);
}

TEST(CostAccuracy, NcclAgainstDgxA100) {
  const Cluster dgx(cluster_presets().get("dgx-a100").value);
  const Cluster two(cluster_presets().get("2x-dgx-a100").value);
  ErrorStats ar_intra, ar_inter, sr_intra, sr_inter, ar_big;
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
  // Targets of issue 16: <= 15% within a node, <= 20% across nodes. Bounds: today's values
  // (51.1%, 49.3%, 41.7%, 15.9%, 67.3%), rounded up; none is met yet (README: why).
  ar_intra.check("all-reduce intra-node (2/4/8 GPUs), 2KB-64MB", 15.0, 52.0);
  ar_big.check("all-reduce intra-node, >= 8 MB", 15.0, 50.0);
  ar_inter.check("all-reduce 2 nodes x 8 GPUs", 20.0, 42.0);
  sr_intra.check("send/recv intra-node", 15.0, 16.5);
  sr_inter.check("send/recv inter-node", 20.0, 68.0);
  EXPECT_GT(ar_intra.n, 100);
}

TEST(CostAccuracy, AllReduceOn4xA100NvLink) {
  const Cluster c(cluster_presets().get("hgx-a100-4gpu-nvlink").value);
  ErrorStats all, big;
  for (const auto& r : read_csv("all_reduce_4xa100_nvlink3.csv")) {
    const double bytes = std::stod(r[0]), measured = std::stod(r[1]) * 1e-6;
    const double t = ticks_to_seconds(collective_time(c, CollectiveKind::kAllReduce, 4, bytes));
    all.add(t, measured);
    if (bytes >= 1e6) big.add(t, measured);
  }
  // Target of issue 16: <= 15%. Bounds: today's 33.0% and 37.5%, rounded up.
  all.check("all-reduce 4x A100 NVLink3, 8B-16GB", 15.0, 34.0);
  big.check("all-reduce 4x A100 NVLink3, >= 1 MB", 15.0, 38.0);
}

}  // namespace moesim
