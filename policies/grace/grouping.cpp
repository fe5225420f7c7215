#include "policies/grace/grouping.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include <Eigen/Eigenvalues>

#include "core/rng.hpp"

namespace moesim {
namespace {

constexpr int kRestarts = 8;
constexpr int kLloydIterations = 100;

/// Σ_{j in S} A_ej: how strongly expert e is tied to a set.
double affinity_to(const Eigen::MatrixXd& a, int e, const std::vector<int>& set) {
  double s = 0.0;
  for (const int j : set) s += a(e, j);
  return s;
}

/// One k-means run (k-means++ seeding, Lloyd iterations) on the rows of x; returns labels and
/// writes the inertia. An emptied cluster takes the point farthest from its centre.
std::vector<int> kmeans_once(const Eigen::MatrixXd& x, int k, Rng& rng, double& inertia) {
  const auto n = static_cast<int>(x.rows());
  Eigen::MatrixXd centre(k, x.cols());
  centre.row(0) = x.row(static_cast<Eigen::Index>(rng.below(static_cast<std::uint64_t>(n))));
  std::vector<double> d2(static_cast<std::size_t>(n), std::numeric_limits<double>::infinity());
  for (int c = 1; c < k; ++c) {
    double total = 0.0;
    for (int i = 0; i < n; ++i) {
      d2[static_cast<std::size_t>(i)] = std::min(d2[static_cast<std::size_t>(i)], (x.row(i) - centre.row(c - 1)).squaredNorm());
      total += d2[static_cast<std::size_t>(i)];
    }
    int pick = n - 1;
    if (total > 0.0) {
      double u = rng.uniform01() * total;
      for (int i = 0; i < n; ++i) {
        u -= d2[static_cast<std::size_t>(i)];
        if (u < 0.0) {
          pick = i;
          break;
        }
      }
    } else {
      pick = static_cast<int>(rng.below(static_cast<std::uint64_t>(n)));
    }
    centre.row(c) = x.row(pick);
  }
  std::vector<int> label(static_cast<std::size_t>(n), -1);
  for (int it = 0; it < kLloydIterations; ++it) {
    bool changed = false;
    for (int i = 0; i < n; ++i) {
      int best = 0;
      double best_d = std::numeric_limits<double>::infinity();
      for (int c = 0; c < k; ++c) {
        const double d = (x.row(i) - centre.row(c)).squaredNorm();
        if (d < best_d) {
          best_d = d;
          best = c;
        }
      }
      changed = changed || label[static_cast<std::size_t>(i)] != best;
      label[static_cast<std::size_t>(i)] = best;
    }
    // Every cluster keeps at least one point: an empty one takes the point farthest from its
    // own centre among clusters with more than one point.
    std::vector<int> size(static_cast<std::size_t>(k), 0);
    for (const int l : label) ++size[static_cast<std::size_t>(l)];
    for (int c = 0; c < k; ++c) {
      if (size[static_cast<std::size_t>(c)] > 0) continue;
      int far = -1;
      double far_d = -1.0;
      for (int i = 0; i < n; ++i) {
        const int l = label[static_cast<std::size_t>(i)];
        if (size[static_cast<std::size_t>(l)] < 2) continue;
        const double d = (x.row(i) - centre.row(l)).squaredNorm();
        if (d > far_d) {
          far_d = d;
          far = i;
        }
      }
      --size[static_cast<std::size_t>(label[static_cast<std::size_t>(far)])];
      label[static_cast<std::size_t>(far)] = c;
      ++size[static_cast<std::size_t>(c)];
      changed = true;
    }
    centre.setZero();
    for (int i = 0; i < n; ++i) centre.row(label[static_cast<std::size_t>(i)]) += x.row(i);
    for (int c = 0; c < k; ++c) centre.row(c) /= static_cast<double>(size[static_cast<std::size_t>(c)]);
    if (!changed) break;
  }
  inertia = 0.0;
  for (int i = 0; i < n; ++i) inertia += (x.row(i) - centre.row(label[static_cast<std::size_t>(i)])).squaredNorm();
  return label;
}

ExpertGroups groups_of(const std::vector<int>& label, int k) {
  ExpertGroups g(static_cast<std::size_t>(k));
  for (int e = 0; e < static_cast<int>(label.size()); ++e) g[static_cast<std::size_t>(label[static_cast<std::size_t>(e)])].push_back(e);
  return g;
}

/// The group, among those whose size `open` accepts, where adding e gives the highest
/// Algorithm 2 score (lowest index on ties); -1 if none is open.
template <class Open>
int best_group(const Eigen::MatrixXd& a, const ExpertGroups& groups, int e, Open open) {
  int best = -1;
  double best_score = -std::numeric_limits<double>::infinity();
  for (int d = 0; d < static_cast<int>(groups.size()); ++d) {
    if (!open(groups[static_cast<std::size_t>(d)].size())) continue;
    std::vector<int> with = groups[static_cast<std::size_t>(d)];
    with.push_back(e);
    const double score = intra_score(a, with);
    if (score > best_score) {
      best_score = score;
      best = d;
    }
  }
  return best;
}

void check(const Eigen::MatrixXd& a, int k, const char* who) {
  if (a.rows() != a.cols() || a.rows() == 0) throw std::invalid_argument(std::string(who) + ": affinity must be square");
  if (k < 1 || k > a.rows()) throw std::invalid_argument(std::string(who) + ": 1 <= groups <= experts");
}

/// The seed of one node's grouping in the hierarchical pass: derived from the scenario's seed
/// with the node as an id (a sum seed + node would make seed 1's node 1 seed 2's node 0).
std::uint64_t node_seed(std::uint64_t seed, int node) { return Rng::derive_seed(seed, Stream::kGraceGrouping, node, 0); }

}  // namespace

std::vector<int> spectral_clustering(const Eigen::MatrixXd& affinity, int k, std::uint64_t seed) {
  check(affinity, k, "spectral_clustering");
  const Eigen::Index n = affinity.rows();
  if (k == 1) return std::vector<int>(static_cast<std::size_t>(n), 0);
  // Normalized Laplacian: isolated experts (degree 0) get a zero row.
  Eigen::VectorXd inv_sqrt(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double d = affinity.row(i).sum() - affinity(i, i);
    inv_sqrt(i) = d > 0.0 ? 1.0 / std::sqrt(d) : 0.0;
  }
  Eigen::MatrixXd off = affinity;
  off.diagonal().setZero();
  const Eigen::MatrixXd lap =
      Eigen::MatrixXd::Identity(n, n) - inv_sqrt.asDiagonal() * off * inv_sqrt.asDiagonal();
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(lap);
  Eigen::MatrixXd x = solver.eigenvectors().leftCols(k);  // eigenvalues ascending
  for (Eigen::Index i = 0; i < n; ++i) {
    const double norm = x.row(i).norm();
    if (norm > 0.0) x.row(i) /= norm;
  }
  std::vector<int> best;
  double best_inertia = std::numeric_limits<double>::infinity();
  for (int r = 0; r < kRestarts; ++r) {
    Rng rng = Rng::derive(seed, Stream::kGraceGrouping, r);
    double inertia = 0.0;
    std::vector<int> label = kmeans_once(x, k, rng, inertia);
    if (inertia < best_inertia - 1e-12) {
      best_inertia = inertia;
      best = std::move(label);
    }
  }
  return best;
}

double intra_score(const Eigen::MatrixXd& affinity, const std::vector<int>& experts) {
  double s = 0.0;
  for (const int i : experts) s += affinity_to(affinity, i, experts);
  return s;
}

ExpertGroups controlled_grouping(const Eigen::MatrixXd& affinity, int groups, double r, std::uint64_t seed) {
  check(affinity, groups, "controlled_grouping");
  if (!(r >= 0.0 && r <= 1.0)) throw std::invalid_argument("controlled_grouping: r must lie in [0, 1]");
  const int n = static_cast<int>(affinity.rows());
  const int E = n / groups;  // line 1
  const int delta = std::max(1, static_cast<int>(std::lround(E * r)));
  const int lo = std::max(1, E - delta), hi = E + delta;  // line 2
  const ExpertGroups clusters = groups_of(spectral_clustering(affinity, groups, seed), groups);  // line 4
  ExpertGroups L(static_cast<std::size_t>(groups));
  std::vector<int> omega;
  for (int d = 0; d < groups; ++d) {  // lines 5-11
    std::vector<int> c = clusters[static_cast<std::size_t>(d)];
    if (static_cast<int>(c.size()) > hi) {
      std::stable_sort(c.begin(), c.end(), [&](int a, int b) {
        return affinity_to(affinity, a, clusters[static_cast<std::size_t>(d)]) >
               affinity_to(affinity, b, clusters[static_cast<std::size_t>(d)]);
      });
      omega.insert(omega.end(), c.begin() + hi, c.end());
      c.resize(static_cast<std::size_t>(hi));
    }
    L[static_cast<std::size_t>(d)] = c;
  }
  std::sort(omega.begin(), omega.end());
  for (const int e : omega)  // lines 12-15: the group with room where e raises the score most
    L[static_cast<std::size_t>(best_group(affinity, L, e, [&](std::size_t n) { return static_cast<int>(n) < hi; }))]
        .push_back(e);
  // Lines 16-20: groups below the minimum take the weakest-tied experts of groups above it, each
  // to the needy group where it scores highest.
  auto needy = [&] {
    for (int d = 0; d < groups; ++d)
      if (static_cast<int>(L[static_cast<std::size_t>(d)].size()) < lo) return true;
    return false;
  };
  while (needy()) {
    int from = -1, weakest = -1;
    double weakest_tie = std::numeric_limits<double>::infinity();
    for (int g = 0; g < groups; ++g) {
      const auto& members = L[static_cast<std::size_t>(g)];
      if (static_cast<int>(members.size()) <= lo) continue;
      for (const int e : members) {
        const double tie = affinity_to(affinity, e, members) - affinity(e, e);
        if (tie < weakest_tie) {
          weakest_tie = tie;
          weakest = e;
          from = g;
        }
      }
    }
    if (from < 0) break;  // nothing can give: sizes as close as the experts allow
    auto& src = L[static_cast<std::size_t>(from)];
    src.erase(std::find(src.begin(), src.end(), weakest));
    const int to = best_group(affinity, L, weakest, [&](std::size_t n) { return static_cast<int>(n) < lo; });
    L[static_cast<std::size_t>(to)].push_back(weakest);
  }
  for (auto& g : L) std::sort(g.begin(), g.end());
  return L;
}

double affinity_utilization(const Eigen::MatrixXd& affinity, const ExpertGroups& groups) {
  const Eigen::Index n = affinity.rows();
  double all = 0.0, inside = 0.0;
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = i + 1; j < n; ++j) all += affinity(i, j);
  for (const auto& g : groups)
    for (std::size_t a = 0; a < g.size(); ++a)
      for (std::size_t b = a + 1; b < g.size(); ++b) inside += affinity(g[a], g[b]);
  return all > 0.0 ? inside / all : 0.0;
}

