#pragma once
// Quota-based dispatch over several hosts of an expert, shared by the policies that split an
// expert's selections evenly over its copies: even-split (every GPU) and eplb (its replicas).
#include <cstdint>
#include <vector>

#include "policies/expert_parallel.hpp"

namespace moesim {

/// Quotas of `count` selections over `n` parts differing by at most one: ⌊count/n⌋ each, plus one
/// for the count mod n parts starting at part `first`, cyclically.
std::vector<std::int64_t> even_quotas(std::int64_t count, int n, int first);

/// Adds every selection of `r` to `d`, on one of its expert's GPUs `gpus_of[e]` (parallel to
/// `quota[e]`, which is consumed): first on the token's home GPU while its quota lasts, then the
/// remaining selections fill the other quotas, GPUs in list order, tokens in order. The quotas of
/// an expert must sum to its selections.
void assign_home_first(const LayerRouting& r, const std::vector<int>& home, const std::vector<std::vector<int>>& gpus_of,
                       std::vector<std::vector<std::int64_t>>& quota, Dispatch& d);

}  // namespace moesim
