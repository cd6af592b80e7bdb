// Writing tokenizer.json and tokenizer_config.json for ledgerlm's bpe and bytes tokenizers (the
// mapping is described in tokenizer_json.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/byte_level.h"
#include "data/spm_model_proto.h"
#include "data/tokenizer.h"
#include "data/tokenizer_json.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

using Json = nlohmann::json;
using Type = SpmPiece::Type;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

std::string marker_to_space(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const bool marker = s.substr(i, kSpaceMarker.size()) == kSpaceMarker;
    out += marker ? ' ' : s[i];
    i += marker ? kSpaceMarker.size() : 1;
  }
  return out;
}

// Byte offsets of the character boundaries strictly inside `s` (valid UTF-8).
std::vector<size_t> inner_boundaries(std::string_view s) {
  std::vector<size_t> out;
  for (size_t i = 1; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  return out;
}

Json bpe_model(Json vocab, Json merges, Json unk_token, bool byte_fallback) {
  return Json{{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", std::move(unk_token)},
              {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr},
              {"fuse_unk", false},
              {"byte_fallback", byte_fallback},
              {"ignore_merges", false},
              {"vocab", std::move(vocab)},
              {"merges", std::move(merges)}};
}

std::string tokenizer_json_text(Json added_tokens, Json pre_tokenizer, Json decoder, Json model) {
  Json j = {{"version", "1.0"},          {"truncation", nullptr},
            {"padding", nullptr},        {"added_tokens", std::move(added_tokens)},
            {"normalizer", nullptr},     {"pre_tokenizer", std::move(pre_tokenizer)},
            {"post_processor", nullptr}, {"decoder", std::move(decoder)},
            {"model", std::move(model)}};
  return j.dump(1) + "\n";
}

std::string tokenizer_config_text(const std::string& eot, const Json& unk,
                                  int64_t model_max_length) {
  Json c = {{"tokenizer_class", "PreTrainedTokenizerFast"},
            {"bos_token", eot},
            {"eos_token", eot},
            {"unk_token", unk},
            {"split_special_tokens", true},
            {"clean_up_tokenization_spaces", false}};
  if (model_max_length > 0) c["model_max_length"] = model_max_length;
  return c.dump(1) + "\n";
}

}  // namespace

HfTokenizerFiles hf_tokenizer_files_bpe(std::string_view model_proto, const std::string& origin,
                                        int64_t model_max_length) {
  const SpmModel m = spm_model_parse(model_proto, origin);
  auto require_setting = [&](bool ok, const char* what) {
    LLM_REQUIRE(ok, origin, ": ", what,
                "; the Hugging Face export reproduces only models made by `ledgerlm prepare "
                "--tokenizer bpe`");
  };
  require_setting(m.model_type == 2, "not a BPE model");
  require_setting(m.byte_fallback, "trained without byte fallback");
  require_setting(!m.treat_whitespace_as_suffix, "trained with whitespace as a suffix");
  require_setting(m.normalizer_name == "identity", "normalization is not identity");
  require_setting(!m.add_dummy_prefix, "adds a dummy prefix");
  require_setting(!m.remove_extra_whitespaces, "removes extra whitespace");
  require_setting(m.escape_whitespaces, "does not escape whitespace");

  const int32_t n = static_cast<int32_t>(m.pieces.size());
  Json vocab = Json::object();
  Json added = Json::array();
  std::vector<std::string> names(static_cast<size_t>(n));
  std::unordered_map<std::string, int32_t> ids;     // name -> id
  std::unordered_map<std::string, int32_t> normal;  // the same, normal pieces only
  std::string eot, unk;
  int bytes = 0;
  for (int32_t id = 0; id < n; ++id) {
    const SpmPiece& p = m.pieces[static_cast<size_t>(id)];
    LLM_REQUIRE(utf8_is_valid(p.piece) && !p.piece.empty(), origin, ": piece ", id,
                " is empty or not valid UTF-8");
    LLM_REQUIRE(p.type != Type::kUnused, origin, ": piece ", id,
                " is an unused piece, which the Hugging Face export cannot reproduce");
    LLM_REQUIRE(std::isfinite(p.score), origin, ": piece ", id, " has a score that is not finite");
    const bool text = p.type == Type::kNormal || p.type == Type::kUserDefined;
    std::string name = text ? marker_to_space(p.piece) : p.piece;
    const auto [it, fresh] = ids.emplace(name, id);
    LLM_REQUIRE(fresh, origin, ": pieces ", it->second, " and ", id, " both stand for \"", name,
                "\" in the Hugging Face vocabulary");
    vocab[name] = id;
    if (p.type == Type::kNormal) normal.emplace(name, id);
    if (p.type == Type::kByte) ++bytes;
    if (p.type == Type::kControl && p.piece == kEotText) eot = p.piece;
    if (p.type == Type::kUnknown) unk = p.piece;
    if (p.type == Type::kUserDefined)
      added.push_back(Json{{"id", id},
                           {"content", name},
                           {"single_word", false},
                           {"lstrip", false},
                           {"rstrip", false},
                           {"normalized", false},
                           {"special", false}});
    names[static_cast<size_t>(id)] = std::move(name);
  }
  // byte_fallback looks the bytes up by these names.
  LLM_REQUIRE(bytes == 256, origin, ": has ", bytes, " byte pieces, expected 256");
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = ids.find(name);
    LLM_REQUIRE(it != ids.end() && m.pieces[static_cast<size_t>(it->second)].type == Type::kByte,
                origin, ": has no byte piece ", name);
  }
  LLM_REQUIRE(!eot.empty(), origin, ": has no control piece ", kEotText);
  LLM_REQUIRE(!unk.empty(), origin, ": has no unknown piece");

  // Every split of a normal piece into two normal pieces, by falling score of the piece.
  struct Merge {
    float score;
    int32_t id;
    size_t at;
  };
  std::vector<Merge> merges;
  for (const auto& [name, id] : normal)
    for (size_t at : inner_boundaries(name))
      if (normal.count(name.substr(0, at)) && normal.count(name.substr(at)))
        merges.push_back({m.pieces[static_cast<size_t>(id)].score, id, at});
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.id != b.id ? a.id < b.id : a.at < b.at;
  });
  Json merge_list = Json::array();
  for (size_t i = 0; i < merges.size(); ++i) {
    const Merge& g = merges[i];
    if (i > 0 && merges[i - 1].id != g.id) {
      LLM_REQUIRE(merges[i - 1].score != g.score, origin, ": pieces ", merges[i - 1].id, " and ",
                  g.id, " have the same score ", g.score,
                  "; Hugging Face BPE needs the merges in a strict order");
    }
    const std::string& name = names[static_cast<size_t>(g.id)];
    merge_list.push_back(Json::array({name.substr(0, g.at), name.substr(g.at)}));
  }

  Json decoder = {
      {"type", "Sequence"},
      {"decoders", Json::array({Json{{"type", "ByteFallback"}}, Json{{"type", "Fuse"}}})}};
  HfTokenizerFiles files;
  files.tokenizer_json =
      tokenizer_json_text(std::move(added), nullptr, std::move(decoder),
                          bpe_model(std::move(vocab), std::move(merge_list), unk, true));
  files.tokenizer_config_json = tokenizer_config_text(eot, unk, model_max_length);
  return files;
}

HfTokenizerFiles hf_tokenizer_files_bytes(int32_t eot_id, int64_t model_max_length) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, static_cast<char>(b)))] = b;
  vocab[kEotText] = eot_id;
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}};
  HfTokenizerFiles files;
  files.tokenizer_json =
      tokenizer_json_text(Json::array(), byte_level, byte_level,
                          bpe_model(std::move(vocab), Json::array(), nullptr, false));
  files.tokenizer_config_json = tokenizer_config_text(kEotText, nullptr, model_max_length);
  return files;
}

}  // namespace ledgerlm
