// The serving invariants (core/invariants.hpp, docs/design.md "Invariants", issue 30 class 6): each one
// named once, each broken on purpose where a test can reach it (and caught by name), and a
// property test that serves every registered policy under every routing model, colocated and
// disaggregated, with the checks on: every run must finish with all of them holding.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "app/scenario/scenario.hpp"
#include "app/run/serving_metrics.hpp"
#include "core/invariants.hpp"
#include "models/routing.hpp"
#include "policies/policy.hpp"
#include "serving/kv_cache.hpp"
#include "serving/request.hpp"
#include "tests/serving/serve_metrics.hpp"

namespace moesim {
namespace {

/// Runs `f` and returns the name of the invariant it broke ("" if none).
template <typename F>
std::string broken_by(F&& f) {
  try {
    f();
  } catch (const InvariantBroken& e) {
    EXPECT_NE(std::string(e.what()).find(std::string(invariant_name(e.which()))), std::string::npos) << e.what();
    return std::string(invariant_name(e.which()));
  }
  return "";
}

Request arrived(std::int64_t output_tokens) {
  Request r;
  r.spec = RequestSpec{7, 0, 16, output_tokens};
  r.arrive(100);
  return r;
}

/// arrived(output_tokens), then scheduled at tick 150.
Request scheduled(std::int64_t output_tokens) {
  Request r = arrived(output_tokens);
  r.mark_scheduled(150);
  return r;
}

/// A step produced `tokens` more output tokens of `r` at tick `at`, as the scheduler counts them.
void emit(Request& r, std::int64_t tokens, Tick at) {
  static InterTokenGaps gaps;
  r.generated += tokens;
  r.record_tokens(at, tokens, gaps);
}

}  // namespace

TEST(Invariants, EachHasOneDistinctName) {
  std::set<std::string> names;
  for (int i = 0; i <= static_cast<int>(Invariant::kMetricSet); ++i)
    EXPECT_TRUE(names.insert(std::string(invariant_name(static_cast<Invariant>(i)))).second) << i;
  EXPECT_EQ(names.count("unknown"), 0u);
}

TEST(Invariants, RequestOnceArrivesOnceAndFinishesOnce) {
  EXPECT_EQ(broken_by([] {
              Request r = arrived(1);
              r.arrive(200);
            }),
            "request-once");
  EXPECT_EQ(broken_by([] {
              Request r = scheduled(1);
              emit(r, 1, 300);
              r.finish(300);
              r.finish(400);
            }),
            "request-once");
}

TEST(Invariants, ExactOutputNeitherShortNorLong) {
  EXPECT_EQ(broken_by([] {
              Request r = scheduled(3);
              emit(r, 2, 300);
              r.finish(300);
            }),
            "exact-output");
  EXPECT_EQ(broken_by([] {
              Request r = scheduled(3);
              emit(r, 4, 300);
            }),
            "exact-output");
  EXPECT_EQ(broken_by([] {
              Request r = scheduled(3);
              for (int t = 1; t <= 3; ++t) emit(r, 1, 200 + t);
              r.finish(400);
            }),
            "");
}

TEST(Invariants, RequestCausalityOrdersArrivalScheduleTokensFinish) {
  EXPECT_EQ(broken_by([] {
              Request r = arrived(1);
              r.mark_scheduled(50);  // before it arrived at 100
            }),
            "request-causality");
  EXPECT_EQ(broken_by([] {
              Request r = arrived(1);
              emit(r, 1, 300);  // never scheduled
            }),
            "request-causality");
  EXPECT_EQ(broken_by([] {
              Request r = scheduled(2);
              emit(r, 1, 300);
              emit(r, 1, 250);  // before its previous token
            }),
            "request-causality");
}

TEST(Invariants, KvBalancedFreesNoMoreThanAllocated) {
  PagedKvCache kv(10, 16);
  ASSERT_TRUE(kv.grow(1, 40));
  EXPECT_EQ(kv.used_blocks(), 3);
  EXPECT_FALSE(kv.grow(2, 200));  // refused: kv-within-capacity holds by refusing
  EXPECT_EQ(kv.used_blocks(), 3);
  kv.release(1);
  EXPECT_EQ(kv.used_blocks(), 0);
  EXPECT_EQ(broken_by([&] { kv.release(1); }), "");  // releasing nothing is allowed
}

TEST(Invariants, MetricSetIsTheSameForEveryEngineMode) {
  const auto scenario = [](const std::string& policy) {
    return "seed: 1\nmodel: {preset: mixtral-8x7b, layers: 2}\nhardware: dgx-a100\n"
           "workload: {kind: serving, requests: 6, arrival: {process: poisson, rate_per_s: 100}, prompt_tokens: 32, "
           "output_tokens: 3, routing: {kind: uniform}}\npolicy: " + policy + "\n";
  };
  nlohmann::json m = testing::serve_metrics(scenario("static-ep"));
  EXPECT_NO_THROW(check_metric_set(m));
  m.erase("steady_state");
  EXPECT_EQ(broken_by([&] { check_metric_set(m); }), "metric-set");
  EXPECT_NO_THROW(check_metric_set(testing::serve_metrics(scenario("amoe"))));
  nlohmann::json extra = testing::serve_metrics(scenario("amoe"));
  extra["amoe"] = 1;  // a key of one mode's own
  EXPECT_EQ(broken_by([&] { check_metric_set(extra); }), "metric-set");
}

// Every policy under every routing model (the trace model needs a file of its own and is
// covered by its tests), colocated and as a 4 + 4 prefill/decode split: with the checks of
// request-once, exact-output, request-causality, kv-within-capacity, kv-balanced, kv-hand-over,
// selections-conserved, all-to-all-balanced and metric-set on, every run finishes.
TEST(Invariants, EveryPolicyAndRoutingModelServesWithTheChecksOn) {
  int runs = 0;
  for (const std::string& policy : policies().names())
    for (const std::string& routing : routing_models().names()) {
      if (routing == "trace") continue;
      for (const bool split : {false, true}) {
        if (split && policy == "amoe") continue;  // AMoE splits attention and experts its own way
        const std::string text =
            "seed: 5\nmodel: {preset: mixtral-8x7b, layers: 2}\nhardware: dgx-a100\n"
            "workload: {kind: serving, requests: 8, arrival: {process: poisson, rate_per_s: 400}, prompt_tokens: 48, "
            "output_tokens: 3, routing: {kind: " + routing + "}}\npolicy: " + policy + "\n" +
            (split ? "deployment: {prefill_gpus: 4, decode_gpus: 4}\n" : "");
        nlohmann::json m;
        try {
          m = testing::serve_metrics(text, policy + "-" + routing + ".yaml");
        } catch (const InputError&) {
          continue;  // a combination the policy refuses (its own tests cover why)
        }
        EXPECT_EQ(m["requests_completed"].get<std::int64_t>(), 8) << policy << " " << routing << " split " << split;
        ++runs;
      }
    }
  EXPECT_GE(runs, 200) << "most combinations must run";
}

}  // namespace moesim
