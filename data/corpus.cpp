// Corpus files in order, reading them, and the per-document train/val/test split (see corpus.h).
#include "data/corpus.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/base/check.h"
#include "model/base/input_file.h"

namespace fs = std::filesystem;

namespace ledgerlm {
namespace {

bool is_hidden(const std::string& name) {
  return !name.empty() && name[0] == '.';
}

// Reads up to n bytes at an offset (fewer only at the end).
using ReadAt = std::function<size_t(uint64_t offset, char* buf, size_t n)>;

constexpr size_t kScanBlock = size_t{64} << 10;

// The last (backward) or first offset in [lo, hi] holding '\n', or UINT64_MAX; reads in blocks.
uint64_t find_newline(const ReadAt& read, uint64_t lo, uint64_t hi, bool backward) {
  if (hi < lo) return UINT64_MAX;
  // No bigger than the range: a corpus of many small files scans a few bytes per file.
  std::vector<char> buf(static_cast<size_t>(std::min<uint64_t>(kScanBlock, hi - lo + 1)));
  if (backward) {
    uint64_t end = hi + 1;  // scan [lo, end) from the top
    while (end > lo) {
      const uint64_t begin = end - std::min<uint64_t>(kScanBlock, end - lo);
      const size_t got = read(begin, buf.data(), static_cast<size_t>(end - begin));
      for (size_t i = got; i > 0; --i)
        if (buf[i - 1] == '\n') return begin + i - 1;
      end = begin;
    }
  } else {
    for (uint64_t begin = lo; begin <= hi;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(kScanBlock, hi - begin + 1));
      const size_t got = read(begin, buf.data(), want);
      const void* nl = std::memchr(buf.data(), '\n', got);
      if (nl != nullptr) return begin + (static_cast<const char*>(nl) - buf.data());
      if (got < want) break;
      begin += got;
    }
  }
  return UINT64_MAX;
}

// Where a held-out part of about `want` bytes ending at `end` (<= n) begins: the exact cut
// end - want, moved to the nearest line start p with 0 < p < end within a quarter of `want` on
// either side, else back to a UTF-8 character start. `end` when want is 0.
uint64_t part_start(uint64_t end, uint64_t want, const ReadAt& read) {
  if (want == 0 || end == 0) return end;
  const uint64_t cut = want >= end ? 0 : end - want;
  const uint64_t tolerance = std::max<uint64_t>(want / 4, 1);

  // Nearest line start p (byte p-1 is '\n') with 0 < p < end, on either side of the cut, no
  // further than the tolerance.
  uint64_t best = UINT64_MAX;
  if (cut > 0) {
    const uint64_t lo = cut - 1 >= tolerance ? cut - 1 - tolerance : 0;
    const uint64_t nl = find_newline(read, lo, cut - 1, true);
    if (nl != UINT64_MAX && nl + 1 < end) best = nl + 1;
  }
  const uint64_t nl = find_newline(read, cut, std::min(cut + tolerance - 1, end - 1), false);
  if (nl != UINT64_MAX && nl + 1 < end && (best == UINT64_MAX || nl + 1 - cut < cut - best))
    best = nl + 1;
  if (best != UINT64_MAX) return best;

  // No line boundary close enough: cut inside the line, but never inside a UTF-8 character.
  uint64_t p = cut;
  char c = 0;
  while (p > 0 && read(p, &c, 1) == 1 && (static_cast<unsigned char>(c) & 0xC0) == 0x80) --p;
  return p;
}

// The bytes of a document of n bytes that `fraction` of it asks for (0 when it rounds to none).
uint64_t fraction_bytes(uint64_t n, double fraction) {
  if (n == 0 || fraction <= 0.0) return 0;
  return static_cast<uint64_t>(std::llround(static_cast<double>(n) * fraction));
}

CorpusSplit split_points(uint64_t n, double val_fraction, double test_fraction,
                         const ReadAt& read) {
  CorpusSplit s;
  s.test_begin = part_start(n, fraction_bytes(n, test_fraction), read);
  s.val_begin = part_start(s.test_begin, fraction_bytes(n, val_fraction), read);
  return s;
}

}  // namespace

CorpusFiles::CorpusFiles(std::vector<std::string> inputs) : inputs_(std::move(inputs)) {}

// Counted by what the entry is, or for a symbolic link what it points to: a FIFO read as a
// document would block prepare until something writes to it, a device could be endless, and a
// linked folder would be a second copy of a tree (or a loop), so none is read, but a user who
// wonders where a document went sees how many of each were passed over.
void CorpusFiles::count_skipped(const fs::directory_entry& entry) {
  std::error_code ec;
  const bool link = entry.is_symlink(ec);
  if (ec) {
    skipped_.other += 1;
    return;
  }
  const fs::file_status st = entry.status(ec);
  if (st.type() == fs::file_type::not_found) {
    (link ? skipped_.broken_links : skipped_.other) += 1;
  } else if (ec) {
    skipped_.other += 1;
  } else if (link && fs::is_directory(st)) {
    skipped_.folder_links += 1;
  } else if (fs::is_fifo(st)) {
    skipped_.fifos += 1;
  } else if (fs::is_character_file(st) || fs::is_block_file(st)) {
    skipped_.devices += 1;
  } else if (fs::is_socket(st)) {
    skipped_.sockets += 1;
  } else {
    skipped_.other += 1;
  }
}

