// Device discovery and the "environment" block of the measurement file: the versions and clocks
// that a reader needs to judge whether two measurement files are comparable.
#include <unistd.h>

#include <array>
#include <chrono>
#include <ctime>
#include <string>

#include <cublasLt.h>

#include "common.hpp"
#include "results.hpp"

namespace moesim::calib {

namespace {

/// "13.0" from the runtime's and driver's integer encoding 1000*major + 10*minor.
std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

/// "2.28.9" from ncclGetVersion: 10000*major + 100*minor + patch since NCCL 2.9,
/// 1000*major + 100*minor + patch before.
std::string nccl_version_string(int code) {
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int rest = code >= 10000 ? code % 10000 : code % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

/// One integer device attribute.
int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

/// The current UTC time as ISO 8601, to tell repeated runs apart.
std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

}  // namespace

int require_devices() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    fail(kExitNoDevice, std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")");
  }
  if (count <= 0) fail(kExitNoDevice, "no CUDA device (cudaGetDeviceCount: 0 devices)");
  return count;
}

void describe_environment(int device_count, Results& results) {
  nlohmann::json env = nlohmann::json::object();

  int driver = 0;
  int runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  env["driver_version"] = cuda_version_string(driver);
  env["cuda_runtime_version"] = cuda_version_string(runtime);

  int cublas_major = 0;
  int cublas_minor = 0;
  int cublas_patch = 0;
  CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &cublas_major));
  CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &cublas_minor));
  CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &cublas_patch));
  env["cublas_version"] = std::to_string(cublas_major) + "." + std::to_string(cublas_minor) + "." +
                          std::to_string(cublas_patch);
  env["cublaslt_version"] = std::to_string(cublasLtGetVersion());

  int nccl = 0;
  NCCL_CHECK(ncclGetVersion(&nccl));
  env["nccl_version"] = nccl_version_string(nccl);

  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) env["hostname"] = host.data();
  env["timestamp_utc"] = utc_now();

  nlohmann::json devices = nlohmann::json::array();
  for (int d = 0; d < device_count; ++d) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    std::array<char, 32> pci{};
    CUDA_CHECK(cudaDeviceGetPCIBusId(pci.data(), static_cast<int>(pci.size()), d));
    const int cc_major = attribute(cudaDevAttrComputeCapabilityMajor, d);
    const int cc_minor = attribute(cudaDevAttrComputeCapabilityMinor, d);
    // Clock attributes are in kHz; cudaDeviceProp's clock fields are gone in CUDA 13.
    devices.push_back({
        {"index", d},
        {"name", std::string(prop.name)},
        {"pci_bus_id", std::string(pci.data())},
        {"sm_count", attribute(cudaDevAttrMultiProcessorCount, d)},
        {"memory_bytes", static_cast<std::int64_t>(prop.totalGlobalMem)},
        {"compute_capability", std::to_string(cc_major) + "." + std::to_string(cc_minor)},
        {"sm_clock_mhz", attribute(cudaDevAttrClockRate, d) / 1000},
        {"mem_clock_mhz", attribute(cudaDevAttrMemoryClockRate, d) / 1000},
        {"memory_bus_width_bits", attribute(cudaDevAttrGlobalMemoryBusWidth, d)},
    });
    if (d == 0) results.device = prop.name;
  }
  env["devices"] = std::move(devices);
  results.environment = std::move(env);
}

}  // namespace moesim::calib
