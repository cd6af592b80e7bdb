// Model state buffers, the gradient reduction and the optimizer step (see model_state.h).
// Weights and checkpoint I/O are in model_state_io.cpp.
#include "train/step/model_state.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "model/base/check.h"
#include "model/base/crc32c.h"
#include "optim/grad_clip.h"
#include "optim/optim_groups.h"
#include "train/step/zero_units.h"

namespace ledgerlm {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

LossScalerConfig scaler_config(const RunConfig& c, const PrecisionPlan& plan) {
  LossScalerConfig s;
  s.dynamic = plan.scaler_dynamic;
  s.init_scale = c.precision.init_scale;
  s.growth_interval = c.precision.growth_interval;
  s.growth_factor = c.precision.growth_factor;
  s.backoff = c.precision.backoff_factor;
  return s;
}

Buffer alloc(Backend& be, MemTag tag, int64_t elements, DType dt) {
  return be.allocate(tag, static_cast<size_t>(elements) * dtype_size(dt));
}

}  // namespace

std::string offload_dir_for_run(const RunConfig& config) {
  const std::string run_dir = config.train.out_dir + "/" + config.train.name;
  if (config.optim.offload_dir.empty()) return run_dir + "/offload";
  // Runs of one name in different out_dirs share optim.offload_dir: the run directory's own
  // path (symbolic links resolved, so two spellings of one run agree) tells them apart. Its lock
  // (offload_lock.h) refuses whatever would still meet there.
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(run_dir, ec);
  std::string canonical = std::filesystem::weakly_canonical(absolute, ec).string();
  if (ec) canonical = absolute.lexically_normal().string();
  char hash[16];
  std::snprintf(hash, sizeof hash, "%08x", crc32c(canonical.data(), canonical.size()));
  return config.optim.offload_dir + "/" + config.train.name + "-" + hash;
}

namespace {

// Where the files are created: the final directory when optim.offload_dir names one; else, since
// the run directory does not exist yet when the state is built (nothing on disk changes before
// the start succeeds), beside it, moved in by offload_settle().
std::string offload_start_dir(const RunConfig& config) {
  if (!config.optim.offload_dir.empty()) return offload_dir_for_run(config);
  return config.train.out_dir + "/." + config.train.name + ".offload-starting";
}

}  // namespace

// optim.offload: the fp32 master and the optimizer state move to the host backend's memory
// (a device backend: ZeRO-Offload's data flow, the step on the CPU with the CPU backend's
// kernels) and, for disk, on into files behind the pager.
void ModelState::start_offload() {
  const std::string& mode = config_.optim.offload;
  if (mode == "none") return;
  const bool device = backend_.memory_space() == MemSpace::kDevice;
  LLM_REQUIRE(mode != "host" || device, "optim.offload = host: the ", backend_.name(),
              " backend's weights are already in host memory (nothing to offload from); "
              "optim.offload = disk moves the master and the optimizer state to files");
  Backend* host = &backend_;
  if (device) {
    host_backend_ = backend_create_cpu(std::max(1, backend_.num_threads()));
    host = host_backend_.get();
    // What crosses the bus: the reduced gradients down, the updated weights (compute dtype) up.
    host_grads_ = Buffer(&backend_.tracker(), MemTag::kOffloadStaging,
                         static_cast<size_t>(placement_.grads_length) * dtype_size(plan_.grads));
    host_compute_ =
        Buffer(&backend_.tracker(), MemTag::kOffloadStaging,
               static_cast<size_t>(placement_.compute_length) * dtype_size(plan_.params));
  }
  if (mode == "disk") {
    int64_t largest = 0;
    for (const ParamInfo& p : table_.params) largest = std::max(largest, p.numel);
    pager_ = std::make_unique<OffloadPager>(
        offload_start_dir(config_), "rank" + std::to_string(comm_->rank()),
        offload_staging_bytes(config_.optim, largest), &backend_.tracker());
  }
  offload_backend_ = std::make_unique<OffloadBackend>(*host, pager_.get(), backend_.tracker());
}

Tensor ModelState::optimizer_compute() const {
  return host_backend_ ? Tensor(host_compute_.data(), plan_.params) : params();
}

void ModelState::upload_compute_copy() {
  if (!host_backend_) return;
  // This rank's updated parts (its master spans), at their compute-copy positions.
  const int64_t es = static_cast<int64_t>(dtype_size(plan_.params));
  for (const UnitPlacement& up : placement_.units) {
    const int64_t at = up.compute.at_of(up.master.begin);
    backend_.copy_from_host(params().offset(at), host_compute_.as<char>() + at * es,
                            up.master.count);
  }
}

