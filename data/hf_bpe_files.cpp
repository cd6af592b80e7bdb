// hf_bpe_read(): the files of a Hugging Face GPT-2 tokenizer, parsed and checked (see the header
// for what is refused and why).
#include "data/hf_bpe_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "data/byte_level.h"
#include "data/sha256.h"
#include "data/tokenizer.h"
#include "model/base/check.h"
#include "model/base/input_file.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kMaxVocab = int64_t{1} << 24;

std::string read_whole(const fs::path& path) {
  return input_file_read(path.string(), "tokenizer file");
}

json parse_json(const std::string& bytes, const std::string& file) {
  try {
    return json::parse(bytes);
  } catch (const json::exception& e) {
    fail(error_message(file, ": invalid JSON (", e.what(), ")"));
  }
}

// What a post-processor puts around the ids of one text: tokens by name, with their ids where the
// post-processor names them (TemplateProcessing's special_tokens, Bert/Roberta's pairs), -1 where
// the vocabulary is to give them.
struct PostAdditions {
  std::vector<std::pair<std::string, int64_t>> before, after;
};

// The vocabulary and merges as strings, before they are resolved to ids.
struct RawBpe {
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  // merges.txt only: the line of each merge, so that a fault names the line of the file it is on.
  std::vector<int64_t> merge_lines;
  std::vector<HfAddedToken> added;
  bool ignore_merges = false;
  HfPipeline pipeline;
  PostAdditions post;
};

void read_vocab(const json& v, const std::string& where, RawBpe* raw) {
  LLM_REQUIRE(v.is_object(), where, " must be an object of token -> id");
  for (const auto& [token, id] : v.items()) {
    LLM_REQUIRE(
        id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (int64_t{1} << 31),
        where, ": the id of \"", token, "\" is not an id in [0, 2^31) (", id.dump(), ")");
    raw->vocab.emplace_back(token, id.get<int64_t>());
  }
}

// "a b" -> (a, b); the tokens of a byte-level vocabulary never hold a plain space.
bool split_merge(const std::string& line, std::pair<std::string, std::string>* out) {
  size_t sp = line.find(' ');
  if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos) return false;
  *out = {line.substr(0, sp), line.substr(sp + 1)};
  return true;
}

bool is_null_or_absent(const json& obj, const char* key) {
  return !obj.contains(key) || obj.at(key).is_null();
}

// The piece of tokenizer.json that must be `null` or an object {"type": "ByteLevel", ...}.
void require_byte_level_or_null(const json& j, const char* key, const std::string& file) {
  if (is_null_or_absent(j, key)) return;
  const json& v = j.at(key);
  LLM_REQUIRE(v.is_object() && v.value("type", "") == "ByteLevel", file, ": key '", key, "' is ",
              v.dump().substr(0, 80), ", expected null or {\"type\": \"ByteLevel\"} (GPT-2's)");
}

