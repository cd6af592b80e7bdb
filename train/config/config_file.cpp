// Config files through toml++, typed against the key registry (see config_file.h).
#include "train/config/config_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <toml++/toml.h>

#include "model/base/check.h"
#include "model/base/input_file.h"

namespace ledgerlm {
namespace {

// "a string", "an array", ... for messages.
const char* toml_type_words(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

std::string at_line(const toml::source_region& where) {
  return where.begin.line > 0 ? error_message(" (line ", where.begin.line, ")") : std::string();
}

const char* expected_words(KeyType type) {
  switch (type) {
    case KeyType::kInt:
      return "an integer";
    case KeyType::kFloat:
      return "a number";
    case KeyType::kBool:
      return "true or false";
    case KeyType::kString:
      return "a string";
  }
  return "a value";
}

// Stores one TOML value into the key's field, or fails naming origin, key and line.
void store_value(const ConfigKey& key, const toml::node& node, const std::string& origin) {
  auto wrong = [&] {
    fail(error_message(origin, ": key '", key.full(), "' expects ", expected_words(key.type),
                       ", got ", toml_type_words(node), at_line(node.source())));
  };
  switch (key.type) {
    case KeyType::kInt:
      if (!node.is_integer()) wrong();
      *static_cast<int64_t*>(key.field) = node.as_integer()->get();
      return;
    case KeyType::kFloat: {
      double v = 0.0;
      if (node.is_integer()) {
        v = static_cast<double>(node.as_integer()->get());
      } else if (node.is_floating_point()) {
        v = node.as_floating_point()->get();
      } else {
        wrong();
      }
      LLM_REQUIRE(std::isfinite(v), origin, ": key '", key.full(), "' expects a finite number",
                  at_line(node.source()));
      *static_cast<double*>(key.field) = v;
      return;
    }
    case KeyType::kBool:
      if (!node.is_boolean()) wrong();
      *static_cast<bool*>(key.field) = node.as_boolean()->get();
      return;
    case KeyType::kString: {
      if (!node.is_string()) wrong();
      const std::string& s = node.as_string()->get();
      LLM_REQUIRE(s.find('\0') == std::string::npos, origin, ": key '", key.full(),
                  "' contains a NUL character", at_line(node.source()));
      *static_cast<std::string*>(key.field) = s;
      return;
    }
  }
}

toml::table parse_or_fail(std::string_view text, const std::string& origin) {
  try {
    return toml::parse(text);
  } catch (const toml::parse_error& e) {
    const toml::source_position& at = e.source().begin;
    fail(error_message(origin, ": not valid TOML at line ", at.line, ", column ", at.column, ": ",
                       e.description()));
  }
}

}  // namespace

std::set<std::string> config_load_toml(std::string_view text, const std::string& origin,
                                       const std::vector<ConfigKey>& keys) {
  std::map<std::string, const ConfigKey*> by_name;
  std::set<std::string> sections;
  for (const ConfigKey& k : keys) {
    by_name[k.full()] = &k;
    sections.insert(k.section);
  }
  const toml::table root = parse_or_fail(text, origin);
  std::set<std::string> set;
  for (const auto& [section_key, section] : root) {
    const std::string section_name(section_key.str());
    const toml::table* table = section.as_table();
    LLM_REQUIRE(table != nullptr, origin, ": key '", section_name, "' must be inside a [section]",
                at_line(section.source()));
    LLM_REQUIRE(!table->empty() || sections.count(section_name), origin, ": unknown section [",
                section_name, "]", at_line(section.source()));
    for (const auto& [key, value] : *table) {
      const std::string full = section_name + "." + std::string(key.str());
      auto it = by_name.find(full);
      LLM_REQUIRE(it != by_name.end(), origin, ": unknown key '", full, "'", at_line(key.source()));
      store_value(*it->second, value, origin);
      set.insert(full);
    }
  }
  return set;
}

std::set<std::string> config_load_file(const std::string& path,
                                       const std::vector<ConfigKey>& keys) {
  // A directory opens as a stream on Linux and reads as empty text: every key would silently
  // keep its default (a run of the default model). Refuse it by name.
  std::error_code ec;
  LLM_REQUIRE(!std::filesystem::is_directory(path, ec), "config file '", path,
              "' is a directory; expected a TOML file (e.g. ", path, "/config.toml)");
  // A FIFO or a device is refused too, in one line, before anything waits on it.
  const int fd = input_file_open(path, "config file");
  LLM_REQUIRE(fd >= 0, "config file '", path, "': cannot be read (", errno_text(), ")");
  const std::string text = input_file_read_fd(fd, path, "config file");
  return config_load_toml(text, "config file '" + path + "'", keys);
}

}  // namespace ledgerlm
