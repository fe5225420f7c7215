#pragma once
// The collectors' NCCL table (../shared/data/kernels/nccl.csv: nccl-tests all_reduce, all_gather,
// alltoall and reduce_scatter on 2-8 GPUs of one node, per GPU system): read into collective
// samples for the profile fitter (calibrate/profile.hpp: a launch cost and an efficiency curve
// against line rate per op and GPU count), and scored on held-out message sizes (issue 47).
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/held_out_score.hpp"
#include "calibrate/measurements.hpp"
#include "hardware/cluster.hpp"

namespace moesim::calibration {

/// The rows of `system` in an nccl.csv, of the newest NCCL version it was measured with, as
/// collective samples (bytes: nccl-tests' size, the per-rank buffer). Rows of other systems and
/// versions, of reduce_scatter (no moesim collective) and of int8 (moesim's collectives move
/// 16-bit activations; the bytes are the same) are left out; repeated rows are repeated runs, each
/// a sample. Throws InputError at FILE:LINE:COL for a missing column, a bad number and an
/// unknown op.
Measurements read_nccl_table(const std::string& text, const std::string& path, const std::string& system);

/// The engines' custom all-reduce rows of `system` in a custom_allreduce.csv, per engine
/// ("trtllm", "sglang", "vllm"), as all_reduce samples (bytes: the bf16 message): for each engine
/// the newest version's kernel, its CUDA-graph variant where both were timed (serving replays
/// graphs). Located errors as read_nccl_table's.
std::map<std::string, Measurements> read_custom_allreduce_table(const std::string& text, const std::string& path,
                                                               const std::string& system);

/// Fits one engine's custom all-reduce samples per GPU count: a launch that includes every hop
/// (one-shot kernels read all peers at once) and the fraction of the ring's line rate reached
/// at each size, t = launch + line-rate transfer / η(bytes).
std::map<int, CollectiveCalibration> fit_custom_all_reduce(const Measurements& m, const ClusterSpec& base,
                                                           const std::vector<char>& held);

/// Errors of the calibrated collectives per (op, GPU count); the reference is the uncalibrated
/// model (NCCL's tuning).
struct CollectiveFitScore : HeldOutScore {
  std::string op;
  int gpus = 0;
};

/// Fits `m`'s collectives with `fraction` of each (op, GPUs) group's sizes held out
/// (held_out_samples), and scores the held-out sizes against the calibrated and the
/// uncalibrated `base`.
/// With `custom_engine`, `m` holds that engine's custom all-reduce, fitted by
/// fit_custom_all_reduce and priced as a serving cluster of that engine prices it.
std::vector<CollectiveFitScore> score_collective_fits(const Measurements& m, const ClusterSpec& base,
                                                      const std::string& base_name, double fraction,
                                                      const std::string& custom_engine = "");

nlohmann::json score_json(const CollectiveFitScore& s);

}  // namespace moesim::calibration
