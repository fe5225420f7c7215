// `moesim guideline`: building each (skewness, bandwidth) cell's scenario, checking and running
// the cells on the sweep's thread pool, and deciding each cell. Output lives in cli_guideline.cpp.
//
// A cell's scenario is a fixed text (the MoE-GPS set-up) plus `--set`-style overrides for every
// value the user chose, so a bad value is reported at the option that gave it ("--skewness 4.2:
// error: ... at most E/top_k = 4") rather than at a line of text the user never wrote.
#include "app/sweep/guideline.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "app/sweep/sweep.hpp"
#include "hardware/cluster.hpp"
#include "core/diagnostics.hpp"
#include "predictors/estimates.hpp"

namespace moesim {
namespace {

// The name the generated scenario's diagnostics carry.
constexpr const char* kScenarioName = "moesim guideline";

[[noreturn]] void fail(const std::string& where, const std::string& message) {
  throw InputError(SourceLocation{where, 0, 0}, message);
}

// The MoE-GPS §4 set-up every cell shares. The GPUs become a full mesh (nvlink-mesh) whatever the
// preset's own fabric: MoE-GPS §5 assumes "fully connected GPUs with the same interconnect
// bandwidth between each pair", and varies only that bandwidth (Fig. 7: 32 to 600 GB/s).
// Expert duplication is Algorithm 1 (moegps-dup); "none" is its no-forecast baseline (static-ep).
// Under the paper's assumptions the copies are hidden and token-to-expert runs without its own
// overhead curve, which run_guideline adds afterwards as a ratio of the cell's layer time.
std::string scenario_text(const GuidelineSpec& spec) {
  const GuidelineAssumptions& a = spec.assumptions;
  std::string t =
      "name: guideline\n"
      "hardware: {fabric: nvlink-mesh}\n"
      "workload: {kind: prefill, routing: {kind: skewness}}\n";
  t += a.hidden_copies ? "policy: [{name: moegps-dup, copies: hidden}]\n" : "policy: [moegps-dup]\n";
  t += "predictor:\n"
       "  - none\n"
       "  - distribution-only\n";
  for (const auto& acc : spec.accuracies)
    t += "  - {name: token-to-expert, accuracy: " + acc.text + (a.overhead_ratio ? ", overhead_c0_ms: 0" : "") + "}\n";
  return t;
}

// GPUs of the preset (2 for an unknown one, which fails at --hardware anyway).
int preset_gpus(const std::string& hardware) {
  const auto* preset = cluster_presets().find(hardware);
  return preset ? std::max(2, preset->value.num_gpus()) : 2;
}

// One override of a cell, and the option it stands for in diagnostics.
struct Override {
  std::string set;    ///< key.path=value, as --set takes it
  std::string shown;  ///< "--skewness 4.2": where a problem with it is reported
};

// A cell's overrides: every value the options chose, in the order they are applied. Every GPU
// also keeps its PCIe link (host traffic) and a route takes the fastest path, so a PCIe path
// faster than the mesh would carry GPU-to-GPU traffic around it (at 8 GB/s per pair, PCIe 4.0's
// 31.5 GB/s is faster): PCIe links are capped at the cell's bandwidth, and then the direct link
// (one hop) always beats a PCIe path (two hops or more), so each pair talks at the bandwidth.
std::vector<Override> cell_overrides(const GuidelineSpec& spec, const GuidelineValue& skew, const GuidelineValue& bw) {
  auto n = [](auto v) { return std::to_string(v); };
  const GuidelineAssumptions& a = spec.assumptions;
  // Per GPU (MoE-GPS §4 quotes a GPU's NVLink or PCIe bandwidth): each of its G-1 links gets
  // an even share, so an all-to-all leaves a GPU at the quoted bandwidth.
  const double pair = a.bandwidth_per_gpu ? bw.value / (preset_gpus(spec.hardware) - 1) : bw.value;
  const std::string pair_text = format_number(pair);
  std::vector<Override> all = {
      {"seed=" + n(spec.seed), "--seed " + n(spec.seed)},
      {"model=" + spec.model, "--model " + spec.model},
      {"hardware.preset=" + spec.hardware, "--hardware " + spec.hardware},
      {"hardware.nvlink_bandwidth_GBps=" + pair_text, "--bandwidth-GBps " + bw.text},
      {"workload.batch_size=" + n(spec.batch_size), "--batch-size " + n(spec.batch_size)},
      {"workload.seq_len=" + n(spec.seq_len), "--seq-len " + n(spec.seq_len)},
      {"workload.batches=" + n(spec.batches), "--batches " + n(spec.batches)},
      {"workload.warmup_batches=" + n(spec.warmup_batches), "--warmup-batches " + n(spec.warmup_batches)},
      {"workload.routing.skewness=" + skew.text, "--skewness " + skew.text}};
  const auto* preset = cluster_presets().find(spec.hardware);  // an unknown one fails at --hardware
  if (preset && preset->value.pcie_bandwidth_GBps > pair)
    all.push_back({"hardware.pcie_bandwidth_GBps=" + pair_text, "--bandwidth-GBps " + bw.text});
  const std::string paper = "--assumptions paper";
  if (a.tensor_parallel_attention) all.push_back({"workload.attention_parallelism=tensor", paper});
  if (a.flops_only) all.push_back({"hardware.compute_model=flops-only", paper});
  if (a.one_layer) all.push_back({"model.layers=1", paper});
  return all;
}

// A --set may refine a cell (model.layers=2) but not replace what the command chooses: a key
// equal to, or a parent of, one the command sets is refused, naming the option to use instead.
void check_sets(const GuidelineSpec& spec) {
  std::vector<std::pair<std::string, std::string>> owned = {
      {"hardware.fabric", "the GPUs are fully connected (MoE-GPS §5); vary --bandwidth-GBps"},
      {"hardware.pcie_bandwidth_GBps", "it is capped at each --bandwidth-GBps, so GPU pairs talk over the mesh"},
      {"workload.kind", "the guideline is about prefill (MoE-GPS §2)"},
      {"workload.routing.kind", "cells are routed by skewness (MoE-GPS §2); use --skewness"},
      {"policy", "the guideline compares predictors under moegps-dup (MoE-GPS Algorithm 1)"},
      {"predictor", "the predictors are none, distribution-only and token-to-expert; use --accuracies"}};
  if (spec.assumptions.bandwidth_per_gpu)
    for (const char* k : {"hardware.gpus_per_node", "hardware.nodes"})
      owned.emplace_back(k, "each --bandwidth-GBps is shared over the preset's GPUs; choose another --hardware");
  const GuidelineValue any{1.0, "1"};
  for (const Override& o : cell_overrides(spec, any, any))
    owned.emplace_back(o.set.substr(0, o.set.find('=')), "use " + o.shown.substr(0, o.shown.find(' ')));
  std::vector<Diagnostic> problems;
  for (const std::string& s : spec.sets) {
    const std::string key = s.substr(0, s.find('='));
    for (const auto& [k, why] : owned)
      if (key == k || k.rfind(key + ".", 0) == 0) {
        problems.push_back({SourceLocation{"--set " + s, 0, 0}, "'" + k + "' is chosen by moesim guideline: " + why});
        break;
      }
  }
  if (!problems.empty()) throw InputError(std::move(problems));
}

// `e` located for the user: a problem with an override moves to the option it stands for; one in
// the generated text names the cell instead of a line the user never saw.
std::vector<Diagnostic> located(const InputError& e, const std::vector<Override>& overrides,
                                const GuidelineValue& skew, const GuidelineValue& bw) {
  std::vector<Diagnostic> out;
  for (Diagnostic d : e.diagnostics()) {
    for (const Override& o : overrides)
      if (d.where.file == "--set " + o.set) d.where = SourceLocation{o.shown, 0, 0};
    if (d.where.file == kScenarioName) {
      d.where.line = d.where.column = 0;
      d.message += " (cell: skewness " + skew.text + ", bandwidth " + bw.text + " GB/s)";
    }
    out.push_back(std::move(d));
  }
  return out;
}

// The cells in output order: by bandwidth, then skewness.
struct CellKey {
  const GuidelineValue* skewness;
  const GuidelineValue* bandwidth;
};

// Runs f(i, overrides) for every cell on the pool, collecting each cell's InputError; then throws
// every distinct problem in cell order (a bad skewness fails at each bandwidth, reported once).
template <class F>
void for_each_cell(const GuidelineSpec& spec, const std::vector<CellKey>& cells, unsigned jobs, F f) {
  std::vector<std::vector<Diagnostic>> problems(cells.size());
  parallel_for(cells.size(), jobs, [&](std::size_t i) {
    const std::vector<Override> overrides = cell_overrides(spec, *cells[i].skewness, *cells[i].bandwidth);
    try {
      f(i, overrides);
    } catch (const InputError& e) {
      problems[i] = located(e, overrides, *cells[i].skewness, *cells[i].bandwidth);
    }
  });
  std::vector<Diagnostic> all;
  std::set<std::string> seen;
  for (const auto& cell : problems)
    for (const Diagnostic& d : cell)
      if (seen.insert(d.to_string()).second) all.push_back(d);
  if (!all.empty()) throw InputError(std::move(all));
}

// A run's metrics as a curve point.
CurvePoint point_of(const nlohmann::json& run, Strategy strategy, GuidelineValue accuracy) {
  if (run.at("predictor").get<std::string>() != strategy_name(strategy))
    throw std::logic_error("guideline: run of predictor " + run.at("predictor").dump() + " where " +
                           strategy_name(strategy) + " was expected");
  const nlohmann::json& m = run.at("metrics");
  const nlohmann::json& b = m.at("layer_breakdown_ms");
  return CurvePoint{strategy,
                    std::move(accuracy),
                    m.at("layer_latency_ms").at("mean").get<double>(),
                    LayerBreakdown{b.at("attention").get<double>(), b.at("ffn").get<double>(),
                                   b.at("communication").get<double>(), b.at("overhead").get<double>(),
                                   b.at("idle").get<double>()},
                    m.at("prediction_error").get<double>()};
}

}  // namespace

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kNone: return "none";
    case Strategy::kDistributionOnly: return "distribution-only";
    case Strategy::kTokenToExpert: return "token-to-expert";
  }
  return "none";
}

