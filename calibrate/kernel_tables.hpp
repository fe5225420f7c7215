#pragma once
// Measured kernel tables (AIConfigurator's collector format, ../shared/data/kernels/MANIFEST.md):
// recognised by their header, read with every bad cell located, and fitted to GemmKernelFits
// (issue 47). Only `gemm.csv` is fitted so far; the other tables are recognised and named.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/held_out_score.hpp"
#include "hardware/gemm_kernel_fit.hpp"
#include "hardware/gpu_spec.hpp"

namespace moesim::calibration {

/// One row of gemm.csv: one GEMM timed on one GPU inside one engine.
struct GemmTableRow {
  std::string system, engine, kernel_source;
  GemmFamily family = GemmFamily::kBf16;
  std::int64_t m = 0, n = 0, k = 0;
  double time_us = 0.0;
  int line = 0;  ///< 1-based line in the file
};

/// The kernel table a file holds, by its header: "gemm", "moe", "generation_attention",
/// "context_attention", "generation_mla", "context_mla", "nccl", "custom_allreduce", "deepep_ll",
/// "deepep_normal"; nullopt for anything else.
std::optional<std::string> kernel_table_kind(const std::string& text);

/// Reads a gemm.csv. Throws InputError at FILE:LINE:COL for a missing column, a cell that is not
/// a positive number (latency) or whole number (m, n, k), an unknown gemm_dtype, and the same
/// (system, engine, kernel, dtype, m, n, k) measured twice with different times.
std::vector<GemmTableRow> read_gemm_table(const std::string& text, const std::string& path);

/// The table's name for a GPU preset ("h100_sxm" for H100-SXM5-80GB), "" if none is known.
std::string kernel_table_system(const GpuSpec& gpu);

/// The held-out rule, fixed before any fit: within each (engine, family), the distinct values of
/// n and of k are sorted, and every fourth from the third on (indices 2, 6, 10, ...; never the
/// last) is held out; a row is held out when its n or its k is. On the 13-value grid of the
/// shipped tables that is n or k in {1,024, 4,096, 8,192}: 41% of the rows, each inside the
/// measured range, so a held-out shape is interpolated between measured ones.
std::vector<char> held_out_rows(const std::vector<GemmTableRow>& rows);

/// The largest fixed cost a GEMM table's fit may have and still be a GPU kernel's time. Every
/// kernel of the shipped tables fits 2–16 us (launch, prologue, epilogue, the activation's
/// quantisation); vLLM 0.24's fp8-block tables fit 55–180 us, flat from m = 1 to m = 8,192 on
/// shapes that SGLang's DeepGEMM (the same library) runs in 7–16 us: host work inside the timed
/// region, which a served step under CUDA graphs does not pay. Such a fit is refused, and the
/// engine's GEMMs of that family are priced by another engine's kernel of the family
/// (HardwareCalibration::gemm_fit's fallback).
inline constexpr double kMaxGemmKernelOverheadUs = 50.0;

/// Errors of one (engine, family) on its rows, in percent of the measured time.
/// The reference is today's uncalibrated roofline (the datasheet).
struct GemmFitScore : HeldOutScore {
  std::string engine, kernel_source;
  GemmFamily family = GemmFamily::kBf16;
  std::string refused;  ///< why the fit is left out of the profile; "" when it is kept
};

/// Fits every (engine, family) of `rows` measured on `system` (other systems' rows are skipped)
/// for `gpu`. With `holdout`, rows of held_out_rows are left out of the fit and scored;
/// `scores`, when given, receives one score per fit. A fit whose fixed cost exceeds
/// kMaxGemmKernelOverheadUs is scored (with its reason in `refused`) but not returned.
std::vector<GemmKernelFit> fit_gemm_tables(const std::vector<GemmTableRow>& rows, const std::string& system,
                                           const GpuSpec& gpu, bool holdout, std::vector<GemmFitScore>* scores = nullptr);

nlohmann::json score_json(const GemmFitScore& s);

}  // namespace moesim::calibration
