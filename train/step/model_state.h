// The model state of one rank: parameter table, the compute copy of the weights, gradients, FP32
// master weights, optimizer and loss scaler — allocated through the backend's tracking allocator
// with their ledger tags — sharded across data-parallel ranks by ZeRO stage, and the gradient
// reduction and optimizer step of the training step's fixed order.
//
// Where each buffer lives at each ZeRO stage is the placement table's (placement.h): the
// constructor sizes the buffers from it, and the reduction, the optimizer's parts, the
// compute-copy writes and checkpoint I/O read their positions from it. At world 1 every stage is
// stage 0 (nothing to shard). Gradients are all-reduced unit by unit (stage 0), reduce-scattered
// in place after the last micro-batch (stage 1) or during backward (stages 2-3, zero_units.h);
// the updated pieces are all-gathered into the compute copy (stages 1-2) or gathered unit by
// unit for use (stage 3). The gradient norm is summed unit by unit in unit order at every stage.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "model/backend/backend.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "train/comm/comm.h"
#include "train/config/run_config.h"
#include "train/offload/offload_backend.h"
#include "train/offload/offload_pager.h"
#include "train/step/gns.h"
#include "train/step/placement.h"
#include "train/step/precision_plan.h"
#include "train/step/shard_layout.h"

namespace ledgerlm {

class ZeroUnits;

// Where optim.offload = disk keeps a run's state files: RUN_DIR/offload, or
// optim.offload_dir/NAME-HASH, HASH the CRC-32C (8 hex digits) of the run directory's canonical
// path: one directory per run directory.
std::string offload_dir_for_run(const RunConfig& config);

struct StepStats {
  double grad_norm = 0.0;  // global norm of the unscaled gradients (before clipping)
  double lr = 0.0;
  bool skipped = false;  // non-finite gradients: no update happened
  double optim_ms = 0.0;
  double comm_ms = 0.0;  // collectives of the optimizer step (norm, all-gather, exchanges)
  // Bytes this rank sent to other ranks in the optimizer's all-to-alls (Muon's gather and
  // scatter of matrix pieces); 0 for optimizers without whole-tensor work.
  int64_t exchange_bytes = 0;
};

struct ModelStateOptions {
  Comm* comm = nullptr;  // null: one rank
  // Tests: run the stage's machinery even on one rank (-1: zero_stage_effective).
  int stage_override = -1;
};

class ModelState {
 public:
  ModelState(const RunConfig& config, Backend& backend, const ModelStateOptions& options = {});
  ~ModelState();

  const RunConfig& config() const { return config_; }
  // The trained tensors' table (gradients, master, optimizer state, checkpoints): every tensor
  // unless some are frozen (train.freeze, [lora]).
  const ParamTable& table() const { return table_; }
  // Every tensor of the model, trained and frozen (ParamInfo::trainable), and the frozen ones.
  const ParamTable& model_table() const { return model_table_; }
  const ParamTable& frozen_table() const { return frozen_table_; }
  // The frozen weights in the compute dtype, whole on every rank (empty when none).
  Tensor frozen() const { return Tensor(frozen_.data(), plan_.params); }
  // SHA-256 of the frozen weights' bytes (compute dtype, frozen-table order); "" when none.
  // Checkpoints record it: a resume must find the same base weights.
  std::string frozen_sha256();
  // Where the frozen weights came from: the --init-from path (absolute), or "" for the seed's
  // init. Checkpoints record it with the hash, so a resume rebuilds and checks them.
  const std::string& base_source() const { return base_source_; }
  void set_base_source(const std::string& path) { base_source_ = path; }
  const PrecisionPlan& plan() const { return plan_; }
  const ShardLayout& layout() const { return layout_; }
  const PlacementTable& placement() const { return placement_; }
  int stage() const { return stage_; }
  int world() const { return layout_.world; }
  Comm& comm() { return *comm_; }
  Backend& backend() { return backend_; }
  // The backend of the fp32 master and the optimizer state: the compute backend, or under
  // optim.offload = disk the offload backend whose buffers live in files. Every op on them goes
  // through it.
  Backend& state_backend() { return offload_backend_ ? *offload_backend_ : backend_; }
  // True when the optimizer runs on a host backend apart from a device compute backend
  // (optim.offload = host or disk on a device).
  bool optimizer_on_host() const { return host_backend_ != nullptr; }
  // The pager of optim.offload = disk (nullptr otherwise).
  OffloadPager* offload_pager() { return pager_.get(); }
  // Moves the offload files into the run directory once it exists (offload_dir_for_run).
  void offload_settle();
  GptModel& model() { return *model_; }
  Optimizer& optimizer() { return *optim_; }
  LossScaler& scaler() { return scaler_; }

