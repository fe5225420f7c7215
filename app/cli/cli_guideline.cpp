// `moesim guideline`: its options, the two CSVs and the decision map printed on stdout (MoE-GPS
// Fig. 1's guideline as a table of skewness × bandwidth, Fig. 7's saving difference per cell, and
// the Fig. 6 breakdowns in --curves).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/cli/cli.hpp"
#include "app/sweep/guideline.hpp"
#include "app/run/progress_bar.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

// A computed number in a CSV: the shortest text that reads back to the same double, as
// result.json and the sweep's results.csv print numbers.
std::string num(double v) { return nlohmann::json(v).dump(); }

/// --out: one row per cell, sorted by bandwidth then skewness (run_guideline's order).
std::string decisions_csv(const std::vector<GuidelineCell>& cells) {
  std::string csv =
      "skewness,bandwidth_GBps,none_ms,distribution_only_ms,token_to_expert_ms,best_accuracy,winner,"
      "distribution_only_saving,token_to_expert_saving,saving_difference\n";
  for (const GuidelineCell& c : cells)
    csv += c.skewness.text + "," + c.bandwidth_GBps.text + "," + num(c.none_ms) + "," + num(c.distribution_only_ms) +
           "," + num(c.token_to_expert_ms) + "," + c.best_accuracy.text + "," + strategy_name(c.winner) + "," +
           num(c.distribution_only_saving) + "," + num(c.token_to_expert_saving) + "," + num(c.saving_difference) +
           "\n";
  return csv;
}

/// --curves: one row per (cell, strategy, accuracy), the data of the U-curves and Fig. 6's bars.
std::string curves_csv(const std::vector<GuidelineCell>& cells) {
  std::string csv =
      "skewness,bandwidth_GBps,strategy,accuracy,layer_ms,attention_ms,ffn_ms,communication_ms,overhead_ms,"
      "idle_ms,prediction_error\n";
  for (const GuidelineCell& c : cells)
    for (const CurvePoint& p : c.curve)
      csv += c.skewness.text + "," + c.bandwidth_GBps.text + "," + strategy_name(p.strategy) + "," + p.accuracy.text +
             "," + num(p.layer_ms) + "," + num(p.parts.attention) + "," + num(p.parts.ffn) + "," +
             num(p.parts.communication) + "," + num(p.parts.overhead) + "," + num(p.parts.idle) + "," +
             num(p.prediction_error) + "\n";
  return csv;
}

/// A table cell: the winner's short name (token-to-expert with its best accuracy) and its saving.
std::string verdict(const GuidelineCell& c) {
  if (c.winner == Strategy::kNone) return "none";
  const bool dist = c.winner == Strategy::kDistributionOnly;
  std::ostringstream os;
  os << (dist ? std::string("dist") : "t2e@" + c.best_accuracy.text) << " " << std::showpos << std::fixed
     << std::setprecision(1) << 100.0 * (dist ? c.distribution_only_saving : c.token_to_expert_saving) << "%";
  return os.str();
}

/// One line for a bandwidth: each stretch of skewness with one winner, and where it changes.
std::string changes_line(const std::vector<const GuidelineCell*>& row) {
  struct Stretch {
    Strategy winner;
    std::string from, to;
  };
  std::vector<Stretch> stretches;
  for (const GuidelineCell* c : row) {
    if (stretches.empty() || stretches.back().winner != c->winner) stretches.push_back({c->winner, c->skewness.text, {}});
    stretches.back().to = c->skewness.text;
  }
  std::string line = row.front()->bandwidth_GBps.text + " GB/s: ";
  if (stretches.size() == 1) return line + strategy_name(stretches[0].winner) + " at every skewness (" +
                                    stretches[0].from + " to " + stretches[0].to + ")";
  line += "winner changes at skewness";
  for (std::size_t i = 1; i < stretches.size(); ++i) line += (i > 1 ? ", " : " ") + stretches[i].from;
  line += ":";
  for (std::size_t i = 0; i < stretches.size(); ++i)
    line += std::string(i ? ";" : "") + " " + strategy_name(stretches[i].winner) + " " + stretches[i].from +
            (stretches[i].from == stretches[i].to ? "" : "-" + stretches[i].to);
  return line;
}

