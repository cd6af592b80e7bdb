// Fuzz target: safetensors files (ckpt/safetensors.h), the weights format ledgerlm reads from
// runs, checkpoints and --init-from. An input is one file; the target opens it (header length,
// JSON header, dtypes, shapes, offsets tiling the data section) and reads every tensor back, raw
// and widened to fp32. Accepted: the file opened and every tensor read.
#include <cstdint>
#include <string_view>
#include <vector>

#include "ckpt/safetensors.h"
#include "model/base/check.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ledgerlm;
  static fuzz::Stats stats("fuzz_safetensors");
  static fuzz::Scratch scratch;
  stats.input();
  const std::string path =
      scratch.write("in.safetensors", std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    SafeTensorsFile f = SafeTensorsFile::open(path);
    std::vector<char> buf;
    for (const SafeTensorInfo& t : f.tensors()) {
      buf.resize(static_cast<size_t>(t.bytes));
      f.read_elements(t, 0, t.numel(), buf.data());
      const bool is_float = t.dtype == DType::kF32 || t.dtype == DType::kF64 ||
                            t.dtype == DType::kBF16 || t.dtype == DType::kF16;
      if (is_float) f.read_f32(t.name);
      f.get(t.name);
    }
    stats.accept();
  } catch (const Error&) {
    // Rejected with a message: the expected outcome for damaged input.
  }
  return 0;
}
