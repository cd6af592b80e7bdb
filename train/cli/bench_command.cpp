// `ledgerlm bench`: training steps (forward + backward + optimizer) on random tokens, with
// tokens/s, the losses, the forward/backward/optimizer split, time by op, achieved GFLOP/s and
// MFU: on the CPU against this machine's measured peak (peak_flops.h); on a GPU against the
// device's datasheet peak (gpu_peak.h) and against a measured large GEMM. Prints figures; never
// passes or fails on timing.
//
// On a device backend ops run asynchronously, so the op split comes from the profiling
// backend's synchronized timings (profiling_backend.h), which serialize host and device: there
// tokens/s comes from unprofiled steps first, and the split from as many profiled steps after.
// On the CPU one set of steps gives both (synchronize does nothing there).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/backend/gpu_peak.h"
#include "model/backend/peak_flops.h"
#include "model/backend/wrap/profiling_backend.h"
#include "model/backends/backend_factory.h"
#include "model/backends/cpu_facts.h"
#include "model/base/check.h"
#include "model/base/dtype.h"
#include "model/base/rng.h"
#include "model/base/subnormals.h"
#include "optim/schedule.h"
#include "train/cli/commands.h"
#include "train/run/run_setup.h"
#include "train/step/model_state.h"
#include "train/step/train_step.h"

namespace ledgerlm {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Random tokens: micro-batch m of step s draws (seed, kData, (s-1)*A + m, element), each row a
// window of T + 1 tokens split into inputs and shifted targets. A token is the least of four
// uniform draws over the vocabulary, so token k comes with probability about 4 (1 - k/V)^3 / V:
// a unigram distribution 0.64 nats below uniform's ln V that a working model starts learning in
// its first steps, so a falling loss tells a training that works from one that does not (on
// uniform tokens the loss cannot fall below its starting ln V). The costs of the ops do not
// depend on the token values.
class RandomBatches final : public BatchSource {
 public:
  explicit RandomBatches(const RunConfig& cfg)
      : cfg_(cfg),
        tokens_(static_cast<size_t>(cfg.train.micro_batch * (cfg.train.seq_len + 1))),
        inputs_(static_cast<size_t>(cfg.train.micro_batch * cfg.train.seq_len)),
        targets_(inputs_.size()) {}

  MicroBatch micro_batch(int64_t step, int64_t micro) override {
    const int64_t B = cfg_.train.micro_batch, T = cfg_.train.seq_len, A = cfg_.train.accum;
    for (size_t i = 0; i < tokens_.size(); ++i) {
      auto bits = rng_bits(static_cast<uint64_t>(cfg_.train.seed), RngStream::kData,
                           static_cast<uint64_t>((step - 1) * A + micro), i);
      const uint32_t v = static_cast<uint32_t>(cfg_.model.vocab_size);
      tokens_[i] = static_cast<int32_t>(
          std::min(std::min(bits[0] % v, bits[1] % v), std::min(bits[2] % v, bits[3] % v)));
    }
    for (int64_t r = 0; r < B; ++r) {
      std::copy(tokens_.begin() + r * (T + 1), tokens_.begin() + r * (T + 1) + T,
                inputs_.begin() + r * T);
      std::copy(tokens_.begin() + r * (T + 1) + 1, tokens_.begin() + (r + 1) * (T + 1),
                targets_.begin() + r * T);
    }
    return {inputs_.data(), targets_.data(), static_cast<uint64_t>(micro * B)};
  }

