// Safetensors reader and writer (see safetensors.h for the format).
#include "ckpt/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/base/check.h"
#include "model/base/crc32c.h"
#include "model/base/input_file.h"

namespace ledgerlm {

// The format is little-endian; we copy bytes straight into memory.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

using nlohmann::json;

// Refuse absurd header lengths before allocating: real headers are kilobytes to a few MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr const char* kMetadataKey = "__metadata__";

// Writes all `bytes` or throws; retries short writes and EINTR.
void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, std::min<size_t>(bytes, 1u << 30));
    if (n < 0 && errno == EINTR) continue;
    LLM_REQUIRE(n > 0, "cannot write '", path, "': ", errno_text());
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

// Shape entries must be non-negative and their product must not overflow.
bool checked_numel(const std::vector<int64_t>& shape, int64_t* numel) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return false;
    n *= d;
  }
  *numel = n;
  return true;
}

// Parses one tensor entry of the header; throws naming the file and tensor on any problem.
SafeTensorInfo parse_entry(const std::string& path, const std::string& name, const json& entry,
                           int64_t data_bytes) {
  const std::string where = "safetensors file '" + path + "': tensor '" + name + "'";
  LLM_REQUIRE(entry.is_object(), where, ": header entry must be an object");
  SafeTensorInfo info;
  info.name = name;

  auto dt = entry.find("dtype");
  LLM_REQUIRE(dt != entry.end() && dt->is_string(), where, ": missing string field 'dtype'");
  LLM_REQUIRE(dtype_parse_safetensors(dt->get<std::string>(), &info.dtype), where,
              ": unsupported dtype '", dt->get<std::string>(),
              "' (expected F32, F64, BF16, F16, U8, I32 or U16)");

  auto sh = entry.find("shape");
  LLM_REQUIRE(sh != entry.end() && sh->is_array(), where, ": missing array field 'shape'");
  for (const auto& d : *sh) {
    LLM_REQUIRE(d.is_number_integer() && d.get<int64_t>() >= 0, where,
                ": shape entries must be non-negative integers (got ", sh->dump(), ")");
    info.shape.push_back(d.get<int64_t>());
  }
  int64_t numel = 0;
  LLM_REQUIRE(checked_numel(info.shape, &numel) &&
                  numel <= std::numeric_limits<int64_t>::max() /
                               static_cast<int64_t>(dtype_size(info.dtype)),
              where, ": shape ", sh->dump(), " is too large");

  auto off = entry.find("data_offsets");
  LLM_REQUIRE(off != entry.end() && off->is_array() && off->size() == 2 &&
                  (*off)[0].is_number_integer() && (*off)[1].is_number_integer(),
              where, ": 'data_offsets' must be [begin, end]");
  const int64_t begin = (*off)[0].get<int64_t>(), end = (*off)[1].get<int64_t>();
  LLM_REQUIRE(begin >= 0 && begin <= end, where, ": data_offsets [", begin, ", ", end,
              "] are not an increasing non-negative range");
  LLM_REQUIRE(end <= data_bytes, where, ": data_offsets [", begin, ", ", end,
              "] run past the data section (", data_bytes, " bytes): file truncated or corrupt");
  const int64_t expected = numel * static_cast<int64_t>(dtype_size(info.dtype));
  LLM_REQUIRE(end - begin == expected, where, ": data_offsets [", begin, ", ", end, "] hold ",
              end - begin, " bytes but dtype ", dt->get<std::string>(), " x shape ",
              safetensors_shape_string(info.shape), " needs ", expected);
  info.offset = begin;
  info.bytes = expected;
  return info;
}

}  // namespace

int64_t SafeTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string safetensors_shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- writer ------------------------------------------------------------------------------------

void SafeTensorsWriter::add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                            const void* data) {
  LLM_REQUIRE(!name.empty() && name != kMetadataKey, "safetensors: invalid tensor name '", name,
              "'");
  for (const auto& e : entries_)
    LLM_REQUIRE(e.info.name != name, "safetensors: tensor '", name, "' added twice");
  int64_t numel = 0;
  LLM_REQUIRE(checked_numel(shape, &numel), "safetensors: tensor '", name, "' has invalid shape ",
              safetensors_shape_string(shape));
  Entry e;
  e.info.name = name;
  e.info.dtype = dtype;
  e.info.shape = shape;
  e.info.offset = data_bytes_;
  e.info.bytes = numel * static_cast<int64_t>(dtype_size(dtype));
  LLM_REQUIRE(data != nullptr || e.info.bytes == 0, "safetensors: tensor '", name, "' has no data");
  e.data = data;
  data_bytes_ += e.info.bytes;
  entries_.push_back(std::move(e));
}

void SafeTensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  LLM_REQUIRE(key.rfind(kSafetensorsChecksumPrefix, 0) != 0, "safetensors: metadata key '", key,
              "' is reserved for the writer's checksums");
  metadata_[key] = value;
}

