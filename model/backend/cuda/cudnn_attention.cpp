// cuDNN fused attention through the cuDNN frontend's graph API (see cudnn_attention.h). Host
// C++: the frontend is header-only and builds graphs on the host; compiled with the project's
// warnings while the frontend's headers are SYSTEM includes. libcudnn is never linked: the
// frontend's dynamic loading (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING) resolves every cuDNN call
// through cudnn_frontend::cudnn_dlhandle, set here from the loader's handle.
#include "model/backend/cuda/cudnn_attention.h"

#include <cudnn_frontend.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "model/backend/common/cudnn_library.h"
#include "model/backend/cuda/cuda_backend.h"
#include "model/base/check.h"

static_assert(
    CUDNN_MAJOR == ledgerlm::kCudnnMajor,
    "cudnn_library.h's kCudnnMajor must be the cuDNN major the frontend compiles against");

// The frontend's handle for its dlsym look-ups (declared extern by cudnn_frontend_shim.h).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace ledgerlm::cuda {
namespace {

namespace fe = cudnn_frontend;

// Tensor uids of the variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// kv: k/v heads (grouped-query attention when < h; cuDNN's SDPA takes K and V with fewer heads
// than Q, h a multiple of kv, and sums dK and dV over each group's query heads itself).
struct Shape {
  int64_t b, h, t, hd, kv;
  int64_t c() const { return h * hd; }
  int64_t row() const { return c() + 2 * kv * hd; }  // the fused qkv row: q | k | v
  bool operator<(const Shape& o) const {
    return std::tie(b, h, t, hd, kv) < std::tie(o.b, o.h, o.t, o.hd, o.kv);
  }
};

// What a shape runs: both graphs and their workspace sizes, or why our kernel runs it.
struct ShapePlan {
  std::shared_ptr<fe::graph::Graph> fwd, bwd;
  int64_t fwd_workspace = 0, bwd_workspace = 0;
  std::string refused;  // non-empty: our kernel runs this shape
};

std::string shape_text(const Shape& s) {
  return error_message("B=", s.b, " H=", s.h, s.kv != s.h ? error_message(" KV=", s.kv) : "",
                       " T=", s.t, " hd=", s.hd);
}

// Strides of q, k or v (and dq, dk, dv) in the fused layout: every one steps by a whole row.
std::vector<int64_t> qkv_strides(const Shape& s) {
  return {s.t * s.row(), s.hd, s.row(), 1};
}
// [B, heads, T, hd]: heads = H for q and dq, KV for k, v, dk and dv.
std::vector<int64_t> qkv_dims(const Shape& s, int64_t heads) {
  return {s.b, heads, s.t, s.hd};
}

// The fused layout's q ([B,H,T,hd]), k or v ([B,KV,T,hd]); the caller offsets the pointer by 0,
// C or C + KV hd.
fe::graph::Tensor_attributes qkv_tensor(const char* name, Uid uid, const Shape& s, int64_t heads) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim(qkv_dims(s, heads))
      .set_stride(qkv_strides(s));
}

