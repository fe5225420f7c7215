// `moesim calibrate fit|report`: measurements → hardware profile, and its held-out accuracy.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "app/cli/cli.hpp"

#include <CLI/CLI.hpp>
#include "calibrate/attention_tables.hpp"
#include "calibrate/collective_tables.hpp"
#include "calibrate/deepep_tables.hpp"
#include "calibrate/deepep_tables.hpp"
#include "calibrate/kernel_tables.hpp"
#include "calibrate/profile.hpp"
#include "calibrate/report.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/cluster.hpp"
#include "hardware/collectives.hpp"

namespace moesim {
namespace {

// Samples no GPU of `spec` could have produced, located at `file` and the sample: a GEMM faster
// than twice the datasheet's peak, a copy or collective moving more than 100 TB/s (past every
// link built), a time under a nanosecond.
constexpr double kMinUs = 1e-3;

// The least time a GEMM can take on `spec`'s GPU: half the time at the datasheet's peak for its
// dtype (a measurement under it is not one), and at least a nanosecond.
double gemm_floor_us(const ClusterSpec& spec, DType dt, std::int64_t m, std::int64_t n, std::int64_t k) {
  const double peak = spec.gpu.peak(dt) > 0 ? spec.gpu.peak(dt) : spec.gpu.peak(DType::kFp32);
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return std::max(kMinUs, flops / (2.0 * peak) * 1e6);
}

std::string too_fast(const std::string& what, double time_us, double floor_us, const ClusterSpec& spec) {
  return what + ": " + std::to_string(time_us) + " us is faster than twice " + spec.gpu.name + "'s peak allows (" +
         std::to_string(floor_us) + " us): not a measurement";
}

void check_plausible(const calibration::Measurements& m, const ClusterSpec& spec, const std::string& file) {
  std::vector<Diagnostic> bad;
  const auto refuse = [&](const std::string& what) { bad.push_back({SourceLocation{file, 0, 0}, what}); };
  constexpr double kMaxBytesPerS = 1e14;
  for (std::size_t i = 0; i < m.gemm.size(); ++i) {
    const auto& g = m.gemm[i];
    DType dt = DType::kFp32;
    parse_dtype(g.dtype, dt);
    const double floor_us = gemm_floor_us(spec, dt, g.m, g.n, g.k);
    if (g.time_us < floor_us) refuse(too_fast("gemm[" + std::to_string(i) + "]", g.time_us, floor_us, spec));
  }
  for (std::size_t i = 0; i < m.memcpy.size(); ++i)
    if (m.memcpy[i].time_us < kMinUs || m.memcpy[i].bytes / (m.memcpy[i].time_us * 1e-6) > kMaxBytesPerS)
      refuse("memcpy[" + std::to_string(i) + "]: " + std::to_string(m.memcpy[i].bytes) + " bytes in " +
             std::to_string(m.memcpy[i].time_us) + " us is past 100 TB/s: not a measurement");
  for (std::size_t i = 0; i < m.collectives.size(); ++i)
    if (m.collectives[i].time_us < kMinUs || m.collectives[i].bytes / (m.collectives[i].time_us * 1e-6) > kMaxBytesPerS)
      refuse("collectives[" + std::to_string(i) + "]: " + std::to_string(m.collectives[i].bytes) + " bytes in " +
             std::to_string(m.collectives[i].time_us) + " us is past 100 TB/s: not a measurement");
  if (!bad.empty()) throw InputError(std::move(bad));
}

// Every file of a recognised format; others (a README or licence in `DIR/*`, a folder) are
// skipped with a warning naming them, so a whole data folder can be given.
calibration::Measurements load_all(const std::vector<std::string>& files, const ClusterSpec& spec) {
  calibration::Measurements all;
  std::size_t used = 0;
  for (const auto& f : files) {
    if (auto m = calibration::load_measurements_if_recognised(f)) {
      check_plausible(*m, spec, f);
      all.append(*m);
      ++used;
    } else {
      const Diagnostic skipped{SourceLocation{f, 0, 0},
                               std::filesystem::is_directory(f) ? "skipped: a directory, not a measurement file"
                                                                : "skipped: not a measurement format moesim reads",
                               true};
      std::cerr << skipped.to_string() << "\n";
    }
  }
  if (used == 0)
    throw InputError(SourceLocation{files.empty() ? "" : files.front(), 0, 0},
                     "none of the " + std::to_string(files.size()) +
                         " file(s) is a measurement file moesim reads (moesim-calibrate JSON, nccl-tests output, "
                         "vidur CSVs, LLMCompass matmul or collective sweep CSVs)");
  if (all.gemm.empty() && all.collectives.empty() && all.memcpy.empty())
    throw InputError(SourceLocation{files.front(), 0, 0}, "no samples in the measurement files");
  return all;
}

}  // namespace

ClusterSpec calibrated_preset(const std::string& preset, const std::string& profile_path) {
  ClusterSpec spec = cluster_presets().get(preset, SourceLocation{"--base", 0, 0}).value;
  apply_calibration_choice(spec, profile_path);
  return spec;
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  if (in) buffer << in.rdbuf();
  if (!in || in.bad()) throw InputError(SourceLocation{path, 0, 0}, "cannot read measurement file");
  return buffer.str();
}

/// The kernel tables among `files` fitted into `profile` (the rest returned for the other fits);
/// an NCCL table's rows of the GPU become collective samples in `collectives`, a custom
/// all-reduce table's the samples of each engine's kernel in `custom`.
std::vector<std::string> fit_kernel_tables(const std::vector<std::string>& files, const ClusterSpec& spec,
                                           double holdout, HardwareCalibration& profile, nlohmann::json& report,
                                           calibration::Measurements& collectives,
                                           std::map<std::string, calibration::Measurements>& custom) {
  std::vector<std::string> rest;
  const std::string gpu_system = calibration::kernel_table_system(spec.gpu);
  std::vector<calibration::GemmTableRow> gemm;
  std::vector<calibration::AttentionTableRow> attention;
  std::vector<calibration::DeepEpTableRow> deepep;
  for (const auto& f : files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec)) {
      rest.push_back(f);
      continue;
    }
    const std::string text = read_text(f);
    const auto kind = calibration::kernel_table_kind(text);
    if (!kind) {
      rest.push_back(f);
    } else if (*kind == "gemm") {
      auto rows = calibration::read_gemm_table(text, f);
      // The same plausibility rule as every other measurement file (issue 52: one check for every
      // source of a value), on the rows of the GPU being fitted.
      std::vector<Diagnostic> bad;
      for (const auto& r : rows) {
        if (r.system != gpu_system) continue;
        const double floor_us = gemm_floor_us(spec, gemm_family_dtype(r.family), r.m, r.n, r.k);
        if (r.time_us < floor_us)
          bad.push_back({SourceLocation{f, r.line, 0}, too_fast(r.system + " " + r.engine + " GEMM m=" +
                                                                    std::to_string(r.m) + " n=" + std::to_string(r.n) +
                                                                    " k=" + std::to_string(r.k), r.time_us, floor_us, spec)});
      }
      if (!bad.empty()) throw InputError(std::move(bad));
      gemm.insert(gemm.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
    } else if (*kind == "custom_allreduce") {
      if (gpu_system.empty())
        throw InputError(SourceLocation{f, 0, 0}, spec.gpu.name + " is measured in no kernel table (they hold h100_sxm and b200_sxm)");
      for (auto& [engine, m] : calibration::read_custom_allreduce_table(text, f, gpu_system)) custom[engine].append(m);
    } else if (*kind == "deepep_ll" || *kind == "deepep_normal") {
      auto rows = calibration::read_deepep_table(text, f, *kind);
      deepep.insert(deepep.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
    } else if (*kind == "nccl") {
      if (gpu_system.empty())
        throw InputError(SourceLocation{f, 0, 0}, spec.gpu.name + " is measured in no kernel table (they hold h100_sxm and b200_sxm)");
      collectives.append(calibration::read_nccl_table(text, f, gpu_system));
    } else if (kind->find("attention") != std::string::npos || kind->find("mla") != std::string::npos) {
      auto rows = calibration::read_attention_table(text, f, *kind);
      attention.insert(attention.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
    } else {
      std::cerr << Diagnostic{SourceLocation{f, 0, 0}, "skipped: a " + *kind + " kernel table, which moesim does not fit yet (the fused MoE layer)", true}.to_string() << "\n";
    }
  }
  if (!collectives.collectives.empty() && holdout > 0.0) {
    report["collectives"] = nlohmann::json::array();
    for (const auto& s : calibration::score_collective_fits(collectives, spec, spec.gpu.name, holdout))
      report["collectives"].push_back(calibration::score_json(s));
  }
  if (!custom.empty() && holdout > 0.0) {
    report["custom_allreduce"] = nlohmann::json::array();
    for (const auto& [engine, m] : custom)
      for (const auto& s : calibration::score_collective_fits(m, spec, spec.gpu.name, holdout, engine)) {
        nlohmann::json j = calibration::score_json(s);
        j["op"] = custom_all_reduce_name(engine);
        report["custom_allreduce"].push_back(std::move(j));
      }
  }
  if (gemm.empty() && attention.empty() && deepep.empty()) return rest;
  const std::string system = calibration::kernel_table_system(spec.gpu);
  if (system.empty())
    throw InputError(SourceLocation{"--base", 0, 0}, spec.gpu.name + " is measured in no kernel table (they hold h100_sxm and b200_sxm)");
  std::vector<calibration::GemmFitScore> scores;
  profile.gemm_fits = calibration::fit_gemm_tables(gemm, system, spec.gpu, holdout > 0.0, &scores);
  std::vector<calibration::AttentionFitScore> attention_scores;
  profile.attention_fits = calibration::fit_attention_tables(attention, system, spec.gpu, holdout > 0.0, &attention_scores);
  if (profile.gemm_fits.empty() && profile.attention_fits.empty() && profile.deepep_fits.empty())
    throw InputError(SourceLocation{files.front(), 0, 0}, "the kernel tables hold no " + system + " rows to fit");
  report.update({{"system", system},
                 {"gpu", spec.gpu.name},
                 {"holdout", holdout > 0.0},
                 {"gemm", nlohmann::json::array()},
                 {"attention", nlohmann::json::array()}});
  for (const auto& s : scores) {
    report["gemm"].push_back(calibration::score_json(s));
    if (!s.refused.empty())
      std::cerr << "moesim: warning: " << system << " " << s.engine << " " << gemm_family_name(s.family)
                << " GEMM table (" << s.kernel_source << ") not fitted: " << s.refused << "\n";
  }
  for (const auto& s : attention_scores) report["attention"].push_back(calibration::score_json(s));
  std::vector<calibration::DeepEpFitScore> deepep_scores;
  profile.deepep_fits = calibration::fit_deepep_tables(deepep, system, spec, holdout > 0.0, &deepep_scores);
  report["deepep"] = nlohmann::json::array();
  for (const auto& s : deepep_scores) report["deepep"].push_back(calibration::score_json(s));
  return rest;
}

}  // namespace

int cli_calibrate_fit(const std::vector<std::string>& files, const std::string& base, const std::string& out,
                      double holdout, const std::string& kernel_report) {
  const ClusterSpec spec = calibrated_preset(base, "none");
  HardwareCalibration kernels;
  nlohmann::json report = nlohmann::json::object();
  calibration::Measurements m;
  std::map<std::string, calibration::Measurements> custom;
  const std::vector<std::string> others = fit_kernel_tables(files, spec, holdout, kernels, report, m, custom);
  // Kernel tables alone make a profile of kernel fits; other files (and an NCCL table) add the
  // measured curves.
  if (!others.empty()) m.append(load_all(others, spec));
  const bool measured = !m.gemm.empty() || !m.collectives.empty() || !m.memcpy.empty();
  HardwareCalibration profile = measured ? calibration::fit_profile(m, spec, base, holdout) : HardwareCalibration{};
  if (!measured) profile.base = base, profile.device = spec.gpu.name, profile.holdout = holdout;
  profile.gemm_fits = std::move(kernels.gemm_fits);
  // Each engine's custom all-reduce: fitted as an all-reduce, kept under the engine's name.
  for (const auto& [engine, samples] : custom) {
    const std::vector<char> held = calibration::held_out_samples(samples, holdout).collectives;
    for (auto& [gpus, cal] : calibration::fit_custom_all_reduce(samples, spec, held))
      profile.collectives[{custom_all_reduce_name(engine), CollectiveScope::kIntraNode}][gpus] = cal;
  }
  profile.attention_fits = std::move(kernels.attention_fits);
  profile.deepep_fits = std::move(kernels.deepep_fits);
  if (!kernel_report.empty()) {
    std::ofstream r(kernel_report);
    if (!r) throw InputError(SourceLocation{kernel_report, 0, 0}, "cannot write the kernel report");
    r << report.dump(2) << "\n";
  }
  YAML::Emitter em;
  em << profile.to_yaml();
  const std::string tmp = out + ".tmp";
  {
    std::ofstream o(tmp);
    if (!o) throw InputError(SourceLocation{out, 0, 0}, "cannot write profile");
    o << "# moesim hardware profile: fitted from " << files.size() << " measurement file(s) against " << base << "\n"
      << em.c_str() << "\n";
  }
  // What `calibrate fit` writes, every reader must take: the profile is read back by the reader
  // itself before it replaces OUT (issue 52: a fit no reader accepts is refused here, not later).
  try {
    (void)load_calibration(tmp);
  } catch (const InputError& e) {
    std::remove(tmp.c_str());
    throw InputError(SourceLocation{out, 0, 0}, "the fitted profile is not one moesim can read, so it is not written: " +
                                                    e.diagnostics().front().message);
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) {  // e.g. --out names a directory
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError(SourceLocation{out, 0, 0}, "cannot write profile: " + why);
  }
  std::size_t collectives = 0;
  for (const auto& [_, by_gpus] : profile.collectives) collectives += by_gpus.size();
  std::cout << "fitted " << profile.gemm_fits.size() << " GEMM kernel families, " << profile.attention_fits.size()
            << " attention kernel families, " << profile.deepep_fits.size() << " DeepEP kernel fits, " << profile.gemm.size() << " GEMM shapes, " << collectives << " collective curves, "
            << profile.links.size() << " host links from " << m.gemm.size() << " GEMM, " << m.collectives.size()
            << " collective and " << m.memcpy.size() << " memcpy samples (held out " << holdout * 100
            << "%)\nwrote " << out << "\n";
  return 0;
}

int cli_calibrate_report(const std::string& profile_path, const std::vector<std::string>& files, bool json) {
  const HardwareCalibration profile = load_calibration(profile_path);
  if (profile.base.empty() || !cluster_presets().contains(profile.base))
    throw InputError(SourceLocation{profile_path, 0, 0},
                     "the profile's base '" + profile.base + "' is not a hardware preset");
  const ClusterSpec plain = cluster_presets().get(profile.base).value;
  ClusterSpec calibrated = plain;
  apply_calibration(calibrated, profile);
  const auto report = calibration::calibration_report(calibrated, plain, load_all(files, plain));
  if (json) std::cout << report.dump(2) << "\n";
  else calibration::print_report(std::cout, report);
  return 0;
}

CalibrateCommand::CalibrateCommand(CLI::App& app) {
  auto* calibrate = app.add_subcommand("calibrate", "fit a hardware profile to measurements; report its accuracy");
  calibrate->require_subcommand(1);
  fit_ = calibrate->add_subcommand("fit", "fit cost models to measurements and write a hardware profile");
  fit_->add_option("measurements", measurements_, "moesim-calibrate JSON, nccl-tests output, vidur or LLMCompass CSVs")
      ->required();
  fit_->add_option("--base", base_, "hardware preset the measurements were taken on")->required();
  fit_->add_option("--out", profile_out_, "profile to write (YAML)")->required();
  fit_->add_option("--holdout", holdout_,
                   "fraction of samples kept out of the fit for `report` (kernel tables: any value > 0 holds out "
                   "by their fixed rule, 0 fits every row)")
      ->check(finite_number)->check(CLI::Range(0.0, 0.5));
  fit_->add_option("--kernel-report", kernel_report_, "write the kernel fits' held-out errors here (JSON)");
  report_ = calibrate->add_subcommand("report", "error of the profile and of its base preset per op class");
  report_->add_option("profile", profile_in_, "profile from `moesim calibrate fit`")->required();
  report_->add_option("measurements", measurements_, "measurement files")->required();
  report_->add_flag("--json", json_, "machine-readable output");
}

bool CalibrateCommand::parsed() const { return fit_->parsed() || report_->parsed(); }

int CalibrateCommand::run() const {
  if (fit_->parsed()) return cli_calibrate_fit(measurements_, base_, profile_out_, holdout_, kernel_report_);
  return cli_calibrate_report(profile_in_, measurements_, json_);
}

}  // namespace moesim
