// Per-tensor optimizer state (see tensor_states.h). The rules mirror each optimizer's allocation
// (optim/*.cpp) and the planner's totals (memory_plan.cpp), written independently of both.
#include "train/ledger/tensor_states.h"

#include <cstdio>

#include "model/base/check.h"

namespace ledgerlm {

std::vector<TensorState> plan_tensor_states(const OptimConfig& o, const PlanTensor& t,
                                            int64_t count) {
  const DType S = o.state_dtype;
  std::vector<TensorState> out;
  auto add = [&](const char* name, DType dt, int64_t n) { out.push_back({name, dt, n}); };
  if (o.name == "sgd") {
    if (o.momentum > 0.0) add("momentum", S, count);
  } else if (o.name == "adamw" || o.name == "lamb") {
    add("m", S, count);
    add("v", S, count);
  } else if (o.name == "lars") {
    add("momentum", S, count);
  } else if (o.name == "adafactor") {
    if (t.dims >= 2) {
      add("row", DType::kF32, t.rows);
      add("col", DType::kF32, t.cols);
    } else {
      add("v", S, count);
    }
    if (o.adafactor_beta1 > 0.0) add("m", S, count);
  } else if (o.name == "adamw8bit") {
    const bool fp32_state = t.numel < kSmallTensor || (o.embedding_fp32_state && t.embedding);
    if (fp32_state) {
      add("m", DType::kF32, count);
      add("v", DType::kF32, count);
    } else {
      const int64_t blocks = (count + o.block_size - 1) / o.block_size;
      add("codes.m", DType::kU8, count);
      add("codes.v", DType::kU8, count);
      add("absmax.m", DType::kF32, blocks);
      add("absmax.v", DType::kF32, blocks);
    }
  } else if (o.name == "lion") {
    add("m", S, count);
  } else if (o.name == "adamw_schedulefree") {
    add("z", S, count);
    add("v", S, count);
  } else if (o.name == "ademamix") {
    add("m1", S, count);
    add("nu", S, count);
    add("m2", S, count);
  } else if (o.name == "muon") {
    if (t.muon) {
      add("momentum", S, count);
    } else {
      add("m", S, count);
      add("v", S, count);
    }
  } else {
    fail(std::string("optim.name = '") + o.name + "': no per-tensor state rule");
  }
  return out;
}

std::string tensor_states_text(const std::vector<TensorState>& states) {
  std::string out;
  int64_t bytes = 0;
  char part[96];
  for (const TensorState& s : states) {
    std::snprintf(part, sizeof part, "%s%s:%sx%lld", out.empty() ? "" : " ", s.name.c_str(),
                  dtype_name(s.dtype), static_cast<long long>(s.elements));
    out += part;
    bytes += s.bytes();
  }
  if (states.empty()) return "-";
  std::snprintf(part, sizeof part, " (%.1f kB)", static_cast<double>(bytes) / 1e3);
  return out + part;
}

std::vector<std::vector<TensorState>> tensor_states_of_views(const std::vector<StateView>& views,
                                                             size_t params) {
  std::vector<std::vector<TensorState>> out(params);
  for (const StateView& v : views)
    if (v.param >= 0 && static_cast<size_t>(v.param) < params)
      out[static_cast<size_t>(v.param)].push_back({v.name, v.dtype, v.numel});
  return out;
}

}  // namespace ledgerlm