// Reads a post-processor: null, ByteLevel (moves offsets only), TemplateProcessing, Bert or
// Roberta processing, or a Sequence of them (each wraps what the one before made). Anything else,
// or a template it cannot read, is refused in one line naming `file` and the key.
PostAdditions post_processor_additions(const json& pp, const std::string& file) {
  if (pp.is_null()) return {};
  const std::string shown = pp.dump().substr(0, 120);
  auto refuse_shape = [&](const char* why) {
    fail(error_message(file, ": key 'post_processor' is ", shown,
                       ", expected null, ByteLevel, TemplateProcessing, BertProcessing, "
                       "RobertaProcessing or a Sequence of them (",
                       why, ")"));
  };
  if (!pp.is_object() || !pp.contains("type") || !pp.at("type").is_string())
    refuse_shape("no type");
  const std::string type = pp.at("type").get<std::string>();
  if (type == "ByteLevel") return {};  // trims or shifts offsets only
  if (type == "Sequence") {
    if (!pp.contains("processors") || !pp.at("processors").is_array())
      refuse_shape("a Sequence without 'processors'");
    PostAdditions all;
    for (const json& p : pp.at("processors")) {
      PostAdditions one = post_processor_additions(p, file);
      one.before.insert(one.before.end(), all.before.begin(), all.before.end());
      all.after.insert(all.after.end(), one.after.begin(), one.after.end());
      all.before = std::move(one.before);
    }
    return all;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    // {"cls": ["<s>", 0], "sep": ["</s>", 2]}: cls before, sep after every single text.
    auto token = [&](const char* key) -> std::pair<std::string, int64_t> {
      const bool ok = pp.contains(key) && pp.at(key).is_array() && pp.at(key).size() == 2 &&
                      pp.at(key)[0].is_string() && pp.at(key)[1].is_number_integer();
      if (!ok) refuse_shape("a processor without its cls and sep tokens");
      return {pp.at(key)[0].get<std::string>(), pp.at(key)[1].get<int64_t>()};
    };
    return {{token("cls")}, {token("sep")}};
  }
  if (type != "TemplateProcessing") refuse_shape("an unknown kind");
  // "single": [{"SpecialToken": {"id": "<|begin_of_text|>", ...}}, {"Sequence": {"id": "A"}}],
  // "special_tokens": {"<|begin_of_text|>": {"id": ..., "ids": [128000], "tokens": [...]}}.
  if (!pp.contains("single") || !pp.at("single").is_array())
    refuse_shape("a TemplateProcessing without its 'single' template");
  PostAdditions out;
  int sequences = 0;
  for (const json& piece : pp.at("single")) {
    if (piece.is_object() && piece.contains("Sequence") && piece.at("Sequence").is_object() &&
        piece.at("Sequence").value("id", "") == "A") {
      ++sequences;
      continue;
    }
    if (!(piece.is_object() && piece.contains("SpecialToken") &&
          piece.at("SpecialToken").is_object() && piece.at("SpecialToken").contains("id") &&
          piece.at("SpecialToken").at("id").is_string()))
      refuse_shape("a 'single' template piece other than $A or a special token");
    const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
    auto& side = sequences == 0 ? out.before : out.after;
    const json* entry = nullptr;
    if (pp.contains("special_tokens") && pp.at("special_tokens").is_object() &&
        pp.at("special_tokens").contains(name))
      entry = &pp.at("special_tokens").at(name);
    if (entry == nullptr) {
      side.emplace_back(name, -1);
      continue;
    }
    const bool ok = entry->is_object() && entry->contains("ids") && entry->at("ids").is_array() &&
                    entry->contains("tokens") && entry->at("tokens").is_array() &&
                    entry->at("ids").size() == entry->at("tokens").size();
    if (!ok) refuse_shape("a special_tokens entry without matching 'ids' and 'tokens'");
    for (size_t k = 0; k < entry->at("ids").size(); ++k) {
      const json &id = entry->at("ids")[k], &tok = entry->at("tokens")[k];
      if (!id.is_number_integer() || !tok.is_string())
        refuse_shape("a special_tokens entry whose ids are not integers");
      side.emplace_back(tok.get<std::string>(), id.get<int64_t>());
    }
  }
  if (sequences != 1) refuse_shape("a 'single' template that does not hold $A exactly once");
  return out;
}

std::string short_dump(const json& v) {
  const std::string d = v.dump();
  return d.size() > 100 ? d.substr(0, 100) + "..." : d;
}

// Keys read without throwing nlohmann's own errors on a value of the wrong type: a string key
// that is absent or not a string reads "", a flag that is absent or null its default, and a flag
// of another type is refused naming `where`.
std::string string_key(const json& o, const char* key) {
  return o.is_object() && o.contains(key) && o.at(key).is_string() ? o.at(key).get<std::string>()
                                                                   : "";
}
bool flag_key(const json& o, const char* key, bool absent, const std::string& where) {
  if (!o.is_object() || !o.contains(key) || o.at(key).is_null()) return absent;
  LLM_REQUIRE(o.at(key).is_boolean(), where, ": '", key, "' is ", short_dump(o.at(key)),
              ", expected true or false");
  return o.at(key).get<bool>();
}

