// Micro-benchmark (not a test): the training step's GEMM shapes (bench_tiny and bench_small,
// forward and backward, fp32) through three libraries' own APIs, side by side and interleaved
// so that load from other processes hits all alike:
//   OpenBLAS  cblas_sgemm (the OpenMP build, linked)
//   BLIS      bli_sgemm, its typed API with explicit strides (dlopen'ed with RTLD_LOCAL: BLIS also
//             exports CBLAS/BLAS symbols, and two CBLAS providers must not meet in one namespace)
//   oneDNN    dnnl_sgemm (row-major, linked), and its matmul primitive (created once per shape,
//             operand strides for the transposes, a sum post-op for beta = 1, the scratchpad
//             supplied by the caller)
// Prints per shape the median GFLOP/s of each library and which is fastest, then the total time
// per step each library would take over all the step's GEMMs of that config.
//
// Build (Debian packages libopenblas-openmp-dev, libblis-openmp-dev, libdnnl-dev):
//   g++ -O2 -std=c++20 -fopenmp -I/usr/include/x86_64-linux-gnu/openblas-openmp \
//       tests/bench/bench_gemm_libs.cpp /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so \
//       -ldnnl -ldl -o /tmp/bench_gemm_libs
// Run: OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=1000 /tmp/bench_gemm_libs [reps]
// Kernel choice of each library can be forced to its AVX2 kernels on an AVX-512 CPU with
//   OPENBLAS_CORETYPE=Haswell BLIS_ARCH_TYPE=6 (zen3) ONEDNN_MAX_CPU_ISA=AVX2
// (and to the AVX-512 ones with OPENBLAS_CORETYPE=SkylakeX BLIS_ARCH_TYPE=0 (skx)).
#include <cblas.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// BLIS 0.9 typed API: trans_t 0 = no transpose; dim_t/inc_t are 64-bit.
using BliSgemm = void (*)(int, int, int64_t, int64_t, int64_t, const float*, const float*, int64_t,
                          int64_t, const float*, int64_t, int64_t, const float*, float*, int64_t,
                          int64_t);
using BliArchQuery = int (*)();
using BliArchString = const char* (*)(int);
using BliSetThreads = void (*)(int64_t);

struct Blis {
  BliSgemm sgemm = nullptr;
  std::string arch;
};

