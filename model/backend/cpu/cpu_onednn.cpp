// oneDNN matmul primitives (see cpu_onednn.h).
#include "model/backend/cpu/cpu_onednn.h"

#include <omp.h>

#include <map>
#include <tuple>

#include "model/base/check.h"

#if LEDGERLM_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace ledgerlm::cpu {

#if LEDGERLM_HAVE_DNNL
namespace {

#define LLM_DNNL(call)                                                                     \
  do {                                                                                     \
    const dnnl_status_t st_ = (call);                                                      \
    LLM_REQUIRE(st_ == dnnl_success, "oneDNN: ", #call, " failed with status ", int(st_)); \
  } while (0)

using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, bool>;

// A primitive descriptor for C[m,n] = op(A) op(B) (+ C): op(A) and op(B) described by strides over
// the row-major stored matrices, C dense row-major; user-managed scratchpad.
dnnl_primitive_desc_t matmul_pd(dnnl_engine_t engine, const Key& key, dnnl_memory_desc_t* amd,
                                dnnl_memory_desc_t* bmd, dnnl_memory_desc_t* cmd) {
  const auto [ta, tb, m, n, k, beta1] = key;
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  const dnnl_dims_t ad = {m, k}, as = {ta ? 1 : lda, ta ? lda : 1};
  const dnnl_dims_t bd = {k, n}, bs = {tb ? 1 : ldb, tb ? ldb : 1};
  const dnnl_dims_t cd = {m, n}, cs = {n, 1};
  LLM_DNNL(dnnl_memory_desc_init_by_strides(amd, 2, ad, dnnl_f32, as));
  LLM_DNNL(dnnl_memory_desc_init_by_strides(bmd, 2, bd, dnnl_f32, bs));
  LLM_DNNL(dnnl_memory_desc_init_by_strides(cmd, 2, cd, dnnl_f32, cs));
  dnnl_matmul_desc_t md;
  LLM_DNNL(dnnl_matmul_desc_init(&md, amd, bmd, nullptr, cmd));
  dnnl_primitive_attr_t attr;
  LLM_DNNL(dnnl_primitive_attr_create(&attr));
  LLM_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  dnnl_post_ops_t po = nullptr;
  if (beta1) {
    LLM_DNNL(dnnl_post_ops_create(&po));
    LLM_DNNL(dnnl_post_ops_append_sum(po, 1.0f));
    LLM_DNNL(dnnl_primitive_attr_set_post_ops(attr, po));
  }
  dnnl_primitive_desc_t pd;
  LLM_DNNL(dnnl_primitive_desc_create(&pd, &md, attr, engine, nullptr));
  if (po) dnnl_post_ops_destroy(po);
  dnnl_primitive_attr_destroy(attr);
  return pd;
}

int64_t pd_scratchpad_bytes(dnnl_primitive_desc_t pd) {
  const dnnl_memory_desc_t* smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  return smd ? static_cast<int64_t>(dnnl_memory_desc_get_size(smd)) : 0;
}

dnnl_engine_t cpu_engine() {
  dnnl_engine_t e;
  LLM_DNNL(dnnl_engine_create(&e, dnnl_cpu, 0));
  return e;
}

}  // namespace

struct OneDnnMatmuls::Impl {
  struct Entry {
    dnnl_primitive_t prim = nullptr;
    dnnl_memory_t a = nullptr, b = nullptr, c = nullptr, scratch = nullptr;
    int64_t scratch_bytes = 0;
  };
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  std::map<Key, Entry> cache;