// NFC, alone or in (nested) Sequences; null is none.
bool read_normalizer(const json& n, const std::string& file) {
  if (n.is_null()) return false;
  const std::string type = string_key(n, "type");
  if (type == "NFC") return true;
  if (type == "Sequence" && n.contains("normalizers") && n.at("normalizers").is_array()) {
    bool nfc = false;
    for (const json& m : n.at("normalizers")) nfc = read_normalizer(m, file) || nfc;
    return nfc;
  }
  fail(error_message(file, ": key 'normalizer' is ", short_dump(n),
                     ", expected null, NFC or a Sequence of NFC (the normalizers ledgerlm "
                     "reproduces exactly)"));
}

HfPipeline read_pre_tokenizer(const json& pre, const std::string& file) {
  const std::string expected =
      ", expected ByteLevel (add_prefix_space false), or a Sequence of Split (GPT-2's, Llama-3's "
      "or Qwen2's regex, Isolated) and Digits steps ending with ByteLevel";
  LLM_REQUIRE(pre.is_object(), file, ": key 'pre_tokenizer' is ", short_dump(pre), expected);
  std::vector<json> steps;
  if (string_key(pre, "type") == "Sequence") {
    LLM_REQUIRE(pre.contains("pretokenizers") && pre.at("pretokenizers").is_array() &&
                    !pre.at("pretokenizers").empty(),
                file, ": key 'pre_tokenizer' is a Sequence without 'pretokenizers'", expected);
    for (const json& s : pre.at("pretokenizers")) steps.push_back(s);
  } else {
    steps.push_back(pre);
  }
  HfPipeline out;
  bool splits = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    const std::string type = string_key(s, "type");
    const std::string where =
        error_message(file, ": key 'pre_tokenizer' step ", i, " (", type, ")");
    if (type == "ByteLevel") {
      LLM_REQUIRE(i + 1 == steps.size(), where, " is not the last step", expected);
      LLM_REQUIRE(!flag_key(s, "add_prefix_space", false, where), where,
                  " has add_prefix_space true, expected false (as the GPT-2, SmolLM2, Qwen2 and "
                  "Llama-3 tokenizers; a prefix space on every piece would make the cut points "
                  "of parallel encoding change the ids)");
      if (flag_key(s, "use_regex", true, where)) {
        out.steps.push_back(
            {HfPreStep::Kind::kGpt2, nullptr, HfPreStep::CutRule::kGpt2, false, {}});
        splits = true;
      }
    } else if (type == "Split") {
      const json pattern = s.contains("pattern") ? s.at("pattern") : json();
      LLM_REQUIRE(
          pattern.is_object() && pattern.contains("Regex") && pattern.at("Regex").is_string(),
          where, " has pattern ", short_dump(pattern), ", expected {\"Regex\": ...}");
      LLM_REQUIRE(string_key(s, "behavior") == "Isolated", where, " has behavior ",
                  short_dump(s.contains("behavior") ? s.at("behavior") : json()),
                  ", expected \"Isolated\"");
      LLM_REQUIRE(!flag_key(s, "invert", false, where), where, " has invert true, expected false");
      const std::string regex = pattern.at("Regex").get<std::string>();
      HfPreStep step{HfPreStep::Kind::kRegex, nullptr, HfPreStep::CutRule::kGpt2, false, {}};
      LLM_REQUIRE(hf_known_split_regex(regex, &step.cut), where, " has the regex \"",
                  regex.substr(0, 60), regex.size() > 60 ? "..." : "",
                  "\", expected GPT-2's, Llama-3's or Qwen2's (the regexes whose cut points for "
                  "parallel encoding ledgerlm knows)");
      step.regex = hf_regex_compile(regex, where);
      step.pattern = regex;
      out.steps.push_back(std::move(step));
      splits = true;
    } else if (type == "Digits") {
      out.steps.push_back({HfPreStep::Kind::kDigits,
                           nullptr,
                           HfPreStep::CutRule::kGpt2,
                           flag_key(s, "individual_digits", false, where),
                           {}});
    } else {
      fail(error_message(where, " is not supported", expected));
    }
  }
  LLM_REQUIRE(string_key(steps.back(), "type") == "ByteLevel", file,
              ": key 'pre_tokenizer' does not end with ByteLevel", expected);
  LLM_REQUIRE(splits, file,
              ": key 'pre_tokenizer' splits nothing (ByteLevel use_regex false and no Split)",
              expected);
  return out;
}

