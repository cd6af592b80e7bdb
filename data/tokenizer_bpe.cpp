// The BPE tokenizer on sentencepiece 0.1.97: loading a model and checking it is one ledgerlm
// can use (training: tokenizer_bpe_train.cpp).
//
// sentencepiece's decoder turns every U+2581 ("▁", its internal space marker) into a space, so a
// literal U+2581 in the text is encoded as its three byte-fallback tokens, which decode back
// verbatim.
// Encoding works line by line: no piece spans "\n" (a user-defined symbol is never merged), so
// this gives the same ids as encoding the whole text while keeping sentencepiece's inputs short.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <sentencepiece_processor.h>

#include "data/tokenizer.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(std::string model_proto, const std::string& origin)
      : proto_(std::move(model_proto)) {
    auto st = sp_.LoadFromSerializedProto(proto_);
    LLM_REQUIRE(st.ok(), origin, ": not a valid sentencepiece model (", st.ToString(), ")");
    vocab_ = sp_.GetPieceSize();
    eot_ = sp_.PieceToId(kEotText);
    newline_ = sp_.PieceToId("\n");
    LLM_REQUIRE(sp_.IsControl(eot_), origin, ": has no control symbol ", kEotText,
                " (not a model made by `ledgerlm prepare`)");
    LLM_REQUIRE(!sp_.IsUnknown(newline_), origin, ": has no \"\\n\" symbol");
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_ids_[b] = sp_.PieceToId(name);
      LLM_REQUIRE(sp_.IsByte(byte_ids_[b]), origin, ": has no byte-fallback piece ", name);
    }
    // A model trained with other normalization settings would silently break round trips.
    const std::string probe = "a  b\t\tc \n\n d\xC3\xAF";
    LLM_REQUIRE(decode(encode(probe)) == probe, origin,
                ": does not round-trip text exactly (trained with normalization?)");
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    size_t bad = 0;
    LLM_REQUIRE(utf8_is_valid(text, &bad), "bpe tokenizer: input is not valid UTF-8 (byte ", bad,
                ")");
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 1);
    std::vector<int> ids;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      size_t end = nl == std::string_view::npos ? text.size() : nl;
      encode_line(text.substr(pos, end - pos), &ids, &out);
      if (nl == std::string_view::npos) break;
      out.push_back(newline_);
      pos = nl + 1;
    }
    return out;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    std::vector<int> run;
    auto flush = [&] {
      if (run.empty()) return;
      std::string piece;
      auto st = sp_.Decode(run, &piece);
      LLM_ASSERT(st.ok(), st.ToString());
      out += piece;
      run.clear();
    };
    for (int32_t id : ids) {
      LLM_REQUIRE(id >= 0 && id < vocab_, "bpe tokenizer: token id ", id,
                  " is outside the vocab [0, ", vocab_, ")");
      if (id == eot_) {
        flush();
        out += kEotText;
      } else {
        run.push_back(id);
      }
    }
    flush();
    return out;
  }

  int64_t vocab_size() const override { return vocab_; }
  int32_t eot_id() const override { return eot_; }
  std::string name() const override { return "bpe"; }

  void save(const std::string& dir) const override {
    std::string path = (std::filesystem::path(dir) / "tokenizer.model").string();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    LLM_REQUIRE(f, "cannot write ", path);
    f.write(proto_.data(), static_cast<std::streamsize>(proto_.size()));
    f.close();
    LLM_REQUIRE(f, "error while writing ", path);
  }

 private:
  // Encodes one line (no "\n"), routing literal U+2581 through byte tokens.
  void encode_line(std::string_view line, std::vector<int>* ids, std::vector<int32_t>* out) const {
    while (!line.empty()) {
      size_t mark = line.find(kSpaceMarker);
      std::string_view part = line.substr(0, mark);
      if (!part.empty()) {
        auto st = sp_.Encode(part, ids);
        LLM_ASSERT(st.ok(), st.ToString());
        out->insert(out->end(), ids->begin(), ids->end());
      }
      if (mark == std::string_view::npos) break;
      for (char c : kSpaceMarker) out->push_back(byte_ids_[static_cast<unsigned char>(c)]);
      line.remove_prefix(mark + kSpaceMarker.size());
    }
  }

  std::string proto_;
  sentencepiece::SentencePieceProcessor sp_;
  int32_t vocab_ = 0;
  int32_t eot_ = -1;
  int32_t newline_ = -1;
  int32_t byte_ids_[256] = {};
};

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_bpe_from_proto(std::string model_proto,
                                                    const std::string& origin) {
  return std::make_unique<BpeTokenizer>(std::move(model_proto), origin);
}

std::unique_ptr<Tokenizer> tokenizer_load_bpe(const std::string& model_path) {
  std::ifstream f(model_path, std::ios::binary);
  LLM_REQUIRE(f, model_path, ": cannot open the tokenizer model");
  std::ostringstream buf;
  buf << f.rdbuf();
  LLM_REQUIRE(!f.bad(), model_path, ": cannot read the tokenizer model");
  return tokenizer_bpe_from_proto(buf.str(), model_path);
}

}  // namespace ledgerlm
