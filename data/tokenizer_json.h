// Hugging Face tokenizer files for ledgerlm's own tokenizers: tokenizer.json (the `tokenizers`
// library's format) and tokenizer_config.json (what transformers' AutoTokenizer reads first), so
// that `AutoTokenizer.from_pretrained(DIR)` gives exactly the ids ledgerlm trained on and decodes
// them back to the text. Written by `ledgerlm export --format hf`.
//
// The mapping from a ledgerlm bpe model (sentencepiece BPE: identity normalization, no dummy
// prefix, no whitespace collapsing, byte fallback, "\n" a user-defined symbol, whitespace-only
// pieces allowed) to the library's model types, kept in this one place:
//   - model: BPE with byte_fallback, vocab = every piece at its sentencepiece id. Normal and
//     user-defined pieces are written with the space marker U+2581 as a real space (" the"), so
//     no normalizer is needed, and a literal U+2581 in the text is no piece: it falls back to its
//     three byte tokens, as ledgerlm's encoder routes it (tokenizer_bpe.cpp). Byte pieces keep
//     sentencepiece's names "<0xAB>", which are the names byte_fallback looks up; control and
//     unknown pieces keep theirs ("<|endoftext|>", "<unk>"; unk_token = the unknown piece).
//   - merges: sentencepiece merges the adjacent pair whose concatenation is the highest-scoring
//     piece (leftmost among equals); the library merges the lowest-ranked listed pair (leftmost
//     among equals). Listing, for every normal piece of two or more characters in order of
//     falling score, each split into two normal pieces gives the library the same choices.
//     Scores of such pieces must therefore be distinct. Merges are written as [left, right]
//     pairs (pieces hold spaces, which the older "left right" form cannot carry; tokenizers
//     0.20 or later reads them).
//   - added_tokens: the user-defined pieces ("\n"), never special: sentencepiece matches them
//     before anything else and never merges them, as the library does with added tokens. The
//     control and unknown pieces are not added tokens, so the library encodes their text like
//     any other text, as sentencepiece does.
//   - normalizer, pre_tokenizer, post_processor: none (no piece spans a word boundary, so
//     splitting the text into words first would change nothing); decoder: ByteFallback then Fuse.
//   - tokenizer_config.json: tokenizer_class PreTrainedTokenizerFast (the tokenizer.json as it
//     is); bos_token and eos_token the end-of-text piece (config.json's bos and eos ids),
//     unk_token the unknown piece; split_special_tokens true, because transformers otherwise
//     makes its special tokens added tokens and turns a literal "<|endoftext|>" in the text into
//     the eot id, which ledgerlm never does; clean_up_tokenization_spaces false (it would delete
//     spaces before punctuation on decode).
// The bytes tokenizer maps the same way onto the library's ByteLevel pre-tokenizer and decoder
// (GPT-2's byte-to-character alphabet, byte_level.h) and a BPE model without merges: token b is
// byte b, and "<|endoftext|>" (the eot) is a vocabulary entry, not an added token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ledgerlm {

struct HfTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
};

// The files for a ledgerlm bpe tokenizer from its tokenizer.model bytes. A model whose settings
// the mapping above cannot reproduce (another model type or normalization, no byte fallback,
// unused pieces, equal scores, duplicate piece names) is one Error naming `origin`.
// `model_max_length` is the model's context (tokenizer_config.json), 0 to leave it out.
HfTokenizerFiles hf_tokenizer_files_bpe(std::string_view model_proto, const std::string& origin,
                                        int64_t model_max_length);

// The files for the bytes tokenizer: ids 0..255 the bytes, `eot_id` the end-of-text token.
HfTokenizerFiles hf_tokenizer_files_bytes(int32_t eot_id, int64_t model_max_length);

}  // namespace ledgerlm
