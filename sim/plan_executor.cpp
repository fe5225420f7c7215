#include "sim/plan_executor.hpp"

#include <array>
#include <stdexcept>
#include <string>

namespace moesim {

PlanExecutor::PlanExecutor(Simulator& sim, FlowNetwork& net, int num_gpus, Hooks hooks)
    : sim_(sim), net_(net), hooks_(std::move(hooks)), compute_(num_gpus), engines_(num_gpus) {}

std::vector<TaskTiming> PlanExecutor::run(const TaskGraph& plan) {
  plan_ = &plan;
  timing_.assign(plan.size(), TaskTiming{});
  pending_deps_.resize(plan.size());
  for (TaskId i = 0; i < plan.size(); ++i) pending_deps_[i] = plan.dependency_count(i);
  for (auto& s : compute_) s = Stream{};
  for (auto& g : engines_)
    for (auto& s : g) s = Stream{};
  done_ = 0;
  // Collect roots first: starting one may complete it and make later roots' successors ready.
  std::vector<TaskId> roots;
  for (TaskId i = 0; i < plan.size(); ++i)
    if (pending_deps_[i] == 0) roots.push_back(i);
  for (TaskId id : roots) on_ready(id);
  sim_.run();
  if (done_ != plan.size()) {
    throw std::logic_error("plan stalled: " + std::to_string(plan.size() - done_) +
                           " tasks never ran");
  }
  plan_ = nullptr;
  return std::move(timing_);
}

void PlanExecutor::on_ready(TaskId id) {
  const Task& t = plan_->task(id);
  timing_[id].ready = sim_.now();
  switch (t.kind) {
    case TaskKind::kJoin:
      timing_[id].start = sim_.now();
      finish(id);
      break;
    case TaskKind::kDelay:
      timing_[id].start = sim_.now();
      sim_.after(t.delay, [this, id] { finish(id); }, EventPriority::kCompletion);
      break;
    case TaskKind::kCompute: {
      if (t.gpu < 0 || static_cast<std::size_t>(t.gpu) >= compute_.size())
        throw std::logic_error("compute task on unknown GPU " + std::to_string(t.gpu));
      Stream& s = compute_[t.gpu];
      s.ready.push_back(id);
      kick_stream(s);
      break;
    }
    case TaskKind::kTransfer:
      if (t.engine == CopyEngine::kNone) {
        start_transfer(id);
      } else {
        Stream& s = engines_[t.gpu][static_cast<int>(t.engine)];
        s.ready.push_back(id);
        kick_stream(s);
      }
      break;
  }
}

// A stream (compute or copy engine) runs one task at a time, in ready order.
void PlanExecutor::kick_stream(Stream& s) {
  if (s.busy || s.head == s.ready.size()) return;
  const TaskId id = s.ready[s.head++];
  s.busy = true;
  const Task& t = plan_->task(id);
  timing_[id].start = sim_.now();
  if (t.kind == TaskKind::kCompute) {
    const Tick d = hooks_.compute_time(t, plan_->ops_of(t));
    sim_.after(d, [this, id, &s] {
      s.busy = false;
      finish(id);
      kick_stream(s);
    }, EventPriority::kCompletion);
  } else {
    net_.start_flow(hooks_.route(t.src, t.dst), t.bytes, [this, id, &s] {
      s.busy = false;
      finish(id);
      kick_stream(s);
    });
  }
}

void PlanExecutor::start_transfer(TaskId id) {
  const Task& t = plan_->task(id);
  timing_[id].start = sim_.now();
  net_.start_flow(hooks_.route(t.src, t.dst), t.bytes, [this, id] { finish(id); });
}

void PlanExecutor::finish(TaskId id) {
  timing_[id].end = sim_.now();
  ++done_;
  for (TaskId next : plan_->successors(id))
    if (--pending_deps_[next] == 0) on_ready(next);
}

}  // namespace moesim