void ModelState::download_gradients() {
  if (!host_backend_) return;
  const int64_t es = static_cast<int64_t>(dtype_size(plan_.grads));
  for (const UnitPlacement& up : placement_.units)
    backend_.copy_to_host(host_grads_.as<char>() + up.grads.at * es, grads().offset(up.grads.at),
                          up.grads.count);
}

void ModelState::offload_settle() {
  if (pager_) pager_->relocate(offload_dir_for_run(config_));
}

ModelState::ModelState(const RunConfig& config, Backend& backend, const ModelStateOptions& options)
    : config_(config), backend_(backend), comm_(options.comm) {
  if (comm_ == nullptr) {
    own_comm_ = comm_create_single();
    comm_ = own_comm_.get();
  }
  const int world = comm_->world();
  model_table_ = model_table_for_run(config, world);
  table_ = param_table_for_run(config, world);
  frozen_table_ = frozen_table_for_run(config);
  plan_ = precision_plan(config);
  scaler_ = LossScaler(scaler_config(config, plan_));
  stage_ =
      options.stage_override >= 0 ? options.stage_override : zero_stage_effective(config, world);
  LLM_REQUIRE(stage_ >= 0 && stage_ <= 3, "dist.zero = ", stage_, ": expected 0, 1, 2 or 3");
  layout_ = shard_layout_build(table_, world, comm_->rank());
  placement_ = placement_build(table_, layout_, stage_, plan_, config_.optim);
  params_ = alloc(backend_, MemTag::kParams, placement_.compute_length, plan_.params);
  if (frozen_table_.total > 0)
    frozen_ = alloc(backend_, MemTag::kParams, frozen_table_.total, plan_.params);
  grads_ = alloc(backend_, MemTag::kGrads, placement_.grads_length, plan_.grads);
  gns_source_ = ledgerlm::gns_source(config_, world, stage_);
  gns_tracker_ = GnsTracker(config_.train.gns_ema);
  if (gns_source_ == GnsSource::kMicroBatches)
    gns_accum_ = alloc(backend_, MemTag::kWorkspace, placement_.grads_length, plan_.grads);
  // 16-bit weights get an fp32 master; with master = none an fp32 scratch view of this rank's
  // part of the compute copy; fp32 weights are their own master (placement_.master_is_compute).
  start_offload();
  if (plan_.separate_master)
    master_ = alloc(state_backend(), MemTag::kMaster, placement_.master_length, DType::kF32);
  if (plan_.master_none)
    master_scratch_ = alloc(backend_, MemTag::kWorkspace, placement_.master_length, DType::kF32);
  if ((stage_ == 1 || (stage_ == 0 && world > 1)) && plan_.grads != DType::kF32)
    staging_f32_ = alloc(backend_, MemTag::kComm, layout_.largest_unit, DType::kF32);
  // precision.state picks the storage of the optimizer's parameter-shaped state (m, v, momentum).
  OptimConfig optim = config_.optim;
  optim.state_dtype = dtype_parse(config_.precision.state, "precision.state");
  // The average's decay per step, from its half-life in tokens and this run's global batch.
  optim.ema_decay =
      optim_ema_decay(optim.ema_half_life, config_.train.micro_batch * config_.train.accum * world *
                                               static_cast<int64_t>(config_.train.seq_len));
  optim_ = optimizer_create(optim);
  optim_->init(table_, placement_.optimizer_shard(), state_backend());
  std::vector<Location> state_where;
  for (const StateComponent& c : optim_->state_components())
    state_where.push_back(c.host || (host_backend_ && !(pager_ && offload_tag_paged(c.tag)))
                              ? Location::kHost
                          : pager_ && !c.scratch && offload_tag_paged(c.tag) ? Location::kDisk
                                                                             : Location::kDevice);
  for (TensorPlacement& tp : placement_.tensors)
    if (tp.group != kFrozenGroup) tp.state_where = state_where;
  model_ =
      std::make_unique<GptModel>(config_.model, model_table_, backend_, plan_.params, plan_.grads);
  const ParamTable* frozen_table = frozen_.empty() ? nullptr : &frozen_table_;
  model_->set_bf16_matmul(config_.precision.matmul == "bf16");
  model_->set_tf32_matmul(config_.precision.matmul == "tf32");
  // Resolved by run_setup/bench (run_resolve_attention): "auto" left unresolved runs our kernel.
  model_->set_attention_impl(config_.precision.attention == "cudnn" ? AttentionImpl::kCudnn
                                                                    : AttentionImpl::kOwn);
  if (stage_ >= 2) {
    ZeroUnitsConfig zc;
    zc.stage = stage_;
    zc.reshard_after_forward = config_.dist.reshard_after_forward;
    zc.params = plan_.params;
    zc.grads = plan_.grads;
    zero_units_ = std::make_unique<ZeroUnits>(table_, layout_, backend_, *comm_, zc, params(),
                                              grads(), frozen_table, frozen());
  } else {
    flat_units_ = std::make_unique<FlatUnits>(table_, params(), grads(), frozen_table, frozen());
  }
}

