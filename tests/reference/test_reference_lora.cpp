// LoRA against the independent PyTorch reference (tests/reference/gpt_ref.py --lora-scale): the
// loss and the gradient of every adapter factor of a tiny GPT with adapters on all four linear
// layers (rank 3, alpha 4.5: scale 1.5), base weights frozen, in fp32 and fp64; and of a tiny
// Llama-style block (rotary, grouped-query attention, SwiGLU) with separate adapters on q, k, v,
// o, gate, up and down, the reference reading q, k and v's under PEFT's q_proj/k_proj/v_proj.
//
// ledgerlm keeps A (r, in) and B (out, r) in (out, in) storage like its linear weights; the
// reference reads them under PEFT's names ("<layer>.lora_A.weight", "<layer>.lora_B.weight"),
// which use the same (r, in) / (out, r) shapes, so the factors travel untransposed while the
// base weights go through the HF export's Conv1D transposition.
//
// Tolerances (per tensor, max|a-b| <= atol + rtol x max|ref|) as the whole-model reference test
// (test_reference_gpt.cpp) states them: fp32 rtol 1e-4 (two fp32 implementations summing in
// different orders, measured ~1e-6), fp64 rtol 1e-6 (compared after rounding both to fp32).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ckpt/hf_export.h"
#include "ckpt/safetensors.h"
#include "model/backend/backend.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "model/unit_access.h"
#include "tests/support/config_test_support.h"
#include "tests/support/lora_test_support.h"
#include "tests/support/reference_config_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

constexpr int64_t kBatch = 2, kSeq = 16;

struct Precision {
  DType dtype;
  const char* torch_name;
  double atol, rtol, loss_rtol;
};
constexpr Precision kFp32{DType::kF32, "float32", 1e-6, 1e-4, 1e-5};
constexpr Precision kFp64{DType::kF64, "float64", 1e-12, 1e-6, 1e-12};

ModelConfig gpt2_config() {
  ModelConfig cfg = testing::model_config_of({.vocab = 65, .L = 2, .H = 2, .C = 32, .block = 16});
  cfg.lora.rank = 3;
  cfg.lora.alpha = 4.5;
  cfg.lora.targets = "qkv,attn_proj,mlp_fc,mlp_proj";
  return cfg;
}

// 4 query heads on 2 kv heads (qkv 32 + 2 x 2 x 8 = 64 rows: q 32, k 16, v 16), SwiGLU F = 48.
ModelConfig llama_config() {
  ModelConfig cfg = gpt2_config();
  cfg.n_head = 4;
  cfg.n_kv_head = 2;
  cfg.position = "rope";
  cfg.mlp = "swiglu";
  cfg.ffn_hidden = 48;
  cfg.norm = "rmsnorm";
  cfg.bias = false;
  cfg.lora.targets = "q,k,v,o,gate,up,down";
  return cfg;
}

// PEFT's module of adapter factor `p` in the reference's GPT-2 layout: its base weight's Conv1D
// module, or for q, k and v's own adapters "...attn.q_proj" and so on.
std::string reference_module(const ParamTable& full, const ParamTable& plain, const ParamInfo& p) {
  const ParamInfo& f = full.find(p.name);
  const std::string base = full.params[static_cast<size_t>(f.lora_base)].name;
  const std::string layer = plain.find(base).hf_name;  // "...c_attn.weight"
  const std::string module = layer.substr(0, layer.size() - 7);
  const std::string stem = p.name.substr(0, p.name.size() - 7);  // "block.0.attn.q"
  const std::string last = stem.substr(stem.rfind('.') + 1);
  if (last == "q" || last == "k" || last == "v")
    return module.substr(0, module.rfind('.') + 1) + last + "_proj";
  return module;
}

