// Acting on forecasts (MoE-GPS §3.1–3.3), function by function: the compute error models on a
// hand-made balanced dispatch (exact loads, conservation, hosts, shortfall), the planned map and
// its rounding, placement of the true selections, and the dispatch each forecast kind implies —
// token-to-expert skipping the scatter for correct predictions, distribution-only copying what
// it predicts and scattering as before, no forecast as static-ep.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "policies/prediction_dispatch.hpp"
#include "policies/expert_copies.hpp"
#include "tests/support/policy_fixtures.hpp"

namespace moesim {
namespace {

using testing_support::fixed_routing;
using testing_support::mispredicting_forecast;

using Hosts = std::vector<std::vector<int>>;
constexpr int kG = 4;
const Hosts kOwners{{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}};  // contiguous: expert e on GPU e/2
const Hosts kEverywhere(8, std::vector<int>{0, 1, 2, 3});

// 8 experts × 5 selections, expert by expert, each computed on its owner: 10 per GPU.
const std::vector<std::int32_t> kItems = fixed_routing(std::vector<std::int64_t>(8, 5)).experts;
std::vector<int> on_owners() {
  std::vector<int> g;
  for (const std::int32_t e : kItems) g.push_back(e / 2);
  return g;
}

using Loads = std::vector<std::int64_t>;

// Every item on a GPU hosting its expert, the reported loads recount, nothing lost.
void check_consistent(const std::vector<std::int32_t>& items, const Hosts& hosts, const std::vector<int>& gpu_of_item,
                      const Loads& load) {
  Loads recount(load.size(), 0);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& h = hosts[static_cast<std::size_t>(items[i])];
    EXPECT_NE(std::find(h.begin(), h.end(), gpu_of_item[i]), h.end()) << "item " << i;
    ++recount[static_cast<std::size_t>(gpu_of_item[i])];
  }
  EXPECT_EQ(recount, load);
  EXPECT_EQ(std::accumulate(load.begin(), load.end(), std::int64_t{0}), static_cast<std::int64_t>(items.size()));
}

ErrorRealisation realise(ErrorModel m, double eps, const Hosts& hosts, std::vector<int>& g,
                         const std::vector<char>& prefer = {}) {
  const ErrorRealisation r = apply_compute_error(m, eps, kItems, hosts, g, kG, prefer);
  check_consistent(kItems, hosts, g, r.gpu_load);
  return r;
}

}  // namespace

TEST(ErrorTarget, ExactLoadsPerModel) {
  // 40 selections on 4 GPUs: avg 10. (1 + 0.1)·10 is 11.000000000000002 in doubles: still 11.
  EXPECT_EQ(error_target(ErrorModel::kOptimistic, 0.1, 10, 40, 4), 10);
  EXPECT_EQ(error_target(ErrorModel::kTypical, 0.1, 10, 40, 4), 11);
  EXPECT_EQ(error_target(ErrorModel::kPessimistic, 0.1, 10, 40, 4), 14);  // 10 + 0.1·40
  EXPECT_EQ(error_target(ErrorModel::kPessimistic, 0.05, 100, 400, 4), 120);  // (1 + 4·0.05)·100
  EXPECT_EQ(error_target(ErrorModel::kTypical, 0.0, 11, 42, 4), 11);  // ⌈10.5⌉, no error
  EXPECT_EQ(error_target(ErrorModel::kTypical, 0.1, 30, 40, 4), 30);  // never lowers b
  EXPECT_EQ(error_target(ErrorModel::kPessimistic, 1.0, 10, 40, 4), 40);  // never above every selection
}

TEST(ComputeError, OptimisticLeavesTheBalance) {
  auto g = on_owners();
  const ErrorRealisation r = realise(ErrorModel::kOptimistic, 0.25, kEverywhere, g);
  EXPECT_EQ(r.gpu_load, (Loads{10, 10, 10, 10}));
  EXPECT_EQ(r.moved, 0);
  EXPECT_EQ(g, on_owners());
}

TEST(ComputeError, TypicalRaisesTheBottleneckToOnePlusEpsTimesAvg) {
  auto g = on_owners();
  ErrorRealisation r = realise(ErrorModel::kTypical, 0.1, kEverywhere, g);
  EXPECT_EQ(r.bottleneck, 0);  // all tied: the lowest index
  EXPECT_EQ(r.target, 11);
  EXPECT_EQ(r.gpu_load, (Loads{11, 9, 10, 10}));  // from the most loaded donor, lowest index first
  g = on_owners();
  r = realise(ErrorModel::kTypical, 0.25, kEverywhere, g);
  EXPECT_EQ(r.gpu_load, (Loads{13, 9, 9, 9}));  // ⌈12.5⌉, one from each donor
  EXPECT_EQ(r.moved, 3);
  EXPECT_EQ(r.shortfall, 0);
}

