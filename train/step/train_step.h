// One training step in the fixed order — the single definition that `ledgerlm train`,
// `ledgerlm bench` and the tests call:
//
//   zero grads
//   for micro in 0..A-1: batch -> forward (recompute-aware) -> loss x scale / A -> backward
//                        (gradients accumulate in the configured accumulation dtype)
//   reduction point: gradients meet across data-parallel ranks here (nothing on one rank)
//   non-finite loss in fp32/bf16: stop with an error (fp16 lets the scaler decide)
//   unscale on the fly -> non-finite check -> global grad-norm clip -> optimizer step on the
//   FP32 master -> write the compute copy; or skip (fp16 overflow: weights and state untouched;
//   too many skips in a row stop the run) -> loss-scaler update
//
// The loop around it (budgets, LR schedule, evaluation, metrics, checkpoints, stop signals)
// lives in train_loop.h; where the micro-batches come from is a BatchSource.
#pragma once

#include <cstdint>
#include <vector>

#include "data/loader.h"
#include "train/step/model_state.h"

namespace ledgerlm {

// One micro-batch on this rank: tokens and targets [B, T] (host memory, row-major) and the index
// in the step's global batch of row 0 (dropout masks follow each sequence's global place).
struct MicroBatch {
  const int32_t* inputs = nullptr;
  const int32_t* targets = nullptr;
  uint64_t first_sequence = 0;
};

// Supplies micro-batch `micro` (0..A-1) of optimizer step `step` (1-based). The pointers stay
// valid until the next call.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual MicroBatch micro_batch(int64_t step, int64_t micro) = 0;
};

// The data loader's global order: step s reads the loader's batch s - 1.
class LoaderBatches final : public BatchSource {
 public:
  explicit LoaderBatches(const DataLoader& loader);
  MicroBatch micro_batch(int64_t step, int64_t micro) override;

 private:
  const DataLoader& loader_;
  std::vector<int32_t> inputs_, targets_;
};

struct StepResult {
  double loss = 0.0;        // mean over the micro-batches of their mean token loss (nats)
  double grad_norm = 0.0;   // global norm of the unscaled gradients, before clipping
  double lr = 0.0;          // the LR passed in
  double loss_scale = 1.0;  // the scale backward used (1 without loss scaling)
  bool skipped = false;     // non-finite gradients: no update happened (fp16)
  double forward_ms = 0.0, backward_ms = 0.0, optim_ms = 0.0, comm_ms = 0.0;
  int64_t exchange_bytes = 0;  // StepStats::exchange_bytes
  // train.gns (gns.h): this step's two estimates, their EMAs and B_simple (sequences); `gns`
  // false when off or when the step was skipped (the EMAs then keep their values).
  bool gns = false;
  GnsEstimate gns_step;
  double gns_g2_ema = 0.0, gns_trace_ema = 0.0, b_simple = 0.0;
};

// Runs optimizer step `step` (1-based) at learning rate `lr` over config.train.accum
// micro-batches of config.train.micro_batch x seq_len. Errors (non-finite loss in fp32/bf16,
// non-finite gradients without loss scaling, too many consecutive fp16 skips) are thrown as Error
// with the step in the message.
StepResult train_step(ModelState& state, BatchSource& batches, int64_t step, double lr);

}  // namespace ledgerlm
