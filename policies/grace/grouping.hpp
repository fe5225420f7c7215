#pragma once
// GRACE-MoE's expert grouping (§4.1, App. A.2): spectral clustering of a layer's expert affinity
// matrix, controlled non-uniform grouping (Algorithm 3) bounded by the non-uniformity ratio r, r
// chosen at the knee of (S(r), U(r)) (Eq. 1), and the hierarchical scheme — fully non-uniform
// groups per node, controlled non-uniform groups per GPU inside each node.
#include <cstdint>
#include <vector>

#include <Eigen/Dense>

namespace moesim {

/// Expert lists, one per group.
using ExpertGroups = std::vector<std::vector<int>>;

/// Spectral clustering into k clusters (Ng, Jordan, Weiss): the k eigenvectors of the smallest
/// eigenvalues of the normalized Laplacian I - D^-1/2 A D^-1/2, rows normalized, then k-means
/// (k-means++ seeding from `seed`, the best of several restarts). Returns each expert's cluster in
/// [0, k); every cluster gets at least one expert (an empty one takes the point farthest from its
/// centre). A must be symmetric, non-negative, n x n with 1 <= k <= n.
std::vector<int> spectral_clustering(const Eigen::MatrixXd& affinity, int k, std::uint64_t seed);

/// Algorithm 2: the affinity inside a set of experts, Σ_{i,j in S} A_ij.
double intra_score(const Eigen::MatrixXd& affinity, const std::vector<int>& experts);

/// Algorithm 3: spectral clusters, then group sizes held within [E - δ, E + δ], E = ⌊n/D⌋,
/// δ = max(1, round(E·r)): overfull clusters keep their best-connected experts, the rest join the
/// group (with room) where they raise the intra score most, and groups below the minimum take the
/// weakest-connected experts of groups above it.
ExpertGroups controlled_grouping(const Eigen::MatrixXd& affinity, int groups, double r, std::uint64_t seed);

/// Eq. 1: U, the share of all pairwise affinity kept inside groups, and S, the standard deviation
/// of group sizes around n/D.
double affinity_utilization(const Eigen::MatrixXd& affinity, const ExpertGroups& groups);
double size_deviation(const ExpertGroups& groups, int experts);

/// r at the knee of (S(r), U(r)) over `candidates` (ascending): the point farthest from the chord
/// between the first and last points, both axes scaled to [0, 1] (the paper picks the knee by eye
/// from its plot, §4.1; this is the usual "kneedle" reading of it).
double knee_ratio(const Eigen::MatrixXd& affinity, int groups, const std::vector<double>& candidates,
                  std::uint64_t seed);

/// Hierarchical grouping (§4.1): `nodes` fully non-uniform node groups (spectral clusters, each
/// given at least `gpus_per_node` experts), then `gpus_per_node` controlled groups of ratio r
/// inside each. Returns the GPU of each expert, GPUs numbered node by node.
std::vector<int> hierarchical_grouping(const Eigen::MatrixXd& affinity, int nodes, int gpus_per_node, double r,
                                       std::uint64_t seed);

}  // namespace moesim