std::string SafeTensorsWriter::header_json() const {
  json header = json::object();
  json metadata = metadata_;
  for (const auto& e : entries_) {
    header[e.info.name] = {{"dtype", dtype_safetensors_name(e.info.dtype)},
                           {"shape", e.info.shape},
                           {"data_offsets", {e.info.offset, e.info.offset + e.info.bytes}}};
    metadata[kSafetensorsChecksumPrefix + e.info.name] =
        crc32c_text(crc32c(e.data, static_cast<size_t>(e.info.bytes)));
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  return header.dump();
}

void SafeTensorsWriter::write_atomic(const std::string& path) const {
  std::string header = header_json();
  // Pad with spaces (valid JSON whitespace) so the data section starts 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t header_len = header.size();

  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LLM_REQUIRE(fd >= 0, "cannot create '", tmp, "': ", errno_text());
  try {
    write_all(fd, &header_len, 8, tmp);
    write_all(fd, header.data(), header.size(), tmp);
    for (const auto& e : entries_) write_all(fd, e.data, static_cast<size_t>(e.info.bytes), tmp);
    LLM_REQUIRE(::fsync(fd) == 0, "cannot fsync '", tmp, "': ", errno_text());
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    fail(error_message("cannot close '", tmp, "': ", why));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    fail(error_message("cannot rename '", tmp, "' to '", path, "': ", why));
  }
  // Make the rename itself durable.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// ---- reader ------------------------------------------------------------------------------------

SafeTensorsFile SafeTensorsFile::open(const std::string& path) {
  SafeTensorsFile f;
  f.path_ = path;
  f.fd_ = input_file_open(path, "safetensors file");
  LLM_REQUIRE(f.fd_ >= 0, "cannot open safetensors file '", path, "': ", errno_text());
  struct stat st;
  LLM_REQUIRE(::fstat(f.fd_, &st) == 0, "cannot stat '", path, "': ", errno_text());
  const int64_t file_size = st.st_size;
  const std::string where = "safetensors file '" + path + "'";

  LLM_REQUIRE(file_size >= 8, where, ": only ", file_size,
              " bytes, too short for the 8-byte header length");
  uint64_t header_len = 0;
  f.read_bytes(0, 8, &header_len, "header length");
  LLM_REQUIRE(header_len >= 2 && header_len <= kMaxHeaderBytes, where, ": header length ",
              header_len, " is not plausible (file of ", file_size,
              " bytes): not a safetensors file?");
  LLM_REQUIRE(static_cast<int64_t>(header_len) <= file_size - 8, where, ": header length ",
              header_len, " exceeds the file size ", file_size, ": file truncated or corrupt");
  std::string text(header_len, '\0');
  f.read_bytes(8, static_cast<int64_t>(header_len), text.data(), "header");
  f.data_start_ = 8 + static_cast<int64_t>(header_len);
  const int64_t data_bytes = file_size - f.data_start_;

  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    fail(error_message(where, ": header is not valid JSON (", e.what(), ")"));
  }
  LLM_REQUIRE(header.is_object(), where, ": header must be a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      LLM_REQUIRE(it->is_object(), where, ": __metadata__ must be an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        LLM_REQUIRE(m->is_string(), where, ": __metadata__ value of '", m.key(),
                    "' must be a string");
        f.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    f.tensors_.push_back(parse_entry(path, it.key(), *it, data_bytes));
  }

  // Tensors must tile the data section exactly: no overlap (two names aliasing bytes), no hole,
  // and no trailing bytes (a sign of a mangled or concatenated file).
  std::sort(f.tensors_.begin(), f.tensors_.end(),
            [](const SafeTensorInfo& a, const SafeTensorInfo& b) {
              return a.offset != b.offset ? a.offset < b.offset : a.bytes < b.bytes;
            });
  int64_t cursor = 0;
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    const SafeTensorInfo& t = f.tensors_[i];
    LLM_REQUIRE(t.offset >= cursor, where, ": tensor '", t.name, "' (bytes ", t.offset, "..",
                t.offset + t.bytes, ") overlaps tensor '", f.tensors_[i - 1].name, "'");
    LLM_REQUIRE(t.offset == cursor, where, ": hole of ", t.offset - cursor,
                " bytes before tensor '", t.name, "'");
    cursor = t.offset + t.bytes;
    f.index_[t.name] = i;
  }
  LLM_REQUIRE(cursor == data_bytes, where, ": data section has ", data_bytes,
              " bytes but the tensors cover ", cursor,
              (cursor < data_bytes ? " (trailing bytes)" : " (file truncated)"));

  // Checksums: none, or one for every tensor (a partial set is a damaged header, not a choice).
  const std::string prefix = kSafetensorsChecksumPrefix;
  size_t checksums = 0;
  for (const auto& [key, value] : f.metadata_) {
    if (key.rfind(prefix, 0) != 0) continue;
    const std::string name = key.substr(prefix.size());
    auto it = f.index_.find(name);
    LLM_REQUIRE(it != f.index_.end(), where, ": __metadata__ has a checksum for tensor '", name,
                "', which the file does not hold: the file is damaged");
    SafeTensorInfo& t = f.tensors_[it->second];
    LLM_REQUIRE(crc32c_parse(value, &t.crc32c), where, ": tensor '", name, "': checksum '", value,
                "' is not 'crc32c:' and 8 hex digits: the file is damaged");
    t.has_checksum = true;
    ++checksums;
  }
  if (checksums > 0)
    for (const SafeTensorInfo& t : f.tensors_)
      LLM_REQUIRE(t.has_checksum, where, ": tensor '", t.name,
                  "' has no checksum in __metadata__ but the other tensors have: the file is "
                  "damaged");
  return f;
}

