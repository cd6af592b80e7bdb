// Fuzz target: a prepared data directory as `ledgerlm train` checks it (data/data_check.h) —
// meta.json (types, ranges, the tokenizer it names, vocab and eot; format 1 and 2; the optional
// test split's keys) and the headers of its token shards against it: magic, version, width,
// count, checksum block size, the checksum table and the CRC over header and table — and then the
// shards loaded and every block read, each verified against its CRC-32C and every token against
// the vocab (data/shard.h). An input packs meta.json, train.bin, val.bin and (optionally) test.bin
// separated by fuzz::kPartSeparator. The bpe
// tokenizer's model file is not part of it (sentencepiece is not instrumented;
// tests/unit/data/test_data_tokenizer_damaged.cpp feeds it damaged models instead). Accepted: the
// directory passed every check and every block of its shards verified.
#include <cstdint>
#include <string>

#include "data/data_check.h"
#include "data/shard.h"
#include "model/base/check.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ledgerlm;
  static fuzz::Stats stats("fuzz_data");
  static fuzz::Scratch scratch;
  stats.input();
  const std::vector<std::string> parts = fuzz::split_parts(data, size, 4);
  const char* names[] = {"meta.json", "train.bin", "val.bin", "test.bin"};
  for (size_t i = 0; i < 4; ++i) {
    if (i >= parts.size()) {
      scratch.remove(names[i]);
    } else {
      scratch.write(names[i], parts[i]);
    }
  }
  try {
    const DataCheck checked = data_check(scratch.dir());
    for (const char* shard : {"train.bin", "val.bin", "test.bin"}) {
      if (std::string(shard) == "test.bin" && !checked.meta.has_test) continue;
      TokenArray tokens = shard_load(scratch.dir() + "/" + shard, nullptr, checked.meta.vocab_size);
      if (tokens.size() > 0) tokens.at(tokens.size() - 1);
      tokens.verify_all();
    }
    stats.accept();
  } catch (const Error&) {
    // Rejected with a message naming the file.
  }
  return 0;
}