std::vector<GuidelineValue> parse_guideline_values(const std::string& option, const std::string& text) {
  const std::string where = option + " " + text;
  // Numbers hold no blanks, so "32, 64" is "32,64" (and " 1:2:1" still a range).
  std::string compact = text;
  compact.erase(std::remove_if(compact.begin(), compact.end(), [](char c) { return c == ' ' || c == '\t'; }),
                compact.end());
  std::vector<GuidelineValue> out;
  for (const std::string& v : parse_value_list(compact, where)) {
    double x = 0.0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || ec != std::errc() || ptr != v.data() + v.size() || !std::isfinite(x))
      fail(where, "'" + v + "' is not a number");
    out.push_back({x, format_number(x)});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.value < b.value; });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].text == out[i - 1].text) fail(where, "the value " + out[i].text + " is given twice");
  return out;
}

const std::vector<AssumptionEntry>& paper_assumptions() {
  using A = GuidelineAssumptions;
  static const std::vector<AssumptionEntry> all = {
      {"attention-tp", &A::tensor_parallel_attention, "attention tensor-parallel, a ring all-reduce after it (§2)"},
      {"flops-only", &A::flops_only, "kernel time proportional to FLOPs, compute saturated (§2, §5)"},
      {"hidden-copies", &A::hidden_copies, "expert copies hidden behind attention (§3.1, §5)"},
      {"overhead-ratio", &A::overhead_ratio, "token-to-expert overhead a ratio of the layer time (§5, Fig. 4)"},
      {"distribution-comm", &A::distribution_comm_unchanged,
       "distribution-only keeps none's communication (§3.2.1, §4)"},
      {"bandwidth-per-gpu", &A::bandwidth_per_gpu, "--bandwidth-GBps per GPU, shared by its links (§4)"},
      {"one-layer", &A::one_layer, "one layer (§3.4)"}};
  return all;
}

