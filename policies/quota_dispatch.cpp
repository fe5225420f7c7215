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
  auto assign = [&](std::int64_t t, int e, std::size_t i) {
    --quota[e][i];
    ++d.send[home[t]][gpus_of[e][i]];
    ++d.load[gpus_of[e][i]][e];
  };
  // Pass 1: selections whose home GPU holds the expert with quota left stay local.
  std::vector<char> placed(r.experts.size(), 0);
  for (std::int64_t t = 0; t < r.num_tokens; ++t)
    for (int s = 0; s < r.top_k; ++s) {
      const int e = r.expert(t, s);
      for (std::size_t i = 0; i < gpus_of[e].size(); ++i)
        if (gpus_of[e][i] == home[t] && quota[e][i] > 0) {
          assign(t, e, i);
          placed[t * r.top_k + s] = 1;
          break;
        }
    }
  // Pass 2: the rest fill the remaining quotas in order.
  std::vector<std::size_t> next(gpus_of.size(), 0);
  for (std::int64_t t = 0; t < r.num_tokens; ++t)
    for (int s = 0; s < r.top_k; ++s) {
      if (placed[t * r.top_k + s]) continue;
      const int e = r.expert(t, s);
      while (next[e] < quota[e].size() && quota[e][next[e]] == 0) ++next[e];
      if (next[e] == quota[e].size()) throw std::logic_error("assign_home_first: quotas short of selections");
      assign(t, e, next[e]);
    }
}

}  // namespace moesim
