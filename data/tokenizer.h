// Tokenizers: text <-> token ids. Three implementations behind one interface:
//   "bpe"    sentencepiece BPE trained on the corpus, configured so decode(encode(t)) == t for any
//            valid UTF-8 text (identity normalization, byte fallback, "\n" as its own symbol);
//   "bytes"  one token per byte (256) plus the end-of-text token (vocab 257);
//   "hf-bpe" a Hugging Face byte-level BPE tokenizer (GPT-2, SmolLM2, Qwen2 or Llama-3 style) read
//            from its files, encoding exactly as the tokenizers library does
//            (tokenizer_hf_bpe.cpp).
// Each has an end-of-text id (eot) that separates documents in the token shards. bpe and bytes
// never produce it from text; hf-bpe, like the tokenizers library, turns the literal text of
// its added tokens ("<|endoftext|>", ...) into their ids.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ledgerlm {

// How decode() renders the end-of-text token, and the name of the sentencepiece control symbol.
inline constexpr const char* kEotText = "<|endoftext|>";

// One thread's encoder, made by Tokenizer::make_encoder: the same ids as Tokenizer::encode, with
// working state of its own (hf-bpe: its piece cache), so that `prepare` encodes on every core
// without sharing anything. bpe and hf-bpe need valid UTF-8: the caller checks it first (prepare
// names the file and offset of a bad byte).
class TokenEncoder {
 public:
  virtual ~TokenEncoder() = default;
  // Appends the ids of `text` to *out.
  virtual void encode(std::string_view text, std::vector<int32_t>* out) = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids for `text`. Throws Error if the bpe tokenizer gets invalid UTF-8.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::unique_ptr<TokenEncoder> make_encoder() const = 0;
  // Whether byte offset p (0 < p < text.size()) of a text is a safe place to cut it for encoding:
  // encode(text) == encode(text[0, p)) followed by encode(text[p, end)), for any bytes beyond the
  // cut_context() bytes on either side of p that the answer reads. `text` is a window of the
  // document part being encoded that holds those bytes on both sides, or reaches the part's
  // edge. The rules, per tokenizer:
  //   bytes   everywhere;
  //   bpe     after "\n", before "\n", and before a space that follows a non-space (sentencepiece
  //           starts a word there: no piece spans it);
  //   hf-bpe  where its pre-tokenizer always ends a piece (GPT-2's: before ASCII white space
  //           that follows a non-white-space character; others: hf_pretokenize.h), when no
  //           added token (<|endoftext|>) could match across p.
  virtual bool safe_cut(std::string_view text, size_t p) const = 0;
  virtual size_t cut_context() const = 0;
  // Text for `ids`; eot ids are rendered as kEotText. Throws Error on an id outside the vocab.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eot_id() const = 0;
  // The ids put before and after each document's ids: hf-bpe's post-processor's (Llama-3: its
  // BOS before), as the tokenizers library adds them to a text it encodes; empty for bpe and
  // bytes. encode() leaves them out. `prepare` writes prefix, the ids, suffix, then the eot
  // unless the suffix already ends with it.
  virtual std::vector<int32_t> doc_prefix() const { return {}; }
  virtual std::vector<int32_t> doc_suffix() const { return {}; }
  // "bpe", "bytes" or "hf-bpe": the meta.json tokenizer field.
  virtual std::string name() const = 0;
  // Writes the files needed to load this tokenizer again into `dir` (bpe: tokenizer.model;
  // hf-bpe: tokenizer.json, or vocab.json + merges.txt, as read).
  virtual void save(const std::string& dir) const = 0;
};

std::unique_ptr<Tokenizer> tokenizer_make_bytes();

// The ids a prompt is continued from (`sample`): the document prefix, then the prompt's ids, as
// training saw the start of every document and as the tokenizers library encodes a text (a
// Llama-3-style template puts its BOS first); not the suffix, which ends a document. A prompt
// that gives no ids at all starts after an end-of-text, where every document starts.
std::vector<int32_t> tokenizer_prompt_ids(const Tokenizer& tok, std::string_view prompt);

// Trains a BPE tokenizer on `texts` (one entry per document, any valid UTF-8: CJK, text without
// spaces, a single word) with at most `vocab_size` pieces (fewer when the corpus has too few
// distinct pairs). Deterministic: single-threaded, fixed seed. A vocab_size below the corpus's
// smallest (tokenizer_bpe_min_vocab) is one Error that names the smallest.
std::unique_ptr<Tokenizer> tokenizer_train_bpe(const std::vector<std::string_view>& texts,
                                               int64_t vocab_size, uint64_t seed);

// The smallest vocabulary BPE training accepts for `texts`: the 259 reserved ids (unk, eot, the
// newline and the 256 byte tokens) plus one id per character of the corpus's alphabet — its most
// frequent characters covering 99.99% of the text, the space marker always among them (rarer
// characters are encoded as bytes).
struct BpeVocabFloor {
  int64_t reserved = 259;
  int64_t alphabet = 0;
  int64_t smallest() const { return reserved + alphabet; }
};
BpeVocabFloor tokenizer_bpe_min_vocab(const std::vector<std::string_view>& texts);

// Loads a BPE tokenizer from a tokenizer.model file written by save().
std::unique_ptr<Tokenizer> tokenizer_load_bpe(const std::string& model_path);
// The same from the model's bytes; errors name `origin`. The model must be one ledgerlm made:
// eot control symbol, "\n" symbol, 256 byte pieces, exact round trips.
std::unique_ptr<Tokenizer> tokenizer_bpe_from_proto(std::string model_proto,
                                                    const std::string& origin);

// Loads a Hugging Face byte-level BPE tokenizer from `dir`: tokenizer.json (hf_bpe_files.h says
// which normalizers, pre-tokenizers and post-processors), or when there is none GPT-2's
// vocab.json + merges.txt. Works
// on a prepared data directory of kind hf-bpe as well (its copy of the files). Throws one Error
// line naming the file and key of anything it cannot reproduce exactly (hf_bpe_files.h).
std::unique_ptr<Tokenizer> tokenizer_load_hf(const std::string& dir);
// The identity of the hf-bpe tokenizer in `dir`: "hf-bpe:" + the SHA-256 of tokenizer.json, or
// of the `sha256sum` listing of vocab.json and merges.txt.
std::string tokenizer_hf_id(const std::string& dir);

// Loads the tokenizer of a prepared data directory (its meta.json names the kind) and checks it
// against meta.json's vocab size and eot id.
std::unique_ptr<Tokenizer> tokenizer_load(const std::string& dir);

// True if `text` is well-formed UTF-8; otherwise *bad_offset (if given) is the first bad byte.
bool utf8_is_valid(std::string_view text, size_t* bad_offset = nullptr);

}  // namespace ledgerlm
