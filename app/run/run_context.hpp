#pragma once
// The pieces every run shares (prefill batches and serving): the scenario's routing model, the
// policy and predictor contexts with their seeded profiling and training windows, and errors of a
// plug-in located at its scenario entry.
#include <memory>
#include <vector>

#include "app/scenario/scenario.hpp"
#include "core/diagnostics.hpp"
#include "policies/policy.hpp"
#include "predictors/predictor.hpp"
#include "policies/memory.hpp"

namespace moesim {

/// InputError at the policy entry when `e` does not fit the cluster's GPU memory.
void check_fits(const MemoryEstimate& e, const Cluster& c, const PolicyEntry& entry);

// A plug-in's own problems (e.g. a policy's replicas that cannot be spread evenly, a trained
// predictor's unreadable trace) are located at its scenario entry.
template <typename F>
void at_entry(const PluginEntry& entry, F&& setup) {
  try {
    setup();
  } catch (const InputError& e) {
    std::vector<Diagnostic> located;
    for (auto d : e.diagnostics()) {
      if (d.where.file.empty()) d.where = entry.where;
      located.push_back(std::move(d));
    }
    throw InputError(std::move(located));
  }
}

/// The scenario's routing model.
std::unique_ptr<RoutingModel> make_routing(const Scenario& s);

/// A policy's context on `cluster`; `shape` (default: the scenario's prefill workload) sizes the
/// profiling window's batches.
PolicyContext policy_context(const Scenario& s, const Cluster& cluster, const RoutingModel& routing,
                             const PrefillWorkload* shape = nullptr);

/// A predictor's context on `cluster`, with its training window sized by `shape` (default: the
/// scenario's prefill workload).
PredictorContext predictor_context(const Scenario& s, const Cluster& cluster, const RoutingModel& routing,
                                   const PrefillWorkload* shape = nullptr);

/// Whether the scenario's layers are routed at count level (issue 13): when no policy, predictor
/// or routing model of the scenario needs token identities and `routing.draws` is `auto`. One
/// answer for the whole scenario, so every run is compared on the same routing draws.
bool count_level_routing(const Scenario& s, const RoutingModel& routing);

}  // namespace moesim
