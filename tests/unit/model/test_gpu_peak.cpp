// The GPU peak table (model/backend/gpu_peak.h): the names the CUDA runtime reports map to the
// right entry (the specific before the general: H100 PCIe is not an H100 SXM, A10 is not an
// A100, GH200 is not an H200), unknown devices are reported as unknown, and precision.matmul
// picks the bf16, tf32 or fp32 column. Exact figures: they are table entries, not measurements.
#include <gtest/gtest.h>

#include "model/backend/gpu_peak.h"

namespace ledgerlm {
namespace {

struct Case {
  const char* device_name;
  const char* model;
  double bf16;
};

TEST(GpuPeak, DeviceNamesMapToTheirEntries) {
  const Case cases[] = {
      {"NVIDIA H100 80GB HBM3", "H100 SXM", 989.0},
      {"NVIDIA H100 PCIe", "H100 PCIe", 756.0},
      {"NVIDIA H100 NVL", "H100 NVL", 835.0},
      {"NVIDIA H200", "H200 SXM", 989.0},
      {"NVIDIA H200 NVL", "H200 NVL", 835.0},
      {"NVIDIA GH200 480GB", "GH200", 989.0},
      {"NVIDIA A100-SXM4-80GB", "A100", 312.0},
      {"NVIDIA A100-PCIE-40GB", "A100", 312.0},
      {"NVIDIA A100 80GB PCIe", "A100", 312.0},
      {"NVIDIA A10", "A10", 125.0},
      {"NVIDIA L40S", "L40S", 362.0},
      {"NVIDIA L40", "L40", 181.0},
      {"NVIDIA L4", "L4", 121.0},
      {"NVIDIA GeForce RTX 4090", "RTX 4090", 165.2},
      {"NVIDIA RTX A6000", "RTX A6000", 154.8},
  };
  for (const Case& c : cases) {
    const GpuPeak p = gpu_peak_for(c.device_name);
    EXPECT_TRUE(p.known()) << c.device_name;
    EXPECT_EQ(p.model, c.model) << c.device_name;
    EXPECT_EQ(p.bf16_tflops, c.bf16) << c.device_name;
    // Every entry has all three columns, tensor rates above the fp32 CUDA-core rate's half.
    EXPECT_GT(p.tf32_tflops, 0.0) << c.device_name;
    EXPECT_GT(p.fp32_tflops, 0.0) << c.device_name;
    EXPECT_GE(p.bf16_tflops, p.tf32_tflops) << c.device_name;
  }
}

TEST(GpuPeak, UnknownDevicesAreUnknown) {
  for (const char* name : {"", "NVIDIA A10G", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 3090",
                           "NVIDIA H1000", "AMD Instinct MI300X"}) {
    const GpuPeak p = gpu_peak_for(name);
    EXPECT_FALSE(p.known()) << "'" << name << "' matched " << p.model;
    EXPECT_EQ(p.bf16_tflops, 0.0) << name;
    EXPECT_EQ(gpu_peak_tflops(p, "bf16"), 0.0) << name;
  }
}

TEST(GpuPeak, MatmulModePicksTheColumn) {
  const GpuPeak h100 = gpu_peak_for("NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu_peak_tflops(h100, "bf16"), 989.0);
  EXPECT_EQ(gpu_peak_tflops(h100, "tf32"), 494.0);
  EXPECT_EQ(gpu_peak_tflops(h100, "fp32"), 67.0);
  const GpuPeak a100 = gpu_peak_for("NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(gpu_peak_tflops(a100, "tf32"), 156.0);
  EXPECT_EQ(gpu_peak_tflops(a100, "fp32"), 19.5);
}

}  // namespace
}  // namespace ledgerlm
