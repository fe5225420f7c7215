#pragma once
// An expert-parallel layer's dispatch and combine through DeepEP's kernels
// (deployment.alltoall: deepep-normal | deepep-ll): the policy's Dispatch says how many selections
// each GPU computes per expert; this turns the layer's routing into each token's destination
// GPUs under that Dispatch and prices the call with hardware/deepep.hpp's per-GPU traffic.
#include <vector>

#include "hardware/deepep.hpp"
#include "policies/expert_parallel.hpp"

namespace moesim {

/// Per GPU: microseconds from the call's start (every GPU enters it together, DeepEP's kernels
/// being collective) until that GPU's tokens have arrived (dispatch) or its outputs are home
/// (combine). Destinations: each selection of expert e goes to a GPU the Dispatch gives load for
/// e, in GPU order, each until its share is used up (replicas and rebalanced selections land
/// where the policy put them). A count-level routing has no tokens: a source's selections are
/// dealt over its tokens in turn, which keeps its per-(source, expert) totals.
std::vector<DeepEpGpuTraffic> deepep_layer_traffic(const PolicyContext& ctx, const MoeLayerInput& in, const Dispatch& d,
                                                   DeepEpOp op);
/// deepep_layer_traffic's finish times, in microseconds.
std::vector<double> deepep_layer_us(const PolicyContext& ctx, const MoeLayerInput& in, const Dispatch& d, DeepEpOp op);

/// The DeepEP parameters a layer of `m` on `gpus` GPUs uses: dispatch in FP8 (with its scales)
/// when the model computes its experts in fp8 or fp4 (SGLang and TensorRT-LLM quantise before
/// the dispatch), else BF16; Buffer's default 20 SMs; NVLink for same-node peers (567632d).
DeepEpParams deepep_params(const ModelSpec& m, MoeAllToAll kernel, int gpus, DeepEpOp op);

}  // namespace moesim
