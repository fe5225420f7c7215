// The extension module behind `import moesim` (python/moesim/__init__.py is the user-facing
// API): the same scenario loader, runner and generators the CLI calls, with the GIL released while
// a scenario loads and simulates, so Python threads run scenarios in parallel.
//
// Located input errors leave as moesim._moesim.InputError whose message is every
// "FILE:LINE:COL: error: ..." line; the package turns it into moesim.ScenarioError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "app/cli/cli.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "app/scenario/scenario_reference.hpp"
#include "app/sweep/sweep.hpp"
#include "core/diagnostics.hpp"
#include "core/version.hpp"
#include "hardware/cluster.hpp"
#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "policies/policy.hpp"
#include "predictors/predictor.hpp"
#include "serving/engine_profile.hpp"

namespace py = pybind11;

namespace moesim {
namespace {

/// An InputError as one exception type Python can catch: its message is every located problem.
struct LocatedErrors : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string joined(const InputError& e) {
  std::string out;
  for (const Diagnostic& d : e.diagnostics()) out += (out.empty() ? "" : "\n") + d.to_string();
  return out.empty() ? std::string(e.what()) : out;
}

std::vector<std::string> warnings_of(const Scenario& s) {
  std::vector<std::string> out;
  for (const Diagnostic& w : s.warnings) out.push_back(w.to_string());
  return out;
}

/// Loads and checks a scenario as `moesim validate` does; the caller holds no GIL.
Scenario load_checked(const std::string& text, const std::string& file, const std::string& base_dir,
                      const std::vector<std::string>& sets) {
  try {
    Scenario s = load_scenario_text(text, file, sets, base_dir);
    check_scenario_fits(s);
    return s;
  } catch (const InputError& e) {
    throw LocatedErrors(joined(e));
  }
}

/// (result.json's text, scenario.resolved.yaml's text, warnings): the CLI's files, byte for byte.
std::tuple<std::string, std::string, std::vector<std::string>> run(const std::string& text, const std::string& file,
                                                                   const std::string& base_dir,
                                                                   const std::vector<std::string>& sets,
                                                                   const std::string& out_dir, unsigned jobs) {
  py::gil_scoped_release unlocked;
  const Scenario s = load_checked(text, file, base_dir, sets);
  nlohmann::json result;
  try {
    result = run_scenario(s, out_dir, {}, std::max(1u, jobs));
  } catch (const InputError& e) {
    throw LocatedErrors(joined(e));
  }
  std::vector<std::string> warnings = warnings_of(s);
  for (const auto& r : result["runs"])
    if (r.contains("warnings"))
      for (const auto& w : r["warnings"])
        warnings.push_back(file + ": warning: run " + r["label"].get<std::string>() + ": " + w.get<std::string>());
  YAML::Emitter em;
  em << s.resolved;
  return {result.dump(2) + "\n", std::string(em.c_str()) + "\n", std::move(warnings)};
}

std::vector<std::string> validate(const std::string& text, const std::string& file, const std::string& base_dir,
                                  const std::vector<std::string>& sets) {
  py::gil_scoped_release unlocked;
  return warnings_of(load_checked(text, file, base_dir, sets));
}

py::dict param_dict(const ParamSpec& p) {
  py::dict d;
  d["name"] = p.name;
  d["type"] = param_type_name(p.type);
  d["default"] = p.default_value.empty() ? py::object(py::none()) : py::object(py::str(p.default_value));
  d["unit"] = p.unit;
  d["help"] = p.help;
  d["min"] = p.min ? py::object(py::float_(*p.min)) : py::object(py::none());
  d["max"] = p.max ? py::object(py::float_(*p.max)) : py::object(py::none());
  d["choices"] = p.choices;
  return d;
}

template <typename T>
py::list entries(const Registry<T>& reg, bool with_params) {
  py::list out;
  for (const auto* e : reg.entries()) {
    py::dict d;
    d["name"] = e->name;
    d["description"] = e->description;
    if constexpr (requires { e->value.params; }) {
      if (with_params) {
        py::list params;
        for (const ParamSpec& p : e->value.params) params.append(param_dict(p));
        d["params"] = params;
      }
    }
    out.append(d);
  }
  return out;
}

py::list list_registry(const std::string& kind) {
  if (kind == "models") return entries(model_presets(), false);
  if (kind == "hardware") return entries(cluster_presets(), false);
  if (kind == "gpus") return entries(gpu_presets(), false);
  if (kind == "policies") return entries(policies(), true);
  if (kind == "routing") return entries(routing_models(), true);
  if (kind == "predictors") return entries(predictors(), true);
  if (kind == "engines") return entries(engine_profiles(), false);
  throw py::value_error("unknown kind '" + kind +
                        "'; valid: models, hardware, gpus, policies, routing, predictors, engines");
}

/// A cost query's JSON text (what `moesim cost ... --json` prints), its InputError located.
template <typename F>
std::string cost_json(F&& query) {
  py::gil_scoped_release unlocked;
  try {
    return query().dump();
  } catch (const InputError& e) {
    throw LocatedErrors(joined(e));
  }
}

/// The points of a sweep as `moesim sweep` expands them (ranges, zips, order): each point's
/// (key, YAML value) overrides, grid keys first.
std::vector<std::vector<std::pair<std::string, std::string>>> sweep_points(const std::vector<std::string>& grids,
                                                                           const std::vector<std::string>& zips,
                                                                           const std::vector<std::string>& sets) {
  try {
    SweepSpec spec;
    spec.file = "sweep";
    for (const auto& g : grids) spec.grids.push_back(parse_sweep_axis("--grid", g));
    for (const auto& z : zips) spec.zips.push_back(parse_sweep_axis("--zip", z));
    spec.sets = sets;
    std::vector<std::vector<std::pair<std::string, std::string>>> out;
    for (const SweepPoint& p : expand_points(spec)) out.push_back(p.overrides);
    return out;
  } catch (const InputError& e) {
    throw LocatedErrors(joined(e));
  }
}

/// Runs `moesim ARGS...` in-process (the verbs with no API of their own: plan, guideline, DeepEP's
/// cost): (exit code, stdout, stderr). std::cout and std::cerr are redirected while it runs, so
/// calls take one lock; the GIL is released meanwhile.
std::tuple<int, std::string, std::string> cli(std::vector<std::string> args) {
  static std::mutex streams;
  args.insert(args.begin(), "moesim");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  int code = 0;
  {
    py::gil_scoped_release free;
    const std::lock_guard<std::mutex> hold(streams);
    std::streambuf* const old_out = std::cout.rdbuf(out.rdbuf());
    std::streambuf* const old_err = std::cerr.rdbuf(err.rdbuf());
    try {
      code = run_cli(static_cast<int>(argv.size()), argv.data());
    } catch (...) {
      std::cout.rdbuf(old_out);
      std::cerr.rdbuf(old_err);
      throw;
    }
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);
  }
  return {code, out.str(), err.str()};
}

}  // namespace
}  // namespace moesim

