// Fuzz target: safetensors files (ckpt/safetensors.h), the weights format ledgerlm reads from
// runs, checkpoints and --init-from. An input is one file; the target opens it (header length,
// JSON header, dtypes, shapes, offsets tiling the data section, the per-tensor checksum records
// of __metadata__) and reads every tensor back, raw and widened to fp32, each read verifying the
// tensor's checksum where the file has one. Accepted: the file opened and every tensor read.
//
// Every accepted input then goes through the checksum path as a property: its tensors and its
// other metadata written again by SafeTensorsWriter (which records every tensor's CRC-32C) must
// read back byte for byte with every checksum present and verified, and one byte of that file's
// data section flipped (where, the input decides) must be refused — by the whole and by a partial
// read — naming the tensor it hit and that the file is damaged, while every other tensor still
// reads. A violation aborts: libFuzzer reports it as a crash with the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/safetensors.h"
#include "model/base/check.h"
#include "model/base/crc32c.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace ledgerlm;

[[noreturn]] void violated(const std::string& what) {
  std::fprintf(stderr, "fuzz_safetensors: checksum property violated: %s\n", what.c_str());
  std::abort();
}

// The message of the Error `fn` throws, or "" when it throws none.
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void check_checksum_property(const fuzz::Scratch& scratch, const SafeTensorsFile& in,
                             const std::vector<std::vector<char>>& bytes, uint32_t input_crc) {
  const std::vector<SafeTensorInfo>& tensors = in.tensors();
  SafeTensorsWriter w;
  try {
    for (size_t i = 0; i < tensors.size(); ++i)
      w.add(tensors[i].name, tensors[i].dtype, tensors[i].shape, bytes[i].data());
    for (const auto& [key, value] : in.metadata())
      if (key.rfind(kSafetensorsChecksumPrefix, 0) != 0) w.set_metadata(key, value);
  } catch (const Error&) {
    return;  // a name the writer does not write ("" or "__metadata__"): no rewrite to check
  }
  const std::string path = scratch.dir() + "/sealed.safetensors";
  w.write_atomic(path);

  int64_t data_bytes = 0;
  {
    const SafeTensorsFile f = SafeTensorsFile::open(path);
    if (f.tensors().size() != tensors.size()) violated("the rewrite has another tensor count");
    for (const SafeTensorInfo& t : f.tensors()) {
      if (!t.has_checksum) violated("tensor '" + t.name + "' has no checksum");
      const SafeTensorInfo& orig = in.get(t.name);
      std::vector<char> got(static_cast<size_t>(t.bytes));
      const std::string e = error_of([&] { f.read_elements(t, 0, t.numel(), got.data()); });
      if (!e.empty()) violated("the intact rewrite is refused: " + e);
      if (got != bytes[static_cast<size_t>(&orig - tensors.data())])
        violated("tensor '" + t.name + "' reads back other bytes");
      if (crc32c(got.data(), got.size()) != t.crc32c)
        violated("tensor '" + t.name + "' has a checksum that is not its CRC-32C");
      data_bytes += t.bytes;
    }
  }
  if (data_bytes == 0) return;

  // One flipped byte in the data section.
  std::string blob;
  {
    std::ifstream s(path, std::ios::binary);
    blob.assign(std::istreambuf_iterator<char>(s), std::istreambuf_iterator<char>());
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, blob.data(), 8);
  const int64_t pos = static_cast<int64_t>(input_crc % static_cast<uint64_t>(data_bytes));
  const uint8_t mask = static_cast<uint8_t>(1u << (input_crc >> 29));
  blob[8 + header_len + static_cast<size_t>(pos)] ^= static_cast<char>(mask);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(blob.data(), blob.size());

  const SafeTensorsFile f = SafeTensorsFile::open(path);  // the header is untouched
  for (const SafeTensorInfo& t : f.tensors()) {
    std::vector<char> buf(static_cast<size_t>(t.bytes));
    const bool hit = t.offset <= pos && pos < t.offset + t.bytes;
    const std::string whole = error_of([&] { f.read_elements(t, 0, t.numel(), buf.data()); });
    if (!hit) {
      if (!whole.empty()) violated("tensor '" + t.name + "' was not hit but: " + whole);
      continue;
    }
    const std::string part = error_of([&] { f.read_elements(t, t.numel() - 1, 1, buf.data()); });
    for (const std::string& e : {whole, part})
      if (e.find("tensor '" + t.name + "'") == std::string::npos ||
          e.find("fails its checksum") == std::string::npos ||
          e.find("damaged") == std::string::npos || e.find('\n') != std::string::npos)
        violated("tensor '" + t.name + "' was hit at byte " + std::to_string(pos - t.offset) +
                 " but reading it gave: '" + e + "'");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::Stats stats("fuzz_safetensors");
  static fuzz::Scratch scratch;
  stats.input();
  const std::string path =
      scratch.write("in.safetensors", std::string_view(reinterpret_cast<const char*>(data), size));
  std::vector<std::vector<char>> bytes;
  std::optional<SafeTensorsFile> opened;
  try {
    SafeTensorsFile f = SafeTensorsFile::open(path);
    for (const SafeTensorInfo& t : f.tensors()) {
      std::vector<char>& buf = bytes.emplace_back(static_cast<size_t>(t.bytes));
      f.read_elements(t, 0, t.numel(), buf.data());
      const bool is_float = t.dtype == DType::kF32 || t.dtype == DType::kF64 ||
                            t.dtype == DType::kBF16 || t.dtype == DType::kF16;
      if (is_float) f.read_f32(t.name);
      if (t.numel() > 0) {  // a partial read verifies the whole tensor too
        std::vector<char> one(dtype_size(t.dtype));
        f.read_elements(t, t.numel() - 1, 1, one.data());
      }
      f.get(t.name);
    }
    stats.accept();
    opened.emplace(std::move(f));
  } catch (const Error&) {
    // Rejected with a message: the expected outcome for damaged input.
    return 0;
  }
  check_checksum_property(scratch, *opened, bytes, crc32c(data, size));
  return 0;
}
