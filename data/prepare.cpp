// data_prepare(): read, split, train/choose the tokenizer, encode, write, publish atomically.
#include "data/prepare.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "data/corpus.h"
#include "data/sha256.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/base/check.h"

namespace fs = std::filesystem;

namespace ledgerlm {
namespace {

// Removes the temporary build directory unless release()d (i.e. on any error path).
class TempDirGuard {
 public:
  explicit TempDirGuard(std::string path) : path_(std::move(path)) {}
  ~TempDirGuard() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

// `dir` without trailing slashes, so that "out/" and "out" name the same sibling temp dir.
std::string normalize_out(const std::string& dir) {
  std::string s = fs::path(dir).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// rename() that fails instead of replacing: rename(2) would silently replace an empty directory
// created at DIR between our existence check and the publish.
void publish_dir(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) != 0) {
    int err = errno;
    fail(error_message("--out ", to, ": cannot publish the prepared data (",
                       err == EEXIST ? "it was created by someone else meanwhile" : strerror(err),
                       ")"));
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The directory of --tokenizer hf:DIR, "" for the other kinds.
std::string hf_source(const std::string& tokenizer) {
  return tokenizer.rfind("hf:", 0) == 0 ? tokenizer.substr(3) : std::string();
}

// The data directory of --tokenizer from:DIR (its tokenizer, whatever the kind), "" otherwise.
std::string data_source(const std::string& tokenizer) {
  return tokenizer.rfind("from:", 0) == 0 ? tokenizer.substr(5) : std::string();
}

}  // namespace

void PrepareOptions::validate() const {
  LLM_REQUIRE(!inputs.empty(), "--input is required (a file, a directory, or - for stdin)");
  LLM_REQUIRE(!out_dir.empty(), "--out is required (the data directory to create)");
  LLM_REQUIRE(tokenizer == "bpe" || tokenizer == "bytes" || hf_source(tokenizer).size() > 0 ||
                  data_source(tokenizer).size() > 0,
              "--tokenizer ", tokenizer,
              " is unknown (expected bpe, bytes, hf:DIR with a Hugging Face GPT-2 tokenizer or "
              "from:DIR with a prepared data directory whose tokenizer to reuse)");
  LLM_REQUIRE(val_fraction >= 0.0 && val_fraction < 1.0, "--val-fraction ", val_fraction,
              " must be in [0, 1)");
  if (tokenizer == "bpe") {
    LLM_REQUIRE(vocab_size >= 260 && vocab_size <= (int64_t{1} << 30), "--vocab-size ", vocab_size,
                " is out of range for bpe (expected 260 .. 2^30)");
  }
}

PrepareSummary data_prepare(const PrepareOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  options.validate();
  auto say = [&](const std::string& line) {
    if (!options.quiet) std::cout << "prepare: " << line << std::endl;
  };

  // Refuse before reading anything: the output must not exist, its parent must.
  const std::string out = normalize_out(options.out_dir);
  std::error_code ec;
  LLM_REQUIRE(!fs::exists(fs::symlink_status(out, ec)), "--out ", out,
              " already exists; refusing to overwrite (choose a new directory or remove it)");
  fs::path parent = fs::absolute(out).parent_path();
  LLM_REQUIRE(fs::is_directory(parent, ec), "--out ", out, ": parent directory ", parent.string(),
              " does not exist");

  // A given tokenizer is read first: a directory it cannot use is refused before the corpus is.
  std::unique_ptr<Tokenizer> tok;
  if (const std::string src = hf_source(options.tokenizer); !src.empty()) {
    tok = tokenizer_load_hf(src);
    say(error_message("read the Hugging Face GPT-2 tokenizer in ", src, ", vocab ",
                      tok->vocab_size(), ", eot id ", tok->eot_id()));
  } else if (const std::string data = data_source(options.tokenizer); !data.empty()) {
    // New text for a model trained on other data (fine-tuning): the same tokenizer, so the
    // same ids and the same data.tokenizer_id.
    tok = tokenizer_load(data);
    say(error_message("reusing the ", tok->name(), " tokenizer of ", data, ", vocab ",
                      tok->vocab_size(), ", eot id ", tok->eot_id()));
  }

  // Read and fingerprint the corpus.
  std::vector<std::string> files = corpus_list_files(options.inputs);
  LLM_REQUIRE(!files.empty(), "--input: no files found in ", options.inputs.front(),
              " (empty corpus)");
  std::vector<Document> docs =
      corpus_read(files, options.stdin_stream ? *options.stdin_stream : std::cin);
  DataMeta meta;
  int64_t total_bytes = 0;
  for (const auto& d : docs) {
    meta.sources.push_back({d.source, static_cast<int64_t>(d.text.size()), sha256_hex(d.text)});
    total_bytes += static_cast<int64_t>(d.text.size());
    if ((tok ? tok->name() : options.tokenizer) != "bytes") {
      size_t bad = 0;
      LLM_REQUIRE(utf8_is_valid(d.text, &bad), "--input ", d.source,
                  ": not valid UTF-8 text (bad byte at offset ", bad,
                  "); use --tokenizer bytes for binary data");
    }
  }
  LLM_REQUIRE(total_bytes > 0, "--input: the corpus is empty (", files.size(),
              " file(s), 0 bytes)");
  say(error_message("read ", docs.size(), " document(s), ", total_bytes, " bytes"));

  // Split every document: train = head, val = tail.
  std::vector<std::string_view> train_parts, val_parts;
  for (const auto& d : docs) {
    std::string_view text = d.text;
    size_t cut = corpus_split_point(text, options.val_fraction);
    if (cut > 0) train_parts.push_back(text.substr(0, cut));
    if (cut < text.size()) val_parts.push_back(text.substr(cut));
  }
  LLM_REQUIRE(!train_parts.empty(), "--input: no training text left after taking --val-fraction ",
              options.val_fraction, " for validation");

  // Tokenizer: bytes, or bpe trained on the train parts only (hf:SRC was read before the corpus).
  if (options.tokenizer == "bytes") {
    tok = tokenizer_make_bytes();
  } else if (!tok) {
    auto t = std::chrono::steady_clock::now();
    say(error_message("training bpe tokenizer, vocab ", options.vocab_size));
    tok = tokenizer_train_bpe(train_parts, options.vocab_size, options.seed);
    char line[128];
    std::snprintf(line, sizeof(line), "trained bpe tokenizer in %.1f s, vocab %lld",
                  seconds_since(t), static_cast<long long>(tok->vocab_size()));
    say(line);
  }

  // Encode each split, one eot after every document part.
  auto encode_split = [&](const std::vector<std::string_view>& parts, DataSplitInfo* info) {
    std::vector<int32_t> tokens;
    for (auto part : parts) {
      std::vector<int32_t> ids = tok->encode(part);
      tokens.insert(tokens.end(), ids.begin(), ids.end());
      tokens.push_back(tok->eot_id());
      info->bytes += static_cast<int64_t>(part.size());
      info->documents += 1;
    }
    info->tokens = static_cast<int64_t>(tokens.size());
    return tokens;
  };
  const auto t_encode = std::chrono::steady_clock::now();
  std::vector<int32_t> train_tokens = encode_split(train_parts, &meta.train);
  std::vector<int32_t> val_tokens = encode_split(val_parts, &meta.val);
  {
    // The encoder's speed, on one thread (scripts/bench/bench_tokenizer.sh reads this line).
    const double s = seconds_since(t_encode);
    const double mb = static_cast<double>(meta.train.bytes + meta.val.bytes) / 1e6;
    char line[128];
    std::snprintf(line, sizeof(line), "encoded %.2f MB in %.3f s (%.2f MB/s, 1 thread)", mb, s,
                  s > 0 ? mb / s : 0.0);
    say(line);
  }
  {
    char line[192];
    std::snprintf(line, sizeof(line),
                  "train %lld tokens (%lld bytes, %.2f bytes/token), val %lld tokens (%lld bytes)",
                  static_cast<long long>(meta.train.tokens),
                  static_cast<long long>(meta.train.bytes),
                  static_cast<double>(meta.train.bytes) / static_cast<double>(meta.train.tokens),
                  static_cast<long long>(meta.val.tokens), static_cast<long long>(meta.val.bytes));
    say(line);
  }

  meta.tokenizer = tok->name();
  meta.vocab_size = tok->vocab_size();
  meta.eot_id = tok->eot_id();
  meta.token_width = shard_token_width(meta.vocab_size);
  meta.val_fraction = options.val_fraction;
  meta.seed = options.seed;

  // Build everything in a sibling temp dir, then publish it with one rename.
  std::string templ = out + ".tmp-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  LLM_REQUIRE(::mkdtemp(buf.data()) != nullptr, "--out ", out, ": cannot create temp dir ", templ,
              " (", strerror(errno), ")");
  const std::string tmp = buf.data();
  TempDirGuard guard(tmp);
  // mkdtemp makes the directory 0700; give the result the permissions mkdir would have.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(tmp.c_str(), 0777 & ~mask);
  shard_write((fs::path(tmp) / "train.bin").string(), train_tokens, meta.vocab_size);
  shard_write((fs::path(tmp) / "val.bin").string(), val_tokens, meta.vocab_size);
  tok->save(tmp);
  meta_write((fs::path(tmp) / "meta.json").string(), meta);
  publish_dir(tmp, out);
  guard.release();

  PrepareSummary summary;
  summary.out_dir = out;
  summary.meta = meta;
  summary.seconds = seconds_since(t0);
  char line[128];
  std::snprintf(line, sizeof(line), "wrote %s in %.1f s", out.c_str(), summary.seconds);
  say(line);
  return summary;
}

}  // namespace ledgerlm
