// The 8-lane fp32 vector the AVX2 kernels are written against (AVX2 + FMA + F16C).
//
// Include only from an ISA translation unit (cpu_kernels_avx2.cpp), inside its kernel namespace
// and after its `#pragma GCC target`: the wrappers must be compiled for the AVX2 target and must
// not be visible to code compiled for baseline x86-64. <immintrin.h> is included before that.
// The same operations exist for AVX-512 (cpu_vec_avx512.h), so one kernel template serves both;
// every lane computes exactly what the other width computes for it.

struct Vec {
  static constexpr int kLanes = 8;
  __m256 v;

  // Lanes [0, count) set (count clamped to [0, 8]).
  static __m256i lanes(int64_t count) {
    const int c = static_cast<int>(count < 0 ? 0 : (count > 8 ? 8 : count));
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  // Lanes past `count` read as 0 (and are not touched in memory).
  static Vec load_part(const float* p, int64_t count) {
    return {_mm256_maskload_ps(p, lanes(count))};
  }
  // Lanes past `count` read as `fill`.
  static Vec load_part_or(const float* p, int64_t count, float fill) {
    const __m256i m = lanes(count);
    return {
        _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m))};
  }
  // Lanes [0, count) kept, the rest 0.
  Vec keep_first(int64_t count) const {
    return {_mm256_and_ps(v, _mm256_castsi256_ps(lanes(count)))};
  }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void store_part(float* p, int64_t count) const { _mm256_maskstore_ps(p, lanes(count), v); }
  static Vec set1(float x) { return {_mm256_set1_ps(x)}; }
  static Vec zero() { return {_mm256_setzero_ps()}; }

  // Member operators, not friends: GCC 12 does not apply `#pragma GCC target` to friend
  // functions defined in the class.
  Vec operator+(Vec b) const { return {_mm256_add_ps(v, b.v)}; }
  Vec operator-(Vec b) const { return {_mm256_sub_ps(v, b.v)}; }
  Vec operator*(Vec b) const { return {_mm256_mul_ps(v, b.v)}; }
  Vec operator/(Vec b) const { return {_mm256_div_ps(v, b.v)}; }
  static Vec fmadd(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }    // ab+c
  static Vec fnmadd(Vec a, Vec b, Vec c) { return {_mm256_fnmadd_ps(a.v, b.v, c.v)}; }  // c-ab
  static Vec fmsub(Vec a, Vec b, Vec c) { return {_mm256_fmsub_ps(a.v, b.v, c.v)}; }    // ab-c
  static Vec min(Vec a, Vec b) { return {_mm256_min_ps(a.v, b.v)}; }
  static Vec max(Vec a, Vec b) { return {_mm256_max_ps(a.v, b.v)}; }
  static Vec round_nearest(Vec a) {
    return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  }
  // p * 2^n for integral n in [-254, 254], rounded once as VSCALEFPS does: 2^n is applied as two
  // exact powers 2^(n/2) and 2^(n - n/2), each a normal float, so only the last product rounds
  // (and saturates to 0 or inf).
  static Vec scale_pow2(Vec p, Vec n) {
    const __m256i ni = _mm256_cvtps_epi32(n.v);
    const __m256i h1 = _mm256_srai_epi32(ni, 1);
    const __m256i h2 = _mm256_sub_epi32(ni, h1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h2, bias), 23));
    return {_mm256_mul_ps(_mm256_mul_ps(p.v, s1), s2)};
  }
  // Horizontal sum and max in a fixed order: lanes (i, i+4), then (i, i+2), then (0, 1).
  float reduce_add() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  float reduce_max() const {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  // Adds the lanes, widened to double, into acc[0..kLanes) lane by lane.
  void add_to_double(double* acc) const {
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    _mm256_storeu_pd(acc, _mm256_add_pd(_mm256_loadu_pd(acc), lo));
    _mm256_storeu_pd(acc + 4, _mm256_add_pd(_mm256_loadu_pd(acc + 4), hi));
  }

  // 16-bit storage, bit-identical to model/base/dtype.h for every non-NaN value: bf16 widening is
  // exact (a shift); narrowing rounds to nearest even and maps NaN to 0x7fc0 as f32_to_bf16
  // does. fp16 uses F16C (IEEE round to nearest even); NaN lanes are canonicalised first so that
  // they narrow to sign | 0x7e00 like f32_to_f16 (a signalling fp16 NaN widens quieted).
  static Vec load_bf16(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
  }
  void store_bf16(uint16_t* p) const {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc00000), nan);
    r = _mm256_srli_epi32(r, 16);
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
  static Vec load_f16(const uint16_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
  }
  void store_f16(uint16_t* p) const {
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256 quiet = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)),
                                      _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
    const __m256 x = _mm256_blendv_ps(v, quiet, nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};
