// `ledgerlm prepare`: raw text -> a data directory with a tokenizer, token shards and meta.json.
//
//   DIR/train.bin, DIR/val.bin   token shards (shard.h), one eot after each document's part (and
//                                the tokenizer's doc_prefix, Llama-3's BOS, before it), with
//                                a CRC-32C per MiB of tokens
//   DIR/test.bin                 the same, for the test split (only with test_fraction > 0)
//   DIR/tokenizer.model          sentencepiece model (bpe only)
//   DIR/tokenizer.json           hf:SRC only: SRC's tokenizer.json copied (or its vocab.json and
//                                merges.txt when it has no tokenizer.json)
//   DIR/meta.json                see meta.h and data/README.md
//   DIR/sources.jsonl            the source files, with their sizes and sha256
//
// The val split is the last val_fraction of every document (cut at a line start where one is
// close), so no val text is seen by the tokenizer or in training. With test_fraction > 0 the last
// test_fraction of every document is the test split and val the val_fraction just before it, both
// fractions of the document's bytes (corpus.h): the tokenizer and the trainer see neither, and
// only `eval --split test` reads test.bin. Output is built in
// DIR.tmp-XXXXXX and renamed to DIR only when complete; an existing DIR is never touched.
//
// Memory is bounded whatever the input: files are read in pieces (the split point from the bytes
// around it), documents are listed one at a time (CorpusFiles), the bpe tokenizer trains on a
// sample of at most bpe_sample_bytes (bpe_sample.h), and encoding runs on `threads` threads over
// chunks of about chunk_bytes, a few per thread in flight (chunker.h, encode_pool.h), the tokens
// going straight to the shard files. The tokens do not depend on threads or chunk_bytes.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "data/bpe_sample.h"
#include "data/chunker.h"
#include "data/meta.h"

namespace ledgerlm {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files, directories, or "-" (stdin)
  std::string out_dir;
  // "bpe", "bytes", or "hf:SRC" for the Hugging Face GPT-2 tokenizer in directory SRC.
  std::string tokenizer = "bpe";
  int64_t vocab_size = 4096;  // bpe only; bytes is always 257, hf's is its own
  double val_fraction = 0.1;  // in [0, 1)
  // In [0, 1), with val_fraction + test_fraction < 1; 0: no test split, and the directory is
  // byte for byte what it was before test splits existed.
  double test_fraction = 0.0;
  uint64_t seed = 1234;
  int threads = 0;  // encoding threads; 0: every core this process may run on
  // bpe only: the most bytes of training text the tokenizer is trained on (bpe_sample.h).
  uint64_t bpe_sample_bytes = kDefaultBpeSampleBytes;
  // The chunk size aimed at (chunker.h); changes only speed and memory, never the tokens.
  uint64_t chunk_bytes = kDefaultChunkBytes;
  bool quiet = false;                    // no progress lines on stdout
  std::istream* stdin_stream = nullptr;  // what "-" reads; nullptr = std::cin

  void validate() const;  // throws Error naming the offending option
};

struct PrepareSummary {
  std::string out_dir;
  DataMeta meta;  // exactly what was written to meta.json
  double seconds = 0.0;
  double encode_seconds = 0.0;  // reading, encoding and writing the shards
  int threads = 0;              // encoding threads used
};

// Runs the whole preparation. Prints progress lines to stdout unless quiet. Throws Error (with
// nothing left behind on disk) on bad input.
PrepareSummary data_prepare(const PrepareOptions& options);

}  // namespace ledgerlm