Blis blis_open(int threads) {
  Blis b;
  void* h = dlopen("/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4",
                   RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (h == nullptr) return b;
  b.sgemm = reinterpret_cast<BliSgemm>(dlsym(h, "bli_sgemm"));
  auto query = reinterpret_cast<BliArchQuery>(dlsym(h, "bli_arch_query_id"));
  auto name = reinterpret_cast<BliArchString>(dlsym(h, "bli_arch_string"));
  auto set_threads = reinterpret_cast<BliSetThreads>(dlsym(h, "bli_thread_set_num_threads"));
  if (set_threads) set_threads(threads);
  if (query && name) b.arch = name(query());
  return b;
}

// A oneDNN matmul primitive for one shape with a user scratchpad, created once.
struct Matmul {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr, scratch = nullptr;
  std::vector<char> pad;
  std::string impl;
};

#define DNNL_OK(x)                                              \
  do {                                                          \
    if ((x) != dnnl_success) {                                  \
      std::fprintf(stderr, "bench_gemm_libs: %s failed\n", #x); \
      std::exit(1);                                             \
    }                                                           \
  } while (0)

struct Shape {
  const char* what;
  int64_t m, n, k;
  bool ta, tb;
  bool add;  // beta = 1 (bias written first, or a weight gradient accumulated)
};

// The linear layers of one step (model/gpt.cpp): forward x W^T (+bias), weight gradients
// dout^T x (+=), input gradients dout W.
std::vector<Shape> step_shapes(int64_t n_tok, int64_t c, int64_t vp) {
  struct Layer {
    const char* name;
    int64_t in, out;
    bool bias;
  };
  const Layer layers[] = {{"qkv", c, 3 * c, true},
                          {"proj", c, c, true},
                          {"fc", c, 4 * c, true},
                          {"fcproj", 4 * c, c, true},
                          {"head", c, vp, false}};
  std::vector<Shape> s;
  for (const Layer& l : layers) {
    s.push_back({l.name, n_tok, l.out, l.in, false, true, l.bias});
    s.push_back({l.name, l.out, l.in, n_tok, true, false, true});
    s.push_back({l.name, n_tok, l.in, l.out, false, false, false});
  }
  return s;
}

using Clock = std::chrono::steady_clock;

Matmul matmul_create(dnnl_engine_t eng, const Shape& s, const float* a, const float* b, float* c) {
  Matmul mm;
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  dnnl_memory_desc_t amd, bmd, cmd;
  dnnl_dims_t ad = {s.m, s.k}, as = {s.ta ? 1 : lda, s.ta ? lda : 1};
  dnnl_dims_t bd = {s.k, s.n}, bs = {s.tb ? 1 : ldb, s.tb ? ldb : 1};
  dnnl_dims_t cd = {s.m, s.n}, cs = {s.n, 1};
  DNNL_OK(dnnl_memory_desc_init_by_strides(&amd, 2, ad, dnnl_f32, as));
  DNNL_OK(dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dnnl_f32, bs));
  DNNL_OK(dnnl_memory_desc_init_by_strides(&cmd, 2, cd, dnnl_f32, cs));
  dnnl_matmul_desc_t md;
  DNNL_OK(dnnl_matmul_desc_init(&md, &amd, &bmd, nullptr, &cmd));
  dnnl_primitive_attr_t attr;
  DNNL_OK(dnnl_primitive_attr_create(&attr));
  DNNL_OK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  if (s.add) {
    dnnl_post_ops_t po;
    DNNL_OK(dnnl_post_ops_create(&po));
    DNNL_OK(dnnl_post_ops_append_sum(po, 1.0f));
    DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
  }
  dnnl_primitive_desc_t pd;
  DNNL_OK(dnnl_primitive_desc_create(&pd, &md, attr, eng, nullptr));
  const char* impl = nullptr;
  DNNL_OK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
  mm.impl = impl ? impl : "?";
  const dnnl_memory_desc_t* smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  mm.pad.resize(dnnl_memory_desc_get_size(smd) + 64);
  DNNL_OK(dnnl_primitive_create(&mm.prim, pd));
  DNNL_OK(dnnl_memory_create(&mm.a, &amd, eng, const_cast<float*>(a)));
  DNNL_OK(dnnl_memory_create(&mm.b, &bmd, eng, const_cast<float*>(b)));
  DNNL_OK(dnnl_memory_create(&mm.c, &cmd, eng, c));
  DNNL_OK(dnnl_memory_create(&mm.scratch, smd, eng, mm.pad.data()));
  return mm;
}

double run_once(int lib, const Blis& blis, const Matmul& mm, dnnl_stream_t stream, const Shape& s,
                const float* a, const float* b, float* c) {
  const float alpha = 1.0f, beta = s.add ? 1.0f : 0.0f;
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n, ldc = s.n;
  const auto t0 = Clock::now();
  if (lib == 0) {
    cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), alpha, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  } else if (lib == 1) {
    // op(A)(i, p) at a[i * rs + p * cs]: row-major A [M,K] has (lda, 1), its transpose (1, lda).
    blis.sgemm(0, 0, s.m, s.n, s.k, &alpha, a, s.ta ? 1 : lda, s.ta ? lda : 1, b, s.tb ? 1 : ldb,
               s.tb ? ldb : 1, &beta, c, ldc, 1);
  } else if (lib == 2) {
    dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, c,
               ldc);
  } else {
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mm.a},
                               {DNNL_ARG_WEIGHTS, mm.b},
                               {DNNL_ARG_DST, mm.c},
                               {DNNL_ARG_SCRATCHPAD, mm.scratch}};
    DNNL_OK(dnnl_primitive_execute(mm.prim, stream, 4, args));
    DNNL_OK(dnnl_stream_wait(stream));
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  const int threads = 2;
  const Blis blis = blis_open(threads);
  constexpr int kLibs = 4;
  const char* names[kLibs] = {"OpenBLAS", "BLIS", "oneDNN", "dnnl-matmul"};
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  DNNL_OK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  DNNL_OK(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
  std::printf("OpenBLAS %s core %s | BLIS %s | oneDNN isa 0x%x\n", openblas_get_config(),
              openblas_get_corename(), blis.sgemm ? blis.arch.c_str() : "(not found)",
              static_cast<unsigned>(dnnl_get_effective_cpu_isa()));
  struct Config {
    const char* name;
    int64_t n_tok, c, vp, layers;
  };
  const Config configs[] = {{"bench_tiny", 12 * 64, 128, 128, 4},
                            {"bench_small", 8 * 256, 384, 128, 6}};
  for (const Config& cfg : configs) {
    std::printf(
        "== %s (GFLOP/s, median of %d; per step: each block shape x %lld layers, head "
        "once)\n",
        cfg.name, reps, static_cast<long long>(cfg.layers));
    std::printf("%-8s %-22s", "layer", "op m x n x k");
    for (const char* n : names) std::printf(" %11s", n);
    std::printf("  fastest | matmul impl\n");
    std::vector<double> step_s(kLibs, 0.0);
    double best_s = 0.0;
    for (const Shape& s : step_shapes(cfg.n_tok, cfg.c, cfg.vp)) {
      std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n, 0.0f);
      for (size_t i = 0; i < a.size(); ++i) a[i] = 0.001f * static_cast<float>(i % 97);
      for (size_t i = 0; i < b.size(); ++i) b[i] = 0.002f * static_cast<float>(i % 89);
      const Matmul mm = matmul_create(eng, s, a.data(), b.data(), c.data());
      std::vector<std::vector<double>> t(kLibs);
      for (int rep = 0; rep < reps + 2; ++rep)
        for (int lib = 0; lib < kLibs; ++lib) {
          if (lib == 1 && !blis.sgemm) continue;
          const double dt = run_once(lib, blis, mm, stream, s, a.data(), b.data(), c.data());
          if (rep >= 2) t[lib].push_back(dt);
        }
      const double flops = 2.0 * s.m * s.n * s.k;
      const int64_t count = std::string(s.what) == "head" ? 1 : cfg.layers;
      double best = 1e30;
      int best_lib = 0;
      char shape[64];
      std::snprintf(shape, sizeof shape, "%c%c %lldx%lldx%lld", s.ta ? 'T' : 'N', s.tb ? 'T' : 'N',
                    static_cast<long long>(s.m), static_cast<long long>(s.n),
                    static_cast<long long>(s.k));
      std::printf("%-8s %-22s", s.what, shape);
      for (int lib = 0; lib < kLibs; ++lib) {
        if (t[lib].empty()) {
          std::printf(" %11s", "-");
          continue;
        }
        const double m = median(t[lib]);
        step_s[lib] += m * static_cast<double>(count);
        if (m < best) best = m, best_lib = lib;
        std::printf(" %11.1f", flops / m / 1e9);
      }
      best_s += best * static_cast<double>(count);
      std::printf("  %s | %s\n", names[best_lib], mm.impl.c_str());
    }
    std::printf("step GEMM ms:");
    for (int lib = 0; lib < kLibs; ++lib) std::printf(" %s %.2f |", names[lib], 1e3 * step_s[lib]);
    std::printf(" best per shape %.2f\n", 1e3 * best_s);
  }
  return 0;
}
