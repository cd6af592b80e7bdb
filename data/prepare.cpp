// data_prepare(): check the options and the output, choose or train the tokenizer (on a bounded
// sample), run the encoding pass (prepare_encode.h), write meta.json, publish atomically.
#include "data/prepare.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

#include "data/bpe_sample.h"
#include "data/corpus.h"
#include "data/encode_pool.h"
#include "data/prepare_encode.h"
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

// Creates the missing parent directories of --out (a new user's `--out data_out/mine` in a fresh
// checkout), and removes them again unless release()d: a failed prepare leaves nothing behind.
class MissingParents {
 public:
  explicit MissingParents(const fs::path& parent) {
    std::error_code ec;
    std::vector<fs::path> missing;  // deepest first
    fs::path p = parent;
    while (!p.empty() && !fs::exists(fs::symlink_status(p, ec))) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
      p = p.parent_path();
    }
    LLM_REQUIRE(p.empty() || fs::is_directory(p, ec), "--out: ", p.string(),
                " is not a directory (expected a directory to hold the prepared data)");
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (::mkdir(it->c_str(), 0777) == 0) {
        created_.push_back(*it);
      } else if (errno != EEXIST) {
        const int err = errno;
        remove_created();
        fail(error_message("--out: cannot create parent directory ", it->string(), " (",
                           strerror(err), ")"));
      }
    }
  }
  ~MissingParents() { remove_created(); }
  MissingParents(const MissingParents&) = delete;
  MissingParents& operator=(const MissingParents&) = delete;
  void release() { created_.clear(); }

 private:
  // Deepest first; remove() leaves a directory that something else has put files into.
  void remove_created() {
    std::error_code ec;
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) fs::remove(*it, ec);
    created_.clear();
  }
  std::vector<fs::path> created_;  // shallowest first
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

// What the held-out fractions took, for the error of a corpus left without training text.
std::string held_out(const PrepareOptions& options) {
  if (options.test_fraction > 0.0)
    return error_message("--val-fraction ", options.val_fraction, " and --test-fraction ",
                         options.test_fraction, " for validation and test");
  return error_message("--val-fraction ", options.val_fraction, " for validation");
}

// The end of the "no files found" error: with what the walk passed over, when it passed over
// something (a directory of FIFOs is not empty to its owner).
std::string empty_corpus_why(const DataSkipped& skipped) {
  return skipped.total() > 0 ? " (" + data_skipped_text(skipped) + ")" : " (empty corpus)";
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
  LLM_REQUIRE(test_fraction >= 0.0 && test_fraction < 1.0, "--test-fraction ", test_fraction,
              " must be in [0, 1)");
  LLM_REQUIRE(
      val_fraction + test_fraction < 1.0, "--val-fraction ", val_fraction, " + --test-fraction ",
      test_fraction,
      " must be below 1 (both are fractions of each document's bytes; train gets the rest)");
  if (tokenizer == "bpe") {
    LLM_REQUIRE(vocab_size >= 260 && vocab_size <= (int64_t{1} << 30), "--vocab-size ", vocab_size,
                " is out of range for bpe (expected 260 .. 2^30)");
  }
  LLM_REQUIRE(threads >= 0 && threads <= 4096, "--threads ", threads,
              " is out of range (expected 0 for every core, or 1 .. 4096)");
  LLM_REQUIRE(bpe_sample_bytes > 0, "--bpe-sample-mb must be > 0");
  LLM_REQUIRE(chunk_bytes >= 1 && chunk_bytes <= (uint64_t{1} << 30), "chunk size ", chunk_bytes,
              " is out of range (expected 1 .. 2^30 bytes)");
}