TEST(ComputeError, PessimisticPutsEveryErrorOnOneGpu) {
  auto g = on_owners();
  ErrorRealisation r = realise(ErrorModel::kPessimistic, 0.1, kEverywhere, g);
  EXPECT_EQ(r.gpu_load, (Loads{14, 8, 9, 9}));  // avg + ε·total = 10 + 4
  g = on_owners();
  r = realise(ErrorModel::kPessimistic, 0.25, kEverywhere, g);
  EXPECT_EQ(r.gpu_load, (Loads{20, 6, 7, 7}));  // (1 + G·ε)·avg = 2·10
}

TEST(ComputeError, RaisesTheMostLoadedGpuLowestIndexOnTies) {
  auto g = on_owners();
  g[0] = 1;  // an expert-0 item moves to GPU 1, one of expert 7 to GPU 2: loads 9, 11, 11, 9
  g[39] = 2;
  const ErrorRealisation r = realise(ErrorModel::kTypical, 0.1, kEverywhere, g);
  EXPECT_EQ(r.bottleneck, 1);
  EXPECT_EQ(r.target, 11);  // already there: nothing moves
  EXPECT_EQ(r.gpu_load, (Loads{9, 11, 11, 9}));
}

TEST(ComputeError, OnlyExpertsTheBottleneckHostsMoveAndTheShortfallIsReported) {
  // Static layout: no other GPU computes an expert GPU 0 hosts, so nothing can move.
  auto g = on_owners();
  ErrorRealisation r = realise(ErrorModel::kPessimistic, 0.25, kOwners, g);
  EXPECT_EQ(r.target, 20);
  EXPECT_EQ(r.moved, 0);
  EXPECT_EQ(r.shortfall, 10);
  EXPECT_EQ(r.gpu_load, (Loads{10, 10, 10, 10}));
  // GPU 0 also hosts expert 2: its five selections on GPU 1 move, then b is as high as it gets.
  Hosts partial = kOwners;
  partial[2].push_back(0);
  g = on_owners();
  r = realise(ErrorModel::kPessimistic, 0.25, partial, g);
  EXPECT_EQ(r.moved, 5);
  EXPECT_EQ(r.shortfall, 5);
  EXPECT_EQ(r.gpu_load, (Loads{15, 5, 10, 10}));
  for (std::size_t i = 0; i < kItems.size(); ++i)
    if (g[i] == 0) {
      EXPECT_LE(kItems[i], 2) << i;
    }
}

TEST(ComputeError, MovesPreferredSelectionsFirst) {
  auto g = on_owners();
  realise(ErrorModel::kTypical, 0.1, kEverywhere, g);
  EXPECT_EQ(g[10], 0);  // item order: GPU 1's first item
  std::vector<char> prefer(kItems.size(), 0);
  prefer[19] = 1;
  g = on_owners();
  realise(ErrorModel::kTypical, 0.1, kEverywhere, g, prefer);
  EXPECT_EQ(g[19], 0);
  EXPECT_EQ(g[10], 1);
}

TEST(Apportion, LargestRemaindersSumExactly) {
  EXPECT_EQ(apportion({0.26, 0.26, 0.24, 0.24}, 10), (Loads{3, 3, 2, 2}));
  EXPECT_EQ(apportion({1.0, 1.0, 1.0}, 10), (Loads{4, 3, 3}));  // normalised; ties: lowest index
  EXPECT_EQ(apportion({0.0, 1.0}, 7), (Loads{0, 7}));
  const std::vector<double> odd{0.123, 0.377, 0.2, 0.05, 0.25};
  for (const std::int64_t n : {0, 1, 3, 17, 1000, 12345}) {
    const Loads c = apportion(odd, n);
    EXPECT_EQ(std::accumulate(c.begin(), c.end(), std::int64_t{0}), n) << n;
    for (std::size_t e = 0; e < c.size(); ++e) EXPECT_LT(std::abs(static_cast<double>(c[e]) - n * odd[e]), 1.0);
  }
  EXPECT_THROW(apportion({0.0, 0.0}, 4), std::invalid_argument);
  EXPECT_THROW(apportion({-0.5, 1.5}, 4), std::invalid_argument);
}

