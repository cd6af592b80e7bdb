// The GPU peak table (see gpu_peak.h). Figures: NVIDIA's product datasheets, dense (the
// "with sparsity" tensor figures halved). Entries are tried in order, the more specific names
// first (H100 PCIe and H100 NVL before H100, H200 NVL before H200).
#include "model/backend/gpu_peak.h"

#include <vector>

namespace ledgerlm {
namespace {

struct Entry {
  const char* words;  // consecutive words of the device name
  const char* model;
  double bf16, tf32, fp32;
};

// clang-format off
constexpr Entry kTable[] = {
  // Hopper. The H200 has the H100 SXM's compute (more and faster memory); GH200's GPU likewise.
  {"GH200",      "GH200",      989.0, 494.0, 67.0},
  {"H200 NVL",   "H200 NVL",   835.0, 418.0, 60.0},
  {"H200",       "H200 SXM",   989.0, 494.0, 67.0},
  {"H100 PCIe",  "H100 PCIe",  756.0, 378.0, 51.0},
  {"H100 NVL",   "H100 NVL",   835.0, 418.0, 60.0},
  {"H100",       "H100 SXM",   989.0, 494.0, 67.0},  // "NVIDIA H100 80GB HBM3"
  // Ampere (A100: SXM and PCIe have the same clocks' peak).
  {"A100",       "A100",       312.0, 156.0, 19.5},
  {"A10",        "A10",        125.0,  62.5, 31.2},
  {"RTX A6000",  "RTX A6000",  154.8,  77.4, 38.7},
  // Ada. GeForce cards run fp32 accumulation at half the fp16-accumulate rate: 165 on a 4090.
  {"L40S",       "L40S",       362.0, 183.0, 91.6},
  {"L40",        "L40",        181.0,  90.5, 90.5},
  {"L4",         "L4",         121.0,  60.0, 30.3},
  {"RTX 4090",   "RTX 4090",   165.2,  82.6, 82.6},
};
// clang-format on

std::vector<std::string_view> words_of(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '-')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '-') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool contains_run(const std::vector<std::string_view>& name,
                  const std::vector<std::string_view>& run) {
  if (run.empty() || run.size() > name.size()) return false;
  for (size_t start = 0; start + run.size() <= name.size(); ++start) {
    bool all = true;
    for (size_t k = 0; k < run.size() && all; ++k) all = name[start + k] == run[k];
    if (all) return true;
  }
  return false;
}

}  // namespace

GpuPeak gpu_peak_for(std::string_view device_name) {
  const std::vector<std::string_view> name = words_of(device_name);
  for (const Entry& e : kTable) {
    if (contains_run(name, words_of(e.words))) return {e.model, e.bf16, e.tf32, e.fp32};
  }
  return {};
}

double gpu_peak_tflops(const GpuPeak& peak, std::string_view matmul) {
  if (matmul == "bf16") return peak.bf16_tflops;
  if (matmul == "tf32") return peak.tf32_tflops;
  return peak.fp32_tflops;
}

}  // namespace ledgerlm
