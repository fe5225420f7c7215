// GPU presets: datasheet invariants and the PCIe bandwidth table.
#include <gtest/gtest.h>

#include <stdexcept>

#include "hardware/gpu_spec.hpp"
#include "core/diagnostics.hpp"

namespace moesim {

namespace {
const GpuSpec& gpu(const char* name) { return gpu_presets().get(name).value; }
constexpr double kT = 1e12;
}  // namespace

TEST(GpuPresets, EveryPresetIsComplete) {
  ASSERT_GE(gpu_presets().names().size(), 7u);
  for (const auto* e : gpu_presets().entries()) {
    SCOPED_TRACE(e->name);
    const GpuSpec& g = e->value;
    EXPECT_EQ(g.name, e->name);
    EXPECT_FALSE(e->description.empty());
    EXPECT_TRUE(g.supports(DType::kFp16));
    EXPECT_GT(g.peak(DType::kFp32), 0.0);
    // Tensor-core fp16 is always faster than CUDA-core fp32; fp8 (when present) doubles fp16.
    EXPECT_GT(g.peak(DType::kFp16), g.peak(DType::kFp32));
    if (g.supports(DType::kFp8)) {
      EXPECT_NEAR(g.peak(DType::kFp8) / g.peak(DType::kFp16), 2.0, 1e-3);
    }
    EXPECT_GT(g.memory_bytes, 16e9);
    EXPECT_GT(g.hbm_bandwidth_Bps, 500e9);
    EXPECT_GT(g.sm_count, 0);
    EXPECT_GE(g.copy_engines, 1);
    EXPECT_GT(g.kernel_launch_us, 0.0);
    EXPECT_NO_THROW(pcie_x16_bandwidth_Bps(g.pcie_gen));
  }
}

TEST(GpuPresets, V100HasNoBf16OrFp8) {
  const GpuSpec& v = gpu("V100-SXM2-32GB");
  EXPECT_FALSE(v.supports(DType::kBf16));
  EXPECT_FALSE(v.supports(DType::kFp8));
  EXPECT_DOUBLE_EQ(v.peak(DType::kFp16), 125 * kT);
  EXPECT_DOUBLE_EQ(v.peak(DType::kFp32), 15.7 * kT);
  EXPECT_DOUBLE_EQ(v.hbm_bandwidth_Bps, 900e9);
  EXPECT_EQ(v.pcie_gen, 3);
  EXPECT_EQ(v.sm_count, 80);
}

TEST(GpuPresets, AmpereHasBf16ButNoFp8) {
  for (const char* name : {"A100-SXM4-40GB", "A100-SXM4-80GB", "RTX-3090"}) {
    SCOPED_TRACE(name);
    const GpuSpec& g = gpu(name);
    EXPECT_TRUE(g.supports(DType::kBf16));
    EXPECT_DOUBLE_EQ(g.peak(DType::kBf16), g.peak(DType::kFp16));
    EXPECT_FALSE(g.supports(DType::kFp8));
  }
  EXPECT_DOUBLE_EQ(gpu("A100-SXM4-80GB").peak(DType::kFp16), 312 * kT);
  EXPECT_DOUBLE_EQ(gpu("A100-SXM4-40GB").hbm_bandwidth_Bps, 1555e9);
  EXPECT_DOUBLE_EQ(gpu("A100-SXM4-80GB").hbm_bandwidth_Bps, 2039e9);
  EXPECT_DOUBLE_EQ(gpu("A100-SXM4-80GB").memory_bytes, 80e9);
  // GeForce: fp32-accumulate tensor rate is half the fp16-accumulate one.
  EXPECT_DOUBLE_EQ(gpu("RTX-3090").peak(DType::kFp16), 71 * kT);
}

TEST(GpuPresets, HopperAndAdaHaveFp8) {
  const GpuSpec& h100 = gpu("H100-SXM-80GB");
  EXPECT_TRUE(h100.supports(DType::kFp8));
  EXPECT_DOUBLE_EQ(h100.peak(DType::kFp16), 989.4 * kT);
  EXPECT_DOUBLE_EQ(h100.peak(DType::kFp8), 1978.9 * kT);
  EXPECT_EQ(h100.pcie_gen, 5);
  EXPECT_TRUE(gpu("RTX-4090").supports(DType::kFp8));
  EXPECT_DOUBLE_EQ(gpu("RTX-4090").peak(DType::kFp8), 330.3 * kT);
}

TEST(GpuPresets, H200IsH100ComputeWithMoreMemory) {
  const GpuSpec& h100 = gpu("H100-SXM-80GB");
  const GpuSpec& h200 = gpu("H200-141GB");
  EXPECT_EQ(h200.peak_flops, h100.peak_flops);
  EXPECT_DOUBLE_EQ(h200.hbm_bandwidth_Bps, 4.8e12);
  EXPECT_DOUBLE_EQ(h200.memory_bytes, 141e9);
  EXPECT_GT(h200.hbm_bandwidth_Bps, h100.hbm_bandwidth_Bps);
}

TEST(GpuPresets, UnknownNameSuggestsTheClosest) {
  try {
    gpu_presets().get("A100-SXM4-80G");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("A100-SXM4-80GB"), std::string::npos) << e.what();
  }
}

TEST(PcieBandwidth, NominalX16PerDirection) {
  EXPECT_DOUBLE_EQ(pcie_x16_bandwidth_Bps(3), 15.75e9);
  EXPECT_DOUBLE_EQ(pcie_x16_bandwidth_Bps(4), 31.5e9);
  EXPECT_DOUBLE_EQ(pcie_x16_bandwidth_Bps(5), 63e9);
  EXPECT_DOUBLE_EQ(pcie_x16_bandwidth_Bps(6), 126e9);
  EXPECT_THROW(pcie_x16_bandwidth_Bps(2), std::invalid_argument);
  EXPECT_THROW(pcie_x16_bandwidth_Bps(7), std::invalid_argument);
  EXPECT_THROW(pcie_x16_bandwidth_Bps(0), std::invalid_argument);
}

}  // namespace moesim
