// `moesim list`: every registry, one entry per line, name first, then its description.
#include <iomanip>
#include <iostream>
#include <string>

#include "app/cli/cli.hpp"

#include <CLI/CLI.hpp>
#include "app/scenario/scenario_reference.hpp"
#include "hardware/cluster.hpp"
#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "policies/policy.hpp"
#include "predictors/predictor.hpp"
#include "serving/engine_profile.hpp"

namespace moesim {
namespace {

void line(const std::string& name, const std::string& desc) {
  std::cout << std::left << std::setw(24) << name << " " << desc << "\n";
}

template <typename T>
void list_registry(const Registry<T>& reg) {
  for (const auto* e : reg.entries()) line(e->name, e->description);
}

template <typename T>
void list_with_params(const Registry<T>& reg) {
  for (const auto* e : reg.entries()) {
    line(e->name, e->description);
    std::cout << describe_params(e->value.params, std::string(25, ' '));
  }
}

}  // namespace

int cli_list(const char* what_c) {
  const std::string what = what_c;
  const bool all = what.empty();
  auto header = [&](const char* h) {
    if (all) std::cout << "# " << h << "\n";
  };
  if (all || what == "models") {
    header("models");
    list_registry(model_presets());
  }
  if (all || what == "hardware") {
    // GPU presets are listed too: `moesim cost gemm --gpu` and `hardware.gpu` take them.
    header("hardware (clusters)");
    list_registry(cluster_presets());
    header("hardware (GPUs)");
    list_registry(gpu_presets());
  }
  if (all || what == "policies") {
    header("policies");
    list_with_params(policies());
  }
  if (all || what == "routing") {
    header("routing models");
    list_with_params(routing_models());
  }
  if (all || what == "predictors") {
    header("predictors");
    list_with_params(predictors());
  }
  if (all || what == "engines") {
    header("serving engines (serving.engine)");
    list_registry(engine_profiles());
  }
  return 0;
}

int cli_list_markdown(const char* what) {
  if (what[0] != '\0') {
    std::cerr << "moesim list: --markdown prints the whole reference; give no category\n";
    return 2;
  }
  std::cout << reference_markdown();
  return 0;
}

int cli_schema() {
  std::cout << scenario_schema_json();
  return 0;
}

ListCommand::ListCommand(CLI::App& app) {
  list_ = app.add_subcommand("list", "list registered models, hardware, policies, routing models, predictors, serving engines");
  list_->add_option("what", what_, "models | hardware | policies | routing | predictors | engines (default: all)")
      ->check(CLI::IsMember({"models", "hardware", "policies", "routing", "predictors", "engines"}));
  list_->add_flag("--markdown", markdown_,
                  "the full reference as Markdown: every scenario section's keys (type, default, unit, range, help) "
                  "and every registry (docs/reference.md is this output)");
  schema_ = app.add_subcommand("schema", "print the JSON Schema of scenario files (scenarios/moesim.schema.json)");
}

bool ListCommand::parsed() const { return list_->parsed() || schema_->parsed(); }

int ListCommand::run() const {
  if (schema_->parsed()) return cli_schema();
  return markdown_ ? cli_list_markdown(what_.c_str()) : cli_list(what_.c_str());
}

}  // namespace moesim