 private:
  const RunConfig& cfg_;
  std::vector<int32_t> tokens_, inputs_, targets_;
};

// One GEMM shape of the step on its own: operands of the same sizes and dtypes (zero-filled),
// one warm-up call, then the median of 5 calls. The step's GFLOP/s for the shape over this one's
// is the GEMM's in-step efficiency (what the rest of the step costs it: caches, thread wake-ups).
double isolated_gemm_seconds(Backend& be, const GemmArgs& shape) {
  GemmArgs g = shape;
  auto buffer = [&](const Tensor& like, int64_t n, Buffer* keep) {
    *keep = be.allocate(MemTag::kWorkspace, static_cast<size_t>(n) * dtype_size(like.dtype));
    return Tensor(keep->data(), like.dtype);
  };
  Buffer a, b, c, bias;
  g.a = buffer(shape.a, g.m * g.k, &a);
  g.b = buffer(shape.b, g.k * g.n, &b);
  g.c = buffer(shape.c, g.m * g.n, &c);
  if (!shape.bias.empty()) g.bias = buffer(shape.bias, g.n, &bias);
  std::vector<double> t;
  for (int rep = 0; rep < 6; ++rep) {
    be.synchronize();  // a device GEMM is timed from an empty queue to its completion
    const auto t0 = Clock::now();
    be.gemm(g);
    be.synchronize();
    if (rep > 0) t.push_back(ms_since(t0) / 1e3);
  }
  return median(t);
}

// Uniform values in [-1, 1) in `ab` (fp32 or bf16) for an operand of `count` elements: a GPU
// multiplying zeros draws less power and holds higher clocks than on real data, so a rate
// measured on zero-filled operands would be optimistic.
Buffer random_operand(Backend& be, int64_t count, DType ab, uint64_t seed) {
  Buffer buf = be.allocate(MemTag::kWorkspace, static_cast<size_t>(count) * dtype_size(ab));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&x] {  // xorshift64*: fast, and the values only need to be non-trivial
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return static_cast<float>(static_cast<double>((x * 0x2545F4914F6CDD1Dull) >> 40) /
                                  static_cast<double>(1ull << 23) -
                              1.0);
  };
  if (ab == DType::kBF16) {
    std::vector<uint16_t> host(static_cast<size_t>(count));
    for (auto& v : host) v = f32_to_bf16(next());
    be.copy_from_host(Tensor(buf.data(), ab), host.data(), count);
  } else {
    std::vector<float> host(static_cast<size_t>(count));
    for (auto& v : host) v = next();
    be.copy_from_host(Tensor(buf.data(), ab), host.data(), count);
  }
  return buf;
}

// The device's attainable GEMM rate: C[n,n] (fp32) = A B^T with A, B [n,n] in `ab` (bf16 for
// precision.matmul = bf16, fp32 otherwise, on TF32 tensor cores when `tf32`) on random values,
// one warm-up call, then the best of 5, each timed from an empty queue to its completion.
// TFLOP/s.
double measured_gemm_tflops(Backend& be, int64_t n, DType ab, bool tf32) {
  Buffer a = random_operand(be, n * n, ab, 1);
  Buffer b = random_operand(be, n * n, ab, 2);
  Buffer c = be.allocate(MemTag::kWorkspace, static_cast<size_t>(n * n) * sizeof(float));
  GemmArgs g;
  g.a = Tensor(a.data(), ab);
  g.b = Tensor(b.data(), ab);
  g.c = Tensor(c.data(), DType::kF32);
  g.m = g.n = g.k = n;
  g.trans_b = true;
  g.tf32 = tf32;
  double best = 0.0;
  for (int rep = 0; rep < 6; ++rep) {
    be.synchronize();
    const auto t0 = Clock::now();
    be.gemm(g);
    be.synchronize();
    const double s = ms_since(t0) / 1e3;
    if (rep > 0 && (best == 0.0 || s < best)) best = s;
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best /
         1e12;
}

// The GPU's MFU denominators: the datasheet peak for the device's name and precision.matmul,
// and the rate a large GEMM of the same precision reaches (bf16 always measured too).
struct GpuRates {
  std::string device;
  GpuPeak table;
  double table_tflops = 0.0;        // for precision.matmul; 0: not in the table
  double gemm_bf16_tflops = 0.0;    // measured
  double gemm_matmul_tflops = 0.0;  // measured in precision.matmul's mode
  std::string gemm_error;           // why a measurement failed (e.g. out of memory)
  int64_t gemm_size = 0;            // n of the n^3 GEMM
};

GpuRates gpu_rates(Backend& be, const std::string& matmul, int64_t gemm_size) {
  GpuRates r;
  r.gemm_size = gemm_size;
  r.device = be.device_name();
  r.table = gpu_peak_for(r.device);
  r.table_tflops = gpu_peak_tflops(r.table, matmul);
  try {
    r.gemm_bf16_tflops = measured_gemm_tflops(be, r.gemm_size, DType::kBF16, false);
    r.gemm_matmul_tflops =
        matmul == "bf16" ? r.gemm_bf16_tflops
                         : measured_gemm_tflops(be, r.gemm_size, DType::kF32, matmul == "tf32");
  } catch (const Error& e) {
    r.gemm_error = e.what();
  }
  return r;
}

}  // namespace

