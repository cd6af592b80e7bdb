// The optimizers as data: one traits entry per optimizer, read by everything outside the optimizer
// that needs to know about it — the name list (config validation, CLI help), the factory, the
// memory planner's state components, the per-tensor state prediction, bytes per parameter, the
// offload staging size and the optimizer-specific config checks. Nothing else compares an
// optimizer's name: adding an optimizer is its own file (its class, factory and entry), its
// kernel header and its visitor methods; the planner needs no hand edit.
//
// The registry starts with the built-in optimizers (optim_traits.cpp) and can be extended at run
// time (optim_traits_register): a test registers a dummy optimizer without editing any file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/base/dtype.h"
#include "model/base/memory.h"
#include "model/param_table.h"
#include "optim/optim_config.h"

namespace ledgerlm {

class Optimizer;

// Storage dtype of one state component.
enum class StateDtypeRule {
  kState,  // OptimConfig::state_dtype (precision.state): fp32 or bf16
  kF32,    // always fp32 (factored statistics, 8-bit absmax, 8-bit AdamW's small tensors)
  kU8,     // 8-bit codes
};

// Elements a state component keeps for a part of `count` elements of one tensor.
enum class StateExtent {
  kPerElement,  // one per parameter element held (m, v, momentum)
  kPerBlock,    // one per optim.block_size block of the elements held (8-bit absmax)
  kRows,        // factored: the whole tensor's rows (2-D view: cols = the last dim), kept whole
  kCols,        //   by every rank holding a part of it; its columns
};

// Which tensors a component serves: all of them, or one side of the optimizer's split of its
// tensors into two kinds (OptimTraits::primary: Adafactor's factored matrices, 8-bit AdamW's
// quantized tensors, Muon's orthogonalised matrices; the other side: the rest).
enum class StateCovers { kAll, kPrimary, kSecondary };

// What a step needs beyond the elements it holds.
enum class WholeTensor {
  kNone,         // element-wise
  kReducedSums,  // per-tensor sums reduced across ranks (LAMB/LARS trust ratios, Adafactor)
  kOnOwner,      // whole matrices gathered on an owner rank (Muon's orthogonalisation): the
                 // planner adds the exchange and Newton-Schulz scratch (comm.muon, workspace.muon)
};

// One component of an optimizer's state, in allocation order.
struct StateComponentTraits {
  std::string name;  // the state's name in checkpoints ("m", "codes.m"); the plan's "optim.<name>"
  MemTag tag = MemTag::kOptimM;
  StateDtypeRule dtype = StateDtypeRule::kState;
  StateExtent extent = StateExtent::kPerElement;
  StateCovers covers = StateCovers::kAll;
  // Each tensor's part starts on a whole optim.block_size block of the buffer (8-bit codes): the
  // buffer holds the parts rounded up to blocks.
  bool block_aligned = false;
  std::string group = "all";  // the optimizer groups the bytes serve (the ledger's `group`)
  // Allocated only when this says so (nullptr: always), e.g. SGD's momentum for momentum > 0.
  bool (*present)(const OptimConfig&) = nullptr;
};

struct OptimTraits {
  std::string name;  // optim.name
  std::unique_ptr<Optimizer> (*create)(const OptimConfig&) = nullptr;
  std::vector<StateComponentTraits> states;
  // Optimizer-wide host scalars (fp64 step counters and the like), "optim.scalars".
  int64_t host_scalars = 0;
  // The optimizer's split of its tensors (StateCovers::kPrimary); nullptr: no split. Without
  // tensor shapes (ledgerlm memory --params) the planner counts every parameter as primary.
  bool (*primary)(const ParamInfo&, const OptimConfig&) = nullptr;
  WholeTensor whole = WholeTensor::kNone;
  // Bytes per element of the fp32 master and the states one whole-tensor kernel reads together
  // (at fp32): the offload staging arena holds two such tensors. 0: element-wise kernels only.
  int64_t whole_tensor_bytes = 0;
  bool schedules = false;          // runs optim.impl = loop and foreach, not only fused
  bool trains_off_master = false;  // see optim_trains_off_master (optim_config.h)
  std::vector<std::string> keys;   // the optim.* keys only this optimizer reads (without "optim.")
  // An optim.* key whose value 0 means "the run's length in steps" (AdEMAMix's warmup), and
  // whether this config leaves it at that: a wall-clock budget alone then gives it no length.
  std::string run_length_key;
  bool (*needs_run_length)(const OptimConfig&) = nullptr;
  // Checks of this optimizer's own keys (after the generic ones); throws Error naming the key.
  void (*validate)(const OptimConfig&) = nullptr;
  // Advice printed at the start of a run ("note: " lines), e.g. an LR on another optimizer's scale.
  std::vector<std::string> (*notes)(const OptimConfig&) = nullptr;
};

// Every registered optimizer, built-ins first, in registration order.
std::vector<const OptimTraits*> optim_traits_all();
// The entry named `name`, or nullptr.
const OptimTraits* optim_traits_find(const std::string& name);
// The entry of config.name; throws Error "optim.name: expected <names> (got '...')" otherwise.
const OptimTraits& optim_traits_of(const OptimConfig& config);
// Adds an optimizer (a test, a plug-in); throws Error if the name is taken or the entry has no
// name or factory. Entries are never removed: references stay valid.
void optim_traits_register(OptimTraits traits);
// The names joined: optim_names_text(", ", " or ") -> "sgd, adamw, ... or muon".
std::string optim_names_text(const std::string& sep, const std::string& last_sep);
// The names of the optimizers whose traits satisfy `pred`, joined likewise.
std::string optim_names_text_if(bool (*pred)(const OptimTraits&), const std::string& sep,
                                const std::string& last_sep);

// A component's storage dtype under `config`, and whether `config` allocates it.
DType optim_state_dtype(const StateComponentTraits& c, const OptimConfig& config);
bool optim_state_present(const StateComponentTraits& c, const OptimConfig& config);
// Whether a component serves a tensor of kind `primary`.
bool optim_state_covers(const StateComponentTraits& c, bool primary);
// `master` plus the optimizer's nominal state bytes per parameter: every parameter counted as
// primary, per-element and per-block components at their dtype, factored statistics as 0.
double optim_state_bytes_per_param(const OptimConfig& config, double master = 0.0);

}  // namespace ledgerlm
