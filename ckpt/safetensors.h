// Safetensors reading and writing: the weight format of ledgerlm (checkpoints, HF export).
//
// Layout of a file: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// padded with spaces so the data starts at a multiple of 8, then the raw little-endian tensor
// bytes. Offsets are relative to the start of the data section; tensors tile it without holes or
// overlaps. The reader validates all of that up front so a damaged file is reported as one clear
// line naming the file and the tensor, never as garbage weights.
//
// Checksums. Every file SafeTensorsWriter writes (a run's model.safetensors, an imported run's,
// an HF or PEFT export) records the CRC-32C of each tensor's bytes in `__metadata__`, one string
// per tensor: "checksum.NAME": "crc32c:0123abcd" (the text form of crc32c.h). Per tensor,
// not one for the whole data section, so that a mismatch names the tensor and a reader that reads
// some tensors only (a LoRA export reads the adapters) verifies what it reads and no more; the
// tensors tile the data section, so together they cover every data byte. Being metadata, they
// leave the file a plain safetensors file: other readers (the safetensors library; transformers,
// which looks only at "format") ignore the extra keys. SafeTensorsFile verifies a tensor's checksum
// whenever it reads the whole tensor — the bytes it reads anyway, at the hardware CRC's GB/s;
// a partial read of a tensor with a checksum reads the whole tensor to verify it (ledgerlm reads
// parts only of checkpoint files, which carry their CRCs in meta.json instead). Files without
// checksums (written before them, or by other tools) load as before; a file that has them must
// have one, well formed, for every tensor and none for a tensor it lacks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/base/dtype.h"

namespace ledgerlm {

struct SafeTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // bytes from the start of the data section
  int64_t bytes = 0;
  bool has_checksum = false;  // the file records the CRC-32C of this tensor's bytes
  uint32_t crc32c = 0;

  int64_t numel() const;
};

// "[3, 4]" for messages.
std::string safetensors_shape_string(const std::vector<int64_t>& shape);

// The __metadata__ key of a tensor's checksum: "checksum." + the tensor's name.
inline constexpr const char* kSafetensorsChecksumPrefix = "checksum.";

// Collects tensors and metadata, then writes them in one go, with each tensor's checksum in the
// metadata (see above). `add` keeps only the pointer: the caller's data must stay alive and
// unchanged until write_atomic returns.
class SafeTensorsWriter {
 public:
  void add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
           const void* data);
  // Keys starting with kSafetensorsChecksumPrefix are the writer's own: an Error.
  void set_metadata(const std::string& key, const std::string& value);
  // Writes `path` + ".tmp", fsyncs it, renames it over `path` and fsyncs the directory, so a
  // crash leaves either the old file or the complete new one. Throws Error naming the path.
  void write_atomic(const std::string& path) const;
  // The header JSON (without the length prefix and padding), as it will be written: computes
  // the checksums from the tensors' data.
  std::string header_json() const;

 private:
  struct Entry {
    SafeTensorInfo info;
    const void* data = nullptr;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
  int64_t data_bytes_ = 0;
};

// An open, validated safetensors file. Tensor data is read on demand with pread, so opening a
// large checkpoint costs only its header.
class SafeTensorsFile {
 public:
  // Validates: header length, JSON syntax, dtype names, shapes, offsets inside the data section,
  // sizes equal to dtype size x prod(shape), no overlaps or holes, the file size, and the
  // checksum records (one per tensor or none). Each problem throws one Error naming the file (and
  // the tensor). The data is not read here: each read verifies the checksum of what it reads.
  static SafeTensorsFile open(const std::string& path);

  SafeTensorsFile(SafeTensorsFile&& other) noexcept;
  SafeTensorsFile& operator=(SafeTensorsFile&& other) noexcept;
  SafeTensorsFile(const SafeTensorsFile&) = delete;
  SafeTensorsFile& operator=(const SafeTensorsFile&) = delete;
  ~SafeTensorsFile();

  const std::string& path() const { return path_; }
  // In file order (ascending offsets).
  const std::vector<SafeTensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr if absent.
  const SafeTensorInfo* find(const std::string& name) const;
  // Throws Error naming the file and the tensor if absent.
  const SafeTensorInfo& get(const std::string& name) const;

  // Copies the tensor's bytes into dst after checking that its dtype and shape are the expected
  // ones (Error naming file, tensor, expected and found otherwise), and its checksum where the
  // file has one (Error naming file and tensor: the file is damaged).
  void read(const std::string& name, void* dst, DType expected_dtype,
            const std::vector<int64_t>& expected_shape) const;
  // Copies elements [first, first + count) of the tensor (any dtype, no checks beyond range and
  // checksum): the building block for reading one shard of a tensor. A whole-tensor read verifies
  // the bytes it read; a partial one of a tensor with a checksum reads the whole to verify it.
  void read_elements(const SafeTensorInfo& info, int64_t first, int64_t count, void* dst) const;
  // The whole tensor widened to fp32 (from F32, F64, BF16 or F16; other dtypes are an Error).
  std::vector<float> read_f32(const std::string& name) const;

 private:
  SafeTensorsFile() = default;
  void read_bytes(int64_t file_offset, int64_t bytes, void* dst, const std::string& what) const;
  // Throws unless `data` (the tensor's bytes as read) matches the tensor's recorded checksum.
  void verify(const SafeTensorInfo& info, const void* data) const;

  std::string path_;
  int fd_ = -1;
  int64_t data_start_ = 0;  // 8 + header length
  std::vector<SafeTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace ledgerlm
