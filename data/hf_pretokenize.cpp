// The normalizer and pre-tokenizer steps of Hugging Face tokenizers (see hf_pretokenize.h).
#include "data/hf_pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "data/pretokenize_gpt2.h"
#include "data/unicode_classes.h"
#include "model/base/check.h"

namespace ledgerlm {

class HfRegex {
 public:
  explicit HfRegex(pcre2_code* code) : code_(code) {}
  ~HfRegex() { pcre2_code_free(code_); }
  HfRegex(const HfRegex&) = delete;
  HfRegex& operator=(const HfRegex&) = delete;
  const pcre2_code* code() const { return code_; }

 private:
  pcre2_code* code_;
};

namespace {

// The regexes whose cut rules are known (hf_pretokenize.h), as their tokenizer.json files spell
// them.
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Unicode's White_Space property, which the tokenizers library's regex engine (Oniguruma) means
// by \s. PCRE2's \s with UCP also takes U+180E (in its \h list), which Unicode 6.3 took out of
// White_Space, so \s and \S are spelled out before compiling.
constexpr const char* kWhiteSpaceRanges =
    R"(\x{9}-\x{D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string spell_out_white_space(const std::string& pattern, const std::string& where) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out +=
            in_class ? std::string(kWhiteSpaceRanges) : "[" + std::string(kWhiteSpaceRanges) + "]";
      } else if (e == 'S') {
        LLM_REQUIRE(!in_class, where, ": \\S inside a character class is not supported");
        out += "[^" + std::string(kWhiteSpaceRanges) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

// The code point that starts at byte i of valid UTF-8, and its length. safe_cut runs before the
// text's UTF-8 is checked: a sequence cut short by the end of `s` reads as U+FFFD, never past it.
uint32_t code_point_at(std::string_view s, size_t i, size_t* len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  if (p[0] < 0x80) {
    *len = 1;
    return p[0];
  }
  const size_t need = p[0] < 0xE0 ? 2 : p[0] < 0xF0 ? 3 : 4;
  if (i + need > s.size()) {
    *len = s.size() - i;
    return 0xFFFD;
  }
  if (p[0] < 0xE0) {
    *len = 2;
    return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
  }
  if (p[0] < 0xF0) {
    *len = 3;
    return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
  }
  *len = 4;
  return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
}

// The code point that ends just before byte p (p > 0), read over at most 4 bytes.
uint32_t code_point_before(std::string_view s, size_t p) {
  size_t start = p - 1;
  while (start > 0 && p - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
    --start;
  size_t len = 0;
  return code_point_at(s, start, &len);
}

bool is_space(uint32_t cp) {
  return unicode_class(cp) == UnicodeClass::kSpace;
}
bool is_number(uint32_t cp) {
  return unicode_class(cp) == UnicodeClass::kNumber;
}

bool ascii_white_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

void split_regex(const HfRegex& re, std::string_view text, std::vector<std::string_view>* out) {
  // Owned here and freed on every way out (an early return or a thrown error included).
  const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(re.code(), nullptr), &pcre2_match_data_free);
  LLM_REQUIRE(match != nullptr, "out of memory for a regex match");
  pcre2_match_data* md = match.get();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;  // the end of the last piece
  size_t from = 0;
  while (from < text.size()) {
    const int rc =
        pcre2_match(re.code(), subject, text.size(), from, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    LLM_REQUIRE(rc >= 0, "pre_tokenizer Split regex: PCRE2 match error ", rc);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t s = ov[0], e = ov[1];
    if (e == s) {  // an empty match splits nothing: search again one character on
      size_t len = 0;
      code_point_at(text, s, &len);
      from = s + len;
      continue;
    }
    if (s > at) out->push_back(text.substr(at, s - at));
    out->push_back(text.substr(s, e - s));
    at = from = e;
  }
  if (at < text.size()) out->push_back(text.substr(at));
}

void split_digits(bool individual, std::string_view text, std::vector<std::string_view>* out) {
  size_t start = 0;
  bool start_digit = false;
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    const bool digit = is_number(code_point_at(text, i, &len));
    if (i > start && (digit != start_digit || (digit && individual))) {
      out->push_back(text.substr(start, i - start));
      start = i;
    }
    if (i == start) start_digit = digit;
    i += len;
  }
  if (start < text.size()) out->push_back(text.substr(start));
}

}  // namespace

bool hf_known_split_regex(const std::string& pattern, HfPreStep::CutRule* rule) {
  if (pattern == kGpt2Regex) {
    *rule = HfPreStep::CutRule::kGpt2;
    return true;
  }
  if (pattern == kLlama3Regex || pattern == kQwen2Regex) {
    *rule = HfPreStep::CutRule::kLlama3;
    return true;
  }
  return false;
}

std::shared_ptr<const HfRegex> hf_regex_compile(const std::string& pattern,
                                                const std::string& where) {
  const std::string spelled = spell_out_white_space(pattern, where);
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(spelled.data()), spelled.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(err, message, sizeof message);
    LLM_REQUIRE(false, where, ": regex does not compile at offset ", offset, " (",
                reinterpret_cast<const char*>(message), ")");
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT, pcre2_match interprets: same matches
  return std::make_shared<const HfRegex>(code);
}

std::string hf_nfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  LLM_REQUIRE(n >= 0, "NFC normalizer: ", utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

void hf_pretokenize(const HfPipeline& pipeline, std::string_view text,
                    std::vector<std::string_view>* pieces, std::vector<std::string_view>* scratch) {
  std::vector<std::string_view>& cur = *scratch;
  cur.assign(1, text);
  std::vector<std::string_view> next;
  for (const HfPreStep& step : pipeline.steps) {
    next.clear();
    for (std::string_view piece : cur) {
      if (piece.empty()) continue;
      switch (step.kind) {
        case HfPreStep::Kind::kGpt2: {
          Gpt2Splitter split(piece);
          std::string_view p;
          while (split.next(&p)) next.push_back(p);
          break;
        }
        case HfPreStep::Kind::kRegex:
          split_regex(*step.regex, piece, &next);
          break;
        case HfPreStep::Kind::kDigits:
          split_digits(step.individual_digits, piece, &next);
          break;
      }
    }
    cur.swap(next);
  }
  for (std::string_view p : cur)
    if (!p.empty()) pieces->push_back(p);
}

bool hf_safe_cut(const HfPipeline& pipeline, std::string_view text, size_t p) {
  if (p == 0 || p >= text.size()) return true;
  bool splits = false;
  for (const HfPreStep& step : pipeline.steps) {
    if (step.kind == HfPreStep::Kind::kDigits) {
      size_t len = 0;
      if (is_number(code_point_before(text, p)) && is_number(code_point_at(text, p, &len)))
        return false;
      continue;
    }
    splits = true;
    const char c = text[p];
    if (step.cut == HfPreStep::CutRule::kGpt2) {
      if (!ascii_white_space(c) || is_space(code_point_before(text, p))) return false;
    } else {
      const bool before_blank = (c == ' ' || c == '\t') && !is_space(code_point_before(text, p));
      size_t len = 0;
      const bool after_newline = text[p - 1] == '\n' && !is_space(code_point_at(text, p, &len));
      if (!before_blank && !after_newline) return false;
    }
  }
  return splits;
}

}  // namespace ledgerlm