RawBpe read_tokenizer_json(const std::string& bytes, const std::string& file) {
  const json j = parse_json(bytes, file);
  LLM_REQUIRE(j.is_object(), file, ": expected a JSON object");
  RawBpe raw;
  raw.pipeline.nfc = read_normalizer(j.contains("normalizer") ? j.at("normalizer") : json(), file);
  LLM_REQUIRE(j.contains("pre_tokenizer") && j.at("pre_tokenizer").is_object(), file,
              ": key 'pre_tokenizer' is missing or null, expected {\"type\": \"ByteLevel\", "
              "\"add_prefix_space\": false} or a Sequence ending with it");
  raw.pipeline.steps = read_pre_tokenizer(j.at("pre_tokenizer"), file).steps;
  require_byte_level_or_null(j, "decoder", file);
  raw.post = post_processor_additions(
      j.contains("post_processor") ? j.at("post_processor") : json(), file);
  for (const char* key : {"truncation", "padding"}) {
    LLM_REQUIRE(is_null_or_absent(j, key), file, ": key '", key,
                "' is set, expected null (ledgerlm encodes whole documents)");
  }

  LLM_REQUIRE(j.contains("model") && j.at("model").is_object(), file, ": key 'model' is missing");
  const json& m = j.at("model");
  LLM_REQUIRE(m.value("type", "") == "BPE", file, ": key 'model.type' is ",
              m.contains("type") ? m.at("type").dump() : std::string("missing"),
              ", expected \"BPE\"");
  LLM_REQUIRE(is_null_or_absent(m, "dropout"), file, ": key 'model.dropout' is ",
              m.at("dropout").dump(), ", expected null (dropout makes encoding random)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    LLM_REQUIRE(is_null_or_absent(m, key) || m.at(key) == "", file, ": key 'model.", key, "' is ",
                m.at(key).dump(), ", expected null (GPT-2 has none)");
  }
  LLM_REQUIRE(is_null_or_absent(m, "byte_fallback") || m.at("byte_fallback") == false, file,
              ": key 'model.byte_fallback' is true, expected false (a byte-level vocabulary; "
              "sentencepiece-style BPE is not supported)");
  LLM_REQUIRE(m.contains("vocab"), file, ": key 'model.vocab' is missing");
  read_vocab(m.at("vocab"), file + ": key 'model.vocab'", &raw);
  if (m.contains("ignore_merges")) {
    LLM_REQUIRE(m.at("ignore_merges").is_boolean(), file,
                ": key 'model.ignore_merges' must be true or false");
    raw.ignore_merges = m.at("ignore_merges").get<bool>();
  }
  LLM_REQUIRE(m.contains("merges") && m.at("merges").is_array(), file,
              ": key 'model.merges' is missing or not an array");
  for (const auto& e : m.at("merges")) {
    std::pair<std::string, std::string> merge;
    // Written as "a b" by older versions of the tokenizers library, as ["a", "b"] by newer ones.
    const bool ok = e.is_string()
                        ? split_merge(e.get<std::string>(), &merge)
                        : e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string() &&
                              (merge = {e[0].get<std::string>(), e[1].get<std::string>()}, true);
    LLM_REQUIRE(ok, file, ": key 'model.merges' entry ", raw.merges.size(), " is ",
                e.dump().substr(0, 80), ", expected \"a b\" or [\"a\", \"b\"]");
    raw.merges.push_back(std::move(merge));
  }
  if (!is_null_or_absent(j, "added_tokens")) {
    LLM_REQUIRE(j.at("added_tokens").is_array(), file, ": key 'added_tokens' must be an array");
    for (const auto& t : j.at("added_tokens")) {
      LLM_REQUIRE(t.is_object() && t.contains("id") && t.at("id").is_number_integer() &&
                      t.contains("content") && t.at("content").is_string() &&
                      !t.at("content").get<std::string>().empty(),
                  file,
                  ": key 'added_tokens' has an entry without an integer 'id' and a "
                  "non-empty 'content' (",
                  t.dump().substr(0, 80), ")");
      for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
        LLM_REQUIRE(t.value(flag, false) == false, file, ": key 'added_tokens' entry ",
                    t.at("content").dump(), " has ", flag,
                    " true, expected false (GPT-2's added tokens match their text exactly)");
      }
      // The library's default: special tokens match the raw text, others the normalized text.
      const std::string where = file + ": key 'added_tokens' entry " + t.at("content").dump();
      const bool normalized =
          flag_key(t, "normalized", !flag_key(t, "special", false, where), where);
      LLM_REQUIRE(t.contains("id") && t.at("id").get<int64_t>() >= 0 &&
                      t.at("id").get<int64_t>() < (int64_t{1} << 31),
                  file, ": key 'added_tokens' entry ", t.at("content").dump(), " has id ",
                  t.at("id").dump(), ", expected an id in [0, 2^31)");
      raw.added.push_back(
          {t.at("content").get<std::string>(), t.at("id").get<int32_t>(), normalized});
    }
  }
  return raw;
}