void check(const Precision& prec, const ModelConfig& cfg, int adapters) {
  const auto [full, trained, frozen, plain, plain_cfg] = testing::lora_tables(cfg);

  // Values exactly representable in fp32 (the reference reads fp32 files), every factor non-zero.
  std::mt19937_64 rng(4711);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto fill = [&](const ParamTable& part) {
    std::vector<double> v(static_cast<size_t>(part.total), 0.0);
    for (const ParamInfo& p : part.params) {
      const int64_t cols = p.numel / p.shape[0];
      const int64_t rows = p.kind == ParamKind::kEmbedding ? p.hf_rows : p.shape[0];
      const double scale = p.kind == ParamKind::kNormWeight ? 0.1 : 0.3;
      for (int64_t i = 0; i < rows * cols; ++i)
        v[static_cast<size_t>(p.offset + i)] = static_cast<float>(
            (p.kind == ParamKind::kNormWeight ? 1.0 : 0.0) + scale * normal(rng));
    }
    return v;
  };
  const std::vector<double> trained_values = fill(trained), frozen_values = fill(frozen);
  auto typed = [&](const std::vector<double>& v) {
    std::vector<char> bytes(v.size() * dtype_size(prec.dtype));
    for (size_t i = 0; i < v.size(); ++i) {
      if (prec.dtype == DType::kF64)
        reinterpret_cast<double*>(bytes.data())[i] = v[i];
      else
        reinterpret_cast<float*>(bytes.data())[i] = static_cast<float>(v[i]);
    }
    return bytes;
  };
  std::vector<char> tp = typed(trained_values), fp = typed(frozen_values);
  std::vector<char> grads(tp.size(), 0);
  auto backend = backend_create_cpu(2);
  GptModel model(cfg, full, *backend, prec.dtype, prec.dtype, prec.dtype);
  FlatUnits units(trained, Tensor(tp.data(), prec.dtype), Tensor(grads.data(), prec.dtype), &frozen,
                  Tensor(fp.data(), prec.dtype));
  std::mt19937 tok_rng(5);
  std::uniform_int_distribution<int32_t> token(0, 64);
  std::vector<int32_t> tokens(kBatch * kSeq), targets(kBatch * kSeq);
  for (auto& t : tokens) t = token(tok_rng);
  for (auto& t : targets) t = token(tok_rng);
  const double loss = model.forward(units, tokens.data(), targets.data(), kBatch, kSeq);
  model.backward(units, 1.0);

  // The base model in HF layout plus the factors under PEFT's names.
  std::vector<float> base(static_cast<size_t>(plain.total), 0.0f);
  for (const ParamInfo& p : frozen.params) {
    const ParamInfo& q = plain.find(p.name);
    for (int64_t i = 0; i < p.numel; ++i)
      base[static_cast<size_t>(q.offset + i)] =
          static_cast<float>(frozen_values[static_cast<size_t>(p.offset + i)]);
  }
  std::vector<HfTensor> tensors = hf_tensors_from_params(plain, Tensor(base.data(), DType::kF32));
  for (const ParamInfo& p : trained.params) {
    HfTensor t;
    t.name = reference_module(full, plain, p) +
             (p.lora == ParamInfo::Lora::kA ? ".lora_A.weight" : ".lora_B.weight");
    t.shape = p.shape;
    for (int64_t i = 0; i < p.numel; ++i)
      t.data.push_back(static_cast<float>(trained_values[static_cast<size_t>(p.offset + i)]));
    tensors.push_back(std::move(t));
  }
  const std::string dir = testing::make_temp_dir("llm_ref_lora_");
  hf_write_safetensors(dir + "/model.safetensors", tensors);
  testing::write_reference_config(dir + "/config.json", plain_cfg);
  SafeTensorsWriter batch;
  batch.add("tokens", DType::kI32, {kBatch, kSeq}, tokens.data());
  batch.add("targets", DType::kI32, {kBatch, kSeq}, targets.data());
  batch.write_atomic(dir + "/batch.safetensors");
  const std::string cmd = "OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE " +
                          testing::python3() + " " + testing::source_dir() +
                          "/tests/reference/gpt_ref.py --config " + dir +
                          "/config.json --weights " + dir + "/model.safetensors --batch " + dir +
                          "/batch.safetensors --out " + dir +
                          "/ref.safetensors --lora-scale 1.5 --dtype " + prec.torch_name;
  const auto res = testing::run_command(cmd);
  ASSERT_EQ(res.exit_code, 0) << cmd << "\n" << res.output;
  SafeTensorsFile ref = SafeTensorsFile::open(dir + "/ref.safetensors");
  double ref_loss = 0.0;
  ref.read("loss", &ref_loss, DType::kF64, {});
  EXPECT_NEAR(loss, ref_loss, prec.loss_rtol * std::fabs(ref_loss));

  int compared = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const HfTensor& t = tensors[k];
    if (t.name.find(".lora_") == std::string::npos) continue;
    const std::vector<float> want = ref.read_f32(t.name);
    // Ours: the factor's gradient in the trained buffer, found by the same order of rows.
    const ParamInfo& p = trained.params[static_cast<size_t>(compared)];
    std::vector<float> got(static_cast<size_t>(p.numel));
    for (int64_t i = 0; i < p.numel; ++i)
      got[static_cast<size_t>(i)] = static_cast<float>(
          prec.dtype == DType::kF64 ? reinterpret_cast<double*>(grads.data())[p.offset + i]
                                    : reinterpret_cast<float*>(grads.data())[p.offset + i]);
    auto c = testing::compare_tensor(p.name + " (" + t.name + ")", got.data(), want.data(), p.numel,
                                     prec.atol, prec.rtol);
    EXPECT_TRUE(c.ok) << c.message;
    ++compared;
  }
  EXPECT_EQ(compared, 2 * 2 * adapters);  // 2 layers x adapters x (A, B)
}

TEST(ReferenceLora, MatchesPytorchFp32) {
  check(kFp32, gpt2_config(), 4);
}
TEST(ReferenceLora, MatchesPytorchFp64) {
  check(kFp64, gpt2_config(), 4);
}
// q, k and v's adapters each on its row block of the fused projection (k and v narrower than q:
// grouped-query), and the gate's.
TEST(ReferenceLora, SeparateQkvAndGateAdaptersMatchPytorchFp32) {
  check(kFp32, llama_config(), 7);
}
TEST(ReferenceLora, SeparateQkvAndGateAdaptersMatchPytorchFp64) {
  check(kFp64, llama_config(), 7);
}

}  // namespace
}  // namespace ledgerlm
