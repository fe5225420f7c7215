// Attention tables → AttentionKernelFits: Levenberg-Marquardt on log time over five physical
// parameters (attention_kernel_fit.hpp), then the median log residual per measured (sequences,
// length, group): what the kernels' tiling and scheduling add to the physics.
#include "calibrate/attention_tables.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "calibrate/csv_table.hpp"
#include "calibrate/levenberg_marquardt.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"

namespace moesim::calibration {
namespace {

bool table_dtype(std::string_view s, DType& out) {
  if (s == "bfloat16" || s == "bf16") out = DType::kBf16;
  else if (s == "float16" || s == "fp16") out = DType::kFp16;
  else if (s == "fp8" || s == "float8_e4m3fn") out = DType::kFp8;
  else return false;
  return true;
}

}  // namespace

std::vector<AttentionTableRow> read_attention_table(const std::string& text, const std::string& path,
                                                    const std::string& kind) {
  const bool mla = kind == "generation_mla" || kind == "context_mla";
  const bool decode = kind == "generation_attention" || kind == "generation_mla";
  if (!mla && kind != "generation_attention" && kind != "context_attention")
    throw InputError(SourceLocation{path, 1, 1}, "not an attention table: " + kind);
  // Columns, in this order: 0 system, 1 compute dtype, 2 KV dtype, 3 batch, 4 isl, 5 step,
  // 6 heads, 7 latency, then for MHA 8 KV heads, 9 head_dim, 10 window.
  std::vector<std::string> need = {"system", mla ? "mla_dtype" : "attn_dtype", "kv_cache_dtype", "batch_size", "isl",
                                   "step", "num_heads", "latency"};
  if (!mla) need.insert(need.end(), {"num_key_value_heads", "head_dim", "window_size"});
  CsvTable table(text, path, kind + " table", need);
  std::vector<AttentionTableRow> rows;
  std::map<std::tuple<std::string, int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                      std::int64_t>,
           std::pair<double, int>>
      seen;
  constexpr std::int64_t kMax = std::int64_t{1} << 31;
  while (table.next()) {
    AttentionTableRow r;
    r.line = table.line();
    r.system = table.cell(0);
    r.family = mla ? (decode ? AttentionFamily::kMlaDecode : AttentionFamily::kMlaPrefill)
                   : (decode ? AttentionFamily::kMhaDecode : AttentionFamily::kMhaPrefill);
    bool ok = true;
    for (std::size_t i : {1, 2}) {
      if (!table_dtype(table.cell(i), i == 1 ? r.compute : r.kv)) {
        table.problem(i, "'" + std::string(table.cell(i)) + "' is not one of bfloat16, float16, fp8");
        ok = false;
      }
    }
    std::int64_t isl = 0, step = 0;
    ok &= table.whole(3, 1, kMax, r.batch);
    ok &= table.whole(4, decode ? 1 : 1, kMax, isl);
    ok &= table.whole(5, decode ? 1 : 0, kMax, step);
    ok &= table.whole(6, 1, 1 << 16, r.heads);
    double ms = 0.0;
    ok &= table.number(7, 0.0, 1e9, ms);
    if (mla) {
      r.kv_heads = 1;
      r.head_dim = 576;
    } else {
      ok &= table.whole(8, 1, 1 << 16, r.kv_heads);
      ok &= table.whole(9, 1, 1 << 12, r.head_dim);
      ok &= table.whole(10, 0, kMax, r.window);
      if (ok && r.heads % r.kv_heads != 0) {
        table.problem(8, "num_heads (" + std::to_string(r.heads) + ") must be a multiple of num_key_value_heads (" +
                             std::to_string(r.kv_heads) + ")");
        ok = false;
      }
    }
    if (!ok) continue;
    r.length = decode ? step : isl;
    r.time_us = ms * 1e3;
    const auto key = std::make_tuple(r.system, static_cast<int>(r.compute), static_cast<int>(r.kv), r.batch, r.length,
                                     r.heads, r.kv_heads, r.head_dim, r.window);
    if (const auto it = seen.find(key); it != seen.end()) {
      if (it->second.first != r.time_us)
        table.problem(7, "this shape was measured on line " + std::to_string(it->second.second) +
                             " with another time: which one is the kernel's?");
      continue;
    }
    seen.emplace(key, std::make_pair(r.time_us, r.line));
    rows.push_back(std::move(r));
  }
  table.finish(rows.size());
  return rows;
}

Op attention_row_op(const AttentionTableRow& row) {
  ModelSpec m;
  m.dtype = row.compute;
  m.kv_dtype = row.kv;
  AttentionSpec& a = m.attention;
  a.heads = static_cast<int>(row.heads);
  a.window = row.window;
  const bool mla = row.family == AttentionFamily::kMlaDecode || row.family == AttentionFamily::kMlaPrefill;
  if (mla) {
    a.kind = AttentionKind::kMla;
    a.kv_heads = a.heads;
    a.q_lora_rank = 1536;
    a.kv_lora_rank = 512;
    a.qk_nope_head_dim = 128;
    a.qk_rope_head_dim = 64;
    a.v_head_dim = 128;
    m.hidden = 7168;
  } else {
    a.kind = row.kv_heads == row.heads ? AttentionKind::kMha : AttentionKind::kGqa;
    a.kv_heads = static_cast<int>(row.kv_heads);
    a.head_dim = static_cast<int>(row.head_dim);
    m.hidden = row.heads * row.head_dim;
  }
  const bool decode = row.family == AttentionFamily::kMhaDecode || row.family == AttentionFamily::kMlaDecode;
  const SeqChunk chunk = decode ? SeqChunk{1, row.length} : SeqChunk{row.length, 0};
  const std::vector<SeqChunk> seqs(static_cast<std::size_t>(row.batch), chunk);
  for (Op& op : attention_step_ops(m, seqs))
    if (op.kind == OpKind::kAttention) return std::move(op);
  return Op{};
}

std::vector<char> held_out_attention_rows(const std::vector<AttentionTableRow>& rows) {
  using Key = std::tuple<int, int, int>;
  const auto key = [](const AttentionTableRow& r) {
    return Key{static_cast<int>(r.family), static_cast<int>(r.compute), static_cast<int>(r.kv)};
  };
  std::map<Key, std::pair<std::set<std::int64_t>, std::set<std::int64_t>>> values;
  for (const auto& r : rows) {
    auto& v = values[key(r)];
    v.first.insert(r.length);
    v.second.insert(r.heads);
  }
  const auto chosen = [](const std::set<std::int64_t>& s) {
    std::set<std::int64_t> out;
    std::size_t i = 0;
    for (auto it = s.begin(); it != s.end(); ++it, ++i)
      if (i % 4 == 2 && i + 1 < s.size()) out.insert(*it);
    return out;
  };
  std::map<Key, std::pair<std::set<std::int64_t>, std::set<std::int64_t>>> held;
  for (const auto& [k, v] : values) held[k] = {chosen(v.first), chosen(v.second)};
  std::vector<char> mask(rows.size(), 0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& h = held[key(rows[i])];
    mask[i] = h.first.count(rows[i].length) || h.second.count(rows[i].heads);
  }
  return mask;
}

namespace {

// Unconstrained coordinates → the fit's parameters, each kept in its physical range.
void apply(const Eigen::VectorXd& x, AttentionKernelFit& f) {
  // Decode attention of one query row per KV head runs on CUDA cores: a few percent of the
  // tensor-core peak, so the floor is low.
  f.compute_efficiency = std::clamp(std::exp(x[0]), 0.002, 1.5);
  f.memory_efficiency = std::clamp(std::exp(x[1]), 0.01, 1.5);
  f.overhead_us = std::clamp(std::exp(x[2]), 0.0, 1e3);
  f.unit_us = std::clamp(std::exp(x[3]), 0.0, 1e3);
  f.blend = std::clamp(1.0 + std::exp(x[4]), 1.0, 32.0);
}

struct Sample {
  AttentionTerms terms;
  std::int64_t sequences = 0, length = 0, group = 0;  ///< the grid point
  double log_time = 0.0;
  std::size_t row = 0;
};

// The median log(measured / physics) at each measured (sequences, length, group); a grid point
// without rows takes the value of the nearest measured length at its (sequences, group), else
// the median of its sequences (tables stop short of the KV sizes that do not fit in memory).
ResidualGrid residual_grid(const std::vector<Sample>& s, const std::vector<double>& log_residual) {
  std::set<std::int64_t> seqs, lens, groups;
  for (const auto& x : s) seqs.insert(x.sequences), lens.insert(x.length), groups.insert(x.group);
  ResidualGrid g;
  for (auto v : seqs) g.log_m.push_back(std::log(static_cast<double>(v)));
  for (auto v : lens) g.log_n.push_back(std::log(static_cast<double>(v)));
  for (auto v : groups) g.log_k.push_back(std::log(static_cast<double>(v)));
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<double>> at;
  std::map<std::int64_t, std::vector<double>> by_seqs;
  for (std::size_t i = 0; i < s.size(); ++i) {
    at[{s[i].sequences, s[i].length, s[i].group}].push_back(log_residual[i]);
    by_seqs[s[i].sequences].push_back(log_residual[i]);
  }
  for (auto b : seqs) {
    const double fill = median(by_seqs[b]);
    for (auto l : lens)
      for (auto h : groups) {
        double v = fill;
        if (const auto it = at.find({b, l, h}); it != at.end()) {
          v = median(it->second);
        } else {
          double best = INFINITY;
          for (auto other : lens)
            if (const auto jt = at.find({b, other, h}); jt != at.end()) {
              const double d = std::abs(std::log(static_cast<double>(other) / static_cast<double>(l)));
              if (d < best) best = d, v = median(jt->second);
            }
        }
        g.value.push_back(std::clamp(v, -5.0, 5.0));
      }
  }
  return g;
}

}  // namespace

std::vector<AttentionKernelFit> fit_attention_tables(const std::vector<AttentionTableRow>& rows,
                                                     const std::string& system, const GpuSpec& gpu, bool holdout,
                                                     std::vector<AttentionFitScore>* scores) {
  const std::vector<char> held = holdout ? held_out_attention_rows(rows) : std::vector<char>(rows.size(), 0);
  std::map<std::tuple<int, int, int>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].system == system)
      groups[{static_cast<int>(rows[i].family), static_cast<int>(rows[i].compute), static_cast<int>(rows[i].kv)}]
          .push_back(i);
  const ComputeCostModel datasheet(gpu);
  const double bw = gpu.hbm_bandwidth_Bps;
  std::vector<AttentionKernelFit> fits;
  for (const auto& [key, idx] : groups) {
    AttentionKernelFit fit;
    fit.engine = "trtllm";  // the tables time TensorRT-LLM's attention ops (MANIFEST.md)
    fit.family = static_cast<AttentionFamily>(std::get<0>(key));
    fit.compute_dtype = static_cast<DType>(std::get<1>(key));
    fit.kv_dtype = static_cast<DType>(std::get<2>(key));
    fit.system = system;
    const double peak = gpu.peak(fit.compute_dtype) > 0 ? gpu.peak(fit.compute_dtype) : gpu.peak(DType::kFp16);
    std::vector<Sample> all, train;
    std::vector<Op> ops;
    for (auto i : idx) {
      Op op = attention_row_op(rows[i]);
      Sample s;
      s.terms = AttentionTerms::of(op);
      s.sequences = rows[i].batch;
      s.length = static_cast<std::int64_t>(s.terms.length);
      s.group = static_cast<std::int64_t>(s.terms.group);
      s.log_time = std::log(rows[i].time_us * 1e-6);
      s.row = i;
      all.push_back(s);
      ops.push_back(std::move(op));
      if (!held[i]) train.push_back(s);
    }
    if (train.size() < 10) continue;  // too few rows to fit five parameters
    const auto residuals = [&](const Eigen::VectorXd& x) {
      AttentionKernelFit f = fit;
      apply(x, f);
      Eigen::VectorXd r(static_cast<Eigen::Index>(train.size()));
      for (std::size_t i = 0; i < train.size(); ++i)
        r[static_cast<Eigen::Index>(i)] = std::log(f.seconds(train[i].terms, peak, bw, gpu.sm_count, true)) - train[i].log_time;
      return r;
    };
    // Two starts (compute- and memory-dominated guesses); the better end wins.
    double best = INFINITY;
    Eigen::VectorXd best_x;
    for (const auto& start : {std::vector<double>{0.5, 0.8, 10.0, 0.05, 1.0}, std::vector<double>{0.3, 0.5, 20.0, 0.5, 0.3}}) {
      Eigen::VectorXd x(5);
      for (int p = 0; p < 5; ++p) x[p] = std::log(start[static_cast<std::size_t>(p)]);
      const double sse = levenberg_marquardt(x, residuals);
      if (sse < best) best = sse, best_x = x;
    }
    apply(best_x, fit);
    std::vector<double> log_res;
    for (const auto& s : train) log_res.push_back(s.log_time - std::log(fit.seconds(s.terms, peak, bw, gpu.sm_count, true)));
    fit.residual = residual_grid(train, log_res);
    HeldOutErrors errors;
    for (std::size_t j = 0; j < all.size(); ++j) {
      const double measured = std::exp(all[j].log_time);
      const double fitted = fit.seconds(all[j].terms, peak, bw, gpu.sm_count);
      if (!held[all[j].row]) {
        errors.add_train(fitted, measured);
        continue;
      }
      errors.add_held(fitted, fit.seconds(all[j].terms, peak, bw, gpu.sm_count, true), datasheet.kernel_seconds(ops[j]),
                      measured);
    }
    fit.fitted_rows = static_cast<int>(train.size());
    fit.fitted_median_error = errors.train_median();
    if (scores) {
      AttentionFitScore s;
      static_cast<HeldOutScore&>(s) = errors.score();
      s.family = fit.family;
      s.compute = fit.compute_dtype;
      s.kv = fit.kv_dtype;
      scores->push_back(s);
    }
    fits.push_back(std::move(fit));
  }
  return fits;
}

nlohmann::json score_json(const AttentionFitScore& s) {
  nlohmann::json j = held_out_json(s, "datasheet");
  j.update({{"family", attention_family_name(s.family)},
            {"compute_dtype", dtype_name(s.compute)},
            {"kv_dtype", dtype_name(s.kv)}});
  return j;
}

}  // namespace moesim::calibration