RawBpe read_vocab_merges(const std::string& vocab_bytes, const std::string& vocab_file,
                         const std::string& merges_bytes, const std::string& merges_file) {
  RawBpe raw;
  raw.pipeline.steps.push_back(
      {HfPreStep::Kind::kGpt2, nullptr, HfPreStep::CutRule::kGpt2, false, {}});
  read_vocab(parse_json(vocab_bytes, vocab_file), vocab_file, &raw);
  std::istringstream lines(merges_bytes);
  std::string line;
  int64_t line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line.rfind("#version", 0) == 0) continue;
    std::pair<std::string, std::string> merge;
    LLM_REQUIRE(split_merge(line, &merge), merges_file, ": line ", line_no, " is \"",
                line.substr(0, 80), "\", expected two tokens separated by one space");
    raw.merges.push_back(std::move(merge));
    raw.merge_lines.push_back(line_no);
  }
  // As GPT-2's tokenizers do: its end-of-text entry of vocab.json is a special token, split out
  // of the text before pre-tokenization.
  for (const auto& [token, id] : raw.vocab) {
    if (token == kEotText) raw.added.push_back({token, static_cast<int32_t>(id)});
  }
  return raw;
}

// Ids, byte strings and merges resolved and checked. Errors name the file that holds the fault:
// `vocab_file` for the vocabulary and added tokens, `merges_file` for the merges (the same file
// for tokenizer.json).
HfBpeSpec resolve(const RawBpe& raw, const std::string& vocab_file,
                  const std::string& merges_file) {
  std::unordered_map<std::string, int32_t> by_text;
  int64_t size = 0;
  for (const auto& [token, id] : raw.vocab) {
    by_text.emplace(token, static_cast<int32_t>(id));
    size = std::max(size, id + 1);
  }
  for (const auto& a : raw.added) {
    LLM_REQUIRE(a.id >= 0, vocab_file, ": added token \"", a.content, "\" has a negative id");
    size = std::max<int64_t>(size, int64_t{a.id} + 1);
  }
  // GPT-2 has 50257 ids; a bound keeps a stray huge id from allocating gigabytes.
  LLM_REQUIRE(size <= kMaxVocab, vocab_file, ": ids reach ", size - 1, ", expected fewer than ",
              kMaxVocab, " tokens");
  HfBpeSpec spec;
  spec.ignore_merges = raw.ignore_merges;
  spec.pipeline = raw.pipeline;
  spec.token_bytes.resize(static_cast<size_t>(size));
  std::vector<char> assigned(static_cast<size_t>(size), 0);
  std::unordered_map<std::string, int32_t> added_ids;
  for (const auto& a : raw.added) {
    auto it = by_text.find(a.content);
    LLM_REQUIRE(it == by_text.end() || it->second == a.id, vocab_file, ": added token \"",
                a.content, "\" has id ", a.id, " but the vocabulary gives it ", it->second);
    LLM_REQUIRE(!assigned[a.id], vocab_file, ": id ", a.id, " belongs to two added tokens");
    assigned[a.id] = 1;
    spec.token_bytes[a.id] = a.content;
    spec.added.push_back(a);
    added_ids.emplace(a.content, a.id);
  }
  // The end-of-text token, by the names the families give it.
  for (const char* name : {kEotText, "<|end_of_text|>", "</s>"}) {
    auto it = added_ids.find(name);
    if (spec.eot_id < 0 && it != added_ids.end()) spec.eot_id = it->second;
  }
  for (const auto& [token, id] : raw.vocab) {
    if (added_ids.count(token)) continue;
    LLM_REQUIRE(!assigned[id], vocab_file, ": id ", id, " is given to two tokens (one is \"", token,
                "\")");
    assigned[id] = 1;
    LLM_REQUIRE(byte_level_decode(token, &spec.token_bytes[id]), vocab_file, ": token \"", token,
                "\" (id ", id,
                ") is not byte-level text (expected GPT-2's byte alphabet, "
                "e.g. \"\\u0120\" for a space)");
  }
  for (int b = 0; b < 256; ++b) {
    const std::string text = byte_level_encode(std::string(1, static_cast<char>(b)));
    auto it = by_text.find(text);
    LLM_REQUIRE(it != by_text.end() && !added_ids.count(text), vocab_file,
                ": the vocabulary lacks the byte-level token \"", text, "\" for byte ", b,
                " (expected all 256, so that any text can be encoded)");
    spec.byte_ids[b] = it->second;
  }
  for (int64_t id = 0; id < size; ++id) {
    LLM_REQUIRE(assigned[id], vocab_file, ": no token has id ", id, " (expected the ids 0..",
                size - 1, " without gaps)");
  }
  LLM_REQUIRE(spec.eot_id >= 0, vocab_file, ": has no ", kEotText,
              " added token (expected an end-of-text token, the separator of documents: ", kEotText,
              ", <|end_of_text|> or </s>)");
  // The post-processor's tokens: the ids it names must be the vocabulary's.
  auto post_ids = [&](const std::vector<std::pair<std::string, int64_t>>& names) {
    std::vector<int32_t> ids;
    for (const auto& [name, id] : names) {
      auto it = by_text.find(name);
      auto ia = added_ids.find(name);
      const int64_t known = ia != added_ids.end() ? ia->second
                            : it != by_text.end() ? it->second
                                                  : -1;
      LLM_REQUIRE(known >= 0 || (id >= 0 && id < size), vocab_file,
                  ": key 'post_processor' adds \"", name,
                  "\", which is not a token of the vocabulary");
      LLM_REQUIRE(id < 0 || known < 0 || id == known, vocab_file, ": key 'post_processor' gives \"",
                  name, "\" the id ", id, " but the vocabulary gives it ", known);
      ids.push_back(static_cast<int32_t>(id >= 0 ? id : known));
    }
    return ids;
  };
  spec.prefix = post_ids(raw.post.before);
  spec.suffix = post_ids(raw.post.after);
  // What the normalizer, pre-tokenizer and post-processor do, whatever the file's form.
  json steps = json::array();
  for (const HfPreStep& s : spec.pipeline.steps)
    steps.push_back({static_cast<int>(s.kind), s.pattern, s.individual_digits});
  spec.pipeline_text = json{
      {"nfc", spec.pipeline.nfc},
      {"steps", steps},
      {"prefix", spec.prefix},
      {"suffix",
       spec.suffix}}.dump();
  spec.merges.reserve(raw.merges.size());
  for (size_t r = 0; r < raw.merges.size(); ++r) {
    const auto& [a, b] = raw.merges[r];
    auto ia = by_text.find(a), ib = by_text.find(b), ic = by_text.find(a + b);
    const std::string at =
        r < raw.merge_lines.size() ? ": line " + std::to_string(raw.merge_lines[r]) + ":" : ":";
    LLM_REQUIRE(ia != by_text.end() && ib != by_text.end() && ic != by_text.end(), merges_file, at,
                " merge ", r, " (\"", a, " ", b, "\") names a token not in the vocabulary",
                merges_file == vocab_file ? std::string() : " of " + vocab_file);
    spec.merges.push_back({ia->second, ib->second, ic->second});
  }
  return spec;
}

}  // namespace