void CorpusFiles::push_directory(const std::string& dir) {
  Level level;
  level.dir = dir;
  std::error_code ec;
  fs::directory_iterator it(dir, fs::directory_options::none, ec), end;
  LLM_REQUIRE(!ec, "--input ", listing_, ": cannot list directory ", dir, " (", ec.message(), ")");
  for (; it != end; it.increment(ec)) {
    LLM_REQUIRE(!ec, "--input ", listing_, ": cannot list directory ", dir, " (", ec.message(),
                ")");
    std::string name = it->path().filename().string();
    if (is_hidden(name)) continue;
    std::error_code type_ec;
    // A real directory is walked; a symbolic link to one is not (as a recursive listing that
    // does not follow links); a regular file, or a link to one, is read.
    const bool is_dir = it->is_directory(type_ec) && !it->is_symlink(type_ec);
    if (!is_dir && !it->is_regular_file(type_ec)) {
      count_skipped(*it);
      continue;
    }
    // Sorting the names of directories with a '/' after them orders the walk as sorting the
    // full paths would: "a/x" comes after "a.txt" ('/' > '.') and before "a0".
    if (is_dir) name += '/';
    level.names.push_back(std::move(name));
  }
  LLM_REQUIRE(!ec, "--input ", listing_, ": cannot list directory ", dir, " (", ec.message(), ")");
  std::sort(level.names.begin(), level.names.end());
  stack_.push_back(std::move(level));
}

bool CorpusFiles::next(std::string* path) {
  while (true) {
    while (!stack_.empty()) {
      Level& top = stack_.back();
      if (top.next == top.names.size()) {
        stack_.pop_back();
        continue;
      }
      std::string& name = top.names[top.next++];
      const bool is_dir = name.back() == '/';
      if (is_dir) name.pop_back();
      // As a directory listing names its entries: the directory as given, then the name.
      std::string full = (fs::path(top.dir) / name).string();
      std::string().swap(name);  // walked: its memory is not needed any more
      if (!is_dir) {
        *path = std::move(full);
        return true;
      }
      push_directory(full);
    }
    if (input_ == inputs_.size()) return false;
    const std::string& input = inputs_[input_++];
    if (input == "-") {
      *path = input;
      return true;
    }
    std::error_code ec;
    fs::file_status st = fs::status(input, ec);
    LLM_REQUIRE(!ec && fs::exists(st), "--input ", input, ": no such file or directory");
    if (fs::is_directory(st)) {
      listing_ = input;
      push_directory(input);
      continue;
    }
    LLM_REQUIRE(fs::is_regular_file(st), "--input ", input, ": not a regular file or directory");
    *path = input;
    return true;
  }
}

std::vector<std::string> corpus_list_files(const std::vector<std::string>& inputs) {
  CorpusFiles files(inputs);
  std::vector<std::string> out;
  std::string path;
  while (files.next(&path)) out.push_back(path);
  return out;
}

InputFile::InputFile(const std::string& path, const std::string& name) : name_(name) {
  fd_ = input_file_open(path, "--input file");
  LLM_REQUIRE(fd_ >= 0, "--input ", name, ": cannot open for reading (", std::strerror(errno), ")");
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail(error_message("--input ", name, ": cannot stat (", std::strerror(err), ")"));
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t InputFile::read_at(uint64_t offset, char* buf, size_t n) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, buf + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    LLM_REQUIRE(got >= 0, "--input ", name_, ": read error (", std::strerror(errno), ")");
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

void corpus_spool_stdin(std::istream& in, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  LLM_REQUIRE(out, "cannot create ", path, " (to hold standard input)");
  std::vector<char> buf(size_t{1} << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    out.write(buf.data(), in.gcount());
  }
  LLM_REQUIRE(!in.bad(), "--input -: error reading standard input");
  out.close();
  LLM_REQUIRE(out, "error while writing ", path, " (disk full?)");
}

CorpusSplit corpus_split_points(std::string_view text, double val_fraction, double test_fraction) {
  return split_points(text.size(), val_fraction, test_fraction,
                      [&](uint64_t offset, char* buf, size_t n) {
                        if (offset >= text.size()) return size_t{0};
                        const size_t got = std::min<size_t>(n, text.size() - offset);
                        std::memcpy(buf, text.data() + offset, got);
                        return got;
                      });
}

CorpusSplit corpus_split_points(const InputFile& file, double val_fraction, double test_fraction) {
  return split_points(
      file.size(), val_fraction, test_fraction,
      [&](uint64_t offset, char* buf, size_t n) { return file.read_at(offset, buf, n); });
}

size_t corpus_split_point(std::string_view text, double val_fraction) {
  return static_cast<size_t>(corpus_split_points(text, val_fraction, 0.0).val_begin);
}

uint64_t corpus_split_point(const InputFile& file, double val_fraction) {
  return corpus_split_points(file, val_fraction, 0.0).val_begin;
}

}  // namespace ledgerlm
