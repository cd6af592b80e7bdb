// The BPE tokenizer on sentencepiece 0.1.97: loading a model and checking it is one ledgerlm
// can use (training: tokenizer_bpe_train.cpp).
//
// sentencepiece's decoder turns every U+2581 ("▁", its internal space marker) into a space, so a
// literal U+2581 in the text is encoded as its three byte-fallback tokens, which decode back
// verbatim.
// Encoding works line by line: no piece spans "\n" (a user-defined symbol is never merged), so
// this gives the same ids as encoding the whole text while keeping sentencepiece's inputs short.
// A line longer than kMaxEncodeRun bytes is cut further before a space that follows a non-space:
// sentencepiece's trainer learns pieces inside words only, a word being a run of spaces (U+2581
// after normalization) and the non-spaces after it (allow_whitespace_only_pieces), so no piece
// spans such a cut and its merges on either side are the same (its BPE merges the best-scoring
// adjacent pair anywhere, and pairs across the cut never form a piece). The same rule is this
// tokenizer's safe_cut. Sentencepiece's encoder slows down on long inputs (0.6 MB/s on one
// 12 MB line against 3.8 MB/s line by line on the same text), hence the cut.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <sentencepiece_processor.h>

#include "data/tokenizer.h"
#include "model/base/check.h"
#include "model/base/input_file.h"

namespace ledgerlm {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581
// Longer runs of a line are cut (see above); short enough for sentencepiece's working set to stay
// in cache, long enough that nearly every line goes through it whole.
constexpr size_t kMaxEncodeRun = 8192;

// The bpe tokenizer's safe cuts (Tokenizer::safe_cut): around "\n", and before a space after a
// non-space.
bool bpe_safe_cut(std::string_view text, size_t p) {
  if (p == 0 || p >= text.size()) return true;
  return text[p - 1] == '\n' || text[p] == '\n' || (text[p] == ' ' && text[p - 1] != ' ');
}

// Where to cut a run longer than kMaxEncodeRun: the last safe cut at or before the limit, else the
// first after it, else nowhere (npos).
size_t run_cut(std::string_view run) {
  for (size_t p = kMaxEncodeRun; p > 0; --p)
    if (bpe_safe_cut(run, p)) return p;
  for (size_t p = kMaxEncodeRun + 1; p < run.size(); ++p)
    if (bpe_safe_cut(run, p)) return p;
  return std::string_view::npos;
}

class BpeTokenizer;

class BpeEncoder final : public TokenEncoder {
 public:
  explicit BpeEncoder(const BpeTokenizer& tok) : tok_(tok) {}
  void encode(std::string_view text, std::vector<int32_t>* out) override;

 private:
  const BpeTokenizer& tok_;
  std::vector<int> ids_;
};

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
    encode_valid(text, &ids, &out);
    return out;
  }

  std::unique_ptr<TokenEncoder> make_encoder() const override {
    return std::make_unique<BpeEncoder>(*this);
  }
  bool safe_cut(std::string_view text, size_t p) const override { return bpe_safe_cut(text, p); }
  size_t cut_context() const override { return 1; }

  // encode() of valid UTF-8, appending to *out; `ids` is scratch.
  void encode_valid(std::string_view text, std::vector<int>* ids, std::vector<int32_t>* out) const {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      size_t end = nl == std::string_view::npos ? text.size() : nl;
      encode_line(text.substr(pos, end - pos), ids, out);
      if (nl == std::string_view::npos) break;
      out->push_back(newline_);
      pos = nl + 1;
    }
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
      while (!part.empty()) {
        const size_t cut = part.size() > kMaxEncodeRun ? run_cut(part) : std::string_view::npos;
        auto st = sp_.Encode(part.substr(0, cut), ids);
        LLM_ASSERT(st.ok(), st.ToString());
        out->insert(out->end(), ids->begin(), ids->end());
        part.remove_prefix(cut == std::string_view::npos ? part.size() : cut);
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

void BpeEncoder::encode(std::string_view text, std::vector<int32_t>* out) {
  tok_.encode_valid(text, &ids_, out);
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_bpe_from_proto(std::string model_proto,
                                                    const std::string& origin) {
  return std::make_unique<BpeTokenizer>(std::move(model_proto), origin);
}

std::unique_ptr<Tokenizer> tokenizer_load_bpe(const std::string& model_path) {
  const int fd = input_file_open(model_path, "tokenizer model");
  LLM_REQUIRE(fd >= 0, model_path, ": cannot open the tokenizer model (", errno_text(), ")");
  return tokenizer_bpe_from_proto(input_file_read_fd(fd, model_path, "tokenizer model"),
                                  model_path);
}

}  // namespace ledgerlm
