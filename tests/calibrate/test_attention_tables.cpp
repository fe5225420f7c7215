// Attention kernel tables (issue 47): bad tables are located errors; each row becomes the
// attention core op serving prices; the attention and MLA fits meet their target on held-out
// shapes; the fitted formula obeys its physics (bandwidth halves long decode attention); the
// compiled-in profiles carry the fits; `moesim cost attention|mla` answers every flag.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "calibrate/attention_tables.hpp"
#include "calibrate/kernel_tables.hpp"
#include "core/diagnostics.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/source_files.hpp"

namespace moesim::calibration {
namespace {

using testing_support::source_root;

std::string read(const std::string& path) { return testing_support::read_text(path); }

const std::vector<AttentionTableRow>& shipped_rows() {
  static const std::vector<AttentionTableRow> rows = [] {
    std::vector<AttentionTableRow> all;
    for (const char* kind : {"generation_attention", "context_attention", "generation_mla", "context_mla"}) {
      const std::string path = source_root() + "/data/kernels/" + kind + ".csv";
      const std::string text = read(path);
      EXPECT_EQ(kernel_table_kind(text).value_or("?"), kind);
      auto rows = read_attention_table(text, path, kind);
      all.insert(all.end(), rows.begin(), rows.end());
    }
    return all;
  }();
  return rows;
}

GpuSpec gpu(const char* name) { return gpu_presets().get(name).value; }

constexpr const char* kHeader =
    "system,version,op_name,kernel_source,batch_size,isl,num_heads,num_key_value_heads,head_dim,window_size,"
    "beam_width,attn_dtype,kv_cache_dtype,step,latency\n";

SourceLocation error_at(const std::string& text) {
  try {
    read_attention_table(text, "t.csv", "generation_attention");
  } catch (const InputError& e) {
    return e.diagnostics().front().where;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return {};
}

std::string row(const char* batch, const char* heads, const char* kv_heads, const char* dtype, const char* latency) {
  return std::string("h100_sxm,1.3,generation_attention,torch_flow,") + batch + ",1," + heads + "," + kv_heads +
         ",128,0,1," + dtype + ",bfloat16,1023," + latency + "\n";
}

}  // namespace

TEST(AttentionTables, BadTablesAreLocatedErrors) {
  EXPECT_EQ(error_at("system,batch_size,isl\nh100_sxm,1,1\n").line, 1);  // missing columns
  for (const char* lat : {"-0.1", "0", "slow", "nan"}) {
    const SourceLocation at = error_at(std::string(kHeader) + row("4", "32", "8", "bfloat16", lat));
    EXPECT_EQ(at.line, 2) << lat;
    EXPECT_EQ(at.column, 86) << lat;  // latency, the fifteenth cell
  }
  EXPECT_EQ(error_at(std::string(kHeader) + row("0", "32", "8", "bfloat16", "0.1")).column, 46);  // batch
  EXPECT_EQ(error_at(std::string(kHeader) + row("4", "32", "5", "bfloat16", "0.1")).column, 53);  // 32 % 5
  EXPECT_EQ(error_at(std::string(kHeader) + row("4", "32", "8", "int4", "0.1")).line, 2);
  const std::string dup = std::string(kHeader) + row("4", "32", "8", "bfloat16", "0.1") +
                          row("4", "32", "8", "bfloat16", "0.2");
  EXPECT_EQ(error_at(dup).line, 3);
  EXPECT_EQ(error_at(kHeader).line, 1);  // no rows
}

// Rows become the ops serving prices: decode is one token over the cached KV, MLA decode runs on
// the latent cache and MLA prefill on decompressed K/V; a windowed decode reads only its window.
TEST(AttentionTables, RowsBecomeTheServingOps) {
  AttentionTableRow r;
  r.family = AttentionFamily::kMhaDecode;
  r.batch = 8, r.length = 1023, r.heads = 32, r.kv_heads = 8, r.head_dim = 128;
  Op op = attention_row_op(r);
  EXPECT_EQ(attention_family_of(op), AttentionFamily::kMhaDecode);
  EXPECT_EQ(op.heads, 32);
  EXPECT_EQ(op.n, 1024);
  EXPECT_NEAR(op.flops, 2.0 * 32 * 8 * 1024 * 256, 1.0);
  r.window = 128;
  EXPECT_EQ(attention_row_op(r).n, 128);
  EXPECT_LT(attention_row_op(r).bytes, op.bytes / 4);
  r.family = AttentionFamily::kMhaPrefill;
  r.window = 0;
  EXPECT_EQ(attention_family_of(attention_row_op(r)), AttentionFamily::kMhaPrefill);
  r.length = 1;  // a one-token prompt is still a prompt
  EXPECT_EQ(attention_family_of(attention_row_op(r)), AttentionFamily::kMhaPrefill);
  r.family = AttentionFamily::kMlaDecode;
  r.length = 4095;
  EXPECT_EQ(attention_row_op(r).attention, AttentionForm::kMlaLatent);
  r.family = AttentionFamily::kMlaPrefill;
  EXPECT_EQ(attention_row_op(r).attention, AttentionForm::kMlaFull);
}

TEST(AttentionTables, HeldOutRuleTakesAFifthOrMoreOfEachFamily) {
  const std::vector<char> held = held_out_attention_rows(shipped_rows());
  std::map<int, std::pair<int, int>> counts;
  for (std::size_t i = 0; i < held.size(); ++i) {
    auto& c = counts[static_cast<int>(shipped_rows()[i].family)];
    c.first += held[i];
    ++c.second;
  }
  ASSERT_EQ(counts.size(), 4u);
  for (const auto& [family, c] : counts)
    EXPECT_GE(static_cast<double>(c.first) / c.second, 0.2) << attention_family_name(static_cast<AttentionFamily>(family));
}

// Every H100 and B200 attention family: within the attention target (10% median) on its
// training rows and on held-out shapes, and closer than the datasheet roofline.
TEST(AttentionTables, FitsMeetTheirTargetOnHeldOutShapes) {
  for (const auto& [system, preset] : {std::pair<const char*, const char*>{"h100_sxm", "H100-SXM-80GB"},
                                       {"b200_sxm", "B200-180GB"}}) {
    std::vector<AttentionFitScore> scores;
    const auto fits = fit_attention_tables(shipped_rows(), system, gpu(preset), true, &scores);
    ASSERT_EQ(fits.size(), scores.size());
    // MHA decode: bf16 and fp8 KV; prefill: bf16/bf16, bf16/fp8, fp8/fp8; MLA decode and prefill: 2 each.
    EXPECT_EQ(fits.size(), 9u) << system;
    for (const auto& s : scores) {
      SCOPED_TRACE(std::string(system) + " " + attention_family_name(s.family) + " " + dtype_name(s.compute) + "/" +
                   dtype_name(s.kv));
      EXPECT_LE(s.train_median, 10.0);
      EXPECT_LE(s.held_median, 10.0);
      EXPECT_LT(s.held_median, s.reference_held_median);
    }
  }
}

TEST(AttentionTables, BuiltinProfilesCarryTheFits) {
  for (const char* system : {"h100_sxm", "b200_sxm"}) {
    const auto builtin = builtin_profile(system);
    ASSERT_NE(builtin, nullptr) << system;
    const auto fits = fit_attention_tables(shipped_rows(), system, gpu(measured_gpu_preset(system).c_str()), false);
    ASSERT_EQ(fits.size(), builtin->attention_fits.size()) << system << ": refit with `make profiles`";
    for (std::size_t i = 0; i < fits.size(); ++i) {
      SCOPED_TRACE(std::string(system) + " " + attention_family_name(fits[i].family));
      EXPECT_EQ(fits[i].family, builtin->attention_fits[i].family);
      EXPECT_NEAR(fits[i].memory_efficiency, builtin->attention_fits[i].memory_efficiency,
                  1e-6 * fits[i].memory_efficiency);
      ASSERT_EQ(fits[i].residual.value.size(), builtin->attention_fits[i].residual.value.size());
    }
    const HardwareCalibration yaml = load_calibration(source_root() + "/hardware/profiles/" + system + ".yaml");
    EXPECT_EQ(yaml.attention_fits.size(), builtin->attention_fits.size());
  }
}

// Decode attention over a long KV is a stream of the cache: on a GPU with twice the bandwidth
// and the same compute it costs about half. H200 reads H100's fits (the transfer rule).
TEST(AttentionTables, FittedAttentionObeysItsPhysics) {
  ModelSpec m;
  m.attention.kind = AttentionKind::kGqa;
  m.attention.heads = 32, m.attention.kv_heads = 8, m.attention.head_dim = 128;
  m.hidden = 4096;
  const std::vector<SeqChunk> seqs(64, SeqChunk{1, 32767});
  Op core;
  for (Op& op : attention_step_ops(m, seqs))
    if (op.kind == OpKind::kAttention) core = op;
  ClusterSpec h100 = cluster_presets().get("dgx-h100").value;
  apply_calibration_choice(h100, "builtin");
  const ComputeCostModel a = ComputeCostModel::for_cluster(h100);
  ASSERT_NE(a.attention_fit(core), nullptr);
  EXPECT_EQ(a.attention_fit(core)->family, AttentionFamily::kMhaDecode);
  ClusterSpec wide = h100;
  wide.gpu.hbm_bandwidth_Bps *= 2.0;
  const ComputeCostModel b = ComputeCostModel::for_cluster(wide);
  EXPECT_NEAR(b.kernel_seconds(core) / a.kernel_seconds(core), 0.5, 0.05);
  // Twice the cached tokens: about twice the time.
  const std::vector<SeqChunk> longer(64, SeqChunk{1, 65535});
  for (Op& op : attention_step_ops(m, longer)) {
    if (op.kind == OpKind::kAttention) {
      EXPECT_NEAR(a.kernel_seconds(op) / a.kernel_seconds(core), 2.0, 0.3);
    }
  }
  ClusterSpec h200 = cluster_presets().get("dgx-h200").value;
  apply_calibration_choice(h200, "builtin");
  const ComputeCostModel c = ComputeCostModel::for_cluster(h200);
  ASSERT_NE(c.attention_fit(core), nullptr);
  EXPECT_EQ(c.attention_fit(core)->system, "h100_sxm");
  EXPECT_LT(c.kernel_seconds(core), a.kernel_seconds(core));  // 4.8 against 3.35 TB/s
  apply_calibration_choice(h100, "none");
  EXPECT_EQ(ComputeCostModel::for_cluster(h100).attention_fit(core), nullptr);
}

TEST(AttentionTables, CostAttentionAndMlaAnswerEveryFlag) {
  using testing_support::run_cli_captured;
  const auto r = run_cli_captured({"cost", "attention", "--gpu", "H100-SXM-80GB", "--phase", "decode", "--batch", "16",
                                   "--seq", "4096", "--heads", "32", "--kv-heads", "8", "--head-dim", "128",
                                   "--window", "0", "--dtype", "bf16", "--kv-dtype", "fp8", "--engine", "vllm",
                                   "--json", "--explain"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["priced_by"], "fit");
  EXPECT_EQ(j["explain"]["family"], "mha-decode");
  EXPECT_EQ(j["explain"]["kv_dtype"], "fp8");
  EXPECT_GT(j["time_us"].get<double>(), j["kernel_us"].get<double>());
  const auto mla = run_cli_captured({"cost", "mla", "--gpu", "B200-180GB", "--phase", "prefill", "--batch", "2",
                                     "--seq", "8192", "--heads", "16", "--kv-dtype", "bf16", "--json", "--explain"});
  ASSERT_EQ(mla.code, 0) << mla.err;
  EXPECT_EQ(nlohmann::json::parse(mla.out)["explain"]["family"], "mla-prefill");
  const auto none = run_cli_captured({"cost", "mla", "--gpu", "H100-SXM-80GB", "--phase", "decode", "--batch", "2",
                                      "--seq", "8192", "--heads", "16", "--calibration", "none", "--json"});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(nlohmann::json::parse(none.out)["priced_by"], "datasheet");
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--kv-heads", "5"}, {"--kv-heads", "8", "--batch", "0"},
        {"--kv-heads", "8", "--dtype", "int4"}, {"--kv-heads", "8", "--seq", "99999999999"}}) {
    std::vector<std::string> args = {"cost", "attention", "--gpu", "H100-SXM-80GB", "--phase", "decode", "--batch",
                                     "16", "--seq", "4096", "--heads", "32", "--head-dim", "128"};
    args.insert(args.end(), bad.begin(), bad.end());
    EXPECT_EQ(run_cli_captured(args).code, 2) << bad.front();
  }
}

}  // namespace moesim::calibration
