// GRACE-MoE's grouping (§4.1, App. A.2): spectral clustering recovers planted clusters of a
// synthetic affinity matrix; Algorithm 3 keeps group sizes within [E - δ, E + δ] and, where the
// planted clusters already fit, returns them; the knee of (S(r), U(r)); hierarchical grouping puts
// planted node clusters on nodes; determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/rng.hpp"
#include "policies/grace/grouping.hpp"

namespace moesim {
namespace {

/// Affinity with `sizes` planted clusters (consecutive experts): `inside` within a cluster,
/// `outside` between, plus uniform noise in [0, noise).
Eigen::MatrixXd planted(const std::vector<int>& sizes, double inside, double outside, double noise, std::uint64_t seed) {
  int n = 0;
  std::vector<int> cluster;
  for (int c = 0; c < static_cast<int>(sizes.size()); ++c)
    for (int i = 0; i < sizes[static_cast<std::size_t>(c)]; ++i, ++n) cluster.push_back(c);
  Rng rng(seed);
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const double v = (cluster[static_cast<std::size_t>(i)] == cluster[static_cast<std::size_t>(j)] ? inside : outside) +
                       noise * rng.uniform01();
      a(i, j) = a(j, i) = v;
    }
  return a;
}

/// Whether two labelings define the same partition.
bool same_partition(const std::vector<int>& a, const std::vector<int>& b) {
  std::set<std::pair<int, int>> pairs;
  for (std::size_t i = 0; i < a.size(); ++i) pairs.insert({a[i], b[i]});
  std::set<int> la(a.begin(), a.end()), lb(b.begin(), b.end());
  return pairs.size() == la.size() && pairs.size() == lb.size();
}

std::vector<int> labels_of(const ExpertGroups& g, int n) {
  std::vector<int> l(static_cast<std::size_t>(n), -1);
  for (int d = 0; d < static_cast<int>(g.size()); ++d)
    for (const int e : g[static_cast<std::size_t>(d)]) l[static_cast<std::size_t>(e)] = d;
  return l;
}

}  // namespace

TEST(GraceGrouping, SpectralClusteringRecoversPlantedClusters) {
  for (const std::vector<int>& sizes : {std::vector<int>{8, 8, 8, 8}, std::vector<int>{12, 4, 10, 6}, std::vector<int>{20, 12}}) {
    const Eigen::MatrixXd a = planted(sizes, 1.0, 0.05, 0.1, 7);
    std::vector<int> truth;
    for (int c = 0; c < static_cast<int>(sizes.size()); ++c) truth.insert(truth.end(), static_cast<std::size_t>(sizes[static_cast<std::size_t>(c)]), c);
    const std::vector<int> got = spectral_clustering(a, static_cast<int>(sizes.size()), 1);
    EXPECT_TRUE(same_partition(got, truth)) << sizes.size() << " clusters";
    EXPECT_EQ(got, spectral_clustering(a, static_cast<int>(sizes.size()), 1));  // deterministic
  }
}

