#pragma once
// The inter-token gaps of a serving run, each distinct value stored once. A decode step gives
// every request it serves the same gap (the step's length), so a run of 10^8 output tokens has
// about as many distinct gaps as steps: requests keep 4-byte ids into this table instead of an
// 8-byte double per token, and the ITL percentiles are read off the distinct values and their
// counts instead of a sort of every gap (issue 27: at EP1,024 the per-token doubles were 1.2 GB
// and a fifth of the run).
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace moesim {

/// Distinct inter-token gaps (milliseconds, non-negative), numbered in the order first seen.
class InterTokenGaps {
 public:
  using Id = std::uint32_t;
  /// The id of `gap_ms`, added if new. Consecutive calls with one gap (a step's requests) cost a
  /// comparison.
  Id intern(double gap_ms);
  double value(Id id) const { return values_[id]; }
  std::size_t distinct() const { return values_.size(); }
  /// The values of `ids`, in order.
  std::vector<double> values_of(const std::vector<Id>& ids) const;
  /// Per distinct gap, ascending, how many of the gaps counted by id in `counts` (indexed by id,
  /// as many entries as distinct()) it stands for; gaps counted 0 times are left out.
  std::vector<std::pair<double, std::uint64_t>> ascending(const std::vector<std::uint64_t>& counts) const;

 private:
  std::vector<double> values_;
  std::unordered_map<std::uint64_t, Id> ids_;  ///< by the gap's bit pattern (gaps are never -0 or NaN)
  std::uint64_t last_bits_ = 0;
  Id last_id_ = 0;
};

}  // namespace moesim