std::vector<HfFile> hf_bpe_files(const std::string& dir) {
  const fs::path d(dir);
  if (fs::exists(d / "tokenizer.json"))
    return {{"tokenizer.json", read_whole(d / "tokenizer.json")}};
  const bool vocab = fs::exists(d / "vocab.json"), merges = fs::exists(d / "merges.txt");
  LLM_REQUIRE(vocab && merges, dir, ": has no tokenizer.json and no ",
              vocab    ? "merges.txt"
              : merges ? "vocab.json"
                       : "vocab.json + merges.txt",
              " (expected a Hugging Face GPT-2 tokenizer)");
  return {{"vocab.json", read_whole(d / "vocab.json")},
          {"merges.txt", read_whole(d / "merges.txt")}};
}

HfBpeSpec hf_bpe_read(const std::string& dir) {
  std::vector<HfFile> files = hf_bpe_files(dir);
  auto path = [&](size_t i) { return (fs::path(dir) / files[i].name).string(); };
  HfBpeSpec spec =
      files.size() == 1
          ? resolve(read_tokenizer_json(files[0].bytes, path(0)), path(0), path(0))
          : resolve(read_vocab_merges(files[0].bytes, path(0), files[1].bytes, path(1)), path(0),
                    path(1));
  spec.files = std::move(files);
  return spec;
}

