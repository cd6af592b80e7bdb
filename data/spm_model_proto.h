// The parts of a sentencepiece model file (tokenizer.model, a serialized ModelProto of
// sentencepiece_model.proto) that ledgerlm maps to other tokenizer formats, read from the
// protobuf wire format directly: Debian's sentencepiece 0.1.97 ships no generated .pb.h, and its
// SentencePieceProcessor API cannot tell a user-defined piece from a normal one. Fields the file
// leaves out take the .proto's defaults.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ledgerlm {

struct SpmPiece {
  // sentencepiece_model.proto's SentencePiece.Type values.
  enum class Type {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6
  };
  std::string piece;  // as stored: spaces are U+2581, byte pieces "<0xAB>"
  float score = 0.0f;
  Type type = Type::kNormal;
};

struct SpmModel {
  std::vector<SpmPiece> pieces;  // index = id
  // TrainerSpec
  int model_type = 1;  // 1 unigram, 2 bpe, 3 word, 4 char
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  // NormalizerSpec
  std::string normalizer_name;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Parses a serialized ModelProto; malformed bytes are one Error naming `origin`.
SpmModel spm_model_parse(std::string_view proto, const std::string& origin);

}  // namespace ledgerlm
