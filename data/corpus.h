// The raw text corpus of `prepare`: its files, read in bounded memory, and the per-document
// train/val/test split. A document is one input file (or all of stdin for "-", which prepare first
// copies to a file in its temporary output directory so it can be read like any other).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/meta.h"

namespace ledgerlm {

// The --input values expanded into the files to read, one at a time, in order: a file as is, a
// directory as all regular files below it sorted by path (entries whose name starts with '.' are
// skipped, so .git and editor droppings stay out; symbolic links to files are read, those to
// directories are not followed; FIFOs, devices and sockets are not read, and counted in
// skipped()), "-" as itself. The order is that of sorting the full paths as
// byte strings; it is produced by walking the tree depth first with each directory's entries
// sorted, so memory holds the entries of the directories on the current path, never the whole
// listing (a directory of a million files: its million names, about 40 bytes each plus the
// names' length past 15 bytes).
class CorpusFiles {
 public:
  explicit CorpusFiles(std::vector<std::string> inputs);
  // The next file; false when there are no more. Throws Error for an input that does not exist
  // or a directory that cannot be listed.
  bool next(std::string* path);
  // The entries passed over so far, by kind (FIFOs, devices, links to folders, ...): complete
  // once next() has returned false.
  const DataSkipped& skipped() const { return skipped_; }

 private:
  struct Level {
    std::string dir;
    // Names in order, a directory's with a '/' after it (which also sorts them right).
    std::vector<std::string> names;
    size_t next = 0;
  };
  void push_directory(const std::string& dir);
  void count_skipped(const std::filesystem::directory_entry& entry);

  std::vector<std::string> inputs_;
  size_t input_ = 0;
  std::string listing_;  // the --input value being listed, for errors
  std::vector<Level> stack_;
  DataSkipped skipped_;
};

// All of CorpusFiles at once (tests).
std::vector<std::string> corpus_list_files(const std::vector<std::string>& inputs);

// A source file opened for reading. `name` is how errors and meta.json call it (the path as found,
// or "-" for stdin's copy at `path`).
class InputFile {
 public:
  InputFile(const std::string& path, const std::string& name);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Reads up to n bytes at `offset` (fewer only at the end of the file). Throws Error naming
  // the file on a read error.
  size_t read_at(uint64_t offset, char* buf, size_t n) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string name_;
};

// Copies `in` (standard input) to the file `path`; throws Error on a read or write error.
void corpus_spool_stdin(std::istream& in, const std::string& path);

// The held-out parts of a document of n bytes: train is [0, val_begin), val
// [val_begin, test_begin), test [test_begin, n).
struct CorpusSplit {
  uint64_t val_begin = 0;
  uint64_t test_begin = 0;
};

// Where the val and test parts of a text begin. Both fractions are of the document's bytes: test
// is its last `test_fraction`, val the `val_fraction` just before test (the last val_fraction
// when test_fraction is 0). Each part's exact cut (its end minus round(n x fraction) bytes) moves
// to the nearest line start within a quarter of the part's length, when one lies there before
// the part's end, and otherwise back to a UTF-8 character boundary. A part that rounds to zero
// bytes, or a fraction of 0, is empty (it begins where it ends). The val cut of
// test_fraction 0 is that of every release before the test split existed. The file form reads
// only the bytes around the cuts.
CorpusSplit corpus_split_points(std::string_view text, double val_fraction, double test_fraction);
CorpusSplit corpus_split_points(const InputFile& file, double val_fraction, double test_fraction);

// Where val begins without a test split (corpus_split_points(..., 0).val_begin).
size_t corpus_split_point(std::string_view text, double val_fraction);
uint64_t corpus_split_point(const InputFile& file, double val_fraction);

}  // namespace ledgerlm
