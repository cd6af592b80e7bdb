// The 16-lane fp32 vector the AVX-512 kernels are written against (AVX-512 F/BW/VL/DQ + FMA +
// F16C); the same operations as cpu_vec_avx2.h, lane for lane.
//
// Include only from an ISA translation unit (cpu_kernels_avx512.cpp), inside its kernel namespace
// and after its `#pragma GCC target`, with <immintrin.h> included before that.

struct Vec {
  static constexpr int kLanes = 16;
  __m512 v;

  static __mmask16 lanes(int64_t count) {
    return count >= 16 ? __mmask16(0xFFFF)
                       : __mmask16((1u << static_cast<unsigned>(count < 0 ? 0 : count)) - 1);
  }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec load_part(const float* p, int64_t count) {
    return {_mm512_maskz_loadu_ps(lanes(count), p)};
  }
  static Vec load_part_or(const float* p, int64_t count, float fill) {
    return {_mm512_mask_loadu_ps(_mm512_set1_ps(fill), lanes(count), p)};
  }
  Vec keep_first(int64_t count) const { return {_mm512_maskz_mov_ps(lanes(count), v)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store_part(float* p, int64_t count) const { _mm512_mask_storeu_ps(p, lanes(count), v); }
  static Vec set1(float x) { return {_mm512_set1_ps(x)}; }
  static Vec zero() { return {_mm512_setzero_ps()}; }

  // Member operators, not friends: GCC 12 does not apply `#pragma GCC target` to friend
  // functions defined in the class.
  Vec operator+(Vec b) const { return {_mm512_add_ps(v, b.v)}; }
  Vec operator-(Vec b) const { return {_mm512_sub_ps(v, b.v)}; }
  Vec operator*(Vec b) const { return {_mm512_mul_ps(v, b.v)}; }
  Vec operator/(Vec b) const { return {_mm512_div_ps(v, b.v)}; }
  static Vec fmadd(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  static Vec fnmadd(Vec a, Vec b, Vec c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }
  static Vec fmsub(Vec a, Vec b, Vec c) { return {_mm512_fmsub_ps(a.v, b.v, c.v)}; }
  static Vec min(Vec a, Vec b) { return {_mm512_min_ps(a.v, b.v)}; }
  static Vec max(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
  static Vec round_nearest(Vec a) {
    return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  }
  // p * 2^n, one rounding (VSCALEFPS).
  static Vec scale_pow2(Vec p, Vec n) { return {_mm512_scalef_ps(p.v, n.v)}; }
  // Fixed order: halves of 512, of 256, then as the AVX2 reduction on the last 128 bits.
  float reduce_add() const {
    const __m256 h =
        _mm256_add_ps(_mm512_castps512_ps256(v),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  float reduce_max() const {
    const __m256 h =
        _mm256_max_ps(_mm512_castps512_ps256(v),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  void add_to_double(double* acc) const {
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d hi =
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), lo));
    _mm512_storeu_pd(acc + 8, _mm512_add_pd(_mm512_loadu_pd(acc + 8), hi));
  }

  // 16-bit storage, bit-identical to cpu_vec_avx2.h (and so to model/base/dtype.h for every
  // non-NaN value; NaN narrows to 0x7fc0 / sign | 0x7e00).
  static Vec load_bf16(const uint16_t* p) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
  }
  void store_bf16(uint16_t* p) const {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc00000));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
  }
  static Vec load_f16(const uint16_t* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  void store_f16(uint16_t* p) const {
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512 quiet = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)),
                        _mm512_set1_epi32(0x7fc00000)));
    const __m512 x = _mm512_mask_mov_ps(v, nan, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};
