// Speculative decoding's drafts in a step (StepBuilder::add_drafts): the passes of the draft
// model or MTP module after the target's layers, per attention group.
#include <algorithm>
#include <numeric>

#include "hardware/collectives.hpp"
#include "serving/step_planner.hpp"
#include "hardware/phase.hpp"

namespace moesim {

// Speculative drafts (StepShape::draft): draft_passes sequential passes over one new token per
// decoding sequence. A pass runs, per attention group (one GPU without tensor parallelism): for
// an MTP draft the two norms and eh_proj that join the token's embedding with the target's hidden
// state (DeepSeek-V3 §2.2, Fig. 3), then the draft's layers (attention 1/T of the heads and an
// all-reduce; a dense FFN 1/T, or the MoE block), then the LM head over 1/T of the vocabulary.
// The draft's experts are where the target's are (an MTP module's routed experts are laid out as
// a layer of the target's): each GPU computes its even share of the pool's selections over its
// share of the experts (expert parallel), or its shards of every selected expert (tensor-parallel
// experts). Their dispatch is not planned: a draft token's selections stay an even share.
void StepBuilder::add_drafts(TaskGraph& plan, const StepShape& shape) {
  if (!shape.draft || shape.draft_passes <= 0) return;
  const ModelSpec& d = *shape.draft;
  const Cluster& cluster = ctx_.cluster;
  const int G = cluster.num_gpus();
  const int T = grouped_ ? group_tp_ : tensor_parallel_ ? G : 1;
  const int groups = G / T;
  const ModelSpec slice = tensor_parallel_slice(d, T);
  const double tb = token_bytes(d);
  // Draft tokens per group, and over the pool.
  std::vector<std::vector<SeqChunk>> chunks(static_cast<std::size_t>(groups));
  std::int64_t total = 0;
  for (int g = 0; g < G && g < static_cast<int>(shape.draft_seqs.size()); ++g) {
    auto& c = chunks[static_cast<std::size_t>(g / T)];
    c.insert(c.end(), shape.draft_seqs[static_cast<std::size_t>(g)].begin(), shape.draft_seqs[static_cast<std::size_t>(g)].end());
    total += static_cast<std::int64_t>(shape.draft_seqs[static_cast<std::size_t>(g)].size());
  }
  if (total == 0) return;
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return b > 0 ? (a + b - 1) / b : 0; };
  // One GPU's routed-expert ops for a draft MoE layer over `n` tokens of its group.
  const auto expert_share = [&](std::int64_t n) {
    if (tp_experts_) {
      const std::int64_t sel = n * d.top_k, slice_experts = d.experts / moe_ep_;
      const std::int64_t mine = ceil_div(sel, moe_ep_);
      const std::int64_t active = std::min(slice_experts, mine);
      return sharded_expert_ops(d, std::vector<std::int64_t>(static_cast<std::size_t>(active), ceil_div(mine, active)),
                                T / moe_ep_, true);
    }
    const std::int64_t sel = ceil_div(total * d.top_k, G);
    const std::int64_t active = std::min<std::int64_t>(ceil_div(d.experts, G), sel);
    return expert_ops(d, std::vector<std::int64_t>(static_cast<std::size_t>(active), ceil_div(sel, active)));
  };
  // Runs `ops` on every GPU of group k after its last task, then (T > 1) an all-reduce of `reduce`
  // tokens' hidden states; returns nothing (last_ advances).
  const auto run = [&](int k, const std::vector<Op>& ops, Phase phase, int layer, std::int64_t reduce) {
    std::vector<TaskId> done(static_cast<std::size_t>(T));
    for (int i = 0; i < T; ++i) {
      const TaskId dep[] = {last_[static_cast<std::size_t>(k * T + i)]};
      done[static_cast<std::size_t>(i)] = plan.compute(k * T + i, phase, layer, ops, dep);
    }
    const TaskId end = T > 1 && reduce > 0
                           ? add_ring_all_reduce(plan, cluster, group_gpus_of(k, T), static_cast<double>(reduce) * tb,
                                                 phase::kCollective, layer, done)
                           : plan.join(done, phase, layer);
    for (int i = 0; i < T; ++i) last_[static_cast<std::size_t>(k * T + i)] = end;
  };
  const int base_layer = ctx_.model.layers;
  for (int pass = 0; pass < shape.draft_passes; ++pass) {
    for (int k = 0; k < groups; ++k) {
      const auto& c = chunks[static_cast<std::size_t>(k)];
      const auto n = static_cast<std::int64_t>(c.size());
      if (n == 0) continue;
      if (shape.draft_mtp) {
        std::vector<Op> join;
        join.push_back(make_elementwise("mtp.enorm", static_cast<double>(n * d.hidden), d.dtype));
        join.push_back(make_elementwise("mtp.hnorm", static_cast<double>(n * d.hidden), d.dtype));
        join.push_back(make_gemm("mtp.eh_proj", n, d.hidden, 2 * d.hidden, d.dtype));
        run(k, join, phase::kDense, base_layer, 0);
      }
      for (int l = 0; l < d.layers; ++l) {
        const int layer = base_layer + l;
        run(k, layer_attention_step_ops(slice, l, c, shape.mla_absorbed_max_new), phase::kAttention,
            layer, n);
        if (!d.is_moe_layer(l)) {
          run(k, dense_ffn_ops(slice, n), phase::kDense, layer, n);
          continue;
        }
        std::vector<Op> ops = router_ops(d, n);
        for (Op& op : expert_share(n)) ops.push_back(std::move(op));
        for (Op& op : shared_expert_ops(slice, n)) ops.push_back(std::move(op));
        for (Op& op : combine_ops(d, n)) ops.push_back(std::move(op));
        run(k, ops, phase::kExperts, layer, n);
      }
      // The LM head picks the draft token: vocabulary-parallel GEMM, then top-1 over the logits.
      const std::int64_t vocab = ceil_div(d.vocab, T);
      run(k, {make_elementwise("draft.norm", static_cast<double>(n * d.hidden), d.dtype),
              make_gemm("draft.lm_head", n, vocab, d.hidden, d.dtype),
              make_elementwise("draft.sample", static_cast<double>(n * vocab), DType::kFp32)},
          phase::kDense, base_layer + d.layers, 0);
    }
  }
}

std::vector<int> StepBuilder::group_gpus_of(int k, int size) const {
  std::vector<int> gpus(static_cast<std::size_t>(size));
  std::iota(gpus.begin(), gpus.end(), k * size);
  return gpus;
}

}  // namespace moesim
