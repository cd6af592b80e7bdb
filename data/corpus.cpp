// Corpus listing/reading and the per-document train/val split (see corpus.h).
#include "data/corpus.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/base/check.h"

namespace fs = std::filesystem;

namespace ledgerlm {
namespace {

bool is_hidden(const fs::path& p) {
  std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

}  // namespace

std::vector<std::string> corpus_list_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const auto& input : inputs) {
    if (input == "-") {
      files.push_back(input);
      continue;
    }
    std::error_code ec;
    fs::file_status st = fs::status(input, ec);
    LLM_REQUIRE(!ec && fs::exists(st), "--input ", input, ": no such file or directory");
    if (fs::is_directory(st)) {
      std::vector<std::string> found;
      fs::recursive_directory_iterator it(input, fs::directory_options::none, ec), end;
      LLM_REQUIRE(!ec, "--input ", input, ": cannot list directory (", ec.message(), ")");
      for (; it != end; it.increment(ec)) {
        LLM_REQUIRE(!ec, "--input ", input, ": cannot list directory (", ec.message(), ")");
        if (is_hidden(it->path())) {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file()) found.push_back(it->path().string());
      }
      LLM_REQUIRE(!ec, "--input ", input, ": cannot list directory (", ec.message(), ")");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      LLM_REQUIRE(fs::is_regular_file(st), "--input ", input, ": not a regular file or directory");
      files.push_back(input);
    }
  }
  return files;
}

std::vector<Document> corpus_read(const std::vector<std::string>& files,
                                  std::istream& stdin_stream) {
  std::vector<Document> docs;
  docs.reserve(files.size());
  for (const auto& path : files) {
    Document d;
    d.source = path;
    std::ostringstream buf;
    if (path == "-") {
      buf << stdin_stream.rdbuf();
      LLM_REQUIRE(!stdin_stream.bad(), "--input -: error reading standard input");
    } else {
      std::ifstream f(path, std::ios::binary);
      LLM_REQUIRE(f, "--input ", path, ": cannot open for reading (permissions?)");
      // An empty file makes operator<< set failbit on `buf`; only a read error on `f` matters.
      if (f.peek() != std::ifstream::traits_type::eof()) buf << f.rdbuf();
      LLM_REQUIRE(!f.bad(), "--input ", path, ": read error");
    }
    d.text = buf.str();
    docs.push_back(std::move(d));
  }
  return docs;
}

size_t corpus_split_point(std::string_view text, double val_fraction) {
  const size_t n = text.size();
  if (n == 0 || val_fraction <= 0.0) return n;
  const size_t want_val = static_cast<size_t>(std::llround(static_cast<double>(n) * val_fraction));
  if (want_val == 0) return n;
  const size_t cut = want_val >= n ? 0 : n - want_val;
  const size_t tolerance = std::max<size_t>(want_val / 4, 1);

  // Nearest line start p (text[p-1] == '\n') with 0 < p < n, on either side of the cut.
  size_t best = std::string_view::npos;
  if (cut > 0) {
    size_t nl = text.rfind('\n', cut - 1);
    if (nl != std::string_view::npos && nl + 1 < n && cut - (nl + 1) <= tolerance) best = nl + 1;
  }
  size_t nl = text.find('\n', cut);
  if (nl != std::string_view::npos && nl + 1 < n && nl + 1 - cut <= tolerance &&
      (best == std::string_view::npos || nl + 1 - cut < cut - best)) {
    best = nl + 1;
  }
  if (best != std::string_view::npos) return best;

  // No line boundary close enough: cut inside the line, but never inside a UTF-8 character.
  size_t p = cut;
  while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
  return p;
}

}  // namespace ledgerlm