  // The compute copy (whole at stages 0-2, this rank's compact shard at stage 3) and the
  // gradients (whole at stages 0-1, the compact shard at 2-3) as flat tensors.
  Tensor params() const { return Tensor(params_.data(), plan_.params); }
  Tensor grads() const { return Tensor(grads_.data(), plan_.grads); }
  // The model's view of weights and gradients, unit by unit (unit_access.h).
  UnitAccess& units();
  // The fp32 weights the optimizer updates: flat (stage 0; fp32 weights at 1-2: the compute
  // copy itself) or compact over this rank's pieces.
  float* master();

  void init_weights(uint64_t seed);
  void zero_grads();
  // Loss scale for backward (1 when scaling is off). Backward gets loss_scale() / (A x world):
  // the sum over ranks of their micro-batch means is then the global mean.
  double loss_scale() const { return plan_.scaler_on ? scaler_.scale() : 1.0; }
  // The reduction point, after the last micro-batch's backward: stage 0 all-reduces the
  // gradients, stage 1 reduce-scatters them (2 and 3 did during backward). Returns comm ms.
  double reduce_gradients();
  // The gradient noise scale (train.gns, gns.h): where its small batch comes from, and its EMAs.
  GnsSource gns_source() const { return gns_source_; }
  GnsTracker& gns_tracker() { return gns_tracker_; }
  // GnsSource::kMicroBatches, after micro-batch m's backward into zeroed gradients: the sum of
  // squares of that micro-batch's (scaled) gradient. The micro-batches' sum is kept in a buffer
  // beside and the gradients are left zeroed for the next micro-batch; after the `last` one the
  // gradients hold the whole sum again.
  double gns_take_micro_batch(int64_t m, bool last);
  // GnsSource::kRanks, before reduce_gradients: the mean over ranks of the sums of squares of
  // their local (scaled) gradients. Collective (one scalar all-reduce).
  double gns_local_sum_squares();
  // Unscale, global non-finite check, clip, optimizer step on this rank's shard, write the
  // compute copy (and all-gather it at stages 1-2), scaler update.
  StepStats optimizer_step(int64_t step, double lr);
  // Milliseconds of collectives inside backward (stages 2-3) since the last call.
  double take_backward_comm_ms();
  // The run's length in optimizer steps, as the LR schedule estimates it (optimizers with
  // schedules of their own read it: AdEMAMix's warmups).
  void set_schedule_length(int64_t steps) { schedule_length_ = steps; }
  // Evaluation uses the weights the optimizer returns (the master, or the average of the weights
  // with optim.ema_half_life); training the weights it trains at. They differ for an optimizer
  // that writes_compute_copy() (Schedule-Free: x and y) and for an average: true puts x (or the
  // average) into the compute copy, false puts the training weights back. Collective.
  void use_eval_weights(bool eval);

  // Weights as safetensors with parameter-table names (fp32 from the master when there is one;
  // frozen tensors in the compute dtype). Collective: every rank writes its part of the one file.
  void save_weights(const std::string& path);
  // Loads weights saved by save_weights (or a checkpoint's model file); checks names, shapes,
  // checksums (where the file has them) and that every value is finite. Adapter factors (LoRA)
  // missing from the file keep their initial values: a base model starts a LoRA run.
  void load_weights(const std::string& path);

  // Checkpoint contents of this rank: file "model" holds the weights under parameter-table names
  // (the fp32 master, or the compute copy when precision.master = none); file "compute" the
  // bf16/fp16 compute copy when there is a separate master; file "optimizer" every
  // Optimizer::state_views() piece as "<param>.<state>". Stage 0: rank 0 holds everything and
  // the others contribute nothing; stages 1-3: each rank its shard. Pointers (and the readers of
  // pieces streamed from device memory) stay valid until the next optimizer step.
  std::vector<CkptPiece> checkpoint_pieces();
  // Restores weights and optimizer state from a checkpoint written at any world size and stage
  // (each rank reads the ranges it holds); errors name the checkpoint file and tensor.
  void checkpoint_load(const CheckpointReader& ckpt);
  // The weights of a checkpoint only (--init-from): names and shapes checked, non-finite values
  // refused. Every tensor of the model (trained and frozen) but adapter factors must be there.
  void checkpoint_load_weights(const CheckpointReader& ckpt);

