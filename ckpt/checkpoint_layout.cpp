// Checkpoint data file layout and positioned writes (see checkpoint_layout.h).
#include "ckpt/checkpoint_layout.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "model/base/check.h"
#include "model/base/crc32c.h"

namespace ledgerlm {
namespace {

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void pwrite_all(int fd, const void* data, size_t bytes, int64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pwrite(fd, p, std::min<size_t>(bytes, 1u << 30), offset);
    if (n < 0 && errno == EINTR) continue;
    LLM_REQUIRE(n > 0, "cannot write checkpoint file '", path, "': ", errno_text());
    p += n;
    offset += n;
    bytes -= static_cast<size_t>(n);
  }
}

}  // namespace

const CkptTensorSlot* CkptFileLayout::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<CkptFileLayout> ckpt_layouts_build(const std::vector<CkptPiece>& pieces) {
  std::vector<CkptFileLayout> layouts;
  std::map<std::string, size_t> file_index;
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<int64_t, int64_t>>> ranges;
  for (const CkptPiece& p : pieces) {
    auto [it, added] = file_index.emplace(p.file, layouts.size());
    if (added) layouts.push_back(CkptFileLayout{p.file, {}, {}, 0, 0});
    CkptFileLayout& L = layouts[it->second];
    const CkptTensorSlot* slot = L.find(p.name);
    const int64_t numel = shape_numel(p.shape);
    if (slot == nullptr) {
      L.tensors.push_back(CkptTensorSlot{p.name, p.dtype, p.shape, numel, 0});
    } else {
      LLM_ASSERT(slot->dtype == p.dtype && slot->shape == p.shape, "checkpoint tensor ", p.name,
                 ": pieces disagree on dtype or shape");
    }
    LLM_ASSERT(p.begin >= 0 && p.count >= 0 && p.begin + p.count <= numel, "checkpoint tensor ",
               p.name, ": piece outside the tensor");
    ranges[{p.file, p.name}].push_back({p.begin, p.begin + p.count});
  }
  for (auto& [key, r] : ranges) {
    std::sort(r.begin(), r.end());
    for (size_t i = 1; i < r.size(); ++i)
      LLM_ASSERT(r[i - 1].second <= r[i].first, "checkpoint tensor ", key.second,
                 ": pieces overlap");
  }
  for (CkptFileLayout& L : layouts) {
    nlohmann::json header = nlohmann::json::object();
    int64_t off = 0;
    for (CkptTensorSlot& t : L.tensors) {
      t.offset = off;
      const int64_t bytes = t.numel * static_cast<int64_t>(dtype_size(t.dtype));
      header[t.name] = {{"dtype", dtype_safetensors_name(t.dtype)},
                        {"shape", t.shape},
                        {"data_offsets", {off, off + bytes}}};
      off += bytes;
    }
    header["__metadata__"] = {{"format", kCheckpointFormat},
                              {"format_version", std::to_string(kCheckpointFormatVersion)}};
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // data section 8-byte aligned
    const uint64_t n = text.size();
    std::string prefix(8, '\0');
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((n >> (8 * i)) & 0xffu);
    L.header = prefix + text;
    L.data_start = static_cast<int64_t>(L.header.size());
    L.total_bytes = L.data_start + off;
  }
  return layouts;
}

void ckpt_file_create(const std::string& path, const CkptFileLayout& layout) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LLM_REQUIRE(fd >= 0, "cannot create checkpoint file '", path, "': ", errno_text());
  try {
    pwrite_all(fd, layout.header.data(), layout.header.size(), 0, path);
    LLM_REQUIRE(::ftruncate(fd, layout.total_bytes) == 0, "cannot size checkpoint file '", path,
                "' to ", layout.total_bytes, " bytes: ", errno_text());
  } catch (...) {
    ::close(fd);
    throw;
  }
  LLM_REQUIRE(::close(fd) == 0, "cannot write checkpoint file '", path, "': ", errno_text());
}

uint32_t ckpt_file_write_piece(int fd, const std::string& path, const CkptFileLayout& layout,
                               const CkptPiece& piece, int64_t chunk_bytes) {
  const CkptTensorSlot* slot = layout.find(piece.name);
  LLM_ASSERT(slot != nullptr, "piece ", piece.name, " not in the layout of ", path);
  const int64_t es = static_cast<int64_t>(dtype_size(slot->dtype));
  const int64_t at = layout.data_start + slot->offset + piece.begin * es;
  if (piece.data != nullptr) {
    const size_t bytes = static_cast<size_t>(piece.count * es);
    pwrite_all(fd, piece.data, bytes, at, path);
    return crc32c(piece.data, bytes);
  }
  LLM_ASSERT(piece.read, "piece ", piece.name, " has neither data nor a reader");
  const int64_t chunk = std::max<int64_t>(1, chunk_bytes / es);
  std::vector<char> buffer(static_cast<size_t>(std::min(chunk, piece.count) * es));
  uint32_t crc = 0;
  for (int64_t done = 0; done < piece.count; done += chunk) {
    const int64_t n = std::min(chunk, piece.count - done);
    const size_t bytes = static_cast<size_t>(n * es);
    piece.read(done, n, buffer.data());
    pwrite_all(fd, buffer.data(), bytes, at + done * es, path);
    crc = crc32c(buffer.data(), bytes, crc);
  }
  return crc;
}

void ckpt_fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  LLM_REQUIRE(fd >= 0, "cannot open '", path, "' to fsync: ", errno_text());
  const int rc = ::fsync(fd);
  ::close(fd);
  LLM_REQUIRE(rc == 0, "cannot fsync '", path, "': ", errno_text());
}

}  // namespace ledgerlm
