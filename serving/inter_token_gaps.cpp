#include "serving/inter_token_gaps.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>

namespace moesim {

InterTokenGaps::Id InterTokenGaps::intern(double gap_ms) {
  const auto bits = std::bit_cast<std::uint64_t>(gap_ms);
  if (!values_.empty() && bits == last_bits_) return last_id_;
  const auto [it, added] = ids_.try_emplace(bits, static_cast<Id>(values_.size()));
  if (added) {
    // 2^32 distinct gaps would be 34 GB of this table alone: no run the memory admits reaches it.
    if (values_.size() == std::numeric_limits<Id>::max()) throw std::length_error("inter-token gaps: 2^32 distinct values");
    values_.push_back(gap_ms);
  }
  last_bits_ = bits;
  last_id_ = it->second;
  return last_id_;
}

std::vector<double> InterTokenGaps::values_of(const std::vector<Id>& ids) const {
  std::vector<double> v;
  v.reserve(ids.size());
  for (const Id id : ids) v.push_back(values_[id]);
  return v;
}

std::vector<std::pair<double, std::uint64_t>> InterTokenGaps::ascending(const std::vector<std::uint64_t>& counts) const {
  std::vector<std::pair<double, std::uint64_t>> out;
  for (std::size_t id = 0; id < values_.size(); ++id)
    if (counts[id] > 0) out.emplace_back(values_[id], counts[id]);
  std::sort(out.begin(), out.end());  // distinct values: no ties
  return out;
}

}  // namespace moesim
