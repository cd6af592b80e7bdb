// meta.json read/write with nlohmann::json; every read key is checked so that a hand-edited or
// foreign file fails with one line naming the file and the key.
#include "data/meta.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "model/base/check.h"
#include "model/base/input_file.h"

namespace ledgerlm {
namespace {

using nlohmann::json;

json split_to_json(const DataSplitInfo& s) {
  return json{{"tokens", s.tokens}, {"bytes", s.bytes}, {"documents", s.documents}};
}

// A key of the expected JSON type. Integers must be JSON integers that fit T (a float such as
// 1e300 would overflow the conversion), so a hand-edited file fails with one line.
template <class T>
T get_key(const json& obj, const std::string& key, const std::string& file) {
  LLM_REQUIRE(obj.is_object() && obj.contains(key), file, ": missing key '", key, "'");
  const json& v = obj.at(key);
  auto wrong = [&]() {
    fail(error_message(file, ": key '", key, "' has the wrong type (", v.type_name(), ")"));
  };
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) wrong();
    return v.get<std::string>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) wrong();
    return v.get<T>();
  } else if constexpr (std::is_unsigned_v<T>) {
    if (!v.is_number_unsigned()) wrong();
    return v.get<T>();
  } else {
    if (!v.is_number_integer()) wrong();
    const bool fits =
        v.is_number_unsigned()
            ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
            : v.get<int64_t>() >= std::numeric_limits<T>::min() &&
                  v.get<int64_t>() <= std::numeric_limits<T>::max();
    LLM_REQUIRE(fits, file, ": key '", key, "' is out of range (", v.dump(), ")");
    return static_cast<T>(v.get<int64_t>());
  }
}

DataSplitInfo split_from_json(const json& obj, const std::string& name, const std::string& file) {
  LLM_REQUIRE(obj.contains(name) && obj.at(name).is_object(), file, ": missing object '", name,
              "'");
  const json& s = obj.at(name);
  DataSplitInfo out;
  out.tokens = get_key<int64_t>(s, "tokens", file + " " + name);
  out.bytes = get_key<int64_t>(s, "bytes", file + " " + name);
  out.documents = get_key<int64_t>(s, "documents", file + " " + name);
  LLM_REQUIRE(out.tokens >= 0 && out.bytes >= 0, file, ": negative count in '", name, "'");
  return out;
}

}  // namespace

std::string meta_source_line(const DataSource& s) {
  return json{{"path", s.path}, {"bytes", s.bytes}, {"sha256", s.sha256}}.dump() + "\n";
}

namespace {

// The kinds of DataSkipped: meta.json's key, and the words of the printed line.
struct SkippedKind {
  int64_t DataSkipped::*count;
  const char* key;
  const char* one;
  const char* many;
};
constexpr SkippedKind kSkippedKinds[] = {
    {&DataSkipped::fifos, "fifos", "FIFO", "FIFOs"},
    {&DataSkipped::devices, "devices", "device", "devices"},
    {&DataSkipped::sockets, "sockets", "socket", "sockets"},
    {&DataSkipped::folder_links, "folder_links", "symbolic link to a folder (not followed)",
     "symbolic links to folders (not followed)"},
    {&DataSkipped::broken_links, "broken_links", "broken symbolic link", "broken symbolic links"},
    {&DataSkipped::other, "other", "other entry", "other entries"},
};

}  // namespace

std::string data_skipped_text(const DataSkipped& skipped) {
  std::string text;
  for (const SkippedKind& k : kSkippedKinds) {
    const int64_t n = skipped.*k.count;
    if (n == 0) continue;
    text += text.empty() ? "skipped " : ", ";
    text += std::to_string(n) + " " + (n == 1 ? k.one : k.many);
  }
  return text;
}