PYBIND11_MODULE(_moesim, m) {
  using namespace moesim;
  m.doc() = "moesim's simulator (use the moesim package, not this module)";
  py::register_exception<LocatedErrors>(m, "InputError", PyExc_ValueError);
  m.def("run", &run, py::arg("text"), py::arg("file"), py::arg("base_dir"), py::arg("sets"), py::arg("out_dir"),
        py::arg("jobs"));
  m.def("validate", &validate, py::arg("text"), py::arg("file"), py::arg("base_dir"), py::arg("sets"));
  m.def("list", &list_registry, py::arg("kind"));
  m.def("cost_gemm", [](const std::string& gpu, long long mm, long long n, long long k, const std::string& dtype,
                        const std::string& calibration, bool explain, const std::string& engine) {
    return cost_json([&] { return gemm_cost(gpu, mm, n, k, dtype, calibration, explain, engine); });
  });
  m.def("cost_collective", [](const std::string& kind, const std::string& hardware, int nodes, int gpus, double bytes,
                              const std::string& calibration, const std::string& network_model, bool explain) {
    return cost_json([&] { return collective_cost(kind, hardware, nodes, gpus, bytes, calibration, network_model, explain); });
  });
  m.def("cli", &cli, py::arg("args"));
  m.def("sweep_points", &sweep_points, py::arg("grids"), py::arg("zips"), py::arg("sets"));
  m.def("reference_markdown", [] { return reference_markdown(); });
  m.def("schema", [] { return scenario_schema_json(); });
  m.attr("__version__") = std::string(moesim_version());
  m.attr("commit") = std::string(moesim_commit());
}
