// A stand-in libcudnn for the loader's tests: exports cudnnGetVersion only, returning
// LEDGERLM_FAKE_CUDNN_VERSION (a cuDNN of another major version, which the loader must refuse).
#include <cstddef>

extern "C" size_t cudnnGetVersion() {
  return LEDGERLM_FAKE_CUDNN_VERSION;
}
