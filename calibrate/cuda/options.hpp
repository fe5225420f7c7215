#pragma once
// Command line of moesim-calibrate: a subcommand naming what to measure and the sweeps.
// The defaults measure what moesim's cost models need for common MoE models (Mixtral-8x7B,
// DeepSeek-V2-Lite/Qwen-MoE and Switch-style experts) in about a quarter of an hour on one GPU.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"

namespace moesim::calib {

/// Everything the command line sets.
struct Options {
  std::string command;  ///< "gemm", "grouped-gemm", "memcpy", "nccl" or "all"
  std::string out = "calibration.json";
  std::vector<Dtype> dtypes = {Dtype::fp16, Dtype::bf16, Dtype::fp32, Dtype::fp8};
  /// (N, K) of the weight matrices: expert up/down projections and attention projections.
  std::vector<std::pair<std::int64_t, std::int64_t>> nk = {
      {4096, 14336}, {14336, 4096}, {4096, 4096}, {2048, 1408}, {1408, 2048}, {768, 3072}, {3072, 768}};
  /// Token counts (GEMM M; for grouped GEMM the total over experts). Dense at the small end,
  /// where decode batches live and the memory-bound to compute-bound transition happens.
  std::vector<std::int64_t> m_sweep = {1,    2,    4,    8,    16,   24,   32,   48,    64,
                                       96,   128,  192,  256,  384,  512,  768,  1024,  1536,
                                       2048, 3072, 4096, 6144, 8192, 12288, 16384};
  int repeats = 20;
  int warmup = 5;
  int experts = 8;     ///< grouped GEMM: number of experts
  double skew = 0.6;   ///< grouped GEMM: extra share of the hot experts (MoEShard's alpha_r)
  int gpus = 0;        ///< memcpy p2p and NCCL: use the first N visible GPUs (0: all)
  /// Transfer sizes in bytes for memcpy and NCCL: 1 KiB to 1 GiB, powers of two.
  std::vector<std::int64_t> sizes;
  bool help = false;
};

/// Parses argv; on a malformed command line prints the problem and usage hint, exits kExitUsage.
Options parse_options(int argc, char** argv);

/// The --help text.
std::string usage();

/// True when `command` asks for `section` ("gemm", ...), either by name or through "all".
bool wants(const Options& options, const std::string& section);

}  // namespace moesim::calib
