// The Hugging Face byte-level BPE tokenizer ("hf-bpe"): encodes text to the same ids as the
// tokenizers library does with the same tokenizer.json (or vocab.json + merges.txt).
//
// Encoding, in the library's order:
//   1. added tokens whose `normalized` is false (special tokens: <|endoftext|>, <|im_start|>,
//      ...) are found in the raw text first, leftmost and longest match first, and become their
//      ids — so a literal "<|endoftext|>" inside a document is the end-of-text token, as with the
//      library's defaults;
//   2. the text between them is normalized (NFC where the tokenizer says so), and the other
//      added tokens are found in it the same way;
//   3. the text between those is split into pieces by the pre-tokenizer (GPT-2's pattern,
//      pretokenize_gpt2.h, or the steps of hf_pretokenize.h);
//   4. each piece is a run of bytes; starting from one token per byte, the adjacent pair with the
//      lowest merge rank is merged (leftmost first among equal ranks) until no pair merges.
// Step 4 is the slow one and text repeats its words, so the ids of each piece up to 256 bytes are
// kept in a cache: the tokenizer's own for encode(), one per encoder (make_encoder) for the
// threads of `prepare`.
//
// Safe cuts (Tokenizer::safe_cut), for GPT-2's pre-tokenizer (others: hf_pretokenize.h): every
// piece of step 3 is a run of one class (letters, numbers,
// other symbols) with at most one space in front, a contraction, or white space; so a piece always
// ends where white space follows a non-white-space character, and the splitter, which keeps no
// state but its position, finds the same pieces on either side when the text is cut there. An
// added token matched across the cut would be split by it, so a cut that any added token's text
// spans is not safe.
// Decoding concatenates the bytes each id stands for (added tokens: their text), so
// decode(encode(t)) == t for any valid UTF-8 t.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include "data/hf_bpe_files.h"
#include "data/hf_pretokenize.h"
#include "data/pretokenize_gpt2.h"
#include "data/tokenizer.h"
#include "data/unicode_classes.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

// Pieces longer than this are encoded every time: they rarely repeat, and caching them would let
// one long line of CJK (a single piece) or digits fill memory.
constexpr size_t kMaxCachedPiece = 256;
// The tokenizer's own cache is emptied when it holds this many ids (about 64 MiB of ids plus the
// keys); an encoder's when it holds this many pieces (about 24 MiB with their keys and ids,
// measured), so that `prepare` stays in bounded memory on every core.
constexpr size_t kMaxCachedIds = size_t{1} << 24;
constexpr size_t kMaxEncoderPieces = size_t{1} << 18;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Piece bytes -> its ids, stored as a span of one shared id array.
struct WordCache {
  struct Span {
    uint32_t offset, count;
  };
  std::unordered_map<std::string, Span, StringHash, std::equal_to<>> spans;
  std::vector<int32_t> ids;
  size_t max_pieces = SIZE_MAX;
};

// The working memory of one BPE merge loop, reused across pieces of one encode() call.
struct MergeScratch {
  struct Symbol {
    int32_t id;  // -1 once merged into its left neighbour
    int32_t prev, next;
  };
  struct Candidate {
    int32_t rank, pos, left, right, result;
    // std::push_heap keeps the largest on top: "larger" is a later rank, then a later position.
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::vector<std::string_view> pieces, split_scratch;  // pre-tokenizer output
};

class HfBpeTokenizer;

class HfBpeEncoder final : public TokenEncoder {
 public:
  explicit HfBpeEncoder(const HfBpeTokenizer& tok) : tok_(tok) {
    cache_.max_pieces = kMaxEncoderPieces;
  }
  void encode(std::string_view text, std::vector<int32_t>* out) override;

