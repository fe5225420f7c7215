// Two-batch overlap: a step split into two micro-batches, planned into one graph.
#include "serving/two_batch.hpp"

#include <optional>
#include <stdexcept>

namespace moesim {

std::optional<TwoBatches> split_two_batches(const StepShape& shape, const std::vector<TokenRef>& tokens) {
  TwoBatches out{shape, shape, {}, {}};
  StepShape& first = out.first;
  StepShape& second = out.second;
  second.host.clear();
  second.serial_host.clear();  // the step's serial host work, carried by the first half
  second.swap_out_bytes.assign(shape.swap_out_bytes.size(), 0.0);
  second.swap_in_bytes.assign(shape.swap_in_bytes.size(), 0.0);
  std::size_t offset = 0;
  bool both = false;
  // Per GPU, the first `n` of `v` go to the first half, the rest to the second.
  const auto halve = [](const auto& v, std::size_t n, auto& a, auto& b) {
    a.assign(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
    b.assign(v.begin() + static_cast<std::ptrdiff_t>(n), v.end());
  };
  for (std::size_t g = 0; g < shape.seqs.size(); ++g) {
    const auto& all = shape.seqs[g];
    auto& a = first.seqs[g];
    auto& b = second.seqs[g];
    if (all.size() == 1 && all[0].new_tokens > 1) {
      const std::int64_t half = all[0].new_tokens / 2;
      a = {SeqChunk{half, all[0].context}};
      b = {SeqChunk{all[0].new_tokens - half, all[0].context + half}};
    } else {
      halve(all, (all.size() + 1) / 2, a, b);
    }
    if (g < shape.draft_seqs.size()) {
      const auto& d = shape.draft_seqs[g];
      halve(d, (d.size() + 1) / 2, first.draft_seqs[g], second.draft_seqs[g]);
    }
    std::size_t na = 0, nb = 0;
    for (const SeqChunk& c : a) na += static_cast<std::size_t>(c.new_tokens);
    for (const SeqChunk& c : b) nb += static_cast<std::size_t>(c.new_tokens);
    both = both || nb > 0;
    if (!tokens.empty()) {
      const auto at = tokens.begin() + static_cast<std::ptrdiff_t>(offset);
      out.first_tokens.insert(out.first_tokens.end(), at, at + static_cast<std::ptrdiff_t>(na));
      out.second_tokens.insert(out.second_tokens.end(), at + static_cast<std::ptrdiff_t>(na),
                               at + static_cast<std::ptrdiff_t>(na + nb));
    }
    offset += na + nb;
  }
  if (!both) return std::nullopt;
  return out;
}

namespace {

/// Adds `b`'s per-GPU counts into `a` (the two micro-batches of one layer, reported as one).
void merge_moe(MoeLayerOutput& a, const MoeLayerOutput& b) {
  for (std::size_t g = 0; g < a.gpu_tokens.size() && g < b.gpu_tokens.size(); ++g) a.gpu_tokens[g] += b.gpu_tokens[g];
  if (!a.gpu_rows.empty() || !b.gpu_rows.empty()) {
    if (a.gpu_rows.empty()) a.gpu_rows = a.gpu_tokens;
    const std::vector<std::int64_t>& rows = b.gpu_rows.empty() ? b.gpu_tokens : b.gpu_rows;
    for (std::size_t g = 0; g < a.gpu_rows.size() && g < rows.size(); ++g) a.gpu_rows[g] += rows[g];
  }
  a.tokens_dropped += b.tokens_dropped;
  a.local_bytes += b.local_bytes;
}

}  // namespace

// Two-batch overlap (SGLang's --enable-two-batch-overlap, DeepSeek's inference system, §3.4 of
// the DeepSeek-V3 report on overlapping computation with all-to-all): the two micro-batches are
// planned layer by layer into one graph, each its own chain. Every GPU has one compute stream, so
// their kernels take turns on it while one micro-batch's dispatch or combine is on the links.
// The second micro-batch's tasks are marked (Task::micro_batch) so that the engine's compute
// chooser runs ready work in program order, (layer, micro-batch) first, as SGLang's TBO
// orders its operations; the overlap is whatever the executor then finds, nothing is assumed.
void plan_two_batch_step_into(StepPlan& sp, Policy& policy, const PolicyContext& ctx, int step, const StepShape& first,
                             const StepShape& second, const std::vector<LayerRouting>& routing_first,
                             const std::vector<LayerRouting>& routing_second, const std::vector<Forecast>* forecasts) {
  const ModelSpec& m = ctx.model;
  if (static_cast<int>(routing_first.size()) != m.num_moe_layers() || routing_second.size() != routing_first.size())
    throw std::logic_error("plan_two_batch_step: one routing per MoE layer and micro-batch expected");
  if (forecasts && forecasts->size() != routing_first.size())
    throw std::logic_error("plan_two_batch_step: one forecast per MoE layer expected");
  clear_plan(sp);
  StepBuilder a(policy, ctx, step, first, sp.graph);
  // Every task the second micro-batch adds is marked as its own (Task::micro_batch).
  const auto as_second = [&sp](auto&& add) {
    const auto begin = static_cast<TaskId>(sp.graph.size());
    add();
    sp.graph.set_micro_batch(begin, static_cast<TaskId>(sp.graph.size()), 1);
  };
  std::optional<StepBuilder> b;
  as_second([&] { b.emplace(policy, ctx, step, second, sp.graph); });
  sp.home_tokens = a.home_tokens();
  for (std::size_t g = 0; g < sp.home_tokens.size(); ++g) sp.home_tokens[g] += b->home_tokens()[g];
  while (!a.done()) {
    if (!a.next_is_moe()) {
      a.add_layer(sp.graph, nullptr, nullptr);
      as_second([&] { b->add_layer(sp.graph, nullptr, nullptr); });
      continue;
    }
    const auto i = static_cast<std::size_t>(a.next_moe_index());
    const Forecast* f = forecasts ? &(*forecasts)[i] : nullptr;
    a.add_layer(sp.graph, &routing_first[i], f);
    MoeLayerOutput out = a.take_moe_output();
    as_second([&] { b->add_layer(sp.graph, &routing_second[i], f); });
    merge_moe(out, b->take_moe_output());
    sp.moe.push_back(std::move(out));
  }
  a.add_drafts(sp.graph, first);
  as_second([&] { b->add_drafts(sp.graph, second); });
}

}  // namespace moesim
