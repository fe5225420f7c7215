// Registry-wide: what each policy declares it supports (PolicyCapabilities) is what the scenario
// loader enforces, for every registered policy, so a new policy's rules are its declaration.
#include <gtest/gtest.h>

#include <string>

#include "app/scenario/scenario.hpp"
#include "core/diagnostics.hpp"
#include "policies/policy.hpp"

namespace moesim {
namespace {

/// Every located error of loading `text` (empty when it loads).
std::string errors_of(const std::string& text) {
  try {
    load_scenario_text(text, "capabilities.yaml");
  } catch (const InputError& e) {
    std::string out;
    for (const Diagnostic& d : e.diagnostics()) out += d.to_string() + "\n";
    return out;
  }
  return "";
}

const char* kServing = R"(model: mixtral-8x7b
hardware: dgx-h100
workload: {kind: serving, requests: 8}
)";

bool mentions(const std::string& errors, const std::string& text) { return errors.find(text) != std::string::npos; }

TEST(PolicyCapabilities, PrefillWorkloadsRunOnlyWhereDeclared) {
  for (const auto* p : policies().entries()) {
    const std::string errors = errors_of("model: mixtral-8x7b\nhardware: dgx-h100\npolicy: " + p->name + "\n");
    EXPECT_EQ(mentions(errors, "runs on serving workloads only"), !p->value.supports.prefill) << p->name << ":\n" << errors;
  }
}

TEST(PolicyCapabilities, PredictorsOnlyWhereDeclared) {
  for (const auto* p : policies().entries()) {
    const std::string errors = errors_of(std::string(kServing) + "policy: " + p->name + "\npredictor: oracle\n");
    EXPECT_EQ(mentions(errors, "uses no expert-load predictor"), !p->value.supports.predictors) << p->name << ":\n" << errors;
  }
}

TEST(PolicyCapabilities, ExpertParallelismRequiredWhereDeclared) {
  for (const auto* p : policies().entries()) {
    const std::string errors =
        errors_of(std::string(kServing) + "deployment: {tensor_parallel: 8, expert_parallel: false}\npolicy: " + p->name + "\n");
    EXPECT_EQ(mentions(errors, "needs expert parallelism"), p->value.supports.expert_parallel) << p->name << ":\n" << errors;
  }
}

TEST(PolicyCapabilities, LayerSamplingOnlyOnStepPlanningPolicies) {
  for (const auto* p : policies().entries()) {
    const std::string errors = errors_of(std::string(kServing) + "serving: {layer_sampling: 4}\npolicy: " + p->name + "\n");
    EXPECT_EQ(mentions(errors, "serving.layer_sampling must be 1"), !p->value.supports.stepped) << p->name << ":\n" << errors;
  }
}

TEST(PolicyCapabilities, OwnLayoutRefusesADeployment) {
  for (const auto* p : policies().entries()) {
    const std::string errors = errors_of(std::string(kServing) + "deployment: {prefill_gpus: 4, decode_gpus: 4}\npolicy: " + p->name + "\n");
    EXPECT_EQ(mentions(errors, "splits the GPUs itself"), !p->value.supports.own_layout.empty()) << p->name << ":\n" << errors;
  }
}

}  // namespace
}  // namespace moesim
