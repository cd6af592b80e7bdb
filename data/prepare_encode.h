// The encoding pass of `prepare`: every document read once, in order, in bounded memory; split
// into its train, val and (with a test fraction) test parts; each part cut into chunks
// (chunker.h) that the threads of an EncodePool encode; the tokens appended, in document order,
// to train.bin, val.bin and test.bin, each non-empty part between the tokenizer's doc_prefix
// (Llama-3's BOS) and its doc_suffix followed by one eot; each file's size and SHA-256 listed in
// sources.jsonl.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/meta.h"
#include "data/tokenizer.h"

namespace ledgerlm {

// What the pass needs of PrepareOptions (prepare.h), resolved.
struct EncodePassOptions {
  std::vector<std::string> inputs;
  double val_fraction = 0.1;
  double test_fraction = 0.0;  // 0: no test split and no test.bin
  int threads = 1;
  uint64_t chunk_bytes = 0;
};

struct EncodePassResult {
  DataSplitInfo train, val, test;  // test: zero without a test split
  DataSourcesInfo sources;
  DataSkipped skipped;  // directory entries not read (FIFOs, devices, links to folders, ...)
  double seconds = 0.0;
  int threads = 0;
};

// Writes DIR/train.bin, DIR/val.bin, DIR/test.bin (test_fraction > 0 only) and DIR/sources.jsonl
// into `dir` (prepare's temporary directory). "-" in the inputs is read from `stdin_copy`.
EncodePassResult prepare_encode_corpus(const EncodePassOptions& options, const Tokenizer& tok,
                                       const std::string& stdin_copy, const std::string& dir);

// The file to open for an input path: `stdin_copy` for "-", the path itself otherwise.
inline const std::string& prepare_open_path(const std::string& path,
                                            const std::string& stdin_copy) {
  return path == "-" ? stdin_copy : path;
}

}  // namespace ledgerlm