GuidelineAssumptions parse_assumptions(const std::string& assumptions, const std::string& without) {
  if (assumptions != "paper" && assumptions != "timed")
    fail("--assumptions " + assumptions, "'" + assumptions + "' is not one of: paper, timed");
  GuidelineAssumptions a = assumptions == "paper" ? GuidelineAssumptions::paper() : GuidelineAssumptions::timed();
  if (without.empty()) return a;
  if (assumptions != "paper") fail("--without " + without, "--without drops paper assumptions: use it with --assumptions paper");
  std::string names;
  for (const AssumptionEntry& e : paper_assumptions()) names += (names.empty() ? "" : ", ") + std::string(e.name);
  for (const std::string& name : parse_value_list(without, "--without " + without)) {
    const auto& all = paper_assumptions();
    const auto it = std::find_if(all.begin(), all.end(), [&](const AssumptionEntry& e) { return name == e.name; });
    if (it == all.end()) fail("--without " + without, "'" + name + "' is not a paper assumption; valid: " + names);
    a.*(it->flag) = false;
  }
  return a;
}

double overhead_ratio(double accuracy, double skewness) {
  // The constants of token-to-expert's default curve (predictors/token_to_expert.cpp), read as
  // fractions of a 1.0 ms layer: chosen, not fitted.
  const OverheadCurve ratio{7.0e-5, 10.0, 1.4, 2.0};
  return ratio.at(accuracy, skewness);
}

double saving(double none_ms, double ms) { return none_ms > 0.0 ? (none_ms - ms) / none_ms : 0.0; }