std::string hf_bpe_id(const std::vector<HfFile>& files) {
  if (files.size() == 1) return "hf-bpe:" + sha256_hex(files[0].bytes);
  std::string listing;
  for (const auto& f : files) listing += sha256_hex(f.bytes) + "  " + f.name + "\n";
  return "hf-bpe:" + sha256_hex(listing);
}

std::string hf_bpe_difference(const HfBpeSpec& a, const std::string& a_name, const HfBpeSpec& b,
                              const std::string& b_name) {
  // A token as the vocabulary files spell it (byte-level text; an added token as written).
  auto spelled = [](const HfBpeSpec& s, size_t id) {
    for (const HfAddedToken& t : s.added)
      if (static_cast<size_t>(t.id) == id) return t.content;
    return byte_level_encode(s.token_bytes[id]);
  };
  if (a.token_bytes.size() != b.token_bytes.size())
    return error_message(a_name, " has ", a.token_bytes.size(), " tokens, ", b_name, " ",
                         b.token_bytes.size());
  for (size_t id = 0; id < a.token_bytes.size(); ++id) {
    const std::string sa = spelled(a, id), sb = spelled(b, id);
    if (sa != sb)
      return error_message("id ", id, " is \"", sa, "\" in ", a_name, " but \"", sb, "\" in ",
                           b_name);
  }
  auto added_ids = [](const HfBpeSpec& s) {
    std::vector<int32_t> ids;
    for (const HfAddedToken& t : s.added) ids.push_back(t.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  if (added_ids(a) != added_ids(b))
    return error_message("the added tokens differ (", a.added.size(), " in ", a_name, ", ",
                         b.added.size(), " in ", b_name, ")");
  const size_t n = std::min(a.merges.size(), b.merges.size());
  for (size_t r = 0; r < n; ++r) {
    const HfBpeSpec::Merge &ma = a.merges[r], &mb = b.merges[r];
    if (ma.left != mb.left || ma.right != mb.right)
      return error_message("merge ", r, " is \"", spelled(a, ma.left), " ", spelled(a, ma.right),
                           "\" in ", a_name, " but \"", spelled(b, mb.left), " ",
                           spelled(b, mb.right), "\" in ", b_name);
  }
  if (a.merges.size() != b.merges.size())
    return error_message(a_name, " has ", a.merges.size(), " merges, ", b_name, " ",
                         b.merges.size());
  if (a.pipeline_text != b.pipeline_text)
    return error_message("the normalizer, pre_tokenizer or post_processor differ between ", a_name,
                         " and ", b_name);
  if (a.ignore_merges != b.ignore_merges)
    return error_message("model.ignore_merges is ", a.ignore_merges ? "true" : "false", " in ",
                         a_name, " but ", b.ignore_merges ? "true" : "false", " in ", b_name);
  return "";
}

}  // namespace ledgerlm
