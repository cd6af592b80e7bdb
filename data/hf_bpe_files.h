// Reading a Hugging Face GPT-2 tokenizer from disk: tokenizer.json (model BPE, ByteLevel
// pre-tokenizer) or vocab.json + merges.txt, checked to be something the byte-level BPE encoder
// (tokenizer_hf_bpe.cpp) reproduces exactly. What it cannot reproduce — a normalizer, another
// pre-tokenizer or model, BPE dropout, subword prefixes, added tokens that strip spaces, no
// <|endoftext|>, a byte missing from the vocabulary, a post-processor that adds tokens to a text
// — is refused with one line naming the file and the key. A post-processor that adds nothing
// (null; ByteLevel, which moves offsets only; TemplateProcessing whose single template is just
// $A, as transformers 5 saves GPT-2; a Sequence of these) is accepted; one that adds tokens is
// refused saying what it adds ("post_processor adds '<|endoftext|>' after each text").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ledgerlm {

struct HfFile {
  std::string name;   // "tokenizer.json", "vocab.json" or "merges.txt"
  std::string bytes;  // the file as read
};

struct HfAddedToken {
  std::string content;  // matched verbatim in the text, before pre-tokenization
  int32_t id = -1;
};

struct HfBpeSpec {
  // By id: the bytes each token stands for (an added token: its content).
  std::vector<std::string> token_bytes;
  // By rank: the ids of the pair a merge joins, and the id of the token it makes.
  struct Merge {
    int32_t left, right, result;
  };
  std::vector<Merge> merges;
  std::vector<HfAddedToken> added;
  int32_t byte_ids[256] = {};  // the token of each single byte
  int32_t eot_id = -1;         // the added token <|endoftext|>
  bool ignore_merges = false;  // a piece that is a whole vocabulary entry is that entry
  std::vector<HfFile> files;   // what the tokenizer was read from (what save() copies)
};

// The files that make the tokenizer in `dir`, read: tokenizer.json when it exists (vocab.json and
// merges.txt beside it are then ignored), else vocab.json and merges.txt. Throws Error when
// neither is there.
std::vector<HfFile> hf_bpe_files(const std::string& dir);

// Reads the tokenizer in `dir`: tokenizer.json when it exists (vocab.json and merges.txt beside
// it are then ignored), else vocab.json + merges.txt, whose "<|endoftext|>" entry becomes an
// added token as GPT-2's tokenizers treat it. Throws Error naming the file and key on anything
// it cannot represent.
HfBpeSpec hf_bpe_read(const std::string& dir);

// "hf-bpe:" + the SHA-256 of tokenizer.json, or for vocab.json + merges.txt the SHA-256 of their
// `sha256sum` listing ("<hex>  vocab.json\n<hex>  merges.txt\n"), from `files` as hf_bpe_files
// returns them.
std::string hf_bpe_id(const std::vector<HfFile>& files);

// How the ids of two tokenizers differ, "" when they give the same ids to every text: the first
// id whose token differs, then the merges, added tokens and ignore_merges. It compares what the
// files define rather than their bytes, so the same tokenizer as tokenizer.json and as
// vocab.json + merges.txt is the same. The answer names the tokenizers `a_name` and `b_name`.
std::string hf_bpe_difference(const HfBpeSpec& a, const std::string& a_name, const HfBpeSpec& b,
                              const std::string& b_name);

}  // namespace ledgerlm
