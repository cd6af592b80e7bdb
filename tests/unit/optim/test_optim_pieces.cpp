// The CPU backend's batched optimizer passes (Backend::optimizer_ops): every element-wise kernel
// cut into pieces, all tensors in one parallel region, each piece in the path's vector loops
// (the baseline ISA on portable, AVX2 on the vector paths). They must give bitwise the results of
// cpu_optimizer_op on each whole tensor: the same IEEE operations per element in the same order,
// with no fused multiply-add on either side, so exact equality is the contract (not a tolerance).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_isa.h"
#include "model/backend/cpu/cpu_optim.h"
#include "model/base/dtype.h"

namespace ledgerlm {
namespace {

using cpu::CpuIsa;

// One tensor's data: fp32 weights, gradients stored as `gdt`, two states stored as `sdt`.
struct Slot {
  std::vector<float> w;
  std::vector<char> g, s1, s2;
};

std::vector<char> filled(int64_t n, DType dt, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<char> bytes(static_cast<size_t>(n) * dtype_size(dt));
  for (int64_t i = 0; i < n; ++i) {
    const float x = u(rng);
    switch (dt) {
      case DType::kF32:
        std::memcpy(bytes.data() + 4 * i, &x, 4);
        break;
      case DType::kF64: {
        const double d = x;
        std::memcpy(bytes.data() + 8 * i, &d, 8);
        break;
      }
      case DType::kBF16: {
        const uint16_t h = f32_to_bf16(x);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
      default: {
        const uint16_t h = f32_to_f16(x);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
    }
  }
  return bytes;
}

// Sizes: a few elements (all scalar remainder), one piece plus an odd tail, several pieces, one.
const int64_t kSizes[] = {7, (1 << 14) + 5, 50001, 1};

std::vector<Slot> make_slots(DType gdt, DType sdt, bool states, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Slot> slots;
  for (int64_t n : kSizes) {
    Slot s;
    std::vector<char> w = filled(n, DType::kF32, rng, -1.0f, 1.0f);
    s.w.resize(static_cast<size_t>(n));
    std::memcpy(s.w.data(), w.data(), w.size());
    s.g = filled(n, gdt, rng, -0.5f, 0.5f);
    if (states) {
      s.s1 = filled(n, sdt, rng, -0.1f, 0.1f);
      s.s2 = filled(n, sdt, rng, 0.0f, 0.01f);  // v >= 0
    }
    slots.push_back(std::move(s));
  }
  return slots;
}

OptimOp op_for(OptimOpKind kind, Slot& s, DType gdt, DType sdt, bool momentum) {
  OptimOp op;
  op.kind = kind;
  op.n = static_cast<int64_t>(s.w.size());
  op.w = Tensor(s.w.data(), DType::kF32);
  op.g = Tensor(s.g.data(), gdt);
  op.grad_scale = 0.75;  // exercises the scaled gradient view
  const bool sgd = kind == OptimOpKind::kSgdDecay || kind == OptimOpKind::kSgdBuf ||
                   kind == OptimOpKind::kSgdParam || kind == OptimOpKind::kSgdFused;
  if (!sgd) {
    op.s1 = Tensor(s.s1.data(), sdt);
    op.s2 = Tensor(s.s2.data(), sdt);
  } else if (momentum) {
    op.s1 = Tensor(s.s1.data(), sdt);
  }
  op.adamw = adamw_step_make<float>(3e-3, 0.9, 0.95, 1e-8, 0.1, 7);
  op.sgd.lr = 0.05f;
  op.sgd.momentum = momentum ? 0.9f : 0.0f;
  op.sgd.l2 = 1e-3f;
  op.sgd.decay = 0.999f;
  op.sgd.nesterov = true;
  return op;
}

std::vector<char> bytes_of(const std::vector<Slot>& slots) {
  std::vector<char> all;
  for (const Slot& s : slots) {
    const char* w = reinterpret_cast<const char*>(s.w.data());
    all.insert(all.end(), w, w + s.w.size() * sizeof(float));
    all.insert(all.end(), s.s1.begin(), s.s1.end());
    all.insert(all.end(), s.s2.begin(), s.s2.end());
  }
  return all;
}

// The first differing byte's tensor element, for the failure message.
std::string first_difference(const std::vector<char>& a, const std::vector<char>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return "first differing byte " + std::to_string(i) + " of " + std::to_string(a.size());
  return "equal";
}

const OptimOpKind kKinds[] = {OptimOpKind::kSgdDecay,   OptimOpKind::kSgdBuf,
                              OptimOpKind::kSgdParam,   OptimOpKind::kSgdFused,
                              OptimOpKind::kAdamWDecay, OptimOpKind::kAdamWMoments,
                              OptimOpKind::kAdamWParam, OptimOpKind::kAdamWFused};

class OptimPieces : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(OptimPieces, BatchedPassesAreBitwiseThePerTensorKernels) {
  if (!cpu::cpu_isa_supported(GetParam()))
    GTEST_SKIP() << "this CPU cannot run the " << cpu::cpu_isa_name(GetParam()) << " path";
  std::unique_ptr<Backend> be = cpu::backend_create_cpu_isa(2, GetParam());
  int checked = 0;
  for (OptimOpKind kind : kKinds)
    for (DType gdt : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16})
      for (DType sdt : {DType::kF32, DType::kBF16})
        for (bool momentum : {false, true}) {
          std::vector<Slot> ref = make_slots(gdt, sdt, true, 11), got = ref, one = ref;
          std::vector<OptimOp> ref_ops, got_ops, one_ops;
          for (size_t i = 0; i < ref.size(); ++i) {
            ref_ops.push_back(op_for(kind, ref[i], gdt, sdt, momentum));
            got_ops.push_back(op_for(kind, got[i], gdt, sdt, momentum));
            one_ops.push_back(op_for(kind, one[i], gdt, sdt, momentum));
          }
          for (const OptimOp& op : ref_ops) cpu::cpu_optimizer_op(op, nullptr);
          be->optimizer_ops(got_ops.data(), static_cast<int64_t>(got_ops.size()));
          for (const OptimOp& op : one_ops) be->optimizer_op(op, nullptr);
          const std::string what = std::string(cpu::cpu_isa_name(GetParam())) + " kind " +
                                   std::to_string(static_cast<int>(kind)) + " grads " +
                                   dtype_name(gdt) + " states " + dtype_name(sdt) +
                                   (momentum ? " momentum" : "");
          const std::vector<char> want = bytes_of(ref);
          if (kind != OptimOpKind::kSgdBuf || momentum) {  // (without momentum: no work)
            ASSERT_NE(want, bytes_of(make_slots(gdt, sdt, true, 11))) << what << ": nothing ran";
          }
          EXPECT_EQ(bytes_of(got), want)
              << what << " optimizer_ops: " << first_difference(bytes_of(got), want);
          EXPECT_EQ(bytes_of(one), want)
              << what << " optimizer_op: " << first_difference(bytes_of(one), want);
          ++checked;
        }
  EXPECT_EQ(checked, 8 * 4 * 2 * 2);
}

TEST_P(OptimPieces, BadDtypesAreOneErrorNotACrash) {
  if (!cpu::cpu_isa_supported(GetParam()))
    GTEST_SKIP() << "this CPU cannot run the " << cpu::cpu_isa_name(GetParam()) << " path";
  std::unique_ptr<Backend> be = cpu::backend_create_cpu_isa(2, GetParam());
  std::vector<Slot> slots = make_slots(DType::kF32, DType::kF32, true, 3);
  std::vector<OptimOp> ops;
  for (Slot& s : slots)
    ops.push_back(op_for(OptimOpKind::kAdamWFused, s, DType::kF32, DType::kF32, false));
  const std::vector<char> before = bytes_of(slots);
  ops[2].s1.dtype = DType::kF16;  // fp16 states do not exist
  ops[2].s2.dtype = DType::kF16;
  try {
    be->optimizer_ops(ops.data(), static_cast<int64_t>(ops.size()));
    FAIL() << "fp16 optimizer states were accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("state must be fp32 or bf16"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(bytes_of(slots), before) << "a rejected pass must not have touched any tensor";
}

INSTANTIATE_TEST_SUITE_P(Paths, OptimPieces,
                         ::testing::Values(CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512),
                         [](const auto& info) {
                           return std::string(cpu::cpu_isa_name(info.param));
                         });

}  // namespace
}  // namespace ledgerlm
