// The host cost model (hardware/host_cost.hpp): host work states what runs and its size, the
// model prices it by the cluster's host_speed, and the executor asks it as it asks the compute
// model about kernels. At speed 1 a host task takes exactly the delay its reference time gave.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>

#include "core/diagnostics.hpp"
#include "hardware/calibration.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/host_cost.hpp"
#include "hardware/phase.hpp"
#include "sim/network_backend.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {
namespace {

/// How long `g` takes on a copy of `preset` whose host runs at `speed`.
Tick run_on(const char* preset, double speed, const TaskGraph& g) {
  ClusterSpec spec = cluster_presets().get(preset).value;
  spec.host_speed = speed;
  const Cluster cluster(spec);
  const ComputeCostModel cost = ComputeCostModel::for_cluster(spec);
  Simulator sim;
  const auto net = make_network("flow", sim);
  cluster.install(*net);
  PlanExecutor exec(sim, *net, cluster.num_gpus(), engine_hooks(cluster, cost));
  exec.run(g);
  return sim.now();
}

}  // namespace

TEST(HostCost, ReferenceTimeAtSpeedOneIsThePlainDelay) {
  const Op work = host_work("harmoeny.schedule", 128 * 8, 50e-6);
  EXPECT_EQ(work.kind, OpKind::kHost);
  EXPECT_STREQ(work.name, "harmoeny.schedule");
  EXPECT_EQ(work.m, 128 * 8);
  EXPECT_EQ(host_reference_s(work), 50e-6);
  EXPECT_EQ(HostCostModel().time(work), us_to_ticks(50.0));
  EXPECT_EQ(HostCostModel(2.0).time(work), us_to_ticks(25.0));
  EXPECT_EQ(HostCostModel(0.5).time(work), us_to_ticks(100.0));
  // Several ops on one host thread run one after another.
  const Op ops[] = {work, host_work("predictor", 512, 1e-3)};
  EXPECT_EQ(HostCostModel().time(ops), us_to_ticks(50.0) + ms_to_ticks(1.0));
}

TEST(HostCost, BadWorkAndSpeedsAreRefused) {
  EXPECT_THROW(host_work("x", 1, -1.0), std::logic_error);
  EXPECT_THROW(host_work("x", 1, std::numeric_limits<double>::infinity()), std::logic_error);
  EXPECT_THROW(HostCostModel(0.0), std::logic_error);
  EXPECT_THROW(HostCostModel(-2.0), std::logic_error);
  Op kernel;
  EXPECT_THROW(host_reference_s(kernel), std::logic_error);
  TaskGraph g;
  EXPECT_THROW(g.host(0, phase::kSchedule, -1, kernel), std::logic_error);
  // A kernel's model refuses host work: it is no kernel.
  const ComputeCostModel cost(cluster_presets().get("dgx-a100").value.gpu);
  EXPECT_THROW(cost.op_time(host_work("x", 1, 1e-6)), std::logic_error);
}

// The executor prices a host task through its hook, by the cluster's host_speed; a plain delay
// beside it keeps its own duration; without a host hook a plan with host work is refused.
TEST(HostCost, ExecutorPricesHostTasksByTheClustersHostSpeed) {
  TaskGraph g;
  const TaskId a = g.host(0, phase::kSchedule, -1, host_work("engine.step", 64, 200e-6));
  const TaskId deps[] = {a};
  g.delay(us_to_ticks(10.0), phase::kOther, -1, deps);
  EXPECT_EQ(run_on("dgx-a100", 1.0, g), us_to_ticks(210.0));
  EXPECT_EQ(run_on("dgx-a100", 4.0, g), us_to_ticks(60.0));
  Simulator sim;
  const auto net = make_network("flow", sim);
  PlanExecutor::Hooks hooks;
  hooks.compute_time = [](const Task&, std::span<const Op>) { return Tick{0}; };
  PlanExecutor exec(sim, *net, 1, hooks);
  EXPECT_THROW(exec.run(g), std::logic_error);
}

}  // namespace moesim

namespace moesim {

// "Calibratable like the others": a profile's measured host speed (host: {speed: x}) replaces the
// preset's, and an implausible one is refused.
TEST(HostCost, AProfilesMeasuredHostSpeedReplacesThePresets) {
  ClusterSpec spec = cluster_presets().get("dgx-a100").value;
  spec.host_speed = 3.0;
  EXPECT_EQ(ComputeCostModel::for_cluster(spec).host().speed(), 3.0);
  auto cal = std::make_shared<HardwareCalibration>();
  cal->host_speed = 0.5;
  spec.calibration = cal;
  EXPECT_EQ(ComputeCostModel::for_cluster(spec).host().speed(), 0.5);
  EXPECT_EQ(ComputeCostModel::for_cluster(spec).host().time(host_work("x", 1, 10e-6)), us_to_ticks(20.0));
  const std::string path = ::testing::TempDir() + "/moesim-host-profile.yaml";
  const auto load = [&](const char* speed) {
    std::ofstream(path) << "format: moesim-profile/1\nbase: dgx-a100\nhost: {speed: " << speed << "}\n";
    return load_calibration(path);
  };
  EXPECT_EQ(*load("2").host_speed, 2.0);
  EXPECT_THROW(load("0"), InputError);
  EXPECT_THROW(load("1e9"), InputError);
}

}  // namespace moesim

namespace moesim {

// Network and compute models are registries like the others (SimGrid-style: each entry with a
// description, a miss naming the valid ones), and the scenario's choices are their names.
TEST(ModelRegistries, NetworkAndComputeModelsAreRegistriesWithDescriptions) {
  EXPECT_EQ(network_models().names(), (std::vector<std::string>{"analytic", "flow"}));
  EXPECT_EQ(compute_models().names(), (std::vector<std::string>{"flops-only", "roofline"}));
  for (const auto* e : network_models().entries()) EXPECT_FALSE(e->description.empty()) << e->name;
  for (const auto* e : compute_models().entries()) EXPECT_FALSE(e->description.empty()) << e->name;
  Simulator sim;
  EXPECT_NE(make_network("analytic", sim), nullptr);
  try {
    make_network("packet", sim);
    ADD_FAILURE() << "no error for an unknown network model";
  } catch (const InputError& e) {
    EXPECT_NE(e.diagnostics().front().message.find("flow"), std::string::npos) << e.diagnostics().front().message;
  }
  ComputeEfficiency eff;
  compute_models().get("flops-only").value.apply(eff);
  EXPECT_TRUE(eff.flops_only);
  ClusterSpec spec = cluster_presets().get("dgx-a100").value;
  spec.compute_model = "flops-only";
  EXPECT_TRUE(ComputeCostModel::for_cluster(spec).efficiency().flops_only);
}

}  // namespace moesim