ModelState::~ModelState() = default;

UnitAccess& ModelState::units() {
  if (zero_units_) return *zero_units_;
  return *flat_units_;
}

float* ModelState::master() {
  if (plan_.master_none) return master_scratch_.as<float>();
  if (!master_.empty()) return master_.as<float>();
  return params_.as<float>();  // the fp32 compute copy is its own master
}

void ModelState::zero_grads() {
  backend_.zero(grads(), placement_.grads_length);
}

double ModelState::gns_take_micro_batch(int64_t m, bool last) {
  // One pass over the gradients: their sum of squares, and the fold into the step's sum, which
  // also leaves them zeroed for the next micro-batch's backward. After the last one the gradient
  // buffer holds the whole step's sum (no copy back).
  const Tensor acc(gns_accum_.data(), plan_.grads);
  const SquaresFold fold = last     ? SquaresFold::kAddFrom
                           : m == 0 ? SquaresFold::kMove
                                    : SquaresFold::kAddTo;
  return backend_.sum_squares_fold(grads(), acc, placement_.grads_length, fold);
}

double ModelState::gns_local_sum_squares() {
  // Stages 0-1 hold the whole local gradient until the reduction point.
  double sumsq = backend_.sum_squares(grads(), placement_.grads_length);
  comm_->all_reduce_sum(&sumsq, 1);
  return sumsq / static_cast<double>(world());
}

double ModelState::take_backward_comm_ms() {
  return zero_units_ ? zero_units_->take_comm_ms() : 0.0;
}

double ModelState::reduce_gradients() {
  if (world() == 1 && stage_ == 0) return 0.0;
  if (stage_ >= 2) return 0.0;  // reduced unit by unit during backward
  const auto t0 = Clock::now();
  const bool wide = plan_.grads == DType::kF32;
  for (const UnitPlacement& up : placement_.units) {
    const UnitInfo& unit = table_.units[static_cast<size_t>(up.unit)];
    Tensor g = grads().offset(unit.offset);
    Tensor sum = g;  // fp32 values to sum: 16-bit gradients are widened first
    if (!wide) {
      sum = Tensor(staging_f32_.data(), DType::kF32);
      backend_.convert(sum, g, unit.size);
    }
    // Stage 0: all-reduce (a bucket per unit); stage 1: reduce-scatter in place, this rank's
    // summed piece at the unit's start (up.grads). Either is rounded once into a 16-bit buffer.
    const int64_t n = up.grads.count;
    if (stage_ == 0)
      comm_->all_reduce_sum(backend_, sum, n);
    else
      comm_->reduce_scatter_sum(backend_, sum, n);
    if (!wide) backend_.convert(g, sum, n);
  }
  return ms_since(t0);
}

void ModelState::write_compute_copy(int64_t step, Rounding rounding, const float* source) {
  if (placement_.master_is_compute) return;               // updated in place
  if (!plan_.master_none) rounding = Rounding::kNearest;  // a separate master rounds to nearest
  const Tensor src(source ? const_cast<float*>(source) : master(), DType::kF32);
  const uint64_t seed = static_cast<uint64_t>(config_.train.seed);
  // Stochastic rounding draws for element i of the one-rank layout: keyed on world-independent
  // positions, so a changed world size changes no random number.
  const uint64_t step_base =
      static_cast<uint64_t>(step) * static_cast<uint64_t>(table_.logical_total);
  for (const UnitPlacement& up : placement_.units) {
    const Span& m = up.master;
    state_backend().convert(optimizer_compute().offset(up.compute.at_of(m.begin)), src.offset(m.at),
                            m.count, rounding, seed,
                            step_base + static_cast<uint64_t>(up.logical_begin));
  }
  upload_compute_copy();
}

double ModelState::all_gather_compute_copy() {
  if (stage_ != 1 && stage_ != 2) return 0.0;
  const auto t0 = Clock::now();
  for (const UnitPlacement& up : placement_.units)
    comm_->all_gather_in_place(backend_, params().offset(up.compute.at), up.master.count);
  return ms_since(t0);
}

