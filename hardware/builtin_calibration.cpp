#include "hardware/builtin_calibration.hpp"

#include <map>
#include <mutex>

#include "hardware/cluster.hpp"

namespace moesim {

std::string calibration_system(const GpuSpec& gpu) {
  // Compute capability 9.0 is Hopper, 10.x Blackwell (B200/GB200 10.0, B300/GB300 10.3).
  if (gpu.compute_capability == 90) return "h100_sxm";
  if (gpu.compute_capability == 100 || gpu.compute_capability == 103) return "b200_sxm";
  return "";
}

std::string measured_gpu_preset(const std::string& system) {
  if (system == "h100_sxm") return "H100-SXM-80GB";
  if (system == "b200_sxm") return "B200-180GB";
  return "";
}

std::shared_ptr<const HardwareCalibration> builtin_profile(const std::string& system) {
  // Built on first use and shared: a profile is immutable, and every run of a sweep reads it.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const HardwareCalibration>> built;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = built.find(system); it != built.end()) return it->second;
  for (const auto& src : builtin_profile_sources())
    if (src.name == system) {
      HardwareCalibration h = src.make();
      auto p = h.gemm_fits.empty() && h.attention_fits.empty() && h.collectives.empty() && h.deepep_fits.empty() ? nullptr : std::make_shared<const HardwareCalibration>(std::move(h));
      built.emplace(system, p);
      return p;
    }
  built.emplace(system, nullptr);
  return nullptr;
}

std::shared_ptr<const HardwareCalibration> builtin_calibration(const GpuSpec& gpu) {
  const std::string system = calibration_system(gpu);
  return system.empty() ? nullptr : builtin_profile(system);
}

void apply_calibration_choice(ClusterSpec& spec, const std::string& choice) {
  if (choice == "none") {
    spec.calibration = nullptr;
  } else if (choice.empty() || choice == "builtin") {
    spec.calibration = builtin_calibration(spec.gpu);
  } else {
    apply_calibration(spec, load_calibration(choice));
  }
}

}  // namespace moesim
