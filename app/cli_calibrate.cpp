// `moesim calibrate fit|report`: measurements → hardware profile, and its held-out accuracy.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "app/cli.hpp"
#include "calibrate/profile.hpp"
#include "calibrate/report.hpp"
#include "hardware/cluster.hpp"

namespace moesim {
namespace {

// Every file of a recognised format; others (a README or licence in `DIR/*`, a folder) are
// skipped with a warning naming them, so a whole data folder can be given.
calibration::Measurements load_all(const std::vector<std::string>& files) {
  calibration::Measurements all;
  std::size_t used = 0;
  for (const auto& f : files) {
    if (auto m = calibration::load_measurements_if_recognised(f)) {
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
  if (!profile_path.empty()) apply_calibration(spec, load_calibration(profile_path));
  return spec;
}

int cli_calibrate_fit(const std::vector<std::string>& files, const std::string& base, const std::string& out,
                      double holdout) {
  const ClusterSpec spec = calibrated_preset(base, "");
  const calibration::Measurements m = load_all(files);
  const HardwareCalibration profile = calibration::fit_profile(m, spec, base, holdout);
  YAML::Emitter em;
  em << profile.to_yaml();
  const std::string tmp = out + ".tmp";
  {
    std::ofstream o(tmp);
    if (!o) throw InputError(SourceLocation{out, 0, 0}, "cannot write profile");
    o << "# moesim hardware profile: fitted from " << files.size() << " measurement file(s) against " << base << "\n"
      << em.c_str() << "\n";
  }
  std::rename(tmp.c_str(), out.c_str());
  std::size_t collectives = 0;
  for (const auto& [_, by_gpus] : profile.collectives) collectives += by_gpus.size();
  std::cout << "fitted " << profile.gemm.size() << " GEMM shapes, " << collectives << " collective curves, "
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
  const auto report = calibration::calibration_report(calibrated, plain, load_all(files));
  if (json) std::cout << report.dump(2) << "\n";
  else calibration::print_report(std::cout, report);
  return 0;
}

}  // namespace moesim