double size_deviation(const ExpertGroups& groups, int experts) {
  const double ideal = static_cast<double>(experts) / static_cast<double>(groups.size());
  double s = 0.0;
  for (const auto& g : groups) s += (static_cast<double>(g.size()) - ideal) * (static_cast<double>(g.size()) - ideal);
  return std::sqrt(s / static_cast<double>(groups.size()));
}

double knee_ratio(const Eigen::MatrixXd& affinity, int groups, const std::vector<double>& candidates,
                  std::uint64_t seed) {
  if (candidates.empty()) throw std::invalid_argument("knee_ratio: no candidate ratios");
  const int n = static_cast<int>(affinity.rows());
  std::vector<double> s, u;
  for (const double r : candidates) {
    const ExpertGroups g = controlled_grouping(affinity, groups, r, seed);
    s.push_back(size_deviation(g, n));
    u.push_back(affinity_utilization(affinity, g));
  }
  auto scaled = [](std::vector<double> v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    const double a = *lo, w = *hi - *lo;
    for (double& x : v) x = w > 0.0 ? (x - a) / w : 0.0;
    return v;
  };
  const std::vector<double> xs = scaled(s), ys = scaled(u);
  const double dx = xs.back() - xs.front(), dy = ys.back() - ys.front(), len = std::hypot(dx, dy);
  std::size_t best = 0;
  double best_d = -1.0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const double d = len > 0.0 ? std::abs(dy * (xs[i] - xs.front()) - dx * (ys[i] - ys.front())) / len : 0.0;
    if (d > best_d + 1e-12) {
      best_d = d;
      best = i;
    }
  }
  return candidates[best];
}

