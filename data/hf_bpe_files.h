// Reading a Hugging Face byte-level BPE tokenizer from disk: tokenizer.json or GPT-2's
// vocab.json + merges.txt, checked to be something the byte-level BPE encoder
// (tokenizer_hf_bpe.cpp) reproduces exactly. tokenizer.json may hold, as the GPT-2, SmolLM2, Qwen2
// and Llama-3 tokenizers do:
//   normalizer      null, NFC, or a Sequence of NFC;
//   pre_tokenizer   ByteLevel (add_prefix_space false) alone, or a Sequence of Split (a known
//                   regex, behavior Isolated, invert false) and Digits steps ending with ByteLevel
//                   (hf_pretokenize.h);
//   model           BPE over GPT-2's byte alphabet: merges, ignore_merges, no dropout, no subword
//                   prefix or suffix, no byte_fallback;
//   post_processor  null, ByteLevel, TemplateProcessing, Bert/RobertaProcessing, or a Sequence of
//                   them: the tokens it puts before and after a single text (Llama-3: BOS) are
//                   put around every document `prepare` encodes;
//   added_tokens    matched in the text as the library does (those with normalized false in the
//                   raw text first, then the others in the normalized text), never with
//                   single_word, lstrip or rstrip;
//   an end-of-text token, the separator of documents: the added token <|endoftext|>, else
//   <|end_of_text|> (Llama-3), else </s>.
// Anything else (another normalizer, pre-tokenizer, model or post-processor, a Split regex whose
// cut points ledgerlm does not know, a byte missing from the vocabulary) is refused with one line
// naming the file and the key.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/hf_pretokenize.h"

namespace ledgerlm {

struct HfFile {
  std::string name;   // "tokenizer.json", "vocab.json" or "merges.txt"
  std::string bytes;  // the file as read
};

struct HfAddedToken {
  std::string content;  // matched verbatim in the text, before pre-tokenization
  int32_t id = -1;
  bool normalized = false;  // matched in the normalized text, after the others
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
  int32_t eot_id = -1;         // the end-of-text added token (see above)
  HfPipeline pipeline;         // normalizer and pre-tokenizer (GPT-2's for vocab.json + merges)
  // What the post-processor puts before and after the ids of a single text.
  std::vector<int32_t> prefix, suffix;
  // What the normalizer, pre-tokenizer and post-processor do, in a canonical form (compared by
  // hf_bpe_difference).
  std::string pipeline_text;
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
