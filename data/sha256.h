// SHA-256 (FIPS 180-4), used to fingerprint the source files of a prepared corpus
// (sources.jsonl) so that a data directory can be traced back to the exact text it was built
// from, and tokenizer files (data.tokenizer_id). Computed by OpenSSL's libcrypto, which uses the
// CPU's SHA instructions where there are some (about 1.7 GB/s against 0.4 GB/s for a plain C
// implementation on the 2-core Xeon of the benchmarks): `prepare` hashes every input byte on the
// thread that reads them.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace ledgerlm {

// Incremental hasher: update() any number of times, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view bytes);
  std::string hex_digest();  // 64 lowercase hex characters; finalizes the hasher

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
  bool finished_ = false;
};

// One-shot convenience: sha256_hex("abc") == "ba7816bf...".
std::string sha256_hex(std::string_view bytes);

}  // namespace ledgerlm