  Entry& get(const Key& key) {
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_primitive_desc_t pd = matmul_pd(engine, key, &amd, &bmd, &cmd);
    Entry e;
    e.scratch_bytes = pd_scratchpad_bytes(pd);
    LLM_DNNL(dnnl_primitive_create(&e.prim, pd));
    const dnnl_memory_desc_t* smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    LLM_DNNL(dnnl_memory_create(&e.a, &amd, engine, DNNL_MEMORY_NONE));
    LLM_DNNL(dnnl_memory_create(&e.b, &bmd, engine, DNNL_MEMORY_NONE));
    LLM_DNNL(dnnl_memory_create(&e.c, &cmd, engine, DNNL_MEMORY_NONE));
    LLM_DNNL(dnnl_memory_create(&e.scratch, smd, engine, DNNL_MEMORY_NONE));
    dnnl_primitive_desc_destroy(pd);
    return cache.emplace(key, e).first->second;
  }

  ~Impl() {
    for (auto& [key, e] : cache) {
      dnnl_memory_destroy(e.a);
      dnnl_memory_destroy(e.b);
      dnnl_memory_destroy(e.c);
      dnnl_memory_destroy(e.scratch);
      dnnl_primitive_destroy(e.prim);
    }
    if (stream) dnnl_stream_destroy(stream);
    if (engine) dnnl_engine_destroy(engine);
  }
};

OneDnnMatmuls::OneDnnMatmuls() : impl_(std::make_unique<Impl>()) {
  impl_->engine = cpu_engine();
  LLM_DNNL(dnnl_stream_create(&impl_->stream, impl_->engine, dnnl_stream_default_flags));
}

OneDnnMatmuls::~OneDnnMatmuls() = default;

int64_t OneDnnMatmuls::scratchpad_bytes(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                        bool beta1) {
  return impl_->get(Key{ta, tb, m, n, k, beta1}).scratch_bytes;
}

void OneDnnMatmuls::run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                        const float* b, bool beta1, float* c, void* scratch, int threads) {
  Impl::Entry& e = impl_->get(Key{ta, tb, m, n, k, beta1});
  LLM_DNNL(dnnl_memory_set_data_handle(e.a, const_cast<float*>(a)));
  LLM_DNNL(dnnl_memory_set_data_handle(e.b, const_cast<float*>(b)));
  LLM_DNNL(dnnl_memory_set_data_handle(e.c, c));
  LLM_DNNL(dnnl_memory_set_data_handle(e.scratch, scratch));
  // oneDNN's OpenMP runtime sizes its team from omp_get_max_threads() at execution.
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e.a},
                             {DNNL_ARG_WEIGHTS, e.b},
                             {DNNL_ARG_DST, e.c},
                             {DNNL_ARG_SCRATCHPAD, e.scratch}};
  LLM_DNNL(dnnl_primitive_execute(e.prim, impl_->stream, 4, args));
  LLM_DNNL(dnnl_stream_wait(impl_->stream));
}

int64_t onednn_matmul_scratchpad_bytes(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                       bool beta1) {
  static dnnl_engine_t engine = cpu_engine();
  dnnl_memory_desc_t amd, bmd, cmd;
  dnnl_primitive_desc_t pd = matmul_pd(engine, Key{ta, tb, m, n, k, beta1}, &amd, &bmd, &cmd);
  const int64_t bytes = pd_scratchpad_bytes(pd);
  dnnl_primitive_desc_destroy(pd);
  return bytes;
}

#else  // no oneDNN in this build

struct OneDnnMatmuls::Impl {};
OneDnnMatmuls::OneDnnMatmuls() {
  fail("cpu backend: this build has no oneDNN (install libdnnl-dev and rebuild)");
}
OneDnnMatmuls::~OneDnnMatmuls() = default;
int64_t OneDnnMatmuls::scratchpad_bytes(bool, bool, int64_t, int64_t, int64_t, bool) {
  return 0;
}
void OneDnnMatmuls::run(bool, bool, int64_t, int64_t, int64_t, const float*, const float*, bool,
                        float*, void*, int) {}
int64_t onednn_matmul_scratchpad_bytes(bool, bool, int64_t, int64_t, int64_t, bool) {
  return 0;
}

#endif

}  // namespace ledgerlm::cpu
