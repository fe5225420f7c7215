#include "sim/network_backend.hpp"

#include <stdexcept>

#include "sim/analytic_network.hpp"
#include "sim/flow_network.hpp"

namespace moesim {

Registry<NetworkModelInfo>& network_models() {
  static Registry<NetworkModelInfo> r = [] {
    Registry<NetworkModelInfo> reg("network model");
    reg.add("flow",
            "max-min fair sharing recomputed on every flow start and end (exact when collectives overlap; up to "
            "~64 GPUs)",
            {[](Simulator& sim, const NetworkOptions& o) -> std::unique_ptr<NetworkBackend> {
              return std::make_unique<FlowNetwork>(sim, o.flow_completion_window);
            }});
    reg.add("analytic", "each tick's transfers priced from the bytes on their busiest link (very large clusters)",
            {[](Simulator& sim, const NetworkOptions&) -> std::unique_ptr<NetworkBackend> {
              return std::make_unique<AnalyticNetwork>(sim);
            }});
    return reg;
  }();
  return r;
}

std::unique_ptr<NetworkBackend> make_network(const std::string& model, Simulator& sim, const NetworkOptions& options) {
  return network_models().get(model).value.make(sim, options);
}

}  // namespace moesim
