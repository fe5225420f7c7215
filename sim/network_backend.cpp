#include "sim/network_backend.hpp"

#include <stdexcept>

#include "sim/analytic_network.hpp"
#include "sim/flow_network.hpp"

namespace moesim {

std::unique_ptr<NetworkBackend> make_network(const std::string& model, Simulator& sim) {
  if (model == "flow") return std::make_unique<FlowNetwork>(sim);
  if (model == "analytic") return std::make_unique<AnalyticNetwork>(sim);
  throw std::invalid_argument("unknown network model '" + model + "' (valid: flow, analytic)");
}

}  // namespace moesim
