// Model state buffers and the optimizer step (see model_state.h).
#include "train/model_state.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "ckpt/safetensors.h"
#include "model/base/check.h"
#include "optim/grad_clip.h"

namespace ledgerlm {

PrecisionPlan precision_plan(const RunConfig& c) {
  const PrecisionConfig& p = c.precision;
  PrecisionPlan plan;
  plan.params = dtype_parse(p.params, "precision.params");
  DType grads = dtype_parse(p.grads, "precision.grads");
  if (p.grad_accum == "auto") {
    plan.grads = c.train.accum > 1 ? DType::kF32 : grads;
  } else {
    plan.grads = c.train.accum > 1 ? dtype_parse(p.grad_accum, "precision.grad_accum") : grads;
  }
  plan.master_none = p.master == "none";
  plan.separate_master = !plan.master_none && plan.params != DType::kF32;
  LLM_REQUIRE(!(plan.master_none && plan.params == DType::kF32),
              "precision.master = none needs precision.params bf16 or fp16 (fp32 params are "
              "their own master)");
  plan.rounding = p.rounding == "stochastic" ? Rounding::kStochastic : Rounding::kNearest;
  std::string mode = p.loss_scale;
  if (mode == "auto")
    mode = plan.params == DType::kF16 || plan.grads == DType::kF16 ? "dynamic" : "none";
  plan.scaler_on = mode != "none";
  plan.scaler_dynamic = mode == "dynamic";
  return plan;
}

namespace {

LossScalerConfig scaler_config(const RunConfig& c, const PrecisionPlan& plan) {
  LossScalerConfig s;
  s.dynamic = plan.scaler_dynamic;
  s.init_scale = c.precision.init_scale;
  s.growth_interval = c.precision.growth_interval;
  s.growth_factor = c.precision.growth_factor;
  s.backoff = c.precision.backoff_factor;
  return s;
}

ParamTableOptions table_options(const RunConfig& c) {
  ParamTableOptions o;
  o.block = c.optim.block_size;
  o.world = 1;
  o.decay_embeddings = c.optim.decay_embeddings;
  return o;
}

}  // namespace

ModelState::ModelState(const RunConfig& config, Backend& backend)
    : config_(config),
      backend_(backend),
      table_(param_table_build(config.model, table_options(config))),
      plan_(precision_plan(config)),
      scaler_(scaler_config(config, plan_)) {
  const size_t n = static_cast<size_t>(table_.total);
  params_ = backend_.allocate(MemTag::kParams, n * dtype_size(plan_.params));
  grads_ = backend_.allocate(MemTag::kGrads, n * dtype_size(plan_.grads));
  if (plan_.separate_master) master_ = backend_.allocate(MemTag::kMaster, n * sizeof(float));
  if (plan_.master_none)  // fp32 view the optimizer updates, rounded back into the compute copy
    master_scratch_ = backend_.allocate(MemTag::kWorkspace, n * sizeof(float));
  // precision.state picks the storage of the optimizer's parameter-shaped state (m, v, momentum).
  OptimConfig optim = config_.optim;
  optim.state_dtype = dtype_parse(config_.precision.state, "precision.state");
  optim_ = optimizer_create(optim);
  optim_->init(table_, 0, table_.total, backend_);
  model_ = std::make_unique<GptModel>(config_.model, table_, backend_, plan_.params, plan_.grads);
  model_->set_bf16_matmul(config_.precision.matmul == "bf16");
  units_ = std::make_unique<FlatUnits>(table_, params(), grads());
}

float* ModelState::master() {
  if (plan_.separate_master) return master_.as<float>();
  if (plan_.master_none) return master_scratch_.as<float>();
  return params_.as<float>();
}

void ModelState::init_weights(uint64_t seed) {
  if (plan_.separate_master) {
    gpt_init_params(table_, Tensor(master_.data(), DType::kF32), seed, backend_);
    write_compute_copy(0);
  } else {
    gpt_init_params(table_, params(), seed, backend_);
  }
}

void ModelState::zero_grads() {
  backend_.zero(grads(), table_.total);
}

void ModelState::write_compute_copy(int64_t step) {
  if (plan_.separate_master)
    backend_.convert(params(), Tensor(master_.data(), DType::kF32), table_.total,
                     Rounding::kNearest);
  else if (plan_.master_none)
    backend_.convert(params(), Tensor(master_scratch_.data(), DType::kF32), table_.total,
                     plan_.rounding, static_cast<uint64_t>(config_.train.seed),
                     static_cast<uint64_t>(step) * static_cast<uint64_t>(table_.total));
}

StepStats ModelState::optimizer_step(int64_t step, double lr) {
  StepStats stats;
  stats.lr = lr;
  const double unscale = 1.0 / loss_scale();
  double sumsq = backend_.sum_squares(grads(), table_.total);
  stats.grad_norm = std::sqrt(sumsq) * unscale;
  bool finite = std::isfinite(stats.grad_norm);
  if (finite) {
    auto t0 = std::chrono::steady_clock::now();
    OptimStepInfo info;
    info.lr = lr;
    info.step = step;
    info.grad_scale = unscale * grad_clip_factor(stats.grad_norm, config_.optim.grad_clip);
    if (plan_.master_none)
      backend_.convert(Tensor(master_scratch_.data(), DType::kF32), params(), table_.total);
    optim_->step(master(), grads(), info);
    write_compute_copy(step);
    stats.optim_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  stats.skipped = !finite;
  if (plan_.scaler_on) scaler_.update(finite);
  return stats;
}

void ModelState::save_weights(const std::string& path) const {
  SafeTensorsWriter w;
  const bool fp32_source = plan_.separate_master || plan_.params == DType::kF32;
  const char* base = fp32_source ? static_cast<const char*>(plan_.separate_master ? master_.data()
                                                                                  : params_.data())
                                 : static_cast<const char*>(params_.data());
  DType dt = fp32_source ? DType::kF32 : plan_.params;
  for (const auto& p : table_.params)
    w.add(p.name, dt, p.shape, base + p.offset * static_cast<int64_t>(dtype_size(dt)));
  w.set_metadata("format", "ledgerlm-weights");
  w.set_metadata("format_version", "1");
  w.write_atomic(path);
}

void ModelState::set_weights_f32(const std::vector<float>& staging) {
  Tensor src(const_cast<float*>(staging.data()), DType::kF32);
  if (plan_.separate_master) {
    backend_.convert(Tensor(master_.data(), DType::kF32), src, table_.total);
    write_compute_copy(0);
  } else {
    backend_.convert(params(), src, table_.total);
  }
}

void ModelState::load_weights(const std::string& path) {
  SafeTensorsFile f = SafeTensorsFile::open(path);
  std::vector<float> staging(static_cast<size_t>(table_.total), 0.0f);
  for (const auto& p : table_.params) {
    const SafeTensorInfo& info = f.get(p.name);
    LLM_REQUIRE(info.shape == p.shape, "weights file '", path, "': tensor '", p.name,
                "' has shape ", safetensors_shape_string(info.shape), ", the model expects ",
                safetensors_shape_string(p.shape));
    std::vector<float> v = f.read_f32(p.name);
    std::copy(v.begin(), v.end(), staging.begin() + p.offset);
  }
  set_weights_f32(staging);
}

namespace {

std::string state_tensor_name(const ParamTable& table, const StateView& v) {
  return v.param >= 0 ? table.params[static_cast<size_t>(v.param)].name + "." + v.name
                      : "optim." + v.name;
}

}  // namespace

std::vector<CkptPiece> ModelState::checkpoint_pieces() {
  std::vector<CkptPiece> pieces;
  const bool fp32_source = plan_.separate_master || plan_.params == DType::kF32;
  const DType dt = fp32_source ? DType::kF32 : plan_.params;
  const char* base =
      static_cast<const char*>(plan_.separate_master ? master_.data() : params_.data());
  for (const auto& p : table_.params) {
    CkptPiece piece;
    piece.file = "model";
    piece.name = p.name;
    piece.dtype = dt;
    piece.shape = p.shape;
    piece.begin = 0;
    piece.count = p.numel;
    piece.data = base + p.offset * static_cast<int64_t>(dtype_size(dt));
    pieces.push_back(std::move(piece));
  }
  if (plan_.separate_master) {  // the compute copy too, in its own dtype (what the ledger counts)
    const char* cbase = static_cast<const char*>(params_.data());
    const int64_t es = static_cast<int64_t>(dtype_size(plan_.params));
    for (const auto& p : table_.params)
      pieces.push_back(
          {"compute", p.name, plan_.params, p.shape, 0, p.numel, cbase + p.offset * es});
  }
  for (const StateView& v : optim_->state_views()) {
    CkptPiece piece;
    piece.file = "optimizer";
    piece.name = state_tensor_name(table_, v);
    piece.dtype = v.dtype;
    piece.shape = v.shape;
    piece.begin = v.param_begin;
    piece.count = v.numel;
    piece.data = v.data;
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

void ModelState::checkpoint_load_weights(const CheckpointReader& ckpt) {
  std::vector<float> staging(static_cast<size_t>(table_.total), 0.0f);
  for (const auto& p : table_.params) {
    LLM_REQUIRE(ckpt.has("model", p.name), "checkpoint '", ckpt.dir(),
                "': model.safetensors has no tensor '", p.name, "' (a different architecture?)");
    std::vector<float> v = ckpt.read_f32("model", p.name, p.shape);
    std::copy(v.begin(), v.end(), staging.begin() + p.offset);
  }
  const size_t extra = ckpt.tensor_names("model").size();
  LLM_REQUIRE(extra == table_.params.size(), "checkpoint '", ckpt.dir(),
              "': model.safetensors has ", extra, " tensors, the model has ", table_.params.size(),
              " (a different architecture?)");
  set_weights_f32(staging);
}

void ModelState::checkpoint_load(const CheckpointReader& ckpt) {
  checkpoint_load_weights(ckpt);  // the compute copy is now the master rounded to nearest
  if (plan_.separate_master) {
    // A saved compute copy of the same dtype holds the same bits; read it so that a checkpoint
    // is restored exactly as it was written (and its checksums are exercised).
    const int64_t es = static_cast<int64_t>(dtype_size(plan_.params));
    for (const auto& p : table_.params)
      if (ckpt.has("compute", p.name) && ckpt.info("compute", p.name).dtype == plan_.params)
        ckpt.read("compute", p.name, plan_.params, p.shape, 0, p.numel,
                  static_cast<char*>(params_.data()) + p.offset * es);
  }
  std::vector<std::string> expected;
  for (const StateView& v : optim_->state_views()) {
    const std::string name = state_tensor_name(table_, v);
    LLM_REQUIRE(ckpt.has("optimizer", name), "checkpoint '", ckpt.dir(),
                "': optimizer.safetensors has no state '", name, "' that optimizer ",
                optim_->name(), " with this config needs");
    ckpt.read("optimizer", name, v.dtype, v.shape, v.param_begin, v.numel, v.data);
    expected.push_back(name);
  }
  std::sort(expected.begin(), expected.end());
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  for (const std::string& name : ckpt.tensor_names("optimizer"))
    LLM_REQUIRE(std::binary_search(expected.begin(), expected.end(), name), "checkpoint '",
                ckpt.dir(), "': optimizer.safetensors holds state '", name, "' that optimizer ",
                optim_->name(), " with this config does not use");
}

}  // namespace ledgerlm
