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

// The vocabulary and merges as strings, before they are resolved to ids.
struct RawBpe {
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<HfAddedToken> added;
  bool ignore_merges = false;
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

RawBpe read_tokenizer_json(const std::string& bytes, const std::string& file) {
  const json j = parse_json(bytes, file);
  LLM_REQUIRE(j.is_object(), file, ": expected a JSON object");
  LLM_REQUIRE(is_null_or_absent(j, "normalizer"), file, ": key 'normalizer' is ",
              j.at("normalizer").dump().substr(0, 80), ", expected null (GPT-2 has no normalizer)");
  LLM_REQUIRE(j.contains("pre_tokenizer") && j.at("pre_tokenizer").is_object(), file,
              ": key 'pre_tokenizer' is missing or null, expected {\"type\": \"ByteLevel\", "
              "\"add_prefix_space\": false} (GPT-2's)");
  const json& pre = j.at("pre_tokenizer");
  const bool gpt2_pre = pre.value("type", "") == "ByteLevel" && pre.contains("add_prefix_space") &&
                        pre.at("add_prefix_space") == false && pre.value("use_regex", true) == true;
  LLM_REQUIRE(gpt2_pre, file, ": key 'pre_tokenizer' is ", pre.dump().substr(0, 120),
              ", expected {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": "
              "true} (GPT-2's)");
  require_byte_level_or_null(j, "decoder", file);
  require_byte_level_or_null(j, "post_processor", file);
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
  RawBpe raw;
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
      raw.added.push_back({t.at("content").get<std::string>(), t.at("id").get<int32_t>()});
    }
  }
  return raw;
}

RawBpe read_vocab_merges(const std::string& vocab_bytes, const std::string& vocab_file,
                         const std::string& merges_bytes, const std::string& merges_file) {
  RawBpe raw;
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
  }
  // As GPT-2's tokenizers do: its end-of-text entry of vocab.json is a special token, split out
  // of the text before pre-tokenization.
  for (const auto& [token, id] : raw.vocab) {
    if (token == kEotText) raw.added.push_back({token, static_cast<int32_t>(id)});
  }
  return raw;
}

// Ids, byte strings and merges resolved and checked. `vocab_file` names the file in errors.
HfBpeSpec resolve(const RawBpe& raw, const std::string& vocab_file) {
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
    if (a.content == kEotText) spec.eot_id = a.id;
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
              " added token (expected GPT-2's end-of-text token, the separator of documents)");
  spec.merges.reserve(raw.merges.size());
  for (size_t r = 0; r < raw.merges.size(); ++r) {
    const auto& [a, b] = raw.merges[r];
    auto ia = by_text.find(a), ib = by_text.find(b), ic = by_text.find(a + b);
    LLM_REQUIRE(ia != by_text.end() && ib != by_text.end() && ic != by_text.end(), vocab_file,
                ": merge ", r, " (\"", a, " ", b, "\") names a token not in the vocabulary");
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
          ? resolve(read_tokenizer_json(files[0].bytes, path(0)), path(0))
          : resolve(read_vocab_merges(files[0].bytes, path(0), files[1].bytes, path(1)), path(0));
  spec.files = std::move(files);
  return spec;
}

std::string hf_bpe_id(const std::vector<HfFile>& files) {
  if (files.size() == 1) return "hf-bpe:" + sha256_hex(files[0].bytes);
  std::string listing;
  for (const auto& f : files) listing += sha256_hex(f.bytes) + "  " + f.name + "\n";
  return "hf-bpe:" + sha256_hex(listing);
}

}  // namespace ledgerlm
