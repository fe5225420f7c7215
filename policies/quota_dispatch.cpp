#include "policies/quota_dispatch.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace moesim {

std::vector<std::int64_t> even_quotas(std::int64_t count, int n, int first) {
  std::vector<std::int64_t> q(static_cast<std::size_t>(n), count / n);
  for (std::int64_t i = 0; i < count % n; ++i) ++q[static_cast<std::size_t>((first + i) % n)];
  return q;
}

namespace {

// assign_home_first for a count-level routing, in O(sources · E) with nothing allocated per cell
// (262 k cells a layer at 1,024 GPUs, where the selection-by-selection form's list of what pass 1
// left was most of eplb's dispatch). The same assignment: a quota belongs to one GPU, so pass 1
// touches a quota only from the cell of that GPU and order does not matter there; pass 2 visits
// what is left in the same (source, expert) order.
void assign_home_first_by_count(const LayerRouting& r, const std::vector<std::vector<int>>& gpus_of,
                                std::vector<std::vector<std::int64_t>>& quota, Dispatch& d) {
  const std::size_t E = gpus_of.size(), S = static_cast<std::size_t>(r.sources);
  if (static_cast<std::size_t>(r.num_experts) != E) throw std::logic_error("assign_home_first: one host list per expert");
  thread_local std::vector<std::int64_t> left;
  left.assign(r.counts.begin(), r.counts.end());
  // What each copy computes is what its quota gave away: d.load is filled from the quotas at the
  // end, not cell by cell (a random row of d.load per cell was half of the passes' cache misses).
  thread_local std::vector<std::vector<std::int64_t>> given;
  given.assign(quota.begin(), quota.end());
  // Pass 1, per GPU over the expert copies it holds (expert, then copy order): a cell's
  // selections stay home up to the quota of its first copy there with quota left.
  thread_local std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> held;
  if (held.size() < S) held.resize(S);
  for (std::size_t g = 0; g < S; ++g) held[g].clear();
  for (std::size_t e = 0; e < E; ++e)
    for (std::size_t i = 0; i < gpus_of[e].size(); ++i) {
      const auto g = static_cast<std::size_t>(gpus_of[e][i]);
      if (g < S) held[g].emplace_back(static_cast<std::uint32_t>(e), static_cast<std::uint32_t>(i));
    }
  for (std::size_t g = 0; g < S; ++g) {
    std::uint32_t done_expert = ~0u;  // the expert whose cell took its local share already
    for (const auto& [e, i] : held[g]) {
      std::int64_t& n = left[g * E + e];
      std::int64_t& q = quota[e][i];
      if (e == done_expert || n == 0 || q == 0) continue;
      const std::int64_t local = std::min(n, q);
      q -= local;
      n -= local;
      d.send[g][g] += local;
      done_expert = e;
    }
  }
  // Pass 2: the rest fill the remaining quotas in order.
  thread_local std::vector<std::size_t> next;
  next.assign(E, 0);
  for (std::size_t g = 0; g < S; ++g) {
    std::vector<std::int64_t>& send = d.send[g];
    const std::int64_t* cell = left.data() + g * E;
    for (std::size_t e = 0; e < E; ++e) {
      std::int64_t n = cell[e];
      if (n == 0) continue;
      std::vector<std::int64_t>& q = quota[e];
      const std::vector<int>& gpus = gpus_of[e];
      std::size_t& at = next[e];
      while (n > 0) {
        while (at < q.size() && q[at] == 0) ++at;
        if (at == q.size()) throw std::logic_error("assign_home_first: quotas short of selections");
        const std::int64_t take = std::min(n, q[at]);
        const auto dst = static_cast<std::size_t>(gpus[at]);
        q[at] -= take;
        send[dst] += take;
        n -= take;
      }
    }
  }
  for (std::size_t e = 0; e < E; ++e)
    for (std::size_t i = 0; i < gpus_of[e].size(); ++i)
      d.load[static_cast<std::size_t>(gpus_of[e][i])][e] += given[e][i] - quota[e][i];
}

}  // namespace

void assign_home_first(const LayerRouting& r, const std::vector<int>& home, const std::vector<std::vector<int>>& gpus_of,
                       std::vector<std::vector<std::int64_t>>& quota, Dispatch& d) {
  if (r.by_count) {
    assign_home_first_by_count(r, gpus_of, quota, d);
    return;
  }
  auto assign = [&](int g, int e, std::size_t i, std::int64_t n) {
    quota[e][i] -= n;
    d.send[g][gpus_of[e][i]] += n;
    d.load[gpus_of[e][i]][e] += n;
  };
  // Pass 1: selections whose home GPU holds the expert with quota left stay local (up to the
  // quota). What is left goes to pass 2, per (home GPU, expert) in token order.
  struct Rest {
    int g, e;
    std::int64_t n;
  };
  std::vector<Rest> rest;
  for_each_selection(r, home, [&](int g, int e, std::int64_t n) {
    for (std::size_t i = 0; i < gpus_of[e].size() && n > 0; ++i)
      if (gpus_of[e][i] == g && quota[e][i] > 0) {
        const std::int64_t local = std::min(n, quota[e][i]);
        assign(g, e, i, local);
        n -= local;
        break;
      }
    if (n > 0) rest.push_back({g, e, n});
  });
  // Pass 2: the rest fill the remaining quotas in order.
  std::vector<std::size_t> next(gpus_of.size(), 0);
  for (Rest& x : rest) {
    while (x.n > 0) {
      const int e = x.e;
      while (next[e] < quota[e].size() && quota[e][next[e]] == 0) ++next[e];
      if (next[e] == quota[e].size()) throw std::logic_error("assign_home_first: quotas short of selections");
      const std::int64_t take = std::min(x.n, quota[e][next[e]]);
      assign(x.g, e, next[e], take);
      x.n -= take;
    }
  }
}

}  // namespace moesim