TEST(PlannedItems, PredictedSelectionsOrRoundedShares) {
  const LayerRouting r = fixed_routing({2, 2, 2, 2});
  const Forecast tokens = token_forecast({3, 3, 3, 3, 3, 3, 0, 1}, r, ErrorModel::kTypical, 0.0);
  EXPECT_EQ(planned_items(tokens, r), tokens.selection_expert);
  Forecast dist;
  dist.kind = Forecast::Kind::kDistribution;
  dist.expert_share = {0.55, 0.0, 0.3, 0.15};  // 4.4, 0, 2.4, 1.2 of 8
  EXPECT_EQ(planned_items(dist, r), (std::vector<std::int32_t>{0, 0, 0, 0, 0, 2, 2, 3}));
  EXPECT_THROW(planned_items(Forecast{}, r), std::invalid_argument);
  dist.expert_share.pop_back();
  EXPECT_THROW(planned_items(dist, r), std::invalid_argument);
  Forecast bad = tokens;
  bad.selection_expert[0] = 4;  // no such expert
  EXPECT_THROW(planned_items(bad, r), std::invalid_argument);
  bad.selection_expert.pop_back();
  EXPECT_THROW(planned_items(bad, r), std::invalid_argument);
}

TEST(PlaceUnpinned, LeastFlexibleExpertsFirstOntoTheLeastLoadedHost) {
  // Expert 0 (10 selections) on GPUs {0, 1}, expert 1 (6) on GPU 0 only: placing expert 1 first
  // lets expert 0 fill GPU 1, 8 and 8 (heaviest first would give 11 and 5).
  const std::vector<std::int32_t> items = fixed_routing({10, 6}).experts;
  const Hosts hosts{{0, 1}, {0}};
  std::vector<int> g(items.size(), -1);
  g[0] = 1;  // pinned
  place_unpinned(items, hosts, g, 2);
  EXPECT_EQ(g[0], 1);
  check_consistent(items, hosts, g, Loads{8, 8});
}