 private:
  // Reads `count` fp32 values of tensor `param` (a model_table() index) from element `begin`
  // into `dst` (host). `keep(param)` false: the tensor keeps its current value.
  using WeightReader = std::function<void(int param, int64_t begin, int64_t count, float* dst)>;
  using WeightFilter = std::function<bool(int param)>;
  void set_weights(const WeightReader& read, const WeightFilter& keep = {});
  // Trained weights of a checkpoint's model file (resume: frozen ones come from the base).
  // `refuse_non_finite`: --init-from's check (a resume leaves divergence to the training loop).
  void checkpoint_load_trained(const CheckpointReader& ckpt, bool refuse_non_finite = false);
  // The compute copy from the fp32 master (rounded as precision.rounding says for
  // precision.master = none, to nearest otherwise; `rounding` overrides for init and loads), or
  // from `source`, fp32 weights in the master's layout (the average of the weights).
  void write_compute_copy(int64_t step, Rounding rounding, const float* source = nullptr);
  double gradient_sum_squares();
  // Host copies of pieces[first..] when the backend's memory is not host memory.
  void stage_pieces(Backend& be, std::vector<CkptPiece>* pieces, size_t first);
  // The same pieces read through CkptPiece::read instead (checkpoints: no whole host copy).
  void stream_pieces(Backend& be, std::vector<CkptPiece>* pieces, size_t first);
  // precision.master = none: the fp32 view of this rank's part of the compute copy.
  void widen_compute_copy();
  // The rank's pieces of the weights as written to "model" (fp32 master or compute copy);
  // `weights`: fp32 weights in the master's layout to write instead of the master.
  std::vector<CkptPiece> weight_pieces(const std::string& file, const float* weights = nullptr);
  std::vector<CkptPiece> frozen_pieces();
  double all_gather_compute_copy();
  // The optimizer's all-to-all (OptimStepInfo::exchange); adds its time to exchange_ms_.
  void exchange(Tensor send, const std::vector<int64_t>& send_counts, Tensor recv,
                const std::vector<int64_t>& recv_counts);

  RunConfig config_;
  Backend& backend_;
  std::unique_ptr<Comm> own_comm_;  // the single-rank Comm when none was given
  Comm* comm_ = nullptr;
  ParamTable model_table_, table_, frozen_table_;
  PrecisionPlan plan_;
  int stage_ = 0;
  ShardLayout layout_;
  PlacementTable placement_;  // where every tensor's buffers are on this rank
  void start_offload();
  // The compute copy the optimizer and the master's rounding write: the device's own, or its
  // host image when the optimizer runs on the host (then uploaded by upload_compute_copy).
  Tensor optimizer_compute() const;
  void upload_compute_copy();
  // The reduced gradients the optimizer reads, device to host (optimizer on the host).
  void download_gradients();

  std::unique_ptr<Backend> host_backend_;            // the optimizer's, beside a device backend
  Buffer host_grads_, host_compute_;                 // what crosses the bus, in host memory
  std::unique_ptr<OffloadPager> pager_;              // optim.offload = disk
  std::unique_ptr<OffloadBackend> offload_backend_;  // over backend_, with pager_
  Buffer params_, grads_, master_, master_scratch_, staging_f32_;
  GnsSource gns_source_ = GnsSource::kOff;
  GnsTracker gns_tracker_;
  // kMicroBatches: the step's gradient summed over the micro-batches so far, while the gradient
  // buffer takes one micro-batch's alone (ledger: workspace.gns).
  Buffer gns_accum_;
  Buffer frozen_;  // frozen weights (compute dtype, whole): MemTag::kParams
  std::unique_ptr<Optimizer> optim_;
  std::unique_ptr<GptModel> model_;
  std::unique_ptr<FlatUnits> flat_units_;
  std::unique_ptr<ZeroUnits> zero_units_;
  std::vector<std::vector<char>> staging_;  // host copies behind save_weights pieces
  LossScaler scaler_;
  int64_t schedule_length_ = 0;
  double exchange_ms_ = 0.0;  // the current step's optimizer all-to-alls
  int64_t exchange_bytes_ = 0;
  bool eval_weights_ = false;
  std::string base_source_;
  std::string frozen_sha256_;  // cached: frozen weights change only in set_weights
};

}  // namespace ledgerlm