int command_bench(BenchCommand& cmd) {
  RunConfig& cfg = cmd.run;
  LLM_REQUIRE(cfg.model.vocab_size > 0, "bench: set model.vocab_size (random tokens need a vocab)");
  if (cfg.train.max_steps == 0) cfg.train.max_steps = cmd.steps;
  cfg.validate();
  cfg.train.device = backend_resolve(cfg.train.device);
  run_resolve_attention(&cfg, true);
  LLM_REQUIRE(cmd.steps > 0 && cmd.warmup >= 0, "--steps must be > 0 and --warmup >= 0");
  subnormals_set_process(cfg.precision.subnormals == "flush");  // as train does (run_setup)
  auto profiler = std::make_unique<ProfilingBackend>(
      backend_create(cfg.train.device, {static_cast<int>(cfg.train.threads), 0}));
  ProfilingBackend& be = *profiler;
  ModelState state(cfg, be);
  state.init_weights(static_cast<uint64_t>(cfg.train.seed));
  const int64_t B = cfg.train.micro_batch, T = cfg.train.seq_len, A = cfg.train.accum;
  const int64_t L = cfg.model.n_layer, C = cfg.model.n_embd;
  state.model().plan(B, T);
  RandomBatches batches(cfg);

  const double n_params = static_cast<double>(state.table().num_params);
  const double flops_per_token = 6.0 * n_params + 12.0 * L * C * T;
  std::vector<double> step_ms, fwd_ms, bwd_ms, opt_ms, losses;
  // An accelerator (a backend with a device name; not the guard backend, whose device memory is
  // the CPU's behind guard pages): timed steps unprofiled, then cmd.steps profiled ones for the
  // op split, and the GPU's MFU denominators.
  // Test hook: LEDGERLM_TEST_BENCH_GPU_PATH=N takes this path on any backend, with an N^3 GEMM,
  // so the CPU tests prove its step accounting and report (the figures are the CPU's).
  const char* gpu_path_hook = std::getenv("LEDGERLM_TEST_BENCH_GPU_PATH");
  const int64_t hook_gemm_size = gpu_path_hook ? std::atoll(gpu_path_hook) : 0;
  const bool device = !be.device_name().empty() || hook_gemm_size > 0;
  const int64_t timed_end = cmd.warmup + cmd.steps;
  const int64_t total_steps = device ? timed_end + cmd.steps : timed_end;
  be.set_timing(!device);
  state.set_schedule_length(total_steps);
  for (int64_t s = 1; s <= total_steps; ++s) {
    if (s == cmd.warmup + 1 && !device) be.reset_times();
    if (s == timed_end + 1) {
      be.reset_times();
      be.set_timing(true);
    }
    be.synchronize();
    const auto t_step = Clock::now();
    const StepResult r = train_step(state, batches, s, schedule_lr(cfg.optim, s, total_steps));
    be.synchronize();
    const double total = ms_since(t_step);
    losses.push_back(r.loss);
    if (s > cmd.warmup && s <= timed_end) step_ms.push_back(total);
    // The phase split from steps whose ops finish before the next starts (host clocks valid).
    if (s > (device ? timed_end : cmd.warmup)) {
      fwd_ms.push_back(r.forward_ms);
      bwd_ms.push_back(r.backward_ms);
      opt_ms.push_back(r.optim_ms);
    }
  }
  const double tokens_per_step = static_cast<double>(B * A * T);
  const double med_ms = median(step_ms);
  const double tps = tokens_per_step / (med_ms / 1e3);
  const double gflops = tps * flops_per_token / 1e9;
  // The CPU's peak is measured (a GPU's comes from its table entry and a measured GEMM).
  const PeakFlops peak = device ? PeakFlops{} : measure_peak_flops(be.num_threads());
  // The denominator is the peak of the instructions the linear layers' GEMMs run on: bf16 dot
  // products with precision.matmul = bf16 on a CPU that has them, fp32 FMAs otherwise (bf16
  // weights alone are widened to fp32 and go through sgemm).
  const bool bf16_denominator =
      cfg.precision.matmul == "bf16" && cpu_backend_bf16_dot() && peak.bf16_gflops > 0;
  const double peak_used = bf16_denominator ? peak.bf16_gflops : peak.fp32_gflops;
  const GpuRates gpu = device ? gpu_rates(be.inner(), cfg.precision.matmul,
                                          hook_gemm_size > 0 ? hook_gemm_size : 8192)
                              : GpuRates{};
  int64_t rss = 0, hwm = 0;
  process_rss_bytes(&rss, &hwm);

  std::printf(
      "ledgerlm bench: L%lld H%lld C%lld T%lld B%lld A%lld vocab %lld | %s params | optim %s | "
      "params %s | matmul %s | %d threads\n",
      static_cast<long long>(L), static_cast<long long>(cfg.model.n_head),
      static_cast<long long>(C), static_cast<long long>(T), static_cast<long long>(B),
      static_cast<long long>(A), static_cast<long long>(cfg.model.vocab_size),
      std::to_string(state.table().num_params).c_str(), cfg.optim.name.c_str(),
      cfg.precision.params.c_str(), cfg.precision.matmul.c_str(), be.num_threads());
  nlohmann::json cpu_json;
  // The guard backend runs the CPU backend's kernels (behind its memory checks): the same report.
  const bool cpu_kernels = be.name() == "cpu" || be.name() == "guard";
  if (cpu_kernels) {
    const CpuBackendReport rep =
        cpu_backend_report(C / cfg.model.n_head, cfg.precision.matmul == "bf16");
    std::printf("cpu: %s | path %s\nkernels: %s\ngemm: %s\n", rep.cpu.c_str(), rep.path.c_str(),
                rep.kernels.c_str(), rep.gemm.c_str());
    cpu_json = {{"cpu", rep.cpu}, {"path", rep.path}, {"kernels", rep.kernels}, {"gemm", rep.gemm}};
  }
  std::printf("FLOPs per token = 6N + 12*L*C*T = 6*%.0f + 12*%lld*%lld*%lld = %.4g\n", n_params,
              static_cast<long long>(L), static_cast<long long>(C), static_cast<long long>(T),
              flops_per_token);
  std::printf(
      "step (median of %lld): %.2f ms | forward %.2f ms | backward %.2f ms | optimizer %.2f ms%s\n",
      static_cast<long long>(cmd.steps), med_ms, median(fwd_ms), median(bwd_ms), median(opt_ms),
      device ? " (split from the profiled steps)" : "");
  std::printf("tokens/s %.0f (min step %.2f ms, max %.2f ms)\n", tps,
              *std::min_element(step_ms.begin(), step_ms.end()),
              *std::max_element(step_ms.begin(), step_ms.end()));
  std::printf("loss by step:");
  for (size_t i = 0; i < losses.size(); ++i) std::printf(" %zu:%.4f", i + 1, losses[i]);
  std::printf("\n");
  double mfu = 0.0, mfu_measured = 0.0;
  if (!device) {
    mfu = gflops / peak_used;
    std::printf("achieved %.1f GFLOP/s | measured peak fp32 %.1f GFLOP/s (%s)", gflops,
                peak.fp32_gflops, peak.fp32_isa);
    if (peak.bf16_gflops > 0) std::printf(", bf16 dot %.1f GFLOP/s", peak.bf16_gflops);
    std::printf(" | MFU %.1f%% (vs %s peak)\n", 100.0 * mfu, bf16_denominator ? "bf16" : "fp32");
  } else {
    const std::string& mode = cfg.precision.matmul;
    if (gpu.table.known()) {
      std::printf(
          "gpu: %s | table entry %s: dense bf16 %.1f, tf32 %.1f, fp32 %.1f TFLOP/s (datasheet)\n",
          gpu.device.c_str(), gpu.table.model.c_str(), gpu.table.bf16_tflops, gpu.table.tf32_tflops,
          gpu.table.fp32_tflops);
    } else {
      std::printf("gpu: %s | not in the peak table: MFU against the measured GEMM rate only\n",
                  gpu.device.empty() ? "(no device name)" : gpu.device.c_str());
    }
    if (gpu.gemm_error.empty()) {
      std::printf("measured GEMM %lld^3 (best of 5, synchronized): bf16 %.1f TFLOP/s",
                  static_cast<long long>(gpu.gemm_size), gpu.gemm_bf16_tflops);
      if (mode != "bf16") std::printf(", %s %.1f TFLOP/s", mode.c_str(), gpu.gemm_matmul_tflops);
      std::printf("\n");
    } else {
      std::printf("measured GEMM: not measured (%s)\n", gpu.gemm_error.c_str());
    }
    const double achieved_tflops = gflops / 1e3;
    if (gpu.table_tflops > 0) mfu = achieved_tflops / gpu.table_tflops;
    if (gpu.gemm_matmul_tflops > 0) mfu_measured = achieved_tflops / gpu.gemm_matmul_tflops;
    std::printf("achieved %.2f TFLOP/s", achieved_tflops);
    if (gpu.table_tflops > 0)
      std::printf(" | MFU %.1f%% of the dense %s peak %.1f TFLOP/s", 100.0 * mfu, mode.c_str(),
                  gpu.table_tflops);
    if (mfu_measured > 0)
      std::printf(" | %.1f%% of the measured %s GEMM rate %.1f TFLOP/s", 100.0 * mfu_measured,
                  mode.c_str(), gpu.gemm_matmul_tflops);
    std::printf("\n");
  }
  std::printf("peak RSS %.1f MB | tracked peak %.1f MB\n", hwm / 1e6,
              be.tracker().total().peak / 1e6);

  std::vector<std::pair<std::string, OpTime>> ops(be.times().begin(), be.times().end());
  std::sort(ops.begin(), ops.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double op_total = 0;
  for (const auto& [name, t] : ops) op_total += t.seconds;
  std::printf("%-24s %10s %8s %8s\n", "op", "ms/step", "share", "calls");
  for (const auto& [name, t] : ops)
    std::printf("%-24s %10.3f %7.1f%% %8lld\n", name.c_str(),
                1e3 * t.seconds / static_cast<double>(cmd.steps), 100.0 * t.seconds / op_total,
                static_cast<long long>(t.calls / cmd.steps));
  // Where the step goes, in three parts: the linear layers' GEMMs; attention, whose block
  // products (Q K^T, P V and the backward's five) run inside one kernel with its softmax rows, so
  // its matrix-product time cannot be told apart from its elementwise time; everything else
  // (layernorm, GELU, bias, residual adds, casts, cross-entropy, embedding, optimizer).
  double gemm_s = 0.0, attention_s = 0.0;
  for (const auto& [name, t] : ops) {
    if (name == "gemm") gemm_s += t.seconds;
    if (name.starts_with("attention_")) attention_s += t.seconds;
  }
  const double share_gemm = op_total > 0 ? gemm_s / op_total : 0.0;
  const double share_attention = op_total > 0 ? attention_s / op_total : 0.0;
  const double share_other = 1.0 - share_gemm - share_attention;
  std::printf(
      "step split: linear-layer GEMMs %.1f%% | attention (block products + softmax) %.1f%% | "
      "everything else %.1f%% (of the ops' %.2f ms per step; median step %.2f ms)\n",
      100.0 * share_gemm, 100.0 * share_attention, 100.0 * share_other,
      1e3 * op_total / static_cast<double>(cmd.steps), med_ms);
  std::vector<std::pair<std::string, OpTime>> shapes(be.gemm_times().begin(),
                                                     be.gemm_times().end());
  std::sort(shapes.begin(), shapes.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::printf("%-34s %10s %8s %10s %10s %8s  %s\n", "gemm by shape (op(A)op(B) m x n x k)",
              "ms/step", "calls", "GFLOP/s", "isolated", "in-step", "library");
  double step_gemm_s = 0.0, isolated_s = 0.0;
  for (const auto& [key, t] : shapes) {
    const double iso = isolated_gemm_seconds(be.inner(), t.shape);
    const double per_call = t.seconds / static_cast<double>(t.calls);
    step_gemm_s += t.seconds;
    isolated_s += iso * static_cast<double>(t.calls);
    const double flops = t.flops / static_cast<double>(t.calls);
    const GemmArgs& g = t.shape;
    const bool fp64 = g.a.dtype == DType::kF64 || g.b.dtype == DType::kF64;
    const std::string lib = !cpu_kernels ? "-"
                            : fp64       ? "OpenBLAS"
                            : g.bf16_inputs && cpu_backend_bf16_dot()
                                ? "VDPBF16PS kernel"
                                : cpu_backend_gemm_library(g.m, g.n, g.k, g.trans_a, g.trans_b);
    std::printf("%-34s %10.3f %8lld %10.1f %10.1f %7.0f%%  %s\n", key.c_str(),
                1e3 * t.seconds / static_cast<double>(cmd.steps),
                static_cast<long long>(t.calls / cmd.steps), flops / per_call / 1e9,
                flops / iso / 1e9, 100.0 * iso / per_call, lib.c_str());
  }
  // Attention's block products (32 x T x head_dim, register-tiled or BLAS) are counted in the
  // attention ops above, not here: these are the linear layers' GEMMs only.
  const double gemm_efficiency = step_gemm_s > 0 ? isolated_s / step_gemm_s : 0.0;
  std::printf("linear-layer GEMMs in the step at %.0f%% of the same shapes in isolation\n",
              100.0 * gemm_efficiency);
  nlohmann::json j = {{"tokens_per_s", tps},
                      {"step_ms", med_ms},
                      {"forward_ms", median(fwd_ms)},
                      {"backward_ms", median(bwd_ms)},
                      {"optimizer_ms", median(opt_ms)},
                      {"gflops", gflops},
                      {"peak_fp32_gflops", peak.fp32_gflops},
                      {"peak_bf16_gflops", peak.bf16_gflops},
                      {"mfu", mfu},
                      {"losses", losses},
                      {"flops_per_token", flops_per_token},
                      {"params", state.table().num_params},
                      {"peak_rss_bytes", hwm},
                      {"gemm_in_step_efficiency", gemm_efficiency},
                      {"share_gemm", share_gemm},
                      {"share_attention", share_attention},
                      {"share_other", op_total > 0 ? share_other : 0.0},
                      {"backend", cpu_json}};
  if (device) {
    if (gpu.table_tflops <= 0) j["mfu"] = nullptr;  // no datasheet peak for this device
    j["gpu"] = {{"device", gpu.device},
                {"table_entry", gpu.table.model},
                {"peak_table_tflops", gpu.table_tflops},
                {"gemm_bf16_tflops", gpu.gemm_bf16_tflops},
                {"gemm_matmul_tflops", gpu.gemm_matmul_tflops},
                {"gemm_error", gpu.gemm_error},
                {"mfu_vs_measured_gemm", mfu_measured}};
  }
  std::printf("bench_json %s\n", j.dump().c_str());
  return 0;
}

}  // namespace ledgerlm
