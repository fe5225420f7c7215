#include "serving/batch_planner.hpp"

namespace moesim {

StepShape prefill_shape(const PolicyContext& ctx) {
  const int G = ctx.cluster.num_gpus();
  const std::vector<std::int64_t> seqs = sequences_per_gpu(ctx.workload.batch_size, G);
  StepShape shape;
  shape.seqs.resize(G);
  for (int g = 0; g < G; ++g)
    shape.seqs[g].assign(static_cast<std::size_t>(seqs[g]), SeqChunk{ctx.workload.seq_len, 0});
  shape.tensor_parallel_attention = ctx.workload.tensor_parallel_attention;
  return shape;
}

BatchPlan plan_batch(Policy& policy, const PolicyContext& ctx, int batch,
                     const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts) {
  return plan_step(policy, ctx, batch, prefill_shape(ctx), routing, forecasts);
}

}  // namespace moesim
