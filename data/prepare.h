// `ledgerlm prepare`: raw text -> a data directory with a tokenizer, token shards and meta.json.
//
//   DIR/train.bin, DIR/val.bin   token shards (shard.h), one eot after each document's part
//   DIR/tokenizer.model          sentencepiece model (bpe only)
//   DIR/tokenizer.json           hf:SRC only: SRC's tokenizer.json copied (or its vocab.json and
//                                merges.txt when it has no tokenizer.json)
//   DIR/meta.json                see meta.h and data/README.md
//
// The val split is the last val_fraction of every document (cut at a line start where one is
// close), so no val text is seen by the tokenizer or in training. Output is built in
// DIR.tmp-XXXXXX and renamed to DIR only when complete; an existing DIR is never touched.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "data/meta.h"

namespace ledgerlm {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files, directories, or "-" (stdin)
  std::string out_dir;
  // "bpe", "bytes", or "hf:SRC" for the Hugging Face GPT-2 tokenizer in directory SRC.
  std::string tokenizer = "bpe";
  int64_t vocab_size = 4096;  // bpe only; bytes is always 257, hf's is its own
  double val_fraction = 0.1;  // in [0, 1)
  uint64_t seed = 1234;
  bool quiet = false;                    // no progress lines on stdout
  std::istream* stdin_stream = nullptr;  // what "-" reads; nullptr = std::cin

  void validate() const;  // throws Error naming the offending option
};

struct PrepareSummary {
  std::string out_dir;
  DataMeta meta;  // exactly what was written to meta.json
  double seconds = 0.0;
};

// Runs the whole preparation. Prints progress lines to stdout unless quiet. Throws Error (with
// nothing left behind on disk) on bad input.
PrepareSummary data_prepare(const PrepareOptions& options);

}  // namespace ledgerlm
