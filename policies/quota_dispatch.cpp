#include "policies/quota_dispatch.hpp"

#include <stdexcept>

namespace moesim {

std::vector<std::int64_t> even_quotas(std::int64_t count, int n, int first) {
  std::vector<std::int64_t> q(static_cast<std::size_t>(n), count / n);
  for (std::int64_t i = 0; i < count % n; ++i) ++q[static_cast<std::size_t>((first + i) % n)];
  return q;
}

void assign_home_first(const LayerRouting& r, const std::vector<int>& home, const std::vector<std::vector<int>>& gpus_of,
                       std::vector<std::vector<std::int64_t>>& quota, Dispatch& d) {
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
