#pragma once
// Which attention data-parallel rank of a pool holds the fewest requests: the router's question at
// every arrival. Scanning every rank per arrival costs O(requests x ranks): at 1,024 ranks and
// 131 k closed-loop clients that scan was a third of a decode run. A rank's load only changes when
// a request enters it or leaves it (RankScheduler::enqueue / retire; admission and preemption move
// a request between its queues without changing the count), so a tournament tree over the ranks,
// updated at those two points, answers in O(1) and updates in O(log ranks).
//
// The answer is the scan's: the least load, ties to the lowest rank (SGLang's data-parallel
// controller and vLLM's balancer take the first of equals).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace moesim {

/// Tournament tree of per-rank loads answering "the least loaded rank, lowest index on ties".
class RankLoadIndex {
 public:
  RankLoadIndex() = default;
  /// `ranks` ranks, every load 0.
  explicit RankLoadIndex(std::size_t ranks) { reset(ranks); }

  void reset(std::size_t ranks) {
    leaves_ = 1;
    while (leaves_ < ranks) leaves_ *= 2;
    ranks_ = ranks;
    load_.assign(ranks, 0);
    // Padding leaves hold kNone and lose every match.
    winner_.assign(2 * leaves_, kNone);
    for (std::size_t r = 0; r < ranks; ++r) winner_[leaves_ + r] = static_cast<std::uint32_t>(r);
    for (std::size_t i = leaves_ - 1; i >= 1; --i) winner_[i] = match(winner_[2 * i], winner_[2 * i + 1]);
  }

  std::size_t size() const { return ranks_; }
  std::size_t load(std::size_t rank) const { return load_[rank]; }

  /// Sets `rank`'s load and replays its matches up to the root.
  void set(std::size_t rank, std::size_t load) {
    load_[rank] = load;
    for (std::size_t i = (leaves_ + rank) / 2; i >= 1; i /= 2) winner_[i] = match(winner_[2 * i], winner_[2 * i + 1]);
  }

  /// The least loaded rank, the lowest index among equals; 0 for an empty index.
  int least_loaded() const {
    if (ranks_ == 0) return 0;
    return static_cast<int>(leaves_ == 1 ? 0 : winner_[1]);
  }

 private:
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  /// The winner of two subtrees: the smaller load, the lower rank on ties (the left subtree's
  /// ranks are all lower than the right's).
  std::uint32_t match(std::uint32_t a, std::uint32_t b) const {
    if (b == kNone) return a;
    if (a == kNone) return b;
    return load_[b] < load_[a] ? b : a;
  }

  std::size_t ranks_ = 0, leaves_ = 1;
  std::vector<std::size_t> load_;
  std::vector<std::uint32_t> winner_;  ///< heap order: 1 is the root, leaves from leaves_
};

}  // namespace moesim
