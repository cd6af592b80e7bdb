// What the optimizer tests that compare with a PyTorch script share: the tiny GPT's parameter
// table both sides build, raw little-endian float32 files for the tensors passed between them,
// a flat buffer gathered into table order, and the run of the C++ optimizer whose inputs the
// script replays.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/model_config.h"
#include "model/param_table.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tests/support/config_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// One layer, two heads, 16 channels, vocabulary 64, block 8: every tensor kind of the model in a
// table small enough for a Python script to replay hundreds of steps in a second.
inline ParamTable tiny_reference_table() {
  ModelConfig mc = model_config_of({.vocab = 64, .L = 1, .H = 2, .C = 16, .block = 8});
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

// Runs `opt` (made from `config`, initialised over `table`) for `steps` steps on the flat weights
// `w`. Step s's gradient is grad(s) (flat layout), passed doubled with grad_scale 0.5 (exact: the
// scale undoes it), at schedule_lr(config, s, steps). Writes, for the reference script,
// DIR/grads.bin (each step's gradient in table order, step after step) and DIR/spec.txt:
// `settings`, then " steps=N lrs=..." and a line "numel lr_mult weight_decay" per tensor, the
// groups stated independently of the optimizer (decay on matrices, and on embeddings when
// optim.decay_embeddings; LR multipliers by kind). False when spec.txt could not be written.
inline bool run_reference_steps(Optimizer& opt, const OptimConfig& config, const ParamTable& table,
                                int steps, std::vector<float>& w,
                                const std::function<std::vector<float>(int)>& grad,
                                const std::string& settings, const std::string& dir) {
  std::ostringstream spec;
  spec.precision(17);
  spec << settings << " steps=" << steps << " lrs=";
  std::vector<float> all_grads;
  for (int s = 1; s <= steps; ++s) {
    const double lr = schedule_lr(config, s, steps);
    spec << (s > 1 ? "," : "") << lr;
    std::vector<float> g = grad(s);
    const std::vector<float> packed = gather_in_table_order(table, g.data());
    all_grads.insert(all_grads.end(), packed.begin(), packed.end());
    for (float& x : g) x *= 2.0f;  // exact; undone by grad_scale 0.5
    OptimStepInfo info;
    info.lr = lr;
    info.step = s;
    info.grad_scale = 0.5;
    info.total_steps = steps;
    opt.step(w.data(), Tensor(g.data(), DType::kF32), info);
  }
  spec << "\n";
  for (const auto& p : table.params) {
    const bool decay = p.kind == ParamKind::kMatrix ||
                       (p.kind == ParamKind::kEmbedding && config.decay_embeddings);
    const double mult = p.kind == ParamKind::kEmbedding ? config.lr_mult_embedding
                        : p.kind == ParamKind::kMatrix  ? 1.0
                                                        : config.lr_mult_nodecay;
    spec << p.numel << " " << mult << " " << (decay ? config.weight_decay : 0.0) << "\n";
  }
  write_floats(dir + "/grads.bin", all_grads);
  return write_file(dir + "/spec.txt", spec.str());
}

}  // namespace ledgerlm::testing