TEST(ItemsToDispatch, FromHomeOrFromWhereSelectionsSit) {
  const LayerRouting r = fixed_routing({1, 1, 1, 1});
  const std::vector<int> home{0, 0, 1, 1}, compute{0, 1, 2, 3};
  const Dispatch scatter = items_to_dispatch(r, home, compute, {}, kG, 4);
  EXPECT_EQ(scatter.send[0], (Loads{1, 1, 0, 0}));
  EXPECT_EQ(scatter.send[1], (Loads{0, 0, 1, 1}));
  EXPECT_TRUE(scatter.gather.empty());  // the reverse of the scatter
  for (int g = 0; g < kG; ++g) EXPECT_EQ(scatter.load[g][g], 1);
  // Sitting on 0, 0, 2, 1: only the second and fourth travel; every output returns home.
  const Dispatch sat = items_to_dispatch(r, home, compute, {0, 0, 2, 1}, kG, 4);
  const std::vector<Loads> send{{0, 1, 0, 0}, {0, 0, 0, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  const std::vector<Loads> gather{{1, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}, {0, 1, 0, 0}};
  EXPECT_EQ(sat.send, send);
  EXPECT_EQ(sat.gather, gather);
}

namespace {

std::int64_t total(const std::vector<Loads>& m) {
  std::int64_t n = 0;
  for (const auto& row : m) n += std::accumulate(row.begin(), row.end(), std::int64_t{0});
  return n;
}

// One skewed layer (expert 0 hot, owned by GPU 0) of 128 tokens, 32 living on each GPU.
class ForecastDispatchTest : public ::testing::Test {
 protected:
  LayerRouting r = testing_support::mixed_routing({64, 10, 9, 9, 9, 9, 9, 9}, 7);
  std::vector<int> home = [] {
    std::vector<int> h;
    for (int g = 0; g < kG; ++g) h.insert(h.end(), 32, g);
    return h;
  }();
  CopyBudget budget{kOwners, std::vector<double>(kG, 1e18), 1.0, kG};

  // The decision, checked for consistency: selections on hosts of the placement, load and the
  // gather agree with the per-item choices, the placement grows only by the copies made.
  ForecastDispatch run(const Forecast& f) {
    ForecastDispatch fd = dispatch_on_forecast(f, r, home, budget);
    check_consistent(r.experts, fd.gpus_of_expert, fd.compute_gpu, fd.error.gpu_load);
    std::vector<Loads> load(kG, Loads(8, 0)), gather(kG, Loads(kG, 0)), scatter(kG, Loads(kG, 0));
    for (std::size_t i = 0; i < r.experts.size(); ++i) {
      ++load[fd.compute_gpu[i]][r.experts[i]];
      ++gather[fd.compute_gpu[i]][home[i]];
      ++scatter[home[i]][fd.compute_gpu[i]];
    }
    EXPECT_EQ(fd.dispatch.load, load);
    if (fd.sits_on.empty()) {
      EXPECT_EQ(fd.dispatch.send, scatter);  // home → computing GPU, as static-ep scatters
      EXPECT_TRUE(fd.dispatch.gather.empty());
    } else {
      EXPECT_EQ(fd.dispatch.gather, gather);  // every output returns home
    }
    EXPECT_EQ(new_hosts(budget.placement, fd.gpus_of_expert).size(), fd.dispatch.copies.size());
    return fd;
  }
  Loads sorted_load(const ForecastDispatch& fd) const {
    Loads l = fd.error.gpu_load;
    std::sort(l.begin(), l.end());
    return l;
  }
};

}  // namespace

TEST_F(ForecastDispatchTest, OracleTokensBalanceAndSkipEveryScatter) {
  const ForecastDispatch fd = run(testing_support::oracle_forecast(r));
  EXPECT_EQ(fd.mispredicted, 0);
  EXPECT_EQ(total(fd.dispatch.send), 0);
  EXPECT_EQ(fd.error.gpu_load, (Loads{32, 32, 32, 32}));
  EXPECT_FALSE(fd.dispatch.copies.empty());
  EXPECT_EQ(fd.dispatch.copies_start, CopyStart::kLayerStart);
  // Exactly Algorithm 1's dispatch of the truth.
  const Duplication dup = duplicate_experts(r.experts, kOwners, budget.memory_bytes, 1.0, kG);
  EXPECT_EQ(fd.compute_gpu, dup.gpu_of_item);
}

TEST_F(ForecastDispatchTest, TokensOnlyMispredictedSelectionsTravel) {
  for (const ErrorModel m : {ErrorModel::kOptimistic, ErrorModel::kTypical}) {
    const ForecastDispatch fd = run(mispredicting_forecast(r, 0.25, m));
    EXPECT_EQ(fd.mispredicted, 32);
    std::int64_t forwarded = 0, correct_moved = 0;
    for (std::size_t i = 0; i < r.experts.size(); ++i) {
      const bool wrong = fd.compute_gpu[i] != fd.sits_on[i];
      if (!wrong) continue;
      ++forwarded;
      if (mispredicting_forecast(r, 0.25).selection_expert[i] == r.experts[i]) ++correct_moved;
    }
    EXPECT_EQ(total(fd.dispatch.send), forwarded);
    EXPECT_GT(forwarded, 0);
    EXPECT_LE(forwarded, fd.mispredicted + fd.error.moved);
    EXPECT_LE(correct_moved, fd.error.moved);  // only the error model sends a right one away
    if (m == ErrorModel::kOptimistic) {
      EXPECT_EQ(correct_moved, 0);
    }
  }
}

TEST_F(ForecastDispatchTest, TokensAllWrongForwardEverySelection) {
  // No copies (C_max = 1) and every selection predicted as the expert four away, which lives on
  // another GPU: each one sits on the wrong GPU and is forwarded to its true expert's owner.
  budget.max_copies = 1;
  std::vector<std::int32_t> p;
  for (const std::int32_t e : r.experts) p.push_back((e + 4) % 8);
  const ForecastDispatch fd = run(token_forecast(p, r, ErrorModel::kTypical, 0.0));
  EXPECT_EQ(fd.mispredicted, 128);
  std::vector<Loads> send(kG, Loads(kG, 0));
  for (const std::int32_t e : r.experts) ++send[((e + 4) % 8) / 2][e / 2];
  EXPECT_EQ(fd.dispatch.send, send);
  EXPECT_EQ(total(fd.dispatch.send), 128);
}

TEST_F(ForecastDispatchTest, TokensPessimisticRoutesEveryMispredictionThroughOneGpu) {
  const ForecastDispatch typical = run(mispredicting_forecast(r, 0.25, ErrorModel::kTypical));
  const ForecastDispatch fd = run(mispredicting_forecast(r, 0.25, ErrorModel::kPessimistic));
  const int b = fd.error.bottleneck;
  const auto predicted = mispredicting_forecast(r, 0.25).selection_expert;
  std::int64_t wrong_elsewhere = 0;
  for (std::size_t i = 0; i < r.experts.size(); ++i)
    if (predicted[i] != r.experts[i]) {
      EXPECT_EQ(fd.sits_on[i], b) << i;
      wrong_elsewhere += fd.compute_gpu[i] != b;
    }
  EXPECT_EQ(std::accumulate(fd.dispatch.send[b].begin(), fd.dispatch.send[b].end(), std::int64_t{0}), wrong_elsewhere);
  // Other GPUs send only right predictions the error model moved onto b.
  std::int64_t onto_b = 0;
  for (int s = 0; s < kG; ++s)
    for (int t = 0; t < kG; ++t)
      if (s != b) {
        if (t != b) {
          EXPECT_EQ(fd.dispatch.send[s][t], 0) << s << "→" << t;
        }
        onto_b += fd.dispatch.send[s][t];
      }
  EXPECT_LE(onto_b, fd.error.moved);
  // Typical forwards from several GPUs; pessimistic puts b's load at avg + ε·total or reports why not.
  int typical_senders = 0;
  for (const auto& row : typical.dispatch.send) typical_senders += std::accumulate(row.begin(), row.end(), 0) > 0;
  EXPECT_GT(typical_senders, 1);
  EXPECT_EQ(fd.error.target, 64);
  EXPECT_EQ(fd.error.gpu_load[b] + fd.error.shortfall, 64);
}

TEST_F(ForecastDispatchTest, DistributionExactSharesBalanceAndScatterFromHome) {
  const ForecastDispatch fd = run(testing_support::distribution_forecast(r, expert_shares(r)));
  EXPECT_TRUE(fd.sits_on.empty());
  EXPECT_EQ(total(fd.dispatch.send), 128);  // every selection scatters, local ones included
  EXPECT_EQ(fd.error.gpu_load, (Loads{32, 32, 32, 32}));
  EXPECT_FALSE(fd.dispatch.copies.empty());
  for (const WeightCopy& c : fd.dispatch.copies) EXPECT_EQ(c.expert, 0);  // the hot expert
}

TEST_F(ForecastDispatchTest, DistributionCopiesTheExpertItPredicts) {
  // The forecast names expert 7 (GPU 3) hot; expert 0 (GPU 0) is. Algorithm 1 copies expert 7,
  // expert 0 stays on GPU 0 alone, and GPU 0 computes all its true selections.
  std::vector<double> wrong_hot = expert_shares(r);
  std::swap(wrong_hot[0], wrong_hot[7]);
  const ForecastDispatch fd = run(testing_support::distribution_forecast(r, wrong_hot));
  ASSERT_FALSE(fd.dispatch.copies.empty());
  for (const WeightCopy& c : fd.dispatch.copies) EXPECT_EQ(c.expert, 7);
  EXPECT_EQ(fd.gpus_of_expert[0], (std::vector<int>{0}));
  EXPECT_EQ(fd.error.bottleneck, 0);
  EXPECT_EQ(fd.error.gpu_load[0], 74);  // 64 + 10 of expert 1: above the typical target
  EXPECT_EQ(fd.error.target, 74);  // the typical (1 + ε)·avg is below what the placement left
  EXPECT_EQ(fd.error.moved, 0);
}

TEST_F(ForecastDispatchTest, DistributionErrorRaisesTheBottleneck) {
  // Exact shares balance at 32 each; a stated ε = 0.1 raises b to ⌈1.1·32⌉ = 36 (typical) or
  // ⌈32 + 12.8⌉ = 45 (pessimistic), as far as b's experts allow.
  Forecast f = testing_support::distribution_forecast(r, expert_shares(r));
  f.error = 0.1;
  const ForecastDispatch typical = run(f);
  EXPECT_EQ(typical.error.target, 36);
  EXPECT_EQ(sorted_load(typical).back(), 36);
  f.error_model = ErrorModel::kPessimistic;
  const ForecastDispatch pess = run(f);
  EXPECT_EQ(pess.error.target, 45);
  EXPECT_EQ(pess.error.gpu_load[pess.error.bottleneck] + pess.error.shortfall, 45);
}

TEST_F(ForecastDispatchTest, NoForecastIsStaticEp) {
  const ForecastDispatch fd = run(Forecast{});
  EXPECT_TRUE(fd.dispatch.copies.empty());
  EXPECT_EQ(fd.gpus_of_expert, kOwners);
  for (std::size_t i = 0; i < r.experts.size(); ++i) EXPECT_EQ(fd.compute_gpu[i], r.experts[i] / 2);
  EXPECT_EQ(fd.error.gpu_load, (Loads{74, 18, 18, 18}));
}

}  // namespace moesim