void meta_write(const std::string& path, const DataMeta& meta) {
  json sources = {
      {"files", meta.sources.files}, {"bytes", meta.sources.bytes}, {"list", kSourcesFile}};
  // Only when something was skipped: otherwise meta.json is byte for byte what it was before.
  if (meta.skipped.total() > 0) {
    json skipped = json::object();
    for (const SkippedKind& k : kSkippedKinds)
      if (meta.skipped.*k.count > 0) skipped[k.key] = meta.skipped.*k.count;
    sources["skipped"] = skipped;
  }
  json j = {{"format_version", kDataFormatVersion},
            {"tokenizer", meta.tokenizer},
            {"vocab_size", meta.vocab_size},
            {"eot_id", meta.eot_id},
            {"token_width", meta.token_width},
            {"val_fraction", meta.val_fraction},
            {"seed", meta.seed},
            {"train", split_to_json(meta.train)},
            {"val", split_to_json(meta.val)},
            {"sources", sources}};
  // Only with a test split: without one, meta.json is byte for byte what it was before.
  if (meta.has_test) {
    j["test_fraction"] = meta.test_fraction;
    j["test"] = split_to_json(meta.test);
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  LLM_REQUIRE(f, "cannot write ", path);
  f << j.dump(2) << "\n";
  f.close();
  LLM_REQUIRE(f, "error while writing ", path);
}

DataMeta meta_read(const std::string& dir) {
  std::string file = (std::filesystem::path(dir) / "meta.json").string();
  const int fd = input_file_open(file, "data file");
  LLM_REQUIRE(fd >= 0, file, ": cannot open (is ", dir,
              " a directory made by `ledgerlm prepare`?)");
  const std::string text = input_file_read_fd(fd, file, "data file");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(error_message(file, ": invalid JSON (", e.what(), ")"));
  }
  LLM_REQUIRE(j.is_object(), file, ": expected a JSON object");
  DataMeta m;
  m.format_version = get_key<int>(j, "format_version", file);
  LLM_REQUIRE(m.format_version == 1 || m.format_version == kDataFormatVersion, file,
              ": format_version ", m.format_version, " is not supported (expected 1 or ",
              kDataFormatVersion, ")");
  m.tokenizer = get_key<std::string>(j, "tokenizer", file);
  LLM_REQUIRE(m.tokenizer == "bpe" || m.tokenizer == "bytes" || m.tokenizer == "hf-bpe", file,
              ": tokenizer '", m.tokenizer, "' is unknown (expected bpe, bytes or hf-bpe)");
  m.vocab_size = get_key<int64_t>(j, "vocab_size", file);
  m.eot_id = get_key<int32_t>(j, "eot_id", file);
  LLM_REQUIRE(m.vocab_size > 0 && m.eot_id >= 0 && m.eot_id < m.vocab_size, file, ": eot_id ",
              m.eot_id, " must lie in [0, vocab_size=", m.vocab_size, ")");
  m.token_width = get_key<int>(j, "token_width", file);
  LLM_REQUIRE(m.token_width == 2 || m.token_width == 4, file, ": token_width must be 2 or 4");
  m.val_fraction = get_key<double>(j, "val_fraction", file);
  m.seed = get_key<uint64_t>(j, "seed", file);
  m.train = split_from_json(j, "train", file);
  m.val = split_from_json(j, "val", file);
  // The test split comes as a pair, or not at all (a directory prepared without one).
  m.has_test = j.contains("test_fraction") || j.contains("test");
  if (m.has_test) {
    m.test_fraction = get_key<double>(j, "test_fraction", file);
    LLM_REQUIRE(m.test_fraction > 0.0 && m.test_fraction < 1.0, file, ": test_fraction ",
                m.test_fraction, " must be in (0, 1)");
    m.test = split_from_json(j, "test", file);
  }
  if (m.format_version == 1) {
    LLM_REQUIRE(j.contains("sources") && j.at("sources").is_array(), file,
                ": missing array 'sources'");
    for (const auto& s : j.at("sources")) {
      get_key<std::string>(s, "path", file + " sources[]");
      get_key<std::string>(s, "sha256", file + " sources[]");
      m.sources.files += 1;
      m.sources.bytes += get_key<int64_t>(s, "bytes", file + " sources[]");
    }
  } else {
    LLM_REQUIRE(j.contains("sources") && j.at("sources").is_object(), file,
                ": missing object 'sources'");
    m.sources.files = get_key<int64_t>(j.at("sources"), "files", file + " sources");
    m.sources.bytes = get_key<int64_t>(j.at("sources"), "bytes", file + " sources");
    LLM_REQUIRE(m.sources.files >= 0 && m.sources.bytes >= 0, file,
                ": negative count in 'sources'");
    if (j.at("sources").contains("skipped")) {
      const json& skipped = j.at("sources").at("skipped");
      for (const SkippedKind& k : kSkippedKinds)
        if (skipped.is_object() && skipped.contains(k.key))
          m.skipped.*k.count = get_key<int64_t>(skipped, k.key, file + " sources.skipped");
    }
  }
  return m;
}

}  // namespace ledgerlm
