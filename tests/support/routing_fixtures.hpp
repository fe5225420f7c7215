#pragma once
// The routing context the routing-model tests share: 4 MoE layers, 8 batches, a test model name.
#include <cstdint>

#include "models/routing.hpp"

namespace moesim::testing_support {

inline RoutingContext routing_context(int experts, int top_k, std::uint64_t seed = 1) {
  RoutingContext c;
  c.experts = experts;
  c.top_k = top_k;
  c.moe_layers = 4;
  c.batches = 8;
  c.model_name = "test";
  c.seed = seed;
  return c;
}

}  // namespace moesim::testing_support
