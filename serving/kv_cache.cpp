#include "serving/kv_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/invariants.hpp"

namespace moesim {

PagedKvCache::PagedKvCache(std::int64_t blocks, std::int64_t block_tokens) : total_(blocks), block_tokens_(block_tokens) {
  if (blocks < 0 || block_tokens < 1) throw std::logic_error("PagedKvCache: blocks >= 0 and block_tokens >= 1 expected");
}

std::size_t PagedKvCache::slot_of(std::int64_t id) const {
  // Fibonacci hashing: ids are consecutive, and the top bits of the product spread them.
  return static_cast<std::size_t>((static_cast<std::uint64_t>(id) * 0x9e3779b97f4a7c15ULL) >> 32) & (held_.size() - 1);
}

PagedKvCache::Held* PagedKvCache::find(std::int64_t id) {
  if (held_.empty()) return nullptr;
  for (std::size_t i = slot_of(id);; i = (i + 1) & (held_.size() - 1)) {
    if (held_[i].id == id) return &held_[i];
    if (held_[i].id == kFree) return nullptr;
  }
}

void PagedKvCache::insert(std::int64_t id, std::int64_t blocks) {
  if (id < 0) throw std::logic_error("PagedKvCache: request ids are >= 0");
  if (2 * (held_count_ + 1) > held_.size()) {
    // At most half full: re-insert the live entries into a table twice the size.
    std::vector<Held> old(std::max<std::size_t>(16, 2 * held_.size()));
    old.swap(held_);
    for (const Held& h : old) {
      if (h.id == kFree) continue;
      std::size_t i = slot_of(h.id);
      while (held_[i].id != kFree) i = (i + 1) & (held_.size() - 1);
      held_[i] = h;
    }
  }
  std::size_t i = slot_of(id);
  while (held_[i].id != kFree) i = (i + 1) & (held_.size() - 1);
  held_[i] = Held{id, blocks};
  ++held_count_;
}

void PagedKvCache::erase(Held* h) {
  // Backward-shift deletion: each entry after the hole moves into it unless its home slot lies
  // cyclically in (hole, entry], where a lookup would no longer pass the hole to reach it.
  const std::size_t mask = held_.size() - 1;
  auto hole = static_cast<std::size_t>(h - held_.data());
  for (std::size_t j = (hole + 1) & mask; held_[j].id != kFree; j = (j + 1) & mask) {
    const std::size_t home = slot_of(held_[j].id);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      held_[hole] = held_[j];
      hole = j;
    }
  }
  held_[hole] = Held{};
  --held_count_;
}

std::int64_t PagedKvCache::held_blocks(std::int64_t id) const {
  const Held* h = find(id);
  return h ? h->blocks : 0;
}

std::int64_t PagedKvCache::extra_blocks(std::int64_t id, std::int64_t tokens) const {
  return std::max<std::int64_t>(0, blocks_for(tokens) - held_blocks(id));
}

bool PagedKvCache::grow(std::int64_t id, std::int64_t tokens) {
  // One lookup: every running request grows (or is checked) every step.
  Held* h = find(id);
  const std::int64_t extra = std::max<std::int64_t>(0, blocks_for(tokens) - (h ? h->blocks : 0));
  if (extra > free_blocks()) return false;
  if (extra > 0) {
    if (h)
      h->blocks += extra;
    else
      insert(id, extra);
    used_ += extra;
    peak_ = std::max(peak_, used_);
  }
  check_invariant(used_ <= total_, Invariant::kKvWithinCapacity, [&] {
    return std::to_string(used_) + " KV blocks in use of " + std::to_string(total_);
  });
  return true;
}

void PagedKvCache::release(std::int64_t id) {
  Held* h = find(id);
  if (!h) return;
  used_ -= h->blocks;
  erase(h);
  check_invariant(used_ >= 0, Invariant::kKvBalanced,
                  [&] { return "request " + std::to_string(id) + " freed more KV blocks than were allocated"; });
}

}  // namespace moesim
