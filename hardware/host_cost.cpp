#include "hardware/host_cost.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace moesim {

Op host_work(const char* what, std::int64_t units, double reference_s) {
  if (!(reference_s >= 0.0) || !std::isfinite(reference_s))
    throw std::logic_error(std::string("host work ") + what + ": reference time must be finite and >= 0");
  Op op;
  op.kind = OpKind::kHost;
  op.name = what;
  op.m = units;
  op.flops = reference_s;  // OpKind::kHost keeps its reference time here (sim/work.hpp)
  return op;
}

double host_reference_s(const Op& work) {
  if (work.kind != OpKind::kHost) throw std::logic_error("host_reference_s: not host work");
  return work.flops;
}

HostCostModel::HostCostModel(double speed) : speed_(speed) {
  if (!(speed > 0.0) || !std::isfinite(speed)) throw std::logic_error("HostCostModel: speed must be positive and finite");
}

Tick HostCostModel::time(std::span<const Op> work) const {
  Tick t = 0;
  // Each op is timed as a plain delay of its reference time was (seconds_to_ticks), so that a
  // host at speed 1 gives the figures exactly as before.
  for (const Op& op : work) t = checked_add(t, seconds_to_ticks(host_reference_s(op) / speed_));
  return t;
}

}  // namespace moesim
