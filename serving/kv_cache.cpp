#include "serving/kv_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/invariants.hpp"

namespace moesim {

PagedKvCache::PagedKvCache(std::int64_t blocks, std::int64_t block_tokens) : total_(blocks), block_tokens_(block_tokens) {
  if (blocks < 0 || block_tokens < 1) throw std::logic_error("PagedKvCache: blocks >= 0 and block_tokens >= 1 expected");
}

std::int64_t PagedKvCache::held_blocks(std::int64_t id) const {
  const auto it = held_.find(id);
  return it == held_.end() ? 0 : it->second;
}

std::int64_t PagedKvCache::extra_blocks(std::int64_t id, std::int64_t tokens) const {
  return std::max<std::int64_t>(0, blocks_for(tokens) - held_blocks(id));
}

bool PagedKvCache::grow(std::int64_t id, std::int64_t tokens) {
  // One lookup: every running request grows (or is checked) every step.
  const auto it = held_.find(id);
  const std::int64_t extra = std::max<std::int64_t>(0, blocks_for(tokens) - (it == held_.end() ? 0 : it->second));
  if (extra > free_blocks()) return false;
  if (extra > 0) {
    if (it == held_.end())
      held_.emplace(id, extra);
    else
      it->second += extra;
    used_ += extra;
    peak_ = std::max(peak_, used_);
  }
  check_invariant(used_ <= total_, Invariant::kKvWithinCapacity, [&] {
    return std::to_string(used_) + " KV blocks in use of " + std::to_string(total_);
  });
  return true;
}

void PagedKvCache::release(std::int64_t id) {
  const auto it = held_.find(id);
  if (it == held_.end()) return;
  used_ -= it->second;
  held_.erase(it);
  check_invariant(used_ >= 0, Invariant::kKvBalanced,
                  [&] { return "request " + std::to_string(id) + " freed more KV blocks than were allocated"; });
}

}  // namespace moesim