SafeTensorsFile::SafeTensorsFile(SafeTensorsFile&& other) noexcept {
  *this = std::move(other);
}

SafeTensorsFile& SafeTensorsFile::operator=(SafeTensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_start_ = other.data_start_;
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafeTensorsFile::~SafeTensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const SafeTensorInfo* SafeTensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafeTensorInfo& SafeTensorsFile::get(const std::string& name) const {
  const SafeTensorInfo* info = find(name);
  LLM_REQUIRE(info != nullptr, "safetensors file '", path_, "': no tensor named '", name, "'");
  return *info;
}

void SafeTensorsFile::read_bytes(int64_t file_offset, int64_t bytes, void* dst,
                                 const std::string& what) const {
  char* p = static_cast<char*>(dst);
  while (bytes > 0) {
    ssize_t n = ::pread(fd_, p, static_cast<size_t>(std::min<int64_t>(bytes, 1 << 30)),
                        static_cast<off_t>(file_offset));
    if (n < 0 && errno == EINTR) continue;
    LLM_REQUIRE(n >= 0, "safetensors file '", path_, "': cannot read ", what, ": ", errno_text());
    LLM_REQUIRE(n > 0, "safetensors file '", path_, "': unexpected end of file reading ", what);
    p += n;
    bytes -= n;
    file_offset += n;
  }
}

void SafeTensorsFile::verify(const SafeTensorInfo& info, const void* data) const {
  if (!info.has_checksum) return;
  const uint32_t crc = crc32c(data, static_cast<size_t>(info.bytes));
  LLM_REQUIRE(crc == info.crc32c, "safetensors file '", path_, "': tensor '", info.name,
              "' fails its checksum (", crc32c_text(crc), ", the header records ",
              crc32c_text(info.crc32c),
              "): the file is damaged (or was edited by a tool that kept ledgerlm's checksum.* "
              "metadata)");
}

void SafeTensorsFile::read(const std::string& name, void* dst, DType expected_dtype,
                           const std::vector<int64_t>& expected_shape) const {
  const SafeTensorInfo& info = get(name);
  LLM_REQUIRE(info.dtype == expected_dtype, "safetensors file '", path_, "': tensor '", name,
              "' has dtype ", dtype_safetensors_name(info.dtype), ", expected ",
              dtype_safetensors_name(expected_dtype));
  LLM_REQUIRE(info.shape == expected_shape, "safetensors file '", path_, "': tensor '", name,
              "' has shape ", safetensors_shape_string(info.shape), ", expected ",
              safetensors_shape_string(expected_shape));
  read_bytes(data_start_ + info.offset, info.bytes, dst, "tensor '" + name + "'");
  verify(info, dst);
}

void SafeTensorsFile::read_elements(const SafeTensorInfo& info, int64_t first, int64_t count,
                                    void* dst) const {
  const int64_t n = info.numel();
  LLM_REQUIRE(first >= 0 && count >= 0 && first + count <= n, "safetensors file '", path_,
              "': tensor '", info.name, "' has ", n, " elements, cannot read [", first, ", ",
              first + count, ")");
  const int64_t es = static_cast<int64_t>(dtype_size(info.dtype));
  const std::string what = "tensor '" + info.name + "'";
  if (!info.has_checksum || count == n) {
    read_bytes(data_start_ + info.offset + first * es, count * es, dst, what);
    if (count == n) verify(info, dst);
    return;
  }
  // Part of a tensor with a checksum: the checksum covers the whole, so read it all.
  std::vector<char> whole(static_cast<size_t>(info.bytes));
  read_bytes(data_start_ + info.offset, info.bytes, whole.data(), what);
  verify(info, whole.data());
  std::memcpy(dst, whole.data() + first * es, static_cast<size_t>(count * es));
}

std::vector<float> SafeTensorsFile::read_f32(const std::string& name) const {
  const SafeTensorInfo& info = get(name);
  const int64_t n = info.numel();
  std::vector<float> out(static_cast<size_t>(n));
  switch (info.dtype) {
    case DType::kF32:
      read_elements(info, 0, n, out.data());
      break;
    case DType::kF64: {
      std::vector<double> tmp(out.size());
      read_elements(info, 0, n, tmp.data());
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(tmp[i]);
      break;
    }
    case DType::kBF16:
    case DType::kF16: {
      std::vector<uint16_t> tmp(out.size());
      read_elements(info, 0, n, tmp.data());
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = info.dtype == DType::kBF16 ? bf16_to_f32(tmp[i]) : f16_to_f32(tmp[i]);
      break;
    }
    default:
      fail(error_message("safetensors file '", path_, "': tensor '", name, "' has dtype ",
                         dtype_safetensors_name(info.dtype), ", expected a float dtype"));
  }
  return out;
}

}  // namespace ledgerlm
