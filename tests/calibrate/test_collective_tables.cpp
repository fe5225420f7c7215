// The collectors' NCCL table (issue 47): bad tables are located errors; the rows of one GPU
// become collective samples; the calibrated collectives meet the 10% target on held-out message
// sizes; the built-in profiles carry the curves and price a scenario's all-reduce by them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "calibrate/collective_tables.hpp"
#include "calibrate/kernel_tables.hpp"
#include "core/diagnostics.hpp"
#include "tests/support/source_files.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/cluster.hpp"
#include "hardware/collectives.hpp"
#include "sim/tick.hpp"

namespace moesim::calibration {
namespace {

using testing_support::source_root;

std::string shipped() {
  std::ifstream in(source_root() + "/data/kernels/nccl.csv");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr const char* kHeader =
    "system,nccl_version,op_name,nccl_dtype,num_gpus,message_elems,message_bytes,latency_ms,algbw_GBps,busbw_GBps\n";

SourceLocation error_at(const std::string& text) {
  try {
    read_nccl_table(text, "n.csv", "h100_sxm");
  } catch (const InputError& e) {
    return e.diagnostics().front().where;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return {};
}

}  // namespace

TEST(CollectiveTables, BadTablesAreLocatedErrors) {
  EXPECT_EQ(error_at("system,op_name\nh100_sxm,all_reduce\n").line, 1);
  EXPECT_EQ(error_at(std::string(kHeader) + "h100_sxm,2.23,broadcast,half,8,1024,2048,0.01,1,1\n").column, 15);
  EXPECT_EQ(error_at(std::string(kHeader) + "h100_sxm,2.23,all_reduce,half,8,1024,2048,-1,1,1\n").column, 43);
  EXPECT_EQ(error_at(std::string(kHeader) + "h100_sxm,2.23,all_reduce,half,0,1024,2048,0.01,1,1\n").column, 31);
  EXPECT_EQ(error_at(kHeader).line, 1);
  // The same size twice is two runs of nccl-tests (the shipped table holds such repeats), both kept;
  // only the newest NCCL version's rows are.
  const Measurements m = read_nccl_table(std::string(kHeader) + "h100_sxm,2.23,all_reduce,half,8,1024,2048,0.01,1,1\n" +
                                             "h100_sxm,2.23,all_reduce,half,8,1024,2048,0.02,1,1\n" +
                                             "h100_sxm,2.9,all_reduce,half,8,1024,2048,0.05,1,1\n",
                                         "n.csv", "h100_sxm");
  ASSERT_EQ(m.collectives.size(), 2u);
  EXPECT_EQ(m.collectives[1].time_us, 20.0);
}

TEST(CollectiveTables, KeepsOneGpusSixteenBitRowsOfMoesimsCollectives) {
  const std::string text = shipped();
  EXPECT_EQ(kernel_table_kind(text).value_or("?"), "nccl");
  const Measurements h100 = read_nccl_table(text, "nccl.csv", "h100_sxm");
  ASSERT_FALSE(h100.collectives.empty());
  std::set<std::string> ops;
  for (const auto& c : h100.collectives) {
    ops.insert(c.op);
    EXPECT_EQ(c.nodes, 1);
    EXPECT_GT(c.time_us, 0.0);
  }
  EXPECT_EQ(ops, (std::set<std::string>{"all_gather", "all_reduce", "all_to_all"}));
  EXPECT_NE(read_nccl_table(text, "nccl.csv", "b200_sxm").collectives.size(), 0u);
}

// Every (op, GPU count) of both GPUs within the collectives target (10% median) on held-out
// sizes, and no worse than NCCL's tuning model uncalibrated.
TEST(CollectiveTables, CalibratedCollectivesMeetTheirTargetOnHeldOutSizes) {
  const std::string text = shipped();
  for (const auto& [system, preset] : {std::pair<const char*, const char*>{"h100_sxm", "dgx-h100"}, {"b200_sxm", "dgx-b200"}}) {
    const ClusterSpec base = cluster_presets().get(preset).value;
    const auto scores = score_collective_fits(read_nccl_table(text, "nccl.csv", system), base, preset, 0.2);
    EXPECT_EQ(scores.size(), 9u) << system;  // three ops on 2, 4 and 8 GPUs
    int met = 0;
    for (const auto& s : scores) {
      SCOPED_TRACE(std::string(system) + " " + s.op + " x" + std::to_string(s.gpus));
      EXPECT_GE(s.held_rows * 5, s.train_rows) << "a fifth of the sizes held out";
      met += s.held_median <= 10.0;
      // The misses (docs/validation.md) sit where NCCL switches protocol between held-out sizes.
      EXPECT_LE(s.held_median, 20.0);
      EXPECT_LE(s.held_median, s.reference_held_median + 1.0);
    }
    EXPECT_GE(met, 7) << system;
  }
}

TEST(CollectiveTables, BuiltinProfilesPriceCollectivesByTheMeasuredCurves) {
  const auto builtin = builtin_profile("b200_sxm");
  ASSERT_NE(builtin, nullptr);
  ASSERT_NE(builtin->collective("all_reduce", CollectiveScope::kIntraNode, 8), nullptr);
  ClusterSpec measured = cluster_presets().get("dgx-b200").value, datasheet = measured;
  apply_calibration_choice(measured, "builtin");
  apply_calibration_choice(datasheet, "none");
  const Cluster a(measured), b(datasheet);
  // 64 MiB over 8 B200s: the measured NCCL is slower than the tuning model's NVLink-5 estimate.
  const double bytes = 64.0 * (1 << 20);
  EXPECT_GT(ticks_to_us(collective_time(a, CollectiveKind::kAllReduce, 8, bytes)),
            ticks_to_us(collective_time(b, CollectiveKind::kAllReduce, 8, bytes)));
}

// The engines' custom all-reduce: each engine's newest kernel, within 10% on held-out sizes; a
// serving cluster's small intra-node all-reduce is priced by it, several times under NCCL's.
TEST(CollectiveTables, CustomAllReducesArePricedPerEngine) {
  std::ifstream in(source_root() + "/data/kernels/custom_allreduce.csv");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(kernel_table_kind(text.str()).value_or("?"), "custom_allreduce");
  const auto engines = read_custom_allreduce_table(text.str(), "custom_allreduce.csv", "h100_sxm");
  EXPECT_EQ(engines.size(), 3u);  // trtllm, sglang, vllm
  const ClusterSpec base = cluster_presets().get("dgx-h100").value;
  for (const auto& [engine, m] : engines) {
    for (const auto& s : score_collective_fits(m, base, "dgx-h100", 0.2, engine)) {
      SCOPED_TRACE(engine + " x" + std::to_string(s.gpus));
      EXPECT_LE(s.held_median, 10.0);
    }
  }
  ClusterSpec serving = cluster_presets().get("dgx-h100").value;
  apply_calibration_choice(serving, "builtin");
  ASSERT_NE(serving.calibration->collective(custom_all_reduce_name("vllm"), CollectiveScope::kIntraNode, 8), nullptr);
  ClusterSpec nccl = serving;
  serving.custom_all_reduce = true;
  serving.kernel_engine = "vllm";
  const double bytes = 64 * 7168 * 2;  // a decode step's hidden states, 64 sequences
  const double custom_us = ticks_to_us(collective_time(Cluster(serving), CollectiveKind::kAllReduce, 8, bytes));
  const double nccl_us = ticks_to_us(collective_time(Cluster(nccl), CollectiveKind::kAllReduce, 8, bytes));
  EXPECT_LT(custom_us * 1.5, nccl_us);
}

}  // namespace moesim::calibration
