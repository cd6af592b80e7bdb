// GPT-2's byte-level alphabet: every byte value stands for one printable code point, so that a
// BPE vocabulary over bytes can be stored as text (vocab.json, tokenizer.json). Bytes that are
// printable Latin-1 characters ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves;
// the other 68 (controls, space, U+007F..U+00A0, U+00AD) stand for U+0100, U+0101, ... in byte
// order. So the space is "Ġ" (U+0120) and "\n" is "Ċ" (U+010A) in the vocabulary files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ledgerlm {

// The code point that stands for byte b.
uint32_t byte_level_code_point(uint8_t b);

// The UTF-8 of byte_level_code_point(b) for every byte of `bytes` (a token's vocabulary form).
std::string byte_level_encode(std::string_view bytes);

// The bytes a vocabulary string stands for; false when it holds a character outside the
// byte-level alphabet (or is not valid UTF-8).
bool byte_level_decode(std::string_view text, std::string* bytes);

}  // namespace ledgerlm
