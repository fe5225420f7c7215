// Plans built while they run (PlanExecutor::run_fed): the same timings and events as the whole
// plan run at once, only a window of parts held, parts retired in order with a sound horizon, and
// feeds that break the rules rejected. Also TaskGraph::drop_before, which the executor relies on.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <vector>

#include "sim/analytic_network.hpp"
#include "sim/plan_executor.hpp"
#include "hardware/phase.hpp"

namespace moesim {

namespace {

constexpr int kGpus = 3;

// Three GPUs, each pair joined by a 1 GB/s link each way with 5 ticks of latency; a compute task
// lasts ops[0].flops ticks.
struct Fixture {
  Simulator sim;
  AnalyticNetwork net{sim};
  std::vector<std::vector<std::vector<LinkId>>> routes;
  PlanExecutor make() {
    routes.assign(kGpus, std::vector<std::vector<LinkId>>(kGpus));
    for (int a = 0; a < kGpus; ++a)
      for (int b = 0; b < kGpus; ++b)
        if (a != b) routes[a][b] = {net.add_link(std::to_string(a) + "->" + std::to_string(b), 1e12, 5)};
    return PlanExecutor(sim, net, kGpus,
                        {[](const Task&, std::span<const Op> ops) { return static_cast<Tick>(ops[0].flops); },
                         [this](int s, int d) -> const std::vector<LinkId>& { return routes[s][d]; }});
  }
};

Op work(double ticks) {
  Op op;
  op.flops = ticks;
  return op;
}

// A layered plan in the shape of a batch: per GPU a compute of uneven length, a scatter of
// transfers to every other GPU, a barrier join, a delay, a merge compute; and a trailing copy on
// GPU 0 that belongs to no layer and overlaps the next layer. Layer l depends only on `last`.
std::vector<TaskId> add_layer(TaskGraph& g, const std::vector<TaskId>& last, int l) {
  std::vector<TaskId> attn(kGpus), out(kGpus);
  for (int gpu = 0; gpu < kGpus; ++gpu) {
    const TaskId dep[] = {last[static_cast<std::size_t>(gpu)]};
    attn[gpu] = g.compute(gpu, phase::kAttention, l, {work(100 + 37 * ((gpu + l) % kGpus))}, dep);
  }
  std::vector<std::vector<TaskId>> touching(kGpus);
  for (int s = 0; s < kGpus; ++s)
    for (int d = 0; d < kGpus; ++d) {
      if (s == d) continue;
      const TaskId dep[] = {attn[s]};
      const TaskId f = g.transfer(s, d, 1000.0 * (1 + (s + d + l) % 4), phase::kDispatch, l, dep, s);
      touching[s].push_back(f);
      touching[d].push_back(f);
    }
  std::vector<TaskId> joined(kGpus);
  for (int gpu = 0; gpu < kGpus; ++gpu) joined[gpu] = g.join(touching[gpu], phase::kDispatch, l);
  const TaskId barrier = g.join(joined, phase::kCombine, l);
  for (int gpu = 0; gpu < kGpus; ++gpu) {
    const TaskId dep[] = {barrier};
    const TaskId wait = g.delay(10 + gpu, phase::kSchedule, l, dep, gpu);
    const TaskId merge_dep[] = {wait, joined[gpu]};
    out[gpu] = g.compute(gpu, phase::kMerge, l, {work(20)}, merge_dep);
  }
  const TaskId after[] = {out[0]};
  g.transfer(0, 1, 500.0, phase::kFetch, -1, after, 0, CopyEngine::kHostToDevice);
  return out;
}

// Plans the layered plan a layer per part, recording what the executor hands back.
class LayerFeed final : public PlanFeed {
 public:
  explicit LayerFeed(int layers) : layers_(layers) {}
  bool extend(TaskGraph& g) override {
    if (last_.empty()) {
      const TaskId root = g.join({});
      last_.assign(kGpus, root);
    }
    last_ = add_layer(g, last_, next_++);
    held_max = std::max(held_max, g.tasks().size());
    return next_ < layers_;
  }
  void retire(const TaskGraph& g, TaskId first, std::span<const TaskTiming> timing, Tick horizon) override {
    EXPECT_EQ(first, static_cast<TaskId>(timing_.size())) << "parts retire in order";
    EXPECT_EQ(g.first(), first);
    for (const TaskTiming& t : timing) {
      EXPECT_GE(t.end, 0);
      timing_.push_back(t);
    }
    horizons_.emplace_back(static_cast<TaskId>(timing_.size()), horizon);
    ++parts_retired;
  }
  /// Every task retired after a hand-over started at or after that hand-over's horizon.
  void check_horizons() const {
    for (const auto& [end, horizon] : horizons_)
      for (std::size_t i = end; i < timing_.size(); ++i) EXPECT_GE(timing_[i].start, horizon) << "task " << i;
  }
  const std::vector<TaskTiming>& timing() const { return timing_; }
  std::size_t held_max = 0;
  int parts_retired = 0;

