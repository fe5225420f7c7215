// DeepEP's measured tables (issue 47): bad tables are located errors; the fits of the closed
// form's fixed cost and rates meet the DeepEP target (15% median) on held-out token counts where
// the physics allows; the built-in profiles carry them and `moesim cost dispatch` says so.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "calibrate/deepep_tables.hpp"
#include "calibrate/kernel_tables.hpp"
#include "core/diagnostics.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/cluster.hpp"
#include "hardware/deepep.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/source_files.hpp"

namespace moesim::calibration {
namespace {

using testing_support::source_root;

std::vector<DeepEpTableRow> shipped_rows() {
  std::vector<DeepEpTableRow> all;
  for (const char* kind : {"deepep_ll", "deepep_normal"}) {
    std::ifstream in(source_root() + "/data/kernels/" + kind + ".csv");
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_EQ(kernel_table_kind(s.str()).value_or("?"), kind);
    auto rows = read_deepep_table(s.str(), kind, kind);
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

constexpr const char* kHeader =
    "system,version,op_name,node_num,kernel_source,hidden_size,num_token,num_topk,num_experts,combine_avg_t_us,"
    "combine_bandwidth_gbps,dispatch_avg_t_us,dispatch_bandwidth_gbps\n";

SourceLocation error_at(const std::string& text) {
  try {
    read_deepep_table(text, "d.csv", "deepep_ll");
  } catch (const InputError& e) {
    return e.diagnostics().front().where;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return {};
}

}  // namespace

TEST(DeepEpTables, BadTablesAreLocatedErrors) {
  EXPECT_EQ(error_at("system,node_num\nh100_sxm,1\n").line, 1);
  EXPECT_EQ(error_at(std::string(kHeader) + "h100_sxm,0.5,ll,1,deepep,7168,16,8,256,-3,1,10,1\n").column, 40);
  EXPECT_EQ(error_at(std::string(kHeader) + "h100_sxm,0.5,ll,0,deepep,7168,16,8,256,3,1,10,1\n").column, 17);
  EXPECT_EQ(error_at(std::string(kHeader) + "h100_sxm,0.5,ll,1,deepep,7168,16,8,256,3,1,10,1\n" +
                     "h100_sxm,0.5,ll,1,deepep,7168,16,8,256,3,1,11,1\n")
                .line,
            3);
  EXPECT_EQ(error_at(kHeader).line, 1);
}

TEST(DeepEpTables, FitsBeatTheClosedFormOnHeldOutTokenCounts) {
  const auto rows = shipped_rows();
  const std::vector<char> held = held_out_deepep_rows(rows);
  std::size_t n = 0;
  for (char h : held) n += h;
  EXPECT_GE(static_cast<double>(n) / static_cast<double>(rows.size()), 0.2);
  for (const auto& [system, preset] : {std::pair<const char*, const char*>{"h100_sxm", "dgx-h100"}, {"b200_sxm", "dgx-b200"}}) {
    std::vector<DeepEpFitScore> scores;
    const auto fits = fit_deepep_tables(rows, system, cluster_presets().get(preset).value, true, &scores);
    ASSERT_EQ(fits.size(), scores.size());
    EXPECT_GE(fits.size(), 4u) << system;  // LL and normal, dispatch and combine, within a node
    for (const auto& s : scores) {
      SCOPED_TRACE(std::string(system) + " " + s.kernel + " " + s.op + (s.internode ? " nodes" : " node"));
      EXPECT_LT(s.held_median, s.reference_held_median);
      EXPECT_LE(s.held_median, 30.0);  // the 15% target is met by most, not all (docs/validation.md)
    }
  }
}

TEST(DeepEpTables, BuiltinProfilesPriceDeepEpByTheFits) {
  const auto builtin = builtin_profile("h100_sxm");
  ASSERT_NE(builtin, nullptr);
  ASSERT_NE(builtin->deepep_fit("deepep-ll", "dispatch", false), nullptr);
  using testing_support::run_cli_captured;
  const std::vector<std::string> args = {"cost", "dispatch", "--kernel", "deepep-ll", "--hardware", "dgx-h100",
                                         "--tokens", "128", "--hidden", "7168", "--top-k", "8", "--experts", "256",
                                         "--json"};
  const auto fitted = run_cli_captured(args);
  ASSERT_EQ(fitted.code, 0) << fitted.err;
  auto none_args = args;
  none_args.insert(none_args.end(), {"--calibration", "none"});
  const auto none = run_cli_captured(none_args);
  ASSERT_EQ(none.code, 0) << none.err;
  const auto a = nlohmann::json::parse(fitted.out), b = nlohmann::json::parse(none.out);
  EXPECT_EQ(a["priced_by"], "fit");
  EXPECT_EQ(b["priced_by"], "model");
  // The table: 39.8 us for this call on H100 (deepep_ll.csv); the closed form says 19.8.
  EXPECT_NEAR(a["time_us"].get<double>(), 39.8, 39.8 * 0.15);
  EXPECT_LT(b["time_us"].get<double>(), a["time_us"].get<double>());
}

}  // namespace moesim::calibration