 private:
  const HfBpeTokenizer& tok_;
  WordCache cache_;
  MergeScratch scratch_;
};

// GPT-2's white space (the splitter's \s) at the code point that ends just before p, read
// backwards from p over at most 4 bytes of valid UTF-8.
bool white_space_before(std::string_view text, size_t p) {
  size_t start = p - 1;
  while (start > 0 && p - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
    --start;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + start;
  const size_t len = p - start;
  uint32_t cp = s[0];
  if (len == 2) cp = ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
  if (len == 3) cp = ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
  if (len == 4)
    cp = ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
  return unicode_class(cp) == UnicodeClass::kSpace;
}

bool ascii_white_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// A set of added tokens, found in a text leftmost first and longest first at one place, as the
// library's matcher does.
class AddedSet {
 public:
  void add(std::string content, int32_t id) { tokens_.push_back({std::move(content), id}); }
  void sort() {
    std::stable_sort(tokens_.begin(), tokens_.end(), [](const Token& a, const Token& b) {
      return a.content.size() > b.content.size();  // the longest match is tried first
    });
    for (const auto& t : tokens_) first_[static_cast<unsigned char>(t.content[0])] = true;
  }
  // Calls between(text) for each text between matches (empty ones too) and appends each match's
  // id to *out, in order.
  template <typename F>
  void split(std::string_view text, std::vector<int32_t>* out, F&& between) const {
    size_t segment = 0;
    for (size_t i = 0; i < text.size();) {
      const Token* hit = first_[static_cast<unsigned char>(text[i])] ? at(text, i) : nullptr;
      if (!hit) {
        ++i;
        continue;
      }
      between(text.substr(segment, i - segment));
      out->push_back(hit->id);
      i += hit->content.size();
      segment = i;
    }
    between(text.substr(segment));
  }

 private:
  struct Token {
    std::string content;
    int32_t id;
  };
  const Token* at(std::string_view text, size_t i) const {
    for (const auto& t : tokens_)
      if (text.compare(i, t.content.size(), t.content) == 0) return &t;
    return nullptr;
  }
  std::vector<Token> tokens_;
  bool first_[256] = {};  // bytes a token can start with
};

class HfBpeTokenizer final : public Tokenizer {
 public:
  explicit HfBpeTokenizer(HfBpeSpec spec) : spec_(std::move(spec)) {
    // A later duplicate of a pair replaces the earlier one, as the library's merge map does.
    for (size_t r = 0; r < spec_.merges.size(); ++r) {
      const auto& m = spec_.merges[r];
      merges_[pair_key(m.left, m.right)] = {static_cast<int32_t>(r), m.result};
    }
    std::vector<char> is_added(spec_.token_bytes.size(), 0);
    for (const auto& a : spec_.added) is_added[a.id] = 1;
    if (spec_.ignore_merges) {
      for (size_t id = 0; id < spec_.token_bytes.size(); ++id) {
        if (!is_added[id]) whole_.emplace(spec_.token_bytes[id], static_cast<int32_t>(id));
      }
    }
    for (const auto& a : spec_.added) {
      max_added_ = std::max(max_added_, a.content.size());
      all_added_.push_back(a.content);
      if (!a.normalized) {
        raw_added_.add(a.content, a.id);
      } else {
        // Matched in the normalized text, as the library normalizes their content too.
        norm_added_.add(spec_.pipeline.nfc ? hf_nfc(a.content) : a.content, a.id);
      }
    }
    raw_added_.sort();
    norm_added_.sort();
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    size_t bad = 0;
    LLM_REQUIRE(utf8_is_valid(text, &bad), "hf-bpe tokenizer: input is not valid UTF-8 (byte ", bad,
                ")");
    std::vector<int32_t> out;
    out.reserve(text.size() / 4 + 1);
    // One encode() at a time uses the tokenizer's cache; a concurrent one gets its own rather
    // than wait.
    std::unique_lock<std::mutex> lock(cache_mu_, std::try_to_lock);
    WordCache local;
    WordCache& cache = lock.owns_lock() ? cache_ : local;
    MergeScratch scratch;
    encode_valid(text, cache, scratch, &out);
    return out;
  }

  std::unique_ptr<TokenEncoder> make_encoder() const override {
    return std::make_unique<HfBpeEncoder>(*this);
  }

  bool safe_cut(std::string_view text, size_t p) const override {
    if (p == 0 || p >= text.size()) return true;
    if (spec_.pipeline.is_gpt2()) {
      if (!ascii_white_space(text[p]) || white_space_before(text, p)) return false;
    } else if (!hf_safe_cut(spec_.pipeline, text, p)) {
      return false;
    }
    for (const std::string& a : all_added_) {
      const size_t n = a.size();
      for (size_t s = p >= n - 1 ? p - (n - 1) : 0; s < p; ++s)
        if (text.compare(s, n, a) == 0) return false;
    }
    return true;
  }
  // The code points before and at p (4 bytes each) and any added token's text around p.
  size_t cut_context() const override { return std::max<size_t>(4, max_added_); }

  // encode() of valid UTF-8 with the given cache and scratch, appending to *out: the raw text's
  // added tokens, then each text between them normalized and the normalized added tokens found
  // in it (steps 1 and 2 above).
  void encode_valid(std::string_view text, WordCache& cache, MergeScratch& scratch,
                    std::vector<int32_t>* out) const {
    raw_added_.split(text, out, [&](std::string_view between) {
      if (!spec_.pipeline.nfc) {
        norm_added_.split(between, out,
                          [&](std::string_view t) { encode_segment(t, cache, scratch, out); });
        return;
      }
      const std::string normalized = hf_nfc(between);
      norm_added_.split(normalized, out,
                        [&](std::string_view t) { encode_segment(t, cache, scratch, out); });
    });
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (int32_t id : ids) {
      LLM_REQUIRE(id >= 0 && id < vocab_size(), "hf-bpe tokenizer: token id ", id,
                  " is outside the vocab [0, ", vocab_size(), ")");
      out += spec_.token_bytes[id];
    }
    return out;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(spec_.token_bytes.size()); }
  int32_t eot_id() const override { return spec_.eot_id; }
  std::vector<int32_t> doc_prefix() const override { return spec_.prefix; }
  std::vector<int32_t> doc_suffix() const override { return spec_.suffix; }
  std::string name() const override { return "hf-bpe"; }

  // The files it was read from, byte for byte: the data directory then holds the same tokenizer
  // the tokenizers library reads, and its identity (hf_bpe_id) stays that of the source.
  void save(const std::string& dir) const override {
    for (const auto& f : spec_.files) {
      const std::string path = (std::filesystem::path(dir) / f.name).string();
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      LLM_REQUIRE(out, "cannot write ", path);
      out.write(f.bytes.data(), static_cast<std::streamsize>(f.bytes.size()));
      out.close();
      LLM_REQUIRE(out, "error while writing ", path);
    }
  }

 private:
  struct MergeInfo {
    int32_t rank, result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void encode_segment(std::string_view segment, WordCache& cache, MergeScratch& scratch,
                      std::vector<int32_t>* out) const {
    if (spec_.pipeline.is_gpt2()) {
      Gpt2Splitter split(segment);
      std::string_view piece;
      while (split.next(&piece)) encode_piece(piece, cache, scratch, out);
      return;
    }
    scratch.pieces.clear();
    hf_pretokenize(spec_.pipeline, segment, &scratch.pieces, &scratch.split_scratch);
    // encode_piece does not touch the piece lists, so iterating over them is safe.
    for (std::string_view piece : scratch.pieces) encode_piece(piece, cache, scratch, out);
  }

  void encode_piece(std::string_view piece, WordCache& cache, MergeScratch& scratch,
                    std::vector<int32_t>* out) const {
    if (piece.size() > kMaxCachedPiece) {
      merge_piece(piece, scratch, out);
      return;
    }
    auto it = cache.spans.find(piece);
    if (it != cache.spans.end()) {
      const int32_t* ids = cache.ids.data() + it->second.offset;
      out->insert(out->end(), ids, ids + it->second.count);
      return;
    }
    const size_t before = out->size();
    merge_piece(piece, scratch, out);
    if (cache.ids.size() > kMaxCachedIds || cache.spans.size() >= cache.max_pieces) {
      cache.spans.clear();
      cache.ids.clear();
    }
    const WordCache::Span span{static_cast<uint32_t>(cache.ids.size()),
                               static_cast<uint32_t>(out->size() - before)};
    cache.ids.insert(cache.ids.end(), out->begin() + static_cast<ptrdiff_t>(before), out->end());
    cache.spans.emplace(std::string(piece), span);
  }

  // BPE on one piece: repeatedly merge the adjacent pair of lowest rank (leftmost among equal
  // ranks). A heap of candidate pairs makes it O(n log n); a candidate whose symbols changed
  // since it was pushed is stale and skipped when it comes to the top.
  void merge_piece(std::string_view piece, MergeScratch& s, std::vector<int32_t>* out) const {
    const int32_t n = static_cast<int32_t>(piece.size());
    if (spec_.ignore_merges) {
      auto it = whole_.find(piece);
      if (it != whole_.end()) {
        out->push_back(it->second);
        return;
      }
    }
    s.symbols.resize(static_cast<size_t>(n));
    s.heap.clear();
    for (int32_t i = 0; i < n; ++i) {
      s.symbols[i] = {spec_.byte_ids[static_cast<unsigned char>(piece[i])], i - 1,
                      i + 1 < n ? i + 1 : -1};
    }
    auto push = [&](int32_t pos) {
      if (pos < 0 || s.symbols[pos].next < 0) return;
      const int32_t left = s.symbols[pos].id, right = s.symbols[s.symbols[pos].next].id;
      auto it = merges_.find(pair_key(left, right));
      if (it == merges_.end()) return;
      s.heap.push_back({it->second.rank, pos, left, right, it->second.result});
      std::push_heap(s.heap.begin(), s.heap.end());
    };
    for (int32_t i = 0; i + 1 < n; ++i) push(i);
    while (!s.heap.empty()) {
      std::pop_heap(s.heap.begin(), s.heap.end());
      const MergeScratch::Candidate c = s.heap.back();
      s.heap.pop_back();
      auto& left = s.symbols[c.pos];
      if (left.id != c.left || left.next < 0 || s.symbols[left.next].id != c.right) continue;
      auto& right = s.symbols[left.next];
      left.id = c.result;
      left.next = right.next;
      if (right.next >= 0) s.symbols[right.next].prev = c.pos;
      right.id = -1;
      push(left.prev);
      push(c.pos);
    }
    for (int32_t i = 0; i >= 0; i = s.symbols[i].next) out->push_back(s.symbols[i].id);
  }

  HfBpeSpec spec_;
  std::unordered_map<uint64_t, MergeInfo> merges_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> whole_;  // ignore_merges
  AddedSet raw_added_, norm_added_;     // normalized false / true
  std::vector<std::string> all_added_;  // every added token's text, for safe_cut
  size_t max_added_ = 0;                // the longest added token's length in bytes
  mutable std::mutex cache_mu_;
  mutable WordCache cache_;
};

void HfBpeEncoder::encode(std::string_view text, std::vector<int32_t>* out) {
  tok_.encode_valid(text, cache_, scratch_, out);
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_load_hf(const std::string& dir) {
  return std::make_unique<HfBpeTokenizer>(hf_bpe_read(dir));
}

std::string tokenizer_hf_id(const std::string& dir) {
  return hf_bpe_id(hf_bpe_files(dir));
}

}  // namespace ledgerlm