StepStats ModelState::optimizer_step(int64_t step, double lr) {
  StepStats stats;
  stats.lr = lr;
  const double unscale = 1.0 / loss_scale();
  double sumsq = gradient_sum_squares();
  if (stage_ >= 1) {  // each rank holds a part: the global norm is the sum of the parts
    const auto t0 = Clock::now();
    comm_->all_reduce_sum(&sumsq, 1);
    stats.comm_ms += ms_since(t0);
  }
  stats.grad_norm = std::sqrt(sumsq) * unscale;
  const bool finite = std::isfinite(stats.grad_norm);  // the same on every rank
  if (finite) {
    const auto t0 = Clock::now();
    OptimStepInfo info;
    info.lr = lr;
    info.step = step;
    info.grad_scale = unscale * grad_clip_factor(stats.grad_norm, config_.optim.grad_clip);
    if (stage_ >= 1 && world() > 1)
      info.reduce = [this](double* v, int count) { comm_->all_reduce_sum(v, count); };
    info.total_steps = schedule_length_;
    info.compute = optimizer_compute();
    if (world() > 1)
      info.exchange = [this](Tensor send, const std::vector<int64_t>& sc, Tensor recv,
                             const std::vector<int64_t>& rc) { exchange(send, sc, recv, rc); };
    exchange_ms_ = 0.0;
    exchange_bytes_ = 0;
    if (plan_.master_none) widen_compute_copy();
    if (pager_) pager_->step_begin();  // the requests of a step: the next one reads ahead by them
    download_gradients();
    optim_->step(master(), host_backend_ ? Tensor(host_grads_.data(), plan_.grads) : grads(), info);
    // The optimizer either leaves the compute copy to the trainer (rounded from the master) or
    // wrote its training weights there itself (this rank's parts of them).
    if (!optim_->writes_compute_copy())
      write_compute_copy(step, plan_.rounding);
    else
      upload_compute_copy();
    if (pager_) pager_->step_end();
    const double gather_ms = all_gather_compute_copy();
    stats.comm_ms += gather_ms + exchange_ms_;
    stats.exchange_bytes = exchange_bytes_;
    if (zero_units_) zero_units_->invalidate();
    stats.optim_ms = ms_since(t0) - gather_ms - exchange_ms_;
  }
  stats.skipped = !finite;
  if (plan_.scaler_on) scaler_.update(finite);
  return stats;
}

void ModelState::exchange(Tensor send, const std::vector<int64_t>& send_counts, Tensor recv,
                          const std::vector<int64_t>& recv_counts) {
  const auto t0 = Clock::now();
  // The optimizer's buffers: host memory when it runs on the host beside a device.
  comm_->all_to_all_v(host_backend_ ? *host_backend_ : backend_, send, send_counts, recv,
                      recv_counts);
  exchange_ms_ += ms_since(t0);
  for (size_t r = 0; r < send_counts.size(); ++r)
    if (static_cast<int>(r) != layout_.rank)
      exchange_bytes_ += send_counts[r] * static_cast<int64_t>(dtype_size(send.dtype));
}

void ModelState::use_eval_weights(bool eval) {
  // The average, once it holds a step (the master before that); the master is separate then
  // (precision_plan), so writing the compute copy leaves the training state alone.
  const bool average = optim_->has_average();
  if ((!optim_->writes_compute_copy() && !average) || eval == eval_weights_) return;
  eval_weights_ = eval;
  if (eval)
    write_compute_copy(0, Rounding::kNearest, optim_->averaged_weights());  // x or the average
  else if (optim_->writes_compute_copy()) {
    optim_->write_training_weights(master(), optimizer_compute());
    upload_compute_copy();
  } else {
    write_compute_copy(0, Rounding::kNearest);  // the master, as after every step
  }
  all_gather_compute_copy();
  if (zero_units_) zero_units_->invalidate();
}

double ModelState::gradient_sum_squares() {
  // Unit by unit, in unit order, over the reduced gradients the optimizer reads (up.grads).
  double sum = 0.0;
  for (const UnitPlacement& up : placement_.units)
    sum += backend_.sum_squares(grads().offset(up.grads.at), up.grads.count);
  return sum;
}

void ModelState::widen_compute_copy() {
  Tensor scratch(master_scratch_.data(), DType::kF32);
  for (const UnitPlacement& up : placement_.units) {
    const Span& m = up.master;
    backend_.convert(scratch.offset(m.at), params().offset(up.compute.at_of(m.begin)), m.count);
  }
}

}  // namespace ledgerlm
