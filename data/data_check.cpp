// Whole-directory check of prepared data (see data_check.h).
#include "data/data_check.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/sha256.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/base/check.h"
#include "model/base/input_file.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

void check_shard(const std::string& dir, const char* split, const DataSplitInfo& info,
                 const DataMeta& meta) {
  const std::string path = (fs::path(dir) / (std::string(split) + ".bin")).string();
  const ShardHeader h = shard_read_header(path);
  LLM_REQUIRE(static_cast<int>(h.width) == shard_token_width(meta.vocab_size), "token shard ", path,
              ": token width ", h.width, " does not match the vocab size ", meta.vocab_size, " of ",
              dir, "/meta.json");
  LLM_REQUIRE(static_cast<int64_t>(h.count) == info.tokens, "token shard ", path, ": ", h.count,
              " tokens, but ", dir, "/meta.json records ", info.tokens);
}

}  // namespace

std::string data_tokenizer_id(const std::string& dir, const DataMeta& meta) {
  if (meta.tokenizer == "bytes") return "bytes";
  if (meta.tokenizer == "hf-bpe") return tokenizer_hf_id(dir);
  const std::string path = (fs::path(dir) / "tokenizer.model").string();
  const int fd = input_file_open(path, "tokenizer model");
  LLM_REQUIRE(fd >= 0, path, ": cannot open the tokenizer model (", errno_text(), ")");
  return "bpe:" + sha256_hex(input_file_read_fd(fd, path, "tokenizer model"));
}

DataCheck data_check(const std::string& dir) {
  DataCheck out;
  out.meta = meta_read(dir);
  tokenizer_load(dir);  // loads it and checks vocab size and eot id against meta.json
  check_shard(dir, "train", out.meta.train, out.meta);
  check_shard(dir, "val", out.meta.val, out.meta);
  if (out.meta.has_test) check_shard(dir, "test", out.meta.test, out.meta);
  out.tokenizer_id = data_tokenizer_id(dir, out.meta);
  return out;
}

}  // namespace ledgerlm
