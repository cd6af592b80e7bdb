// Protobuf wire format (varints, length-delimited fields, fixed 32/64-bit fields), just enough to
// read sentencepiece_model.proto's pieces, TrainerSpec and NormalizerSpec fields named in the
// header; every other field is skipped by its wire type.
#include "data/spm_model_proto.h"

#include <cstdint>
#include <cstring>

#include "model/base/check.h"

namespace ledgerlm {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

class WireReader {
 public:
  WireReader(std::string_view data, const std::string& origin) : data_(data), origin_(origin) {}
  bool done() const { return pos_ >= data_.size(); }

  // The next field's number and wire type.
  void key(uint32_t* field, uint32_t* wire) {
    const uint64_t k = varint();
    *field = static_cast<uint32_t>(k >> 3);
    *wire = static_cast<uint32_t>(k & 7);
    require(*field != 0, "field number 0");
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      require(pos_ < data_.size(), "truncated varint");
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    require(false, "varint longer than 10 bytes");
    return 0;
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    require(n <= data_.size() - pos_, "length-delimited field runs past the end");
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  float fixed32_float() {
    require(data_.size() - pos_ >= 4, "truncated 32-bit field");
    float f;
    std::memcpy(&f, data_.data() + pos_, 4);  // little-endian, as on every host we build for
    pos_ += 4;
    return f;
  }
  void skip(uint32_t wire) {
    switch (wire) {
      case kVarint:
        varint();
        break;
      case kFixed64:
        require(data_.size() - pos_ >= 8, "truncated 64-bit field");
        pos_ += 8;
        break;
      case kBytes:
        bytes();
        break;
      case kFixed32:
        fixed32_float();
        break;
      default:
        require(false, "unsupported wire type " + std::to_string(wire));
    }
  }
  // A field of an expected wire type.
  void expect(uint32_t wire, uint32_t want, const char* what) {
    require(wire == want, std::string(what) + " has the wrong wire type");
  }
  void require(bool ok, const std::string& what) const {
    LLM_REQUIRE(ok, origin_, ": not a valid sentencepiece model (protobuf: ", what, ")");
  }

 private:
  std::string_view data_;
  const std::string& origin_;
  size_t pos_ = 0;
};

SpmPiece parse_piece(std::string_view data, const std::string& origin) {
  SpmPiece p;
  WireReader r(data, origin);
  while (!r.done()) {
    uint32_t field, wire;
    r.key(&field, &wire);
    if (field == 1) {
      r.expect(wire, kBytes, "SentencePiece.piece");
      p.piece = std::string(r.bytes());
    } else if (field == 2) {
      r.expect(wire, kFixed32, "SentencePiece.score");
      p.score = r.fixed32_float();
    } else if (field == 3) {
      r.expect(wire, kVarint, "SentencePiece.type");
      const uint64_t t = r.varint();
      r.require(t >= 1 && t <= 6, "SentencePiece.type " + std::to_string(t) + " is unknown");
      p.type = static_cast<SpmPiece::Type>(t);
    } else {
      r.skip(wire);
    }
  }
  return p;
}

void parse_trainer_spec(std::string_view data, const std::string& origin, SpmModel* m) {
  WireReader r(data, origin);
  while (!r.done()) {
    uint32_t field, wire;
    r.key(&field, &wire);
    if (field == 3 || field == 24 || field == 35) {
      r.expect(wire, kVarint, "a TrainerSpec field");
      const uint64_t v = r.varint();
      if (field == 3) m->model_type = static_cast<int>(v);
      if (field == 24) m->treat_whitespace_as_suffix = v != 0;
      if (field == 35) m->byte_fallback = v != 0;
    } else {
      r.skip(wire);
    }
  }
}

void parse_normalizer_spec(std::string_view data, const std::string& origin, SpmModel* m) {
  WireReader r(data, origin);
  while (!r.done()) {
    uint32_t field, wire;
    r.key(&field, &wire);
    if (field == 1) {
      r.expect(wire, kBytes, "NormalizerSpec.name");
      m->normalizer_name = std::string(r.bytes());
    } else if (field >= 3 && field <= 5) {
      r.expect(wire, kVarint, "a NormalizerSpec field");
      const bool v = r.varint() != 0;
      if (field == 3) m->add_dummy_prefix = v;
      if (field == 4) m->remove_extra_whitespaces = v;
      if (field == 5) m->escape_whitespaces = v;
    } else {
      r.skip(wire);
    }
  }
}

}  // namespace

SpmModel spm_model_parse(std::string_view proto, const std::string& origin) {
  SpmModel m;
  WireReader r(proto, origin);
  while (!r.done()) {
    uint32_t field, wire;
    r.key(&field, &wire);
    if (field >= 1 && field <= 3) {
      r.expect(wire, kBytes, "a ModelProto field");
      const std::string_view sub = r.bytes();
      if (field == 1) m.pieces.push_back(parse_piece(sub, origin));
      if (field == 2) parse_trainer_spec(sub, origin, &m);
      if (field == 3) parse_normalizer_spec(sub, origin, &m);
    } else {
      r.skip(wire);
    }
  }
  r.require(!m.pieces.empty(), "no pieces");
  return m;
}

}  // namespace ledgerlm
