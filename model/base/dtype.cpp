// Element type names and IEEE half-precision conversion.
#include "model/base/dtype.h"

#include <cmath>

#include "model/base/check.h"

namespace ledgerlm {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kU8:
      return 1;
    case DType::kI32:
      return 4;
    case DType::kU16:
      return 2;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "fp32";
    case DType::kF64:
      return "fp64";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
    case DType::kU8:
      return "u8";
    case DType::kI32:
      return "i32";
    case DType::kU16:
      return "u16";
  }
  return "?";
}

const char* dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kU8:
      return "U8";
    case DType::kI32:
      return "I32";
    case DType::kU16:
      return "U16";
  }
  return "?";
}

bool dtype_parse_safetensors(const std::string& text, DType* out) {
  static const struct {
    const char* name;
    DType t;
  } kNames[] = {{"F32", DType::kF32}, {"F64", DType::kF64}, {"BF16", DType::kBF16},
                {"F16", DType::kF16}, {"U8", DType::kU8},   {"I32", DType::kI32},
                {"U16", DType::kU16}};
  for (const auto& n : kNames) {
    if (text == n.name) {
      *out = n.t;
      return true;
    }
  }
  return false;
}

DType dtype_parse(const std::string& text, const std::string& what) {
  if (text == "fp32" || text == "f32" || text == "float32") return DType::kF32;
  if (text == "bf16" || text == "bfloat16") return DType::kBF16;
  if (text == "fp16" || text == "f16" || text == "float16") return DType::kF16;
  if (text == "fp64" || text == "f64" || text == "float64") return DType::kF64;
  fail(error_message(what, ": expected one of fp32, bf16, fp16 (got '", text, "')"));
}

}  // namespace ledgerlm