GuidelineCell decide_cell(GuidelineValue skewness, GuidelineValue bandwidth_GBps, std::vector<CurvePoint> curve) {
  if (curve.size() < 3 || curve[0].strategy != Strategy::kNone || curve[1].strategy != Strategy::kDistributionOnly)
    throw std::invalid_argument("decide_cell: the curve must be none, distribution-only, then token-to-expert points");
  for (std::size_t i = 2; i < curve.size(); ++i)
    if (curve[i].strategy != Strategy::kTokenToExpert || (i > 2 && !(curve[i - 1].accuracy.value < curve[i].accuracy.value)))
      throw std::invalid_argument("decide_cell: token-to-expert points must follow in ascending accuracy");
  GuidelineCell c;
  c.skewness = std::move(skewness);
  c.bandwidth_GBps = std::move(bandwidth_GBps);
  c.none_ms = curve[0].layer_ms;
  c.distribution_only_ms = curve[1].layer_ms;
  // The bottom of the U (§4); strict '<' keeps the lowest accuracy on a tie, the cheaper predictor.
  std::size_t best = 2;
  for (std::size_t i = 3; i < curve.size(); ++i)
    if (curve[i].layer_ms < curve[best].layer_ms) best = i;
  c.token_to_expert_ms = curve[best].layer_ms;
  c.best_accuracy = curve[best].accuracy;
  c.winner = Strategy::kNone;
  double winner_ms = c.none_ms;
  for (const auto& [s, ms] : {std::pair{Strategy::kDistributionOnly, c.distribution_only_ms},
                              std::pair{Strategy::kTokenToExpert, c.token_to_expert_ms}})
    if (ms < winner_ms) {
      c.winner = s;
      winner_ms = ms;
    }
  c.distribution_only_saving = saving(c.none_ms, c.distribution_only_ms);
  c.token_to_expert_saving = saving(c.none_ms, c.token_to_expert_ms);
  c.saving_difference = c.distribution_only_saving - c.token_to_expert_saving;
  c.curve = std::move(curve);
  return c;
}

std::vector<GuidelineCell> run_guideline(const GuidelineSpec& spec, unsigned jobs, const std::function<void()>& cell_done) {
  // Checked here, as the scenario would locate them at its generated text or not at all.
  for (const auto& a : spec.accuracies)
    if (a.value < 0.0 || a.value > 1.0) fail("--accuracies " + a.text, "an accuracy must lie in [0, 1]");
  for (const auto& b : spec.bandwidth_GBps)
    if (!(b.value > 0.0)) fail("--bandwidth-GBps " + b.text, "a bandwidth must be above 0 GB/s");
  check_sets(spec);
  std::vector<CellKey> cells;
  for (const auto& b : spec.bandwidth_GBps)
    for (const auto& s : spec.skewness) cells.push_back({&s, &b});
  const std::string text = scenario_text(spec);

  // Every cell is loaded and checked before any runs, so a bad value costs no simulation.
  std::vector<std::optional<Scenario>> loaded(cells.size());
  for_each_cell(spec, cells, jobs, [&](std::size_t i, const std::vector<Override>& overrides) {
    std::vector<std::string> sets;
    for (const Override& o : overrides) sets.push_back(o.set);
    sets.insert(sets.end(), spec.sets.begin(), spec.sets.end());
    Scenario s = load_scenario_text(text, kScenarioName, sets);
    check_scenario_fits(s);
    loaded[i] = std::move(s);
  });

  std::vector<GuidelineCell> out(cells.size());
  for_each_cell(spec, cells, jobs, [&](std::size_t i, const std::vector<Override>&) {
    Scenario s = *std::exchange(loaded[i], std::nullopt);
    s.resolved.reset();  // run_scenario would echo it; the guideline never prints it
    const nlohmann::json runs = run_scenario(s)["runs"];
    std::vector<CurvePoint> curve = {point_of(runs.at(0), Strategy::kNone, {}),
                                     point_of(runs.at(1), Strategy::kDistributionOnly, {})};
    if (spec.assumptions.distribution_comm_unchanged) {
      // The layer's parts add up to its latency (critical-path attribution), so distribution-only
      // is charged none's communication in place of its own.
      CurvePoint& dist = curve[1];
      dist.layer_ms += curve[0].parts.communication - dist.parts.communication;
      dist.parts.communication = curve[0].parts.communication;
    }
    for (std::size_t a = 0; a < spec.accuracies.size(); ++a) {
      CurvePoint p = point_of(runs.at(2 + a), Strategy::kTokenToExpert, spec.accuracies[a]);
      if (spec.assumptions.overhead_ratio) {
        // MoE-GPS §5: "we report and analyze prediction overhead as a ratio to the simulated
        // inference runtime" — here the cell's layer without prediction.
        const double overhead = overhead_ratio(spec.accuracies[a].value, cells[i].skewness->value) * curve[0].layer_ms;
        p.layer_ms += overhead;
        p.parts.overhead += overhead;
      }
      curve.push_back(std::move(p));
    }
    out[i] = decide_cell(*cells[i].skewness, *cells[i].bandwidth, std::move(curve));
    if (cell_done) cell_done();
  });
  return out;
}

}  // namespace moesim
