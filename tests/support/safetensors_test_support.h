// Byte-level edits of safetensors files, for the tests of their checksums and of non-finite
// weights: the header as JSON and the data section as bytes, a tensor's place in the file, one
// flipped byte, one fp32 value written in place (its checksum recomputed or left stale), the
// checksum records removed (a file as written before them, or by another tool). Independent of
// SafeTensorsFile: a test must be able to make what that reader refuses.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "model/base/crc32c.h"
#include "tests/support/test_util.h"

namespace ledgerlm::testing {

struct RawSafetensors {
  nlohmann::json header;  // tensor entries and "__metadata__"
  std::string data;       // the data section
};

inline RawSafetensors raw_safetensors_read(const std::string& path) {
  const std::string blob = read_file(path);
  RawSafetensors raw;
  uint64_t n = 0;
  EXPECT_GE(blob.size(), 8u) << path;
  if (blob.size() < 8) return raw;
  std::memcpy(&n, blob.data(), 8);
  raw.header = nlohmann::json::parse(blob.substr(8, n));
  raw.data = blob.substr(8 + n);
  return raw;
}

inline void raw_safetensors_write(const std::string& path, const RawSafetensors& raw) {
  std::string text = raw.header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  ASSERT_TRUE(write_file(path, std::string(reinterpret_cast<const char*>(&n), 8) + text + raw.data))
      << path;
}

// The offset in the file of byte `byte` of tensor `name`'s data.
inline int64_t raw_tensor_file_offset(const std::string& path, const std::string& name,
                                      int64_t byte = 0) {
  const std::string blob = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, blob.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(blob.substr(8, n));
  return 8 + static_cast<int64_t>(n) + header.at(name).at("data_offsets")[0].get<int64_t>() + byte;
}

// XORs one byte of the file with `mask` (one bit by default).
inline void flip_file_byte(const std::string& path, int64_t offset, uint8_t mask = 0x10) {
  std::string blob = read_file(path);
  ASSERT_LT(static_cast<size_t>(offset), blob.size()) << path;
  blob[static_cast<size_t>(offset)] = static_cast<char>(blob[static_cast<size_t>(offset)] ^ mask);
  ASSERT_TRUE(write_file(path, blob)) << path;
}

// Removes every "checksum.*" record: the file as ledgerlm wrote it before checksums.
inline void strip_checksums(const std::string& path) {
  RawSafetensors raw = raw_safetensors_read(path);
  if (raw.header.contains("__metadata__")) {
    nlohmann::json& md = raw.header["__metadata__"];
    for (auto it = md.begin(); it != md.end();)
      it = it.key().rfind("checksum.", 0) == 0 ? md.erase(it) : std::next(it);
  }
  raw_safetensors_write(path, raw);
}

// Writes `value` as element `element` of the F32 tensor `name`. With `fix_checksum` the tensor's
// checksum record (if the file has one) is recomputed: a file that is intact but holds the value.
inline void set_f32_element(const std::string& path, const std::string& name, int64_t element,
                            float value, bool fix_checksum) {
  RawSafetensors raw = raw_safetensors_read(path);
  const nlohmann::json& entry = raw.header.at(name);
  ASSERT_EQ(entry.at("dtype"), "F32") << name;
  const int64_t begin = entry.at("data_offsets")[0].get<int64_t>();
  const int64_t end = entry.at("data_offsets")[1].get<int64_t>();
  ASSERT_LE(begin + 4 * (element + 1), end) << name;
  std::memcpy(raw.data.data() + begin + 4 * element, &value, 4);
  const std::string key = "checksum." + name;
  if (fix_checksum && raw.header.contains("__metadata__") &&
      raw.header["__metadata__"].contains(key))
    raw.header["__metadata__"][key] =
        crc32c_text(crc32c(raw.data.data() + begin, static_cast<size_t>(end - begin)));
  raw_safetensors_write(path, raw);
}

}  // namespace ledgerlm::testing
