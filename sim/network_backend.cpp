#include "sim/network_backend.hpp"

#include <stdexcept>

#include "sim/flow_network.hpp"

namespace moesim {

std::unique_ptr<NetworkBackend> make_network(const std::string& model, Simulator& sim) {
  if (model == "flow") return std::make_unique<FlowNetwork>(sim);
  throw std::invalid_argument("unknown network model '" + model + "' (valid: flow)");
}

}  // namespace moesim