PrepareSummary data_prepare(const PrepareOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  options.validate();
  auto say = [&](const std::string& line) {
    if (!options.quiet) std::cout << "prepare: " << line << std::endl;
  };

  // Refuse before reading anything: the output must not exist.
  const std::string out = normalize_out(options.out_dir);
  std::error_code ec;
  LLM_REQUIRE(!fs::exists(fs::symlink_status(out, ec)), "--out ", out,
              " already exists; refusing to overwrite (choose a new directory or remove it)");

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
  } else if (options.tokenizer == "bytes") {
    tok = tokenizer_make_bytes();
  }

  // Missing parents of --out are made here (and removed again if prepare fails), once the
  // options and a given tokenizer have been accepted.
  MissingParents parents(fs::absolute(out).parent_path());
  // Everything is built in a sibling temp dir, then published with one rename.
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

  // Standard input is copied to a file first, so that it is read like any other document.
  std::string stdin_copy;
  if (std::find(options.inputs.begin(), options.inputs.end(), "-") != options.inputs.end()) {
    stdin_copy = (fs::path(tmp) / ".stdin").string();
    corpus_spool_stdin(options.stdin_stream ? *options.stdin_stream : std::cin, stdin_copy);
  }

  // bpe: trained on the train parts only, at most bpe_sample_bytes of them.
  if (!tok) {
    int64_t files = 0, bytes = 0;
    DataSkipped skipped;
    const DocumentWalk walk = [&](const TrainPartVisitor& visit) {
      files = bytes = 0;
      CorpusFiles corpus(options.inputs);
      std::string path;
      while (corpus.next(&path)) {
        const InputFile file(prepare_open_path(path, stdin_copy), path);
        files += 1;
        bytes += static_cast<int64_t>(file.size());
        // The train part: the tokenizer never sees val or test text.
        visit(file,
              corpus_split_points(file, options.val_fraction, options.test_fraction).val_begin);
      }
      skipped = corpus.skipped();
    };
    const BpeSample sample = bpe_sample(walk, options.bpe_sample_bytes);
    LLM_REQUIRE(files > 0, "--input: no files found in ", options.inputs.front(),
                empty_corpus_why(skipped));
    LLM_REQUIRE(bytes > 0, "--input: the corpus is empty (", files, " file(s), 0 bytes)");
    LLM_REQUIRE(sample.train_bytes > 0, "--input: no training text left after taking ",
                held_out(options));
    auto t = std::chrono::steady_clock::now();
    say(error_message("training bpe tokenizer, vocab ", options.vocab_size, ", on ",
                      sample.whole ? "all " : "a sample of ", sample.text.size(), " bytes",
                      sample.whole ? ""
                                   : error_message(" of the ", sample.train_bytes,
                                                   " bytes of training text (--bpe-sample-mb ",
                                                   options.bpe_sample_bytes / 1'000'000, ")")));
    tok = tokenizer_train_bpe(sample.parts, options.vocab_size, options.seed);
    char line[128];
    std::snprintf(line, sizeof(line), "trained bpe tokenizer in %.1f s, vocab %lld",
                  seconds_since(t), static_cast<long long>(tok->vocab_size()));
    say(line);
  }

  EncodePassOptions pass_options;
  pass_options.inputs = options.inputs;
  pass_options.val_fraction = options.val_fraction;
  pass_options.test_fraction = options.test_fraction;
  pass_options.threads = options.threads > 0 ? options.threads : encode_default_threads();
  pass_options.chunk_bytes = options.chunk_bytes;
  const EncodePassResult pass = prepare_encode_corpus(pass_options, *tok, stdin_copy, tmp);
  LLM_REQUIRE(pass.sources.files > 0, "--input: no files found in ", options.inputs.front(),
              empty_corpus_why(pass.skipped));
  // Entries that are no regular file (FIFOs, devices, linked folders) are not read: said once.
  if (pass.skipped.total() > 0) say(data_skipped_text(pass.skipped));
  LLM_REQUIRE(pass.sources.bytes > 0, "--input: the corpus is empty (", pass.sources.files,
              " file(s), 0 bytes)");
  LLM_REQUIRE(pass.train.documents > 0, "--input: no training text left after taking ",
              held_out(options));
  if (!stdin_copy.empty()) fs::remove(stdin_copy);

  DataMeta meta;
  meta.tokenizer = tok->name();
  meta.vocab_size = tok->vocab_size();
  meta.eot_id = tok->eot_id();
  meta.token_width = shard_token_width(meta.vocab_size);
  meta.val_fraction = options.val_fraction;
  meta.seed = options.seed;
  meta.train = pass.train;
  meta.val = pass.val;
  meta.has_test = options.test_fraction > 0.0;
  if (meta.has_test) {
    meta.test_fraction = options.test_fraction;
    meta.test = pass.test;
  }
  meta.sources = pass.sources;
  meta.skipped = pass.skipped;
  {
    const double mb =
        static_cast<double>(meta.train.bytes + meta.val.bytes + meta.test.bytes) / 1e6;
    char line[160];
    std::snprintf(line, sizeof(line), "encoded %.2f MB in %.3f s (%.2f MB/s, %d thread%s)", mb,
                  pass.seconds, pass.seconds > 0 ? mb / pass.seconds : 0.0, pass.threads,
                  pass.threads == 1 ? "" : "s");
    say(line);
  }
  {
    char line[256];
    std::snprintf(line, sizeof(line),
                  "%lld document(s), train %lld tokens (%lld bytes, %.2f bytes/token), val %lld "
                  "tokens (%lld bytes)",
                  static_cast<long long>(meta.sources.files),
                  static_cast<long long>(meta.train.tokens),
                  static_cast<long long>(meta.train.bytes),
                  static_cast<double>(meta.train.bytes) / static_cast<double>(meta.train.tokens),
                  static_cast<long long>(meta.val.tokens), static_cast<long long>(meta.val.bytes));
    std::string text = line;
    if (meta.has_test)
      text += error_message(", test ", meta.test.tokens, " tokens (", meta.test.bytes, " bytes)");
    say(text);
  }

  tok->save(tmp);
  meta_write((fs::path(tmp) / "meta.json").string(), meta);
  publish_dir(tmp, out);
  guard.release();
  parents.release();

  PrepareSummary summary;
  summary.out_dir = out;
  summary.meta = meta;
  summary.seconds = seconds_since(t0);
  summary.encode_seconds = pass.seconds;
  summary.threads = pass.threads;
  char line[128];
  std::snprintf(line, sizeof(line), "wrote %s in %.1f s", out.c_str(), summary.seconds);
  say(line);
  return summary;
}

}  // namespace ledgerlm