/// The decision map: rows skewness, columns bandwidth, then where each column's winner changes.
std::string decision_map(const GuidelineSpec& spec, const std::vector<GuidelineCell>& cells) {
  const std::size_t S = spec.skewness.size(), B = spec.bandwidth_GBps.size();
  auto at = [&](std::size_t s, std::size_t b) -> const GuidelineCell& { return cells[b * S + s]; };
  std::size_t width = 8;
  for (const GuidelineCell& c : cells) width = std::max(width, verdict(c).size() + 2);
  std::ostringstream os;
  const GuidelineAssumptions& a = spec.assumptions;
  os << "moesim guideline: " << spec.model << " on " << spec.hardware << " (GPUs fully connected), prefill "
     << spec.batch_size << " x " << spec.seq_len << ", " << spec.batches - spec.warmup_batches << " of "
     << spec.batches << " batches measured, moegps-dup";
  for (const std::string& set : spec.sets) os << ", " << set;
  os << "\nassumptions: " << (a.tensor_parallel_attention ? "attention tensor-parallel" : "attention data-parallel")
     << ", " << (a.flops_only ? "flops-only kernels" : "roofline kernels") << ", copies "
     << (a.hidden_copies ? "hidden" : "timed") << ", token-to-expert overhead "
     << (a.overhead_ratio ? "a ratio of the layer" : "in ms") << (a.one_layer ? ", one layer" : "") << "\n"
     << "winner per skewness (rows) and GB/s " << (a.bandwidth_per_gpu ? "per GPU" : "per GPU pair")
     << " (columns), with its saving vs none;\n"
     << "dist = distribution-only, t2e@a = token-to-expert at its best accuracy a\n\n"
     << std::setw(8) << "skewness";
  for (std::size_t b = 0; b < B; ++b) os << std::setw(static_cast<int>(width)) << spec.bandwidth_GBps[b].text;
  os << "\n";
  for (std::size_t s = 0; s < S; ++s) {
    os << std::setw(8) << spec.skewness[s].text;
    for (std::size_t b = 0; b < B; ++b) os << std::setw(static_cast<int>(width)) << verdict(at(s, b));
    os << "\n";
  }
  os << "\n";
  for (std::size_t b = 0; b < B; ++b) {
    std::vector<const GuidelineCell*> row;
    for (std::size_t s = 0; s < S; ++s) row.push_back(&at(s, b));
    os << changes_line(row) << "\n";
  }
  return os.str();
}

/// Writes `text` to `path`, creating its folder, through write_atomically.
void write_file(const std::string& path, const std::string& text) {
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  write_atomically(p, text);
}

constexpr const char* kGuidelineHelp = R"(Each (skewness, bandwidth) cell simulates the model on the hardware preset's GPUs rewired
as a full mesh (fabric nvlink-mesh) at that bandwidth per GPU pair and direction (MoE-GPS §5;
the preset's PCIe links are capped at it, so that no PCIe path is faster than the mesh),
prefill batches routed at that skewness (max/mean tokens per expert, at most E/top_k), expert
duplication by moegps-dup (MoE-GPS Algorithm 1) acting on each predictor's forecast: none,
distribution-only, and token-to-expert at every --accuracies value. The first --warmup-batches
batches load the replicas duplication keeps and are left out of the latencies. Latency is the
mean MoE layer's prefill latency (result.json's layer_latency_ms.mean); token-to-expert counts
at its best accuracy (the bottom of its U-curve), and the winner is the fastest of the three
(ties go to the simpler strategy: none, then distribution-only).

--out FILE     skewness,bandwidth_GBps,none_ms,distribution_only_ms,token_to_expert_ms,
               best_accuracy,winner,distribution_only_saving,token_to_expert_saving,
               saving_difference: one row per cell, sorted by bandwidth then skewness; savings
               are fractions of none_ms, saving_difference = distribution-only's minus
               token-to-expert's (MoE-GPS Fig. 7: above zero, distribution-only is better).
--curves FILE  skewness,bandwidth_GBps,strategy,accuracy,layer_ms,attention_ms,ffn_ms,
               communication_ms,overhead_ms,idle_ms,prediction_error: one row per cell and
               strategy (and accuracy, for token-to-expert), the U-curves and Fig. 6's bars.

--assumptions paper runs MoE-GPS's own set-up instead of moesim's timed model, each assumption
named for --without (which drops it, timing that part as moesim does):
  attention-tp       attention tensor-parallel, a ring all-reduce after it (§2)
  flops-only         kernel time proportional to FLOPs: compute saturated (§2, §5)
  hidden-copies      expert copies take no time: hidden behind attention (§3.1, §5)
  overhead-ratio     token-to-expert's overhead a ratio of the cell's layer time without
                     prediction, exponential in accuracy as Fig. 4's fits (§5); the constants
                     are chosen, not fitted: 1% of the layer at a = 0.5, 154% at a = 1, halved
                     at skewness 2.0
  distribution-comm  distribution-only charged none's communication ("communication time
                     remains unchanged", §4), though its replicas share the receive load
  bandwidth-per-gpu  --bandwidth-GBps per GPU, shared evenly by its links to the other GPUs
                     (§4 quotes 600 GB/s NVLink, 64 GB/s PCIe)
  one-layer          one layer (§3.4)
