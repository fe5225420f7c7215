#pragma once
// A paged KV cache (vLLM's PagedAttention block manager, reduced to what timing needs): one per
// GPU that runs attention, a fixed number of blocks of `block_tokens` tokens each, allocated to
// requests as their context grows and freed when they finish or are preempted.
#include <cstdint>
#include <vector>

namespace moesim {

/// Block accounting of one GPU's KV cache.
class PagedKvCache {
 public:
  PagedKvCache(std::int64_t blocks, std::int64_t block_tokens);

  /// Blocks needed to hold `tokens` tokens.
  std::int64_t blocks_for(std::int64_t tokens) const { return (tokens + block_tokens_ - 1) / block_tokens_; }
  /// Extra blocks request `id` needs to hold `tokens` tokens in all.
  std::int64_t extra_blocks(std::int64_t id, std::int64_t tokens) const;
  bool can_grow(std::int64_t id, std::int64_t tokens) const { return extra_blocks(id, tokens) <= free_blocks(); }
  /// Grows request `id`'s allocation to hold `tokens` tokens; false (and nothing changes) when
  /// the free blocks do not suffice.
  bool grow(std::int64_t id, std::int64_t tokens);
  /// Frees everything request `id` holds (nothing if it holds nothing).
  void release(std::int64_t id);

  std::int64_t held_blocks(std::int64_t id) const;
  std::int64_t total_blocks() const { return total_; }
  std::int64_t used_blocks() const { return used_; }
  std::int64_t free_blocks() const { return total_ - used_; }
  std::int64_t peak_used_blocks() const { return peak_; }
  std::int64_t block_tokens() const { return block_tokens_; }

 private:
  std::int64_t total_;
  std::int64_t block_tokens_;
  std::int64_t used_ = 0;
  std::int64_t peak_ = 0;

  /// Blocks per request: open addressing with linear probing over a power-of-two table, so the
  /// lookup every running request makes every step is one multiply and, nearly always, one probe
  /// (a node-based map cost a division and a pointer chase: 2% of a serving run). Erasing shifts
  /// the entries behind back into place, so no tombstones pile up over a run's many requests.
  struct Held {
    std::int64_t id = kFree;
    std::int64_t blocks = 0;
  };
  static constexpr std::int64_t kFree = -1;  ///< request ids are >= 0
  std::size_t slot_of(std::int64_t id) const;
  /// The entry of `id`, or nullptr when it holds nothing.
  Held* find(std::int64_t id);
  const Held* find(std::int64_t id) const { return const_cast<PagedKvCache*>(this)->find(id); }
  void insert(std::int64_t id, std::int64_t blocks);
  void erase(Held* h);
  std::vector<Held> held_;
  std::size_t held_count_ = 0;
};

}  // namespace moesim
