#pragma once
// The human-readable table `moesim run` prints.
#include <ostream>

#include <nlohmann/json.hpp>

namespace moesim {

/// One row per run: latency, TTFT, throughput, idle, all-to-all, imbalance, drops.
void print_summary(std::ostream& os, const nlohmann::json& result);

}  // namespace moesim
