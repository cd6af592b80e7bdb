// Shared by the data tests and the fuzz seed writer (tests/fuzz/make_seeds.cpp, which links no
// test library: header only, ledgerlm's data room alone): the smallest bytes-tokenizer data
// directory, as `prepare` would describe it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/meta.h"
#include "data/shard.h"

namespace ledgerlm::testing {

// The train tokens (every id of the bytes tokenizer once) and val tokens (40 ids) of the tiny set.
inline std::vector<int32_t> tiny_bytes_train() {
  std::vector<int32_t> train;
  for (int32_t t = 0; t < 257; ++t) train.push_back(t);
  return train;
}
inline std::vector<int32_t> tiny_bytes_val() {
  std::vector<int32_t> val;
  for (int32_t t = 0; t < 40; ++t) val.push_back((t * 7) % 257);
  return val;
}

// Writes DIR/train.bin and DIR/val.bin of the tiny set and returns their meta.json description
// (not written: a caller may add a test split first), with `source_bytes` bytes of one source.
inline DataMeta tiny_bytes_shards(const std::string& dir, int64_t source_bytes) {
  shard_write(dir + "/train.bin", tiny_bytes_train(), 257);
  shard_write(dir + "/val.bin", tiny_bytes_val(), 257);
  DataMeta meta;
  meta.tokenizer = "bytes";
  meta.vocab_size = 257;
  meta.eot_id = 256;
  meta.token_width = 2;
  meta.val_fraction = 0.1;
  meta.seed = 1234;
  meta.train = {257, 256, 1};
  meta.val = {40, 39, 1};
  meta.sources = {1, source_bytes};
  return meta;
}

// Adds the tiny set's test split (30 tokens, as prepare --test-fraction 0.05 would describe it):
// writes DIR/test.bin and sets meta's test keys.
inline void tiny_bytes_test_split(const std::string& dir, DataMeta& meta) {
  std::vector<int32_t> test;
  for (int32_t t = 0; t < 30; ++t) test.push_back((t * 11) % 257);
  shard_write(dir + "/test.bin", test, 257);
  meta.has_test = true;
  meta.test_fraction = 0.05;
  meta.test = {30, 29, 1};
}

}  // namespace ledgerlm::testing
