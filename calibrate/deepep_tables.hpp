#pragma once
// DeepEP's measured tables (../shared/data/kernels/deepep_ll.csv, deepep_normal.csv: dispatch and
// combine timed through SGLang per nodes, hidden, tokens, top-k, experts and SM budget): read with
// every bad cell located, each row priced by hardware/deepep.cpp's closed form for its bytes and
// nominal rates, and fitted to DeepEpKernelFits (issue 47).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/held_out_score.hpp"
#include "hardware/cluster.hpp"
#include "hardware/deepep_kernel_fit.hpp"

namespace moesim::calibration {

/// One row of a DeepEP table: one dispatch and one combine.
struct DeepEpTableRow {
  std::string system, kernel;  ///< kernel: "deepep-ll" or "deepep-normal"
  int nodes = 1, hidden = 0, top_k = 0, experts = 0, sms = 0;  ///< sms: the normal kernels' budget
  long long tokens = 0;
  double dispatch_us = 0.0, combine_us = 0.0;  ///< normal: transmit + notify
  int line = 0;
};

/// Reads deepep_ll.csv or deepep_normal.csv (`kind` as kernel_table_kind names them), keeping
/// per (system, nodes) the newest version's rows. Throws InputError at FILE:LINE:COL for a
/// missing column, a bad number, and the same (version, shape) measured twice with different
/// times.
std::vector<DeepEpTableRow> read_deepep_table(const std::string& text, const std::string& path, const std::string& kind);

/// The held-out rule, fixed before any fit: within each (kernel, scope), the distinct token
/// counts are sorted and every fourth from the third on (never the last) is held out.
std::vector<char> held_out_deepep_rows(const std::vector<DeepEpTableRow>& rows);

/// Errors of one fit; the reference is the closed form with its published constants.
struct DeepEpFitScore : HeldOutScore {
  std::string kernel, op;
  bool internode = false;
};

/// Fits every (kernel, op, scope) of `rows` measured on `system`, each row priced on `base` (a
/// preset of that GPU) grown to the row's nodes; with `holdout`, held_out_deepep_rows are left
/// out and scored into `scores`.
std::vector<DeepEpKernelFit> fit_deepep_tables(const std::vector<DeepEpTableRow>& rows, const std::string& system,
                                               const ClusterSpec& base, bool holdout,
                                               std::vector<DeepEpFitScore>* scores = nullptr);

nlohmann::json score_json(const DeepEpFitScore& s);

}  // namespace moesim::calibration
