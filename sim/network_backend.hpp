#pragma once
// The interface between the system layer (the plan executor, collectives) and a network model,
// in the spirit of ASTRA-sim's separation of system and network layers: the system starts
// transfers along routes of directed links and is told when each one has arrived; how long that
// takes is the backend's business. Backends: `flow` (flow-level max-min fair sharing,
// sim/flow_network.hpp) and `analytic` (sim/analytic_network.hpp).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/registry.hpp"
#include "sim/hop_latency.hpp"
#include "sim/simulator.hpp"

namespace moesim {

using LinkId = std::uint32_t;
using FlowId = std::uint64_t;

/// One directed link (a full-duplex cable is two links).
struct Link {
  std::string name;
  double bandwidth_Bps = 0.0;  ///< bytes per second, > 0
  Tick latency = 0;            ///< per-hop latency
  // Statistics.
  double bytes_carried = 0.0;
};

/// A network model: links, and transfers along paths of them.
class NetworkBackend {
 public:
  using DoneCallback = std::function<void()>;
  virtual ~NetworkBackend() = default;

  /// Adds a directed link; throws std::invalid_argument for bandwidth <= 0 or latency < 0.
  virtual LinkId add_link(std::string name, double bandwidth_Bps, Tick latency) = 0;
  virtual const Link& link(LinkId id) const = 0;
  virtual std::size_t link_count() const = 0;

  /// Starts moving `bytes` along `path` now; `on_done` runs when the last byte arrives.
  /// An empty path (source == destination) completes at once, at this tick.
  /// `hop` kInLaunch: the flow starts moving bytes at once (its latency was paid by the caller).
  virtual FlowId start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done, HopLatency hop) = 0;
  FlowId start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done) {
    return start_flow(path, bytes, std::move(on_done), HopLatency::kPaid);
  }
  /// Transfers started and not yet arrived.
  virtual std::size_t active_flows() const = 0;
};

/// What a backend is built with beyond its simulator (each backend reads the options it has).
struct NetworkOptions {
  /// Flow backend: flows due within this many ticks of the earliest completion complete with it
  /// (1 = exact: less than a tick of bytes left). See FlowNetwork.
  Tick flow_completion_window = 1;
};

/// A network backend in the registry: how it is built on a simulator.
struct NetworkModelInfo {
  std::function<std::unique_ptr<NetworkBackend>(Simulator&, const NetworkOptions&)> make;
};
/// The network backends (hardware.network_model), each with a one-line description: "flow"
/// (max-min fair sharing) and "analytic" (per-tick link loads).
Registry<NetworkModelInfo>& network_models();

/// The backend `model` names (a registry miss lists the valid names).
std::unique_ptr<NetworkBackend> make_network(const std::string& model, Simulator& sim,
                                             const NetworkOptions& options = {});

}  // namespace moesim
