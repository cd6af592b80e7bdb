// What the optimizer tests that compare with a PyTorch script share: the tiny GPT's parameter
// table both sides build, raw little-endian float32 files for the tensors passed between them,
// and a flat buffer gathered into table order.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/param_table.h"

namespace ledgerlm::testing {

// One layer, two heads, 16 channels, vocabulary 64, block 8: every tensor kind of the model in a
// table small enough for a Python script to replay hundreds of steps in a second.
inline ParamTable tiny_reference_table() {
  ModelConfig mc;
  mc.vocab_size = 64;
  mc.n_layer = 1;
  mc.n_head = 2;
  mc.n_embd = 16;
  mc.block_size = 8;
  return param_table_build(mc);
}

inline void write_floats(const std::string& path, const std::vector<float>& x) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
}

// The file's floats; empty when it cannot be opened (the caller's size check then names it).
inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return {};
  std::vector<float> x(static_cast<size_t>(f.tellg()) / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
  return x;
}

// The table's tensors, in table order, out of a flat buffer.
inline std::vector<float> gather_in_table_order(const ParamTable& t, const float* flat) {
  std::vector<float> out;
  for (const auto& p : t.params) out.insert(out.end(), flat + p.offset, flat + p.offset + p.numel);
  return out;
}

}  // namespace ledgerlm::testing