 private:
  int layers_;
  int next_ = 0;
  std::vector<TaskId> last_;
  std::vector<TaskTiming> timing_;
  std::vector<std::pair<TaskId, Tick>> horizons_;
};

bool same(const TaskTiming& a, const TaskTiming& b) { return a.ready == b.ready && a.start == b.start && a.end == b.end; }

}  // namespace

TEST(PlanFeed, GivesTheWholePlansTimingsAndEventsHoldingAWindow) {
  constexpr int kLayers = 12;
  TaskGraph whole;
  std::vector<TaskId> last(kGpus, whole.join({}));
  for (int l = 0; l < kLayers; ++l) last = add_layer(whole, last, l);
  Fixture a;
  PlanExecutor ea = a.make();
  const std::vector<TaskTiming> expected = ea.run(whole);

  Fixture b;
  PlanExecutor eb = b.make();
  LayerFeed feed(kLayers);
  TaskGraph fed;
  eb.run_fed(fed, feed);
  ASSERT_EQ(feed.timing().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_TRUE(same(feed.timing()[i], expected[i])) << "task " << i;
  EXPECT_EQ(b.sim.events_run(), a.sim.events_run());
  EXPECT_EQ(b.sim.now(), a.sim.now());
  EXPECT_EQ(feed.parts_retired, kLayers);
  feed.check_horizons();
  // Never more than a few layers held at once, and nothing once done.
  EXPECT_LE(feed.held_max, 4 * whole.size() / kLayers);
  EXPECT_EQ(fed.first(), fed.size());
  EXPECT_EQ(fed.size(), whole.size());
}

namespace {
// A feed whose part `bad` breaks a rule via `spoil(plan, first task of the part before)`.
class BadFeed final : public PlanFeed {
 public:
  BadFeed(int bad, std::function<void(TaskGraph&, TaskId)> spoil) : bad_(bad), spoil_(std::move(spoil)) {}
  bool extend(TaskGraph& g) override {
    if (last_.empty()) last_.assign(kGpus, g.join({}));
    const auto begin = static_cast<TaskId>(g.size());
    if (part_ == bad_) spoil_(g, previous_);
    else last_ = add_layer(g, last_, part_);
    previous_ = begin;
    ++part_;
    return part_ < 5;
  }
  void retire(const TaskGraph&, TaskId, std::span<const TaskTiming>, Tick) override {}

 private:
  int bad_, part_ = 0;
  TaskId previous_ = 0;
  std::function<void(TaskGraph&, TaskId)> spoil_;
  std::vector<TaskId> last_;
};

void expect_rejected(int bad, std::function<void(TaskGraph&, TaskId)> spoil, const char* what) {
  Fixture f;
  PlanExecutor ex = f.make();
  BadFeed feed(bad, std::move(spoil));
  TaskGraph g;
  try {
    ex.run_fed(g, feed);
    ADD_FAILURE() << "expected a logic_error about " << what;
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(PlanFeed, RejectsPartsThatCouldChangeTimings) {
  // A root after the first part would start later than in the whole plan.
  expect_rejected(2, [](TaskGraph& g, TaskId) { g.join({}); }, "no dependency");
  // A dependency two parts back may have finished already.
  expect_rejected(3, [](TaskGraph& g, TaskId previous) {
    const TaskId dep[] = {previous - 1};
    g.join(dep);
  }, "is depended on");
  // A part with no tasks while more are promised would never be asked to continue.
  expect_rejected(2, [](TaskGraph&, TaskId) {}, "without tasks");
}

TEST(PlanFeed, RunFedNeedsAnEmptyPlan) {
  Fixture f;
  PlanExecutor ex = f.make();
  LayerFeed feed(1);
  TaskGraph g;
  g.join({});
  EXPECT_THROW(ex.run_fed(g, feed), std::invalid_argument);
}

TEST(TaskGraph, DropBeforeKeepsIdsAndOps) {
  TaskGraph g;
  std::vector<TaskId> ids;
  for (int i = 0; i < 10; ++i) {
    const TaskId dep[] = {ids.empty() ? TaskId{0} : ids.back()};
    ids.push_back(g.compute(0, phase::kExperts, i, {work(i), work(100 + i)}, ids.empty() ? TaskGraph::Deps{} : dep));
  }
  g.drop_before(3);  // not compacted yet
  EXPECT_EQ(g.first(), 3u);
  EXPECT_EQ(g.tasks().size(), 7u);
  g.drop_before(8);  // compacted
  EXPECT_EQ(g.first(), 8u);
  EXPECT_EQ(g.size(), 10u);
  ASSERT_EQ(g.tasks().size(), 2u);
  EXPECT_EQ(g.task(9).layer, 9);
  EXPECT_EQ(g.ops_of(g.task(8))[1].flops, 108.0);
  ASSERT_EQ(g.successors(8).size(), 1u);
  EXPECT_EQ(g.successors(8)[0], 9u);
  EXPECT_EQ(g.dependency_count(9), 1u);
  // New tasks keep counting from the end, and their ops are found after compaction.
  const TaskId dep[] = {9};
  const TaskId n = g.compute(1, phase::kMerge, 10, {work(7)}, dep);
  EXPECT_EQ(n, 10u);
  EXPECT_EQ(g.ops_of(g.task(n))[0].flops, 7.0);
  const TaskId dropped[] = {2};
  EXPECT_THROW(g.join(dropped), std::logic_error);
  g.watch_dependencies();
  EXPECT_EQ(g.earliest_dependency(), TaskGraph::kNoTask);
  g.join(dep);
  EXPECT_EQ(g.earliest_dependency(), 9u);
}

// Past the first pages and the inline successor slots: a fan-out task keeps its successors, in
// order, through drops that recycle pages, and a copy of a dropped plan holds the same tasks.
namespace {
// Both with the default pages and with the small ones of the layer-queue mode's graphs.
void check_fan_outs_and_pages(std::size_t page_bits) {
  SCOPED_TRACE("page bits " + std::to_string(page_bits));
  const std::size_t page = std::size_t{1} << page_bits;
  TaskGraph g(page_bits);
  const TaskId root = g.join({});
  std::vector<TaskId> fan;
  const int every = page < 1000 ? 5 : 1000;  // task late + 1 must not be a fan-out
  for (int i = 0; i < 3 * static_cast<int>(page); ++i) {
    const TaskId dep[] = {i % every == 0 ? root : static_cast<TaskId>(g.size() - 1)};
    const TaskId t = g.delay(i, phase::kOther, i, dep);
    if (i % every == 0) fan.push_back(t);
  }
  ASSERT_EQ(g.successors(root).size(), fan.size());
  for (std::size_t k = 0; k < fan.size(); ++k) EXPECT_EQ(g.successors(root)[k], fan[k]);
  const TaskId late = static_cast<TaskId>(2 * page + 5);
  // Tasks grow a chain off `late`, several past the inline slots, after its pages' neighbours go.
  g.drop_before(late);
  std::vector<TaskId> added;
  for (int k = 0; k < 9; ++k) {
    const TaskId dep[] = {late};
    added.push_back(g.join(dep));
  }
  EXPECT_EQ(g.first(), late);
  EXPECT_EQ(g.task(late).delay, static_cast<Tick>(late - 1));
  const auto succ = g.successors(late);
  ASSERT_EQ(succ.size(), 10u);  // the chain's next delay, then the joins
  EXPECT_EQ(succ[0], late + 1);
  for (std::size_t k = 0; k < added.size(); ++k) EXPECT_EQ(succ[k + 1], added[k]);
  const TaskGraph copy = g;
  EXPECT_EQ(copy.first(), late);
  EXPECT_EQ(copy.size(), g.size());
  EXPECT_EQ(copy.tasks().size(), g.tasks().size());
  EXPECT_EQ(copy.task(late + 1).delay, g.task(late + 1).delay);
  ASSERT_EQ(copy.successors(late).size(), 10u);
  EXPECT_EQ(copy.successors(late)[9], added.back());
  EXPECT_EQ(copy.dependency_count(added[0]), 1u);
}
}  // namespace

TEST(TaskGraph, FanOutsAndPagesSurviveDropsAndCopies) {
  check_fan_outs_and_pages(PagedVector<Task>::kPageBits);
  check_fan_outs_and_pages(3);
}

}  // namespace moesim
