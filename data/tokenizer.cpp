// The byte tokenizer, the tokenizer factory (tokenizer_load) and UTF-8 validation.
#include "data/tokenizer.h"

#include <filesystem>

#include "data/meta.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

void bytes_encode(std::string_view text, std::vector<int32_t>* out) {
  const size_t at = out->size();
  out->resize(at + text.size());
  for (size_t i = 0; i < text.size(); ++i) (*out)[at + i] = static_cast<unsigned char>(text[i]);
}

class BytesEncoder final : public TokenEncoder {
 public:
  void encode(std::string_view text, std::vector<int32_t>* out) override {
    bytes_encode(text, out);
  }
};

// Byte b -> id b; id 256 is end-of-text. No training, nothing to save.
class BytesTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    bytes_encode(text, &ids);
    return ids;
  }
  std::unique_ptr<TokenEncoder> make_encoder() const override {
    return std::make_unique<BytesEncoder>();
  }
  bool safe_cut(std::string_view, size_t) const override { return true; }
  size_t cut_context() const override { return 0; }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    out.reserve(ids.size());
    for (int32_t id : ids) {
      LLM_REQUIRE(id >= 0 && id <= kEot, "bytes tokenizer: token id ", id,
                  " is outside the vocab [0, 257)");
      if (id == kEot) {
        out += kEotText;
      } else {
        out.push_back(static_cast<char>(id));
      }
    }
    return out;
  }
  int64_t vocab_size() const override { return 257; }
  int32_t eot_id() const override { return kEot; }
  std::string name() const override { return "bytes"; }
  void save(const std::string&) const override {}

 private:
  static constexpr int32_t kEot = 256;
};

}  // namespace

std::vector<int32_t> tokenizer_prompt_ids(const Tokenizer& tok, std::string_view prompt) {
  std::vector<int32_t> ids = tok.doc_prefix();
  const std::vector<int32_t> text = tok.encode(prompt);
  ids.insert(ids.end(), text.begin(), text.end());
  if (ids.empty()) ids.push_back(tok.eot_id());
  return ids;
}

std::unique_ptr<Tokenizer> tokenizer_make_bytes() {
  return std::make_unique<BytesTokenizer>();
}

std::unique_ptr<Tokenizer> tokenizer_load(const std::string& dir) {
  DataMeta meta = meta_read(dir);
  std::unique_ptr<Tokenizer> tok;
  if (meta.tokenizer == "bytes") {
    tok = tokenizer_make_bytes();
  } else if (meta.tokenizer == "hf-bpe") {
    tok = tokenizer_load_hf(dir);
  } else {
    tok = tokenizer_load_bpe((std::filesystem::path(dir) / "tokenizer.model").string());
  }
  LLM_REQUIRE(tok->vocab_size() == meta.vocab_size && tok->eot_id() == meta.eot_id, dir,
              "/meta.json: vocab_size ", meta.vocab_size, " / eot_id ", meta.eot_id,
              " do not match the tokenizer (", tok->vocab_size(), " / ", tok->eot_id(), ")");
  return tok;
}

bool utf8_is_valid(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      break;
    }
    if (i + len > n) break;
    bool ok = true;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF.
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (!ok || cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) break;
    i += len;
  }
  if (i < n && bad_offset) *bad_offset = i;
  return i >= n;
}

}  // namespace ledgerlm
