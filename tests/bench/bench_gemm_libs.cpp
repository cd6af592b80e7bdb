// Micro-benchmark (not a test): the training step's GEMM shapes (bench_tiny and bench_small,
// forward and backward, fp32) through three libraries' own APIs, side by side and interleaved
// so that load from other processes hits all alike:
//   OpenBLAS  cblas_sgemm (the OpenMP build, linked)
//   BLIS      bli_sgemm, its typed API with explicit strides (dlopen'ed with RTLD_LOCAL: BLIS also
//             exports CBLAS/BLAS symbols, and two CBLAS providers must not meet in one namespace)
//   oneDNN    dnnl_sgemm (row-major, linked)
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

double run_once(int lib, const Blis& blis, const Shape& s, const float* a, const float* b,
                float* c) {
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
  } else {
    dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, c,
               ldc);
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
  const char* names[] = {"OpenBLAS", "BLIS", "oneDNN"};
  const int libs = blis.sgemm ? 3 : 2;
  const int lib_ids[] = {0, blis.sgemm ? 1 : 2, 2};
  std::printf("OpenBLAS %s core %s | BLIS %s | oneDNN isa %d\n", openblas_get_config(),
              openblas_get_corename(), blis.sgemm ? blis.arch.c_str() : "(not found)",
              static_cast<int>(dnnl_get_effective_cpu_isa()));
  struct Config {
    const char* name;
    int64_t n_tok, c, vp, layers;
  };
  const Config configs[] = {{"bench_tiny", 12 * 64, 128, 128, 4},
                            {"bench_small", 8 * 256, 384, 128, 6}};
  for (const Config& cfg : configs) {
    std::printf("== %s (per step: each block shape x %lld layers, head once)\n", cfg.name,
                static_cast<long long>(cfg.layers));
    std::printf("%-8s %-22s %10s %10s %10s  %s\n", "layer", "op m x n x k", names[0],
                blis.sgemm ? names[1] : "-", names[2], "fastest");
    std::vector<double> step_s(3, 0.0), best_s(1, 0.0);
    for (const Shape& s : step_shapes(cfg.n_tok, cfg.c, cfg.vp)) {
      std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n, 0.0f);
      for (size_t i = 0; i < a.size(); ++i) a[i] = 0.001f * static_cast<float>(i % 97);
      for (size_t i = 0; i < b.size(); ++i) b[i] = 0.002f * static_cast<float>(i % 89);
      std::vector<std::vector<double>> t(3);
      for (int rep = 0; rep < reps + 2; ++rep)
        for (int li = 0; li < libs; ++li) {
          const int lib = lib_ids[li];
          const double dt = run_once(lib, blis, s, a.data(), b.data(), c.data());
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
      for (int lib = 0; lib < 3; ++lib) {
        if (t[lib].empty()) {
          std::printf(" %10s", "-");
          continue;
        }
        const double m = median(t[lib]);
        step_s[lib] += m * static_cast<double>(count);
        if (m < best) best = m, best_lib = lib;
        std::printf(" %10.1f", flops / m / 1e9);
      }
      best_s[0] += best * static_cast<double>(count);
      std::printf("  %s\n", names[best_lib]);
    }
    std::printf("step GEMM ms: OpenBLAS %.2f | BLIS %.2f | oneDNN %.2f | best per shape %.2f\n",
                1e3 * step_s[0], blis.sgemm ? 1e3 * step_s[1] : 0.0, 1e3 * step_s[2],
                1e3 * best_s[0]);
  }
  return 0;
}
