// SHA-256 (FIPS 180-4), used to fingerprint the source files of a prepared corpus in meta.json
// so that a data directory can be traced back to the exact text it was built from.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ledgerlm {

// Incremental hasher: update() any number of times, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  std::string hex_digest();  // 64 lowercase hex characters; finalizes the hasher

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> block_{};
  size_t block_len_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

// One-shot convenience: sha256_hex("abc") == "ba7816bf...".
std::string sha256_hex(std::string_view bytes);

}  // namespace ledgerlm
