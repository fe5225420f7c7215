#pragma once
// The built-in kernel profiles (issue 47): GEMM kernels fitted to the measured tables of
// ../shared/data/kernels/ (hardware/profiles/*.yaml, compiled in), used by default wherever a
// scenario or `moesim cost` prices a GPU of a measured architecture.
//
// Transfer rule: a GPU without tables is priced by the fits of its architecture's measured GPU
// (the same compute capability: H200, H800 and H20 by H100's; GB200, B300 and GB300 by B200's) at
// its own datasheet peaks, HBM bandwidth and SM count. The fitted efficiencies, per-SM bandwidth,
// overhead and residual table belong to the kernels and the SM design, which a sibling shares;
// peaks and bandwidth are what differ. Other architectures keep the datasheet roofline.
#include <memory>
#include <string>
#include <vector>

#include "hardware/calibration.hpp"
#include "hardware/gpu_spec.hpp"

namespace moesim {

struct ClusterSpec;

/// One compiled-in profile: its name (the kernel tables' `system`) and its maker.
struct BuiltinProfileSource {
  std::string name;
  HardwareCalibration (*make)();
};
/// Generated from hardware/profiles/*.yaml (embed.py).
const std::vector<BuiltinProfileSource>& builtin_profile_sources();

/// The built-in profile named `system` ("h100_sxm", "b200_sxm"), built once; nullptr if none.
std::shared_ptr<const HardwareCalibration> builtin_profile(const std::string& system);
/// The built-in profile that prices `gpu` by the transfer rule; nullptr for other architectures.
std::shared_ptr<const HardwareCalibration> builtin_calibration(const GpuSpec& gpu);
/// The measured GPU whose tables price `gpu` ("h100_sxm"), "" for none.
std::string calibration_system(const GpuSpec& gpu);

/// The GPU preset a kernel table's `system` was measured on ("H100-SXM-80GB" for h100_sxm), "" if
/// unknown.
std::string measured_gpu_preset(const std::string& system);

/// `hardware.calibration` and `--calibration`: "builtin" (also ""), "none", or a profile path.
/// Applies it to `spec`; a path's errors are InputErrors located in that file.
void apply_calibration_choice(ClusterSpec& spec, const std::string& choice);

}  // namespace moesim
