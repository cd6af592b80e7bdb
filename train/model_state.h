// The model state of one rank: parameter table, the compute copy of the weights, gradients, FP32
// master weights, optimizer and loss scaler — allocated through the backend's tracking allocator
// with their ledger tags — and the optimizer step of DESIGN.md's fixed order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "model/backend/backend.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "train/run_config.h"

namespace ledgerlm {

// What the precision section means for buffers (config values, not code paths).
struct PrecisionPlan {
  DType params = DType::kF32;    // compute copy
  DType grads = DType::kF32;     // the gradient buffer backward accumulates into
  bool separate_master = false;  // an fp32 master copy exists apart from the compute copy
  bool master_none = false;      // no master: the optimizer updates the compute copy directly
  Rounding rounding = Rounding::kNearest;
  bool scaler_dynamic = false;
  bool scaler_on = false;  // loss scaling active (dynamic or static)
};
PrecisionPlan precision_plan(const RunConfig& config);

struct StepStats {
  double grad_norm = 0.0;  // global norm of the unscaled gradients (before clipping)
  double lr = 0.0;
  bool skipped = false;  // non-finite gradients: no update happened
  double optim_ms = 0.0;
};

class ModelState {
 public:
  ModelState(const RunConfig& config, Backend& backend);

  const RunConfig& config() const { return config_; }
  const ParamTable& table() const { return table_; }
  const PrecisionPlan& plan() const { return plan_; }
  Backend& backend() { return backend_; }
  GptModel& model() { return *model_; }
  Optimizer& optimizer() { return *optim_; }
  LossScaler& scaler() { return scaler_; }

  Tensor params() const { return Tensor(params_.data(), plan_.params); }
  Tensor grads() const { return Tensor(grads_.data(), plan_.grads); }
  // The model's view of the weights and gradients, unit by unit (unit_access.h): the flat
  // buffers of this process.
  UnitAccess& units() { return *units_; }
  // The fp32 weights the optimizer updates (the master copy, or the params when they are fp32).
  float* master();

  void init_weights(uint64_t seed);
  void zero_grads();
  // Loss scale for backward (1 when scaling is off).
  double loss_scale() const { return plan_.scaler_on ? scaler_.scale() : 1.0; }
  // Unscale, check finiteness, clip, optimizer step, write the compute copy, scaler update.
  StepStats optimizer_step(int64_t step, double lr);

  // Weights as safetensors with parameter-table names (fp32 from the master when there is one).
  void save_weights(const std::string& path) const;
  // Loads weights saved by save_weights (or a checkpoint's model file); checks names and shapes.
  void load_weights(const std::string& path);
  // Copies the fp32 weights into the compute copy (after loading or an update).
  void write_compute_copy(int64_t step);

  // Checkpoint contents of this rank: file "model" holds the weights under parameter-table names
  // (the fp32 master, or the compute copy when precision.master = none); file "compute" the
  // bf16/fp16 compute copy when there is a separate master; file "optimizer"
  // holds every Optimizer::state_views() piece as "<param>.<state>" (m, v, codes.m, absmax.m,
  // row, col, momentum ...). Pointers stay valid until the next optimizer step.
  std::vector<CkptPiece> checkpoint_pieces();
  // Restores weights and optimizer state from a checkpoint (any saved weight dtype is converted;
  // optimizer state must match exactly: every view present with its dtype and shape, nothing
  // extra). Errors name the checkpoint file and tensor.
  void checkpoint_load(const CheckpointReader& ckpt);
  // The weights of a checkpoint only (--init-from): names and shapes checked.
  void checkpoint_load_weights(const CheckpointReader& ckpt);

 private:
  // Sets the weights from an fp32 staging copy laid out by the table (padding zero).
  void set_weights_f32(const std::vector<float>& staging);

  RunConfig config_;
  Backend& backend_;
  ParamTable table_;
  PrecisionPlan plan_;
  Buffer params_, grads_, master_, master_scratch_;
  std::unique_ptr<Optimizer> optim_;
  std::unique_ptr<GptModel> model_;
  std::unique_ptr<FlatUnits> units_;
  LossScaler scaler_;
};

}  // namespace ledgerlm