// Algorithm 3: 32 experts, 4 groups, E = 8. Planted clusters of 12, 4, 10, 6 lie outside
// [8 - δ, 8 + δ] for r = 0.25 (δ = 2: [6, 10]), so sizes are pulled in; with r = 0.5 (δ = 4:
// [4, 12]) the planted clusters fit and are returned unchanged.
TEST(GraceGrouping, ControlledGroupingBoundsSizesAndKeepsClustersThatFit) {
  const Eigen::MatrixXd a = planted({12, 4, 10, 6}, 1.0, 0.05, 0.1, 3);
  const ExpertGroups tight = controlled_grouping(a, 4, 0.25, 1);
  int total = 0;
  for (const auto& g : tight) {
    EXPECT_GE(g.size(), 6u);
    EXPECT_LE(g.size(), 10u);
    total += static_cast<int>(g.size());
  }
  EXPECT_EQ(total, 32);
  const ExpertGroups loose = controlled_grouping(a, 4, 0.5, 1);
  std::vector<int> truth;
  for (int c = 0; c < 4; ++c) truth.insert(truth.end(), static_cast<std::size_t>(std::vector<int>{12, 4, 10, 6}[static_cast<std::size_t>(c)]), c);
  EXPECT_TRUE(same_partition(labels_of(loose, 32), truth));
  // Eq. 1: the looser grouping keeps more affinity inside groups, at a larger size deviation.
  EXPECT_GT(affinity_utilization(a, loose), affinity_utilization(a, tight));
  EXPECT_GT(size_deviation(loose, 32), size_deviation(tight, 32));
  EXPECT_NEAR(size_deviation({{0, 1}, {2, 3}}, 4), 0.0, 1e-12);
  EXPECT_NEAR(size_deviation({{0, 1, 2}, {3}}, 4), 1.0, 1e-12);
  EXPECT_THROW(controlled_grouping(a, 4, 1.5, 1), std::invalid_argument);
  EXPECT_THROW(controlled_grouping(a, 33, 0.5, 1), std::invalid_argument);
}

TEST(GraceGrouping, IntraScoreIsAlgorithmTwo) {
  Eigen::MatrixXd a(3, 3);
  a << 0, 2, 3, 2, 0, 5, 3, 5, 0;
  EXPECT_DOUBLE_EQ(intra_score(a, {0, 1}), 4.0);
  EXPECT_DOUBLE_EQ(intra_score(a, {0, 1, 2}), 20.0);
  EXPECT_NEAR(affinity_utilization(a, {{1, 2}, {0}}), 0.5, 1e-12);
}

// The knee of (S(r), U(r)): a ratio strictly between the extremes that keeps more affinity than the
// tightest grouping with less size deviation than the loosest.
TEST(GraceGrouping, KneeRatioTradesAffinityForSizeDeviation) {
  const Eigen::MatrixXd a = planted({12, 4, 10, 6}, 1.0, 0.05, 0.1, 3);
  const std::vector<double> candidates = {0.0, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0};
  const double r = knee_ratio(a, 4, candidates, 1);
  EXPECT_GT(r, 0.0);
  EXPECT_LT(r, 1.0);
  const ExpertGroups at = controlled_grouping(a, 4, r, 1);
  const ExpertGroups tight = controlled_grouping(a, 4, 0.0, 1);
  const ExpertGroups loose = controlled_grouping(a, 4, 1.0, 1);
  EXPECT_GT(affinity_utilization(a, at), affinity_utilization(a, tight));
  EXPECT_LE(size_deviation(at, 32), size_deviation(loose, 32));
  EXPECT_EQ(r, knee_ratio(a, 4, candidates, 1));
}

// Two nodes of two GPUs: planted node clusters (24 + 8 experts, strongly tied inside, weakly across)
// land on one node each, and every GPU gets at least one expert.
TEST(GraceGrouping, HierarchicalGroupingPlacesNodeClustersOnNodes) {
  const Eigen::MatrixXd a = planted({24, 8}, 1.0, 0.01, 0.2, 5);
  const std::vector<int> gpu = hierarchical_grouping(a, 2, 2, 0.5, 1);
  ASSERT_EQ(gpu.size(), 32u);
  const int node0 = gpu[0] / 2;
  for (int e = 0; e < 24; ++e) EXPECT_EQ(gpu[static_cast<std::size_t>(e)] / 2, node0) << e;
  for (int e = 24; e < 32; ++e) EXPECT_NE(gpu[static_cast<std::size_t>(e)] / 2, node0) << e;
  std::set<int> used(gpu.begin(), gpu.end());
  EXPECT_EQ(used.size(), 4u);
  EXPECT_EQ(gpu, hierarchical_grouping(a, 2, 2, 0.5, 1));
}

}  // namespace moesim
