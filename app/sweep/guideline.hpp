#pragma once
// `moesim guideline` (MoE-GPS Fig. 1, 6, 7): which expert-prediction strategy makes a MoE layer's
// prefill fastest, per routing skewness and per interconnect bandwidth. Every (skewness,
// bandwidth) cell is one scenario: the model on the hardware preset's GPUs, fully connected at the
// cell's bandwidth per GPU pair and direction (MoE-GPS §5 "we assumed fully connected GPUs with the
// same interconnect bandwidth between each pair"), routed at the cell's skewness (§2), served by
// moegps-dup (Algorithm 1) acting on each strategy's forecast: none, distribution-only, and
// token-to-expert at every accuracy of the list (§3.2). Token-to-expert is represented by the bottom
// of its U-curve over accuracy (§4: "the best predictor has the minimum total latency across
// strategies and accuracies").
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "app/run/layer_breakdown.hpp"

namespace moesim {

/// MoE-GPS's prediction strategies, in the order a tie is broken: the simpler one wins, as it
/// needs no predictor (none) or no online one (distribution-only, §4).
enum class Strategy { kNone, kDistributionOnly, kTokenToExpert };

/// "none", "distribution-only" or "token-to-expert": the predictor's name, as the CSVs print it.
const char* strategy_name(Strategy s);

/// One value of a swept option: its number and its canonical text (format_number).
struct GuidelineValue {
  double value = 0.0;
  std::string text;
};

/// Parses an option's value list (`v1,v2,...` and `start:stop:step` ranges, as --grid takes them)
/// into numbers, ascending. Throws InputError located at "<option> <text>" for a value that is
/// not a number or that appears twice.
std::vector<GuidelineValue> parse_guideline_values(const std::string& option, const std::string& text);

/// The modelling assumptions a guideline runs under. `timed` is moesim's model: attention
/// data-parallel over the GPUs holding the sequences, roofline kernels, every expert copy a timed
/// transfer, token-to-expert's overhead in milliseconds (its predictor's curve), the bandwidth per
/// GPU pair, every layer of the model. `paper` is MoE-GPS's own set-up, each a stated assumption:
struct GuidelineAssumptions {
  bool tensor_parallel_attention = false;  ///< §2: attention TP over the GPUs, ring all-reduce after it
  bool flops_only = false;                 ///< §2, §5: FFN time proportional to tokens (compute saturated)
  bool hidden_copies = false;              ///< §3.1, §5: copies hidden behind attention
  bool overhead_ratio = false;             ///< §5: t2e overhead a ratio of the inference time (Fig. 4)
  /// §3.2.1, §4: distribution-only's communication is none's ("communication time remains
  /// unchanged"), although its replicas also spread the load tokens are received with.
  bool distribution_comm_unchanged = false;
  bool bandwidth_per_gpu = false;          ///< §4: a GPU's bandwidth, shared evenly by its peers
  bool one_layer = false;                  ///< §3.4: "a single Transformer layer"
  static GuidelineAssumptions timed() { return {}; }
  static GuidelineAssumptions paper() { return {true, true, true, true, true, true, true}; }
};

/// One paper assumption by name (for `--without`), with a one-line description.
struct AssumptionEntry {
  const char* name;
  bool GuidelineAssumptions::*flag;
  const char* help;
};
/// Every paper assumption, in GuidelineAssumptions order.
const std::vector<AssumptionEntry>& paper_assumptions();

/// `assumptions` ("paper" or "timed") less the paper assumptions named in `without` (comma
/// separated). Throws InputError located at the option for an unknown name (listing the valid
/// ones) or a --without given with timed.
GuidelineAssumptions parse_assumptions(const std::string& assumptions, const std::string& without);

/// Token-to-expert's overhead under GuidelineAssumptions::overhead_ratio: the fraction of the
/// cell's layer time without prediction that a predictor of accuracy a costs at skewness s,
/// r0·e^(c1·a)·(s_ref/s)^γ (MoE-GPS fits exponentials to Fig. 4's accuracy → overhead points and
/// prints no coefficients: the defaults are token-to-expert's chosen ms curve over the ~1.0 ms
/// layer it was chosen against, i.e. 1% of the layer at a = 0.5 and 154% at a = 1).
double overhead_ratio(double accuracy, double skewness);

/// Everything that defines a guideline's results (not how it runs: --out, --curves and --jobs are
/// not here). The value lists are ascending, as parse_guideline_values returns them.
struct GuidelineSpec {
  std::string model;     ///< model preset
  std::string hardware;  ///< hardware preset; its GPUs are rewired as a full mesh per bandwidth
  std::vector<GuidelineValue> skewness;
  std::vector<GuidelineValue> bandwidth_GBps;
  std::vector<GuidelineValue> accuracies;  ///< token-to-expert accuracies, each in [0, 1]
  std::int64_t batch_size = 1;
  std::int64_t seq_len = 512;
  std::int64_t batches = 4;
  std::int64_t warmup_batches = 1;
  std::uint64_t seed = 1;
  std::vector<std::string> sets;  ///< extra `--set` overrides, applied to every cell
  GuidelineAssumptions assumptions;
};

/// One strategy (at one accuracy, for token-to-expert) in one cell: the mean MoE layer's prefill
/// latency and its Fig. 6 breakdown, over the measured batches and MoE layers.
struct CurvePoint {
  Strategy strategy = Strategy::kNone;
  GuidelineValue accuracy;  ///< token-to-expert only; text empty otherwise
  double layer_ms = 0.0;    ///< metrics.layer_latency_ms.mean
  LayerBreakdown parts;     ///< metrics.layer_breakdown_ms
  double prediction_error = 0.0;
};

/// One (skewness, bandwidth) cell and its decision.
struct GuidelineCell {
  GuidelineValue skewness;
  GuidelineValue bandwidth_GBps;
  std::vector<CurvePoint> curve;  ///< none, distribution-only, then token-to-expert by accuracy
  double none_ms = 0.0;
  double distribution_only_ms = 0.0;
  double token_to_expert_ms = 0.0;  ///< the lowest latency over the accuracies
  GuidelineValue best_accuracy;     ///< where it is reached (the lowest such accuracy on a tie)
  Strategy winner = Strategy::kNone;
  double distribution_only_saving = 0.0;  ///< saving(none_ms, distribution_only_ms)
  double token_to_expert_saving = 0.0;    ///< saving(none_ms, token_to_expert_ms)
  /// MoE-GPS Fig. 7: distribution-only saving − token-to-expert saving; above zero,
  /// distribution-only is the better predictor.
  double saving_difference = 0.0;
};

/// The fraction of `none_ms` that a strategy taking `ms` saves (negative when it is slower).
double saving(double none_ms, double ms);

/// Decides a cell from its curve: none first, distribution-only second, then at least one
/// token-to-expert point in ascending accuracy. The winner is the argmin of none,
/// distribution-only and the best token-to-expert latency (ties to the simpler strategy).
/// Throws std::invalid_argument for a curve of another shape.
GuidelineCell decide_cell(GuidelineValue skewness, GuidelineValue bandwidth_GBps, std::vector<CurvePoint> curve);

/// Loads and checks every cell's scenario, then simulates the cells on up to `jobs` threads.
/// Returns the cells sorted by bandwidth, then skewness, whatever `jobs`. Throws InputError
/// (every distinct problem, located at the option or --set that caused it) before anything runs.
/// `cell_done` (if set) is called as each cell finishes simulating, from its worker thread.
std::vector<GuidelineCell> run_guideline(const GuidelineSpec& spec, unsigned jobs,
                                         const std::function<void()>& cell_done = {});

}  // namespace moesim
