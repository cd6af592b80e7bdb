// meta.json of a prepared data directory: which tokenizer, vocab size, eot id, token and byte
// counts per split (train, val, and test when prepared with one; bytes of UTF-8 text, for
// bits-per-byte), and how many source files (bytes)
// it was made from. Written by data_prepare(), read by the loader, the tokenizer factory and the
// trainer. The source files themselves, each with its sha256, are listed in sources.jsonl next to
// it, one JSON object per line, so that a corpus of millions of files keeps meta.json small.
//
// Format 2 (written now); format 1 (an inline "sources" array of those objects, token shards
// without checksums) is still read, so that `prepare --tokenizer from:DIR` can reuse an older
// directory's tokenizer when rebuilding it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ledgerlm {

inline constexpr int kDataFormatVersion = 2;
inline constexpr const char* kSourcesFile = "sources.jsonl";

struct DataSource {
  std::string path;  // as given on the command line (or found under a directory); "-" is stdin
  int64_t bytes = 0;
  std::string sha256;
};

// What a walk of --input directories passed over without reading, by kind: entries that are no
// regular file or directory. A symbolic link counts as what it points to, except one to a
// directory (never followed) and one to nothing. Hidden names ('.' first) are skipped by rule and
// not counted.
struct DataSkipped {
  int64_t fifos = 0;
  int64_t devices = 0;  // character and block devices
  int64_t sockets = 0;
  int64_t folder_links = 0;  // symbolic links to directories
  int64_t broken_links = 0;  // symbolic links to nothing
  int64_t other = 0;         // any other kind, or one whose kind could not be read
  int64_t total() const { return fifos + devices + sockets + folder_links + broken_links + other; }
  bool operator==(const DataSkipped&) const = default;
};

struct DataSourcesInfo {
  int64_t files = 0;
  int64_t bytes = 0;
};

// One line for people: "skipped 2 FIFOs, 1 device, 3 symbolic links to folders (not followed)";
// "" when nothing was skipped.
std::string data_skipped_text(const DataSkipped& skipped);

// One line of sources.jsonl (with its newline).
std::string meta_source_line(const DataSource& source);

struct DataSplitInfo {
  int64_t tokens = 0;     // tokens in the shard, including one eot per document part
  int64_t bytes = 0;      // bytes of UTF-8 text the tokens encode (eot counts 0)
  int64_t documents = 0;  // document parts with at least one byte of text
};

struct DataMeta {
  int format_version = kDataFormatVersion;
  std::string tokenizer;  // "bpe", "bytes" or "hf-bpe"
  int64_t vocab_size = 0;
  int32_t eot_id = -1;
  int token_width = 0;  // bytes per token in the shards (2 or 4)
  double val_fraction = 0.0;
  // prepare --test-fraction: a directory prepared with one > 0 has test.bin, and meta.json its
  // "test_fraction" and "test" keys; one without (every directory made before the test split
  // existed) has neither, and has_test is false.
  bool has_test = false;
  double test_fraction = 0.0;
  uint64_t seed = 0;
  DataSplitInfo train;
  DataSplitInfo val;
  DataSplitInfo test;  // has_test only
  DataSourcesInfo sources;
  // In meta.json's "sources" as "skipped" only when something was: a directory with nothing
  // skipped gets the meta.json it always had.
  DataSkipped skipped;
};

// Writes `meta` as pretty JSON to `path` (plain write: callers build in a temp directory).
void meta_write(const std::string& path, const DataMeta& meta);
// Reads DIR/meta.json; throws Error naming the file and the missing/invalid key.
DataMeta meta_read(const std::string& dir);

}  // namespace ledgerlm
