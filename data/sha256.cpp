// SHA-256 through OpenSSL's EVP digest interface (see sha256.h).
#include "data/sha256.h"

#include <openssl/evp.h>

#include "model/base/check.h"

namespace ledgerlm {

struct Sha256::Context {
  EVP_MD_CTX* md = nullptr;
  ~Context() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {
  ctx_->md = EVP_MD_CTX_new();
  LLM_ASSERT(ctx_->md != nullptr && EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1,
             "OpenSSL: cannot start a SHA-256 digest");
}

Sha256::~Sha256() = default;

void Sha256::update(std::string_view bytes) {
  LLM_ASSERT(!finished_, "Sha256::update after hex_digest");
  LLM_ASSERT(EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size()) == 1,
             "OpenSSL: SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  LLM_ASSERT(!finished_, "Sha256::hex_digest called twice");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  LLM_ASSERT(EVP_DigestFinal_ex(ctx_->md, digest, &len) == 1 && len == 32,
             "OpenSSL: SHA-256 final failed");
  finished_ = true;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex_digest();
}

}  // namespace ledgerlm
