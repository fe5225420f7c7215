#pragma once
// Chrome trace-event JSON (opens in Perfetto or chrome://tracing): one process per GPU with lanes
// for its compute stream, its copy engines and the network transfers it sends.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/plan_executor.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

/// Collects executed plans and writes them as one trace.
class ChromeTrace {
 public:
  explicit ChromeTrace(int num_gpus);
  /// Adds every timed task of a batch's plan.
  void add_batch(const TaskGraph& plan, const std::vector<TaskTiming>& timing, int batch);
  /// Writes the trace; throws std::runtime_error if the file cannot be written.
  void write(const std::string& path) const;
  const nlohmann::json& events() const { return events_; }

 private:
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace moesim