std::vector<int> hierarchical_grouping(const Eigen::MatrixXd& affinity, int nodes, int gpus_per_node, double r,
                                       std::uint64_t seed) {
  check(affinity, nodes * gpus_per_node, "hierarchical_grouping");
  ExpertGroups node_groups = groups_of(spectral_clustering(affinity, nodes, seed), nodes);
  // Each node needs an expert per GPU: a short node takes the most weakly tied expert of the
  // largest node group (our reading; the paper leaves node groups fully non-uniform).
  for (;;) {
    const auto small = std::min_element(node_groups.begin(), node_groups.end(),
                                        [](const auto& a, const auto& b) { return a.size() < b.size(); });
    if (static_cast<int>(small->size()) >= gpus_per_node) break;
    auto& big = *std::max_element(node_groups.begin(), node_groups.end(),
                                  [](const auto& a, const auto& b) { return a.size() < b.size(); });
    const auto weakest = std::min_element(big.begin(), big.end(), [&](int a, int b) {
      return affinity_to(affinity, a, big) < affinity_to(affinity, b, big);
    });
    small->push_back(*weakest);
    big.erase(weakest);
  }
  std::vector<int> gpu_of(static_cast<std::size_t>(affinity.rows()), -1);
  for (int node = 0; node < nodes; ++node) {
    std::vector<int> members = node_groups[static_cast<std::size_t>(node)];
    std::sort(members.begin(), members.end());
    const auto m = static_cast<Eigen::Index>(members.size());
    Eigen::MatrixXd sub(m, m);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < m; ++j) sub(i, j) = affinity(members[static_cast<std::size_t>(i)], members[static_cast<std::size_t>(j)]);
    const ExpertGroups local = controlled_grouping(sub, gpus_per_node, r, node_seed(seed, node));
    for (int d = 0; d < gpus_per_node; ++d)
      for (const int i : local[static_cast<std::size_t>(d)]) gpu_of[static_cast<std::size_t>(members[static_cast<std::size_t>(i)])] = node * gpus_per_node + d;
  }
  return gpu_of;
}

}  // namespace moesim