// An attention output layout [B,T,C] (O, dO) as [B,H,T,hd].
std::vector<int64_t> out_dims(const Shape& s) {
  return {s.b, s.h, s.t, s.hd};
}
std::vector<int64_t> out_strides(const Shape& s) {
  return {s.t * s.c(), s.hd, s.c(), 1};
}
std::vector<int64_t> stats_dims(const Shape& s) {
  return {s.b, s.h, s.t, 1};
}
std::vector<int64_t> stats_strides(const Shape& s) {
  return {s.h * s.t, s.t, 1, 1};
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// validate, lower, pick plans, check support, build: "" or the frontend's message.
std::string finish_graph(fe::graph::Graph& g, cudnnHandle_t handle, int64_t* workspace) {
  auto step = [](fe::error_t e, const char* what) {
    return e.is_bad() ? std::string(what) + ": " + e.get_message() : std::string();
  };
  std::string why = step(g.validate(), "validate");
  if (why.empty()) why = step(g.build_operation_graph(handle), "build_operation_graph");
  if (why.empty()) why = step(g.create_execution_plans({fe::HeurMode_t::A}), "execution plans");
  if (why.empty()) why = step(g.check_support(handle), "check_support");
  if (why.empty()) why = step(g.build_plans(handle), "build_plans");
  if (why.empty()) why = step(g.get_workspace_size(*workspace), "workspace size");
  return why;
}

class CudnnAttentionImpl final : public CudnnAttention {
 public:
  explicit CudnnAttentionImpl(CudaBackend& be) : be_(be) {
    const CudnnLoad& load = cudnn_library();
    LLM_REQUIRE(load.ok(), "cuda backend: precision.attention = cudnn: ", load.why);
    fe::cudnn_dlhandle = load.library->native_handle();
    LLM_REQUIRE(fe::detail::create_handle(&handle_) == CUDNN_STATUS_SUCCESS,
                "cuda backend: cudnnCreate failed (cuDNN ", cudnn_version_text(load.version), ")");
    LLM_REQUIRE(fe::detail::set_stream(handle_, be_.stream()) == CUDNN_STATUS_SUCCESS,
                "cuda backend: cudnnSetStream failed");
  }
  ~CudnnAttentionImpl() override {
    // Cached graphs hold plans of this handle: release them first.
    plans_.clear();
    if (handle_ != nullptr) fe::detail::destroy_handle(handle_);
  }

  bool forward(Tensor out, Tensor lse, Tensor qkv, const AttentionArgs& a) override {
    const Shape s = shape_of(a, qkv, out, lse);
    if (s.b * s.h * s.t == 0) return true;
    const ShapePlan& plan = plan_for(s);
    if (!plan.refused.empty()) return false;
    const auto [c, v_col, n_qkv, n_out, qkv16, out16] = bf16_io(s);
    void* ws = workspace(plan.fwd_workspace);
    be_.convert(qkv16, qkv, n_qkv);
    std::unordered_map<int64_t, void*> pack = {{kQ, qkv16.data},
                                               {kK, qkv16.offset(c).data},
                                               {kV, qkv16.offset(v_col).data},
                                               {kO, out16.data},
                                               {kStats, lse.data}};
    execute(*plan.fwd, pack, ws, "forward", s);
    be_.convert(out, out16, n_out);
    ++calls_;
    return true;
  }

  bool backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                const AttentionArgs& a) override {
    const Shape s = shape_of(a, qkv, out, lse);
    LLM_REQUIRE(dqkv.dtype == DType::kF32 && dout.dtype == DType::kF32,
                "cuda backend: the cuDNN attention backward takes fp32 dqkv and dout");
    if (s.b * s.h * s.t == 0) return true;
    const ShapePlan& plan = plan_for(s);
    if (!plan.refused.empty()) return false;
    const auto [c, v_col, n_qkv, n_out, qkv16, out16] = bf16_io(s);
    Tensor dout16(be_.workspace(WorkSlot::kCudnnDout, bytes_bf16(n_out)), DType::kBF16);
    Tensor dqkv16(be_.workspace(WorkSlot::kCudnnDqkv, bytes_bf16(n_qkv)), DType::kBF16);
    void* ws = workspace(plan.bwd_workspace);
    be_.convert(qkv16, qkv, n_qkv);
    be_.convert(out16, out, n_out);
    be_.convert(dout16, dout, n_out);
    std::unordered_map<int64_t, void*> pack = {
        {kQ, qkv16.data},   {kK, qkv16.offset(c).data},   {kV, qkv16.offset(v_col).data},
        {kO, out16.data},   {kDO, dout16.data},           {kStats, lse.data},
        {kDQ, dqkv16.data}, {kDK, dqkv16.offset(c).data}, {kDV, dqkv16.offset(v_col).data}};
    execute(*plan.bwd, pack, ws, "backward", s);
    be_.convert(dqkv, dqkv16, n_qkv);
    ++calls_;
    return true;
  }

  int64_t calls() const override { return calls_; }

 private:
  static size_t bytes_bf16(int64_t n) { return static_cast<size_t>(n) * 2; }

  // What both passes start from: the channels c, a qkv row's first v column, the elements of qkv
  // and of out, and bf16 tensors of those sizes in their workspace slots for the copies cuDNN
  // reads.
  struct Bf16Io {
    int64_t c, v_col, n_qkv, n_out;
    Tensor qkv16, out16;
  };
  Bf16Io bf16_io(const Shape& s) {
    const int64_t c = s.c(), n_qkv = s.b * s.t * s.row(), n_out = s.b * s.t * c;
    Tensor qkv16(be_.workspace(WorkSlot::kCudnnQkv, bytes_bf16(n_qkv)), DType::kBF16);
    Tensor out16(be_.workspace(WorkSlot::kCudnnOut, bytes_bf16(n_out)), DType::kBF16);
    return {c, c + s.kv * s.hd, n_qkv, n_out, qkv16, out16};
  }

  Shape shape_of(const AttentionArgs& a, Tensor qkv, Tensor out, Tensor lse) const {
    LLM_REQUIRE(a.dropout == 0.0, "cuda backend: the cuDNN attention has no dropout (got ",
                a.dropout, "); precision.attention = own runs attention dropout");
    LLM_REQUIRE(qkv.dtype == DType::kF32 && out.dtype == DType::kF32 && lse.dtype == DType::kF32,
                "cuda backend: the cuDNN attention takes fp32 activations (backend.h)");
    LLM_REQUIRE(a.heads > 0 && a.channels % a.heads == 0, "cuda backend: attention channels (",
                a.channels, ") must be divisible by heads (", a.heads, ")");
    LLM_REQUIRE(a.kv_heads >= 0 && a.kv_heads <= a.heads && a.heads % a.kv() == 0,
                "cuda backend: attention kv_heads (", a.kv_heads, ") must divide heads (", a.heads,
                ")");
    return {a.batch, a.heads, a.seq, a.channels / a.heads, a.kv()};
  }

  void* workspace(int64_t bytes) {
    return bytes > 0 ? be_.workspace(WorkSlot::kCudnnWork, static_cast<size_t>(bytes)) : nullptr;
  }

  void execute(fe::graph::Graph& g, std::unordered_map<int64_t, void*>& pack, void* ws,
               const char* what, const Shape& s) {
    fe::error_t e = g.execute(handle_, pack, ws);
    LLM_REQUIRE(!e.is_bad(), "cuda backend: cuDNN attention ", what, " failed at ", shape_text(s),
                ": ", e.get_message());
    if (sync_check_enabled()) sync_check(what);
  }

  // Both graphs of a shape, built on first use and kept (building takes up to seconds).
  const ShapePlan& plan_for(const Shape& s) {
    auto it = plans_.find(s);
    if (it != plans_.end()) return it->second;
    ShapePlan plan;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.hd)));
    try {
      plan.refused = build_forward(s, scale, &plan);
      if (plan.refused.empty()) plan.refused = build_backward(s, scale, &plan);
    } catch (const std::exception& e) {  // the frontend throws on missing symbols
      plan.refused = e.what();
    }
    if (!plan.refused.empty()) {
      plan.fwd.reset();
      plan.bwd.reset();
      std::printf("cuda backend: cuDNN attention refused %s (%s): our own kernel runs it\n",
                  shape_text(s).c_str(), plan.refused.c_str());
      std::fflush(stdout);
    }
    return plans_.emplace(s, std::move(plan)).first->second;
  }

  std::string build_forward(const Shape& s, float scale, ShapePlan* plan) {
    auto g = new_graph();
    auto q = g->tensor(qkv_tensor("Q", kQ, s, s.h));
    auto k = g->tensor(qkv_tensor("K", kK, s, s.kv));
    auto v = g->tensor(qkv_tensor("V", kV, s, s.kv));
    auto options = fe::graph::SDPA_attributes()
                       .set_name("sdpa_forward")
                       .set_generate_stats(true)
                       .set_causal_mask(true)
                       .set_attn_scale(scale);
    auto [o, stats] = g->sdpa(q, k, v, options);
    o->set_output(true).set_uid(kO).set_dim(out_dims(s)).set_stride(out_strides(s));
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dims(s))
        .set_stride(stats_strides(s));
    const std::string why = finish_graph(*g, handle_, &plan->fwd_workspace);
    if (why.empty()) plan->fwd = g;
    return why.empty() ? why : "forward " + why;
  }

  std::string build_backward(const Shape& s, float scale, ShapePlan* plan) {
    auto g = new_graph();
    auto q = g->tensor(qkv_tensor("Q", kQ, s, s.h));
    auto k = g->tensor(qkv_tensor("K", kK, s, s.kv));
    auto v = g->tensor(qkv_tensor("V", kV, s, s.kv));
    auto o = g->tensor(fe::graph::Tensor_attributes()
                           .set_name("O")
                           .set_uid(kO)
                           .set_dim(out_dims(s))
                           .set_stride(out_strides(s)));
    auto d_o = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("dO")
                             .set_uid(kDO)
                             .set_dim(out_dims(s))
                             .set_stride(out_strides(s)));
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(kStats)
                               .set_dim(stats_dims(s))
                               .set_stride(stats_strides(s))
                               .set_data_type(fe::DataType_t::FLOAT));
    // Deterministic: a rerun gives the same dqkv bits, as our kernel's backward does.
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("sdpa_backward")
                       .set_causal_mask(true)
                       .set_attn_scale(scale)
                       .set_deterministic_algorithm(true);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, options);
    dq->set_output(true).set_uid(kDQ).set_dim(qkv_dims(s, s.h)).set_stride(qkv_strides(s));
    dk->set_output(true).set_uid(kDK).set_dim(qkv_dims(s, s.kv)).set_stride(qkv_strides(s));
    dv->set_output(true).set_uid(kDV).set_dim(qkv_dims(s, s.kv)).set_stride(qkv_strides(s));
    const std::string why = finish_graph(*g, handle_, &plan->bwd_workspace);
    if (why.empty()) plan->bwd = g;
    return why.empty() ? why : "deterministic backward " + why;
  }

  CudaBackend& be_;
  cudnnHandle_t handle_ = nullptr;
  std::map<Shape, ShapePlan> plans_;
  int64_t calls_ = 0;
};

}  // namespace

std::unique_ptr<CudnnAttention> cudnn_attention_create(CudaBackend& backend) {
  return std::make_unique<CudnnAttentionImpl>(backend);
}

}  // namespace ledgerlm::cuda