The all-to-alls and the all-reduce are timed on the network under either set.

Files are written atomically and are byte-identical whatever --jobs. Exit codes: 0 success,
2 bad input (located at the option or --set that caused it; nothing is written), 1 internal
error.)";

}  // namespace

GuidelineCommand::GuidelineCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("guideline",
                            "which prediction strategy to use per skewness and interconnect bandwidth (MoE-GPS)");
  cmd_->add_option("--model", model_, "model preset")->required();
  cmd_->add_option("--hardware", hardware_, "hardware preset (its GPUs are fully connected at each bandwidth)")
      ->required();
  cmd_->add_option("--skewness", skewness_, "skewness values: v1,v2,... or start:stop:step")->capture_default_str();
  cmd_->add_option("--bandwidth-GBps", bandwidth_, "GB/s per GPU pair and direction: v1,v2,... or start:stop:step")
      ->capture_default_str();
  cmd_->add_option("--accuracies", accuracies_, "token-to-expert accuracies: v1,v2,... or start:stop:step")
      ->capture_default_str();
  cmd_->add_option("--batch-size", batch_size_, "sequences per batch")->check(CLI::PositiveNumber)->capture_default_str();
  cmd_->add_option("--seq-len", seq_len_, "tokens per sequence")->check(CLI::PositiveNumber)->capture_default_str();
  cmd_->add_option("--batches", batches_, "batches per run")->check(CLI::PositiveNumber)->capture_default_str();
  cmd_->add_option("--warmup-batches", warmup_batches_, "first batches left out of the latencies")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd_->add_option("--seed", seed_, "scenario seed")->check(CLI::Range(0.0, 9007199254740991.0))->capture_default_str();
  cmd_->add_option("--set", sets_, "override a scenario key in every cell: key.path=value (repeatable)")
      ->allow_extra_args(false);
  cmd_->add_option("--out", out_, "decision CSV to write");
  cmd_->add_option("--curves", curves_, "latency-curve CSV to write");
  cmd_->add_option("--assumptions", assumptions_, "timed (moesim's model) or paper (MoE-GPS's set-up; see below)")
      ->capture_default_str();
  cmd_->add_option("--without", without_, "paper assumptions to drop (timed instead): a,b,... (see below)");
  cmd_->add_option("--jobs", jobs_, "cells run in parallel (default: hardware concurrency)")->check(CLI::PositiveNumber);
  cmd_->add_flag("-q,--quiet", quiet_, "no progress bar (drawn on stderr only when it is a terminal)");
  cmd_->footer(kGuidelineHelp);
}

bool GuidelineCommand::parsed() const { return cmd_->parsed(); }

int GuidelineCommand::run() const {
  GuidelineSpec spec;
  spec.model = model_;
  spec.hardware = hardware_;
  spec.skewness = parse_guideline_values("--skewness", skewness_);
  spec.bandwidth_GBps = parse_guideline_values("--bandwidth-GBps", bandwidth_);
  spec.accuracies = parse_guideline_values("--accuracies", accuracies_);
  spec.batch_size = batch_size_;
  spec.seq_len = seq_len_;
  spec.batches = batches_;
  spec.warmup_batches = warmup_batches_;
  spec.seed = seed_;
  spec.sets = sets_;
  spec.assumptions = parse_assumptions(assumptions_, without_);
  if (!out_.empty() && !curves_.empty() && fs::weakly_canonical(fs::absolute(out_)) == fs::weakly_canonical(fs::absolute(curves_)))
    throw InputError(SourceLocation{"--curves " + curves_, 0, 0},
                     "the same file as --out: the curves would overwrite the decision map; give two paths");
  const unsigned jobs = jobs_ ? jobs_ : std::max(1u, std::thread::hardware_concurrency());
  ProgressBar bar("guideline", "cells", spec.skewness.size() * spec.bandwidth_GBps.size(), 0,
                  !quiet_ && isatty(STDERR_FILENO) == 1);
  const std::vector<GuidelineCell> cells = run_guideline(spec, jobs, [&bar] { bar.advance(); });
  bar.finish();
  if (!out_.empty()) write_file(out_, decisions_csv(cells));
  if (!curves_.empty()) write_file(curves_, curves_csv(cells));
  std::cout << decision_map(spec, cells);
  if (!out_.empty()) std::cout << "wrote " << out_ << "\n";
  if (!curves_.empty()) std::cout << "wrote " << curves_ << "\n";
  return 0;
}

}  // namespace moesim
