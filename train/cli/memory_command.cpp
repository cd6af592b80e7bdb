// `ledgerlm memory`: the planner (see memory_command.h).
//
// Two sources for the model: a config (file and/or --section.key flags, short flags on top),
// whose parameter table is built exactly as the trainer builds it (padding included), or
// --params N, a model of exactly N parameters with no padding (the worked figures of the issue:
// 1e9 params in bf16 + bf16 grads + fp32 master + AdamW = 16 GB). Activations need the shapes:
// from the config, or --layers --hidden --heads --seq (and --vocab) next to --params.
#include "train/cli/memory_command.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <thread>

#include "data/meta.h"
#include "model/base/check.h"
#include "optim/optim_groups.h"
#include "optim/optim_traits.h"
#include "train/ledger/memory_plan.h"
#include "train/ledger/plan_layers.h"
#include "train/ledger/tensor_states.h"
#include "train/offload/offload_backend.h"
#include "train/step/placement.h"
#include "train/step/precision_plan.h"

namespace ledgerlm {
namespace {

bool given(const MemoryCommand& cmd, const std::string& flag) {
  return cmd.app != nullptr && cmd.app->get_option(flag)->count() > 0;
}

// --layers takes 1e8 as well as 100000000 (a whole number within model.n_layer's range).
int64_t layers_flag(double layers) {
  LLM_REQUIRE(
      layers >= 1 && layers <= static_cast<double>(kMaxLayers) && layers == std::floor(layers),
      "--layers: expected a whole number 1..", kMaxLayers, " (got ", layers, ")");
  return static_cast<int64_t>(layers);
}

// Short flags onto the run config (the command line wins over the config file).
void apply_short_flags(MemoryCommand& cmd) {
  RunConfig& r = cmd.run;
  if (given(cmd, "--optim")) r.optim.name = cmd.optim;
  if (given(cmd, "--offload")) r.optim.offload = cmd.offload;
  if (given(cmd, "--param-dtype")) r.precision.params = cmd.param_dtype;
  if (given(cmd, "--grad-dtype")) r.precision.grads = cmd.grad_dtype;
  if (given(cmd, "--master")) r.precision.master = cmd.master;
  if (given(cmd, "--recompute")) r.model.recompute = cmd.recompute;
  if (given(cmd, "--zero")) r.dist.zero = cmd.zero;
  if (given(cmd, "--micro-batch")) r.train.micro_batch = cmd.micro_batch;
  if (given(cmd, "--accum")) r.train.accum = cmd.accum;
  if (given(cmd, "--threads")) r.train.threads = cmd.threads;
  if (given(cmd, "--layers")) r.model.n_layer = layers_flag(cmd.layers);
  if (given(cmd, "--hidden")) r.model.n_embd = cmd.hidden;
  if (given(cmd, "--heads")) r.model.n_head = cmd.heads;
  if (given(cmd, "--vocab")) r.model.vocab_size = cmd.vocab;
  if (given(cmd, "--seq")) {
    r.train.seq_len = cmd.seq;
    r.model.block_size = std::max(r.model.block_size, cmd.seq);
  }
}

constexpr double kMaxPlanParams = 1e17;

}  // namespace

CLI::App* memory_command_add(CLI::App& app, MemoryCommand* cmd) {
  CLI::App* sub = app.add_subcommand("memory", "predict the memory ledger of a configuration");
  cmd->app = sub;
  config_register_flags(sub, &cmd->config, &cmd->run);
  sub->add_option("--params", cmd->params,
                  "a model of N parameters (no table, no padding), e.g. 7e9");
  sub->add_option("--layers", cmd->layers, "transformer blocks (activations)");
  sub->add_option("--hidden", cmd->hidden, "model width C (activations)");
  sub->add_option("--heads", cmd->heads, "attention heads (activations)");
  sub->add_option("--seq", cmd->seq, "sequence length T (activations)");
  sub->add_option("--vocab", cmd->vocab, "vocabulary size (logits; default 50257 with --params)");
  sub->add_option("--optim", cmd->optim, optim_names_text(" | ", " | "));
  sub->add_option("--offload", cmd->offload,
                  "none | host | disk: where the master and optimizer state live (optim.offload)");
  sub->add_option("--param-dtype", cmd->param_dtype,
                  "compute copy of the weights: fp32 | bf16 | fp16");
  sub->add_option("--grad-dtype", cmd->grad_dtype, "gradients: fp32 | bf16 | fp16");
  sub->add_option("--master", cmd->master, "fp32 | none (no fp32 master copy)");
  sub->add_option("--world", cmd->world, "data-parallel ranks D")->capture_default_str();
  sub->add_option("--zero", cmd->zero, "ZeRO stage 0..3");
  sub->add_option("--micro-batch", cmd->micro_batch, "sequences per micro-batch per rank");
  sub->add_option("--accum", cmd->accum, "micro-batches per optimizer step");
  sub->add_option("--recompute", cmd->recompute, "none | mlp | block");
  sub->add_option("--threads", cmd->threads, "CPU threads (per-thread scratch; 0: all cores)");
  sub->add_flag("--json", cmd->json, "print JSON instead of the table");
  sub->add_flag("--tensors", cmd->tensors,
                "print one rank's placement table instead: per tensor its optimizer group, the "
                "parts of compute copy, gradients, master and state it holds, owner and ranks");
  sub->add_option("--rank", cmd->rank, "the rank --tensors describes (default 0)");
  return sub;
}

namespace {

// The configuration resolved and checked: whether the model comes from it (else --params), and
// the figures the planner takes beside it.
struct Resolved {
  bool from_config = false;
  int64_t threads = 1, data_bytes = -1;
};

Resolved resolve(MemoryCommand& cmd) {
  config_apply(&cmd.config);
  apply_short_flags(cmd);
  RunConfig& r = cmd.run;
  LLM_REQUIRE(cmd.world >= 1, "--world: expected >= 1 (got ", cmd.world, ")");
  LLM_REQUIRE(r.dist.zero >= 0 && r.dist.zero <= 3, "--zero: expected 0, 1, 2 or 3 (got ",
              r.dist.zero, ")");
  LLM_REQUIRE(r.train.micro_batch >= 1, "--micro-batch: expected >= 1");
  LLM_REQUIRE(r.train.accum >= 1, "--accum: expected >= 1");
  r.optim.validate();
  recompute_parse(r.model.recompute);
  int64_t threads = r.train.threads;
  if (threads <= 0) threads = std::max<int64_t>(1, std::thread::hardware_concurrency());

  if (!given(cmd, "--params")) {
    int64_t data_bytes = plan_data_bytes(r.data.dir);
    if (r.model.vocab_size == 0 && data_bytes >= 0)
      r.model.vocab_size = meta_read(r.data.dir).vocab_size;
    LLM_REQUIRE(r.model.vocab_size > 0, "model.vocab_size = 0 and no prepared data in '",
                r.data.dir, "': give --vocab V (or --model.vocab_size, or --data.dir)");
    r.model.validate();
    lora_check_off(r.model.lora);
    run_config_check_sizes(r);
    return {true, threads, data_bytes};
  }
  return {false, threads, -1};
}

// --params N: a model of exactly N parameters, shapes from the short flags.
PlanInput params_input(MemoryCommand& cmd, int64_t threads) {
  const RunConfig& r = cmd.run;

  // The ledger sums bytes in int64: at most ~40 bytes a parameter (fp32 weights, gradients,
  // master, two optimizer states, reduction buffers) stays below 2^63 up to 1e17 parameters.
  LLM_REQUIRE(cmd.params >= 1 && cmd.params <= kMaxPlanParams,
              "--params: expected a count from 1 to 1e17 (the largest the ledger's byte totals "
              "hold; got ",
              cmd.params, ")");
  const PrecisionPlan pp = precision_plan(r);
  PlanInput in;
  in.num_params = static_cast<int64_t>(std::llround(cmd.params));
  in.elements = in.num_params;  // no table: no padding
  if (given(cmd, "--layers") && given(cmd, "--hidden") && given(cmd, "--heads")) {
    LLM_REQUIRE(
        cmd.hidden > 0 && cmd.heads > 0 && cmd.hidden % cmd.heads == 0 && cmd.hidden <= kMaxEmbd,
        "--hidden/--heads: expected positive values with hidden a multiple of heads and at most ",
        kMaxEmbd);
    ModelConfig m;
    m.vocab_size = given(cmd, "--vocab") ? cmd.vocab : 50257;
    in.shapes.n_layer = layers_flag(cmd.layers);
    in.shapes.n_embd = cmd.hidden;
    in.shapes.n_head = cmd.heads;
    in.shapes.block = r.model;  // the block's variants (MLP, F, attention, norms) from [model]
    in.shapes.padded_vocab = m.padded_vocab();
    in.shapes.seq = r.train.seq_len;
  }
  in.params = pp.params;
  in.grads = pp.grads;
  in.bf16_matmul = r.precision.matmul == "bf16";
  in.cudnn_attention = r.precision.attention == "cudnn";
  in.separate_master = pp.separate_master;
  in.master_none = pp.master_none;
  in.optim = r.optim;
  in.optim.state_dtype = dtype_parse(r.precision.state, "precision.state");
  in.world = cmd.world;
  in.zero = r.dist.zero;
  in.micro_batch = r.train.micro_batch;
  in.accum = r.train.accum;
  in.recompute = recompute_parse(r.model.recompute);
  in.threads = threads;
  in.data_bytes = -1;
  if (r.optim.offload == "disk") {  // the largest tensor: the token embedding or an MLP weight
    const int64_t C = in.shapes.n_embd, F = in.shapes.ffn_width();
    in.offload_staging = offload_staging_bytes(
        r.optim, in.shapes.known()
                     ? std::max(in.shapes.padded_vocab * C, std::max(in.shapes.qkv_width(), F) * C)
                     : 0);
  }
  return in;
}

}  // namespace

PlanInput memory_command_input(MemoryCommand& cmd) {
  const Resolved rs = resolve(cmd);
  if (rs.from_config) return plan_input_from_config(cmd.run, cmd.world, rs.threads, rs.data_bytes);
  return params_input(cmd, rs.threads);
}

MemoryPlan memory_command_plan(MemoryCommand& cmd) {
  const Resolved rs = resolve(cmd);
  if (rs.from_config) return memory_plan_for_config(cmd.run, cmd.world, rs.threads, rs.data_bytes);
  return memory_plan_compute(params_input(cmd, rs.threads));
}

namespace {

// --tensors: the placement table the trainer would build on rank --rank (nothing allocated).
int print_placement(MemoryCommand& cmd) {
  LLM_REQUIRE(!given(cmd, "--params"),
              "--tensors: needs a model from a config (--config or --model.* flags), not --params");
  const RunConfig& r = cmd.run;
  const int world = static_cast<int>(cmd.world);
  LLM_REQUIRE(cmd.rank >= 0 && cmd.rank < world, "--rank: expected 0..", world - 1, " (got ",
              cmd.rank, ")");
  const ParamTable table = param_table_for_run(r, world);
  const ShardLayout layout = shard_layout_build(table, world, static_cast<int>(cmd.rank));
  const PlacementTable t =
      placement_build(table, layout, zero_stage_effective(r, world), precision_plan(r), r.optim);
  std::vector<std::string> groups;
  for (const OptimGroup& g : optim_groups(r.optim)) groups.push_back(g.name);
  // Each tensor's optimizer state as the plan predicts it for the part this rank holds.
  OptimConfig optim = r.optim;
  optim.state_dtype = dtype_parse(r.precision.state, "precision.state");
  const std::vector<PlanTensor> tensors = plan_tensors_from_table(table, optim, world);
  std::vector<std::string> states;
  for (const TensorPlacement& tp : t.tensors)
    states.push_back(tp.group == kFrozenGroup || tp.state.count == 0
                         ? "-"
                         : tensor_states_text(plan_tensor_states(
                               optim, tensors[static_cast<size_t>(tp.param)], tp.state.count)));
  std::printf("%s", placement_describe(t, table, groups, {}, states).c_str());
  std::printf("%s", placement_describe_frozen(frozen_table_for_run(r)).c_str());
  return 0;
}

}  // namespace

int command_memory(MemoryCommand& cmd) {
  if (cmd.tensors) {
    resolve(cmd);
    return print_placement(cmd);
  }
  const MemoryPlan plan = memory_command_plan(cmd);
  if (cmd.json)
    std::printf("%s\n", memory_plan_json(plan).dump(2).c_str());
  else
    std::printf("%s", memory_plan_format(plan).c_str());
  return 0;
}

}  // namespace ledgerlm
