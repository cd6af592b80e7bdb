// prepare's encoding pass (see prepare_encode.h).
#include "data/prepare_encode.h"

#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>

#include "data/chunker.h"
#include "data/corpus.h"
#include "data/encode_pool.h"
#include "data/sha256.h"
#include "data/shard.h"
#include "model/base/check.h"

namespace fs = std::filesystem;

namespace ledgerlm {
namespace {

constexpr size_t kReadBytes = size_t{1} << 20;
// Chunks are handed to the threads in jobs of at least this much text (or the chunks left at the
// end): one thread handoff per small file would cost more than encoding it.
constexpr size_t kJobBytes = size_t{64} << 10;

// One document read front to back exactly once: a sliding window of its bytes, each byte fed to
// SHA-256 as it is read.
class DocumentStream {
 public:
  explicit DocumentStream(const InputFile& file) : file_(file) {}

  // Makes the bytes up to `end` (<= the file size) available.
  void fill_to(uint64_t end) {
    while (read_to_ < end) {
      const size_t want = static_cast<size_t>(std::max<uint64_t>(kReadBytes, end - read_to_));
      const size_t n = static_cast<size_t>(std::min<uint64_t>(want, file_.size() - read_to_));
      const size_t at = buf_.size();
      buf_.resize(at + n);
      const size_t got = file_.read_at(read_to_, buf_.data() + at, n);
      LLM_REQUIRE(got == n, "--input ", file_.name(), ": changed while being read (", file_.size(),
                  " bytes when opened, ended at ", read_to_ + got, ")");
      sha_.update(std::string_view(buf_.data() + at, n));
      read_to_ += n;
    }
  }
  // Forgets the bytes before `offset` (they are moved out once they fill half the buffer, so
  // that tiny chunks do not move the rest of the buffer every time).
  void drop_before(uint64_t offset) {
    if (offset <= begin_) return;
    const size_t n = static_cast<size_t>(offset - begin_);
    if (n < kReadBytes && 2 * n < buf_.size()) return;
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(n));
    begin_ = offset;
  }
  std::string_view view(uint64_t begin, uint64_t end) const {
    LLM_ASSERT(begin >= begin_ && end <= read_to_ && begin <= end);
    return std::string_view(buf_.data() + (begin - begin_), static_cast<size_t>(end - begin));
  }
  // Reads the rest (SHA-256 covers the whole file) and checks the file did not grow.
  std::string finish() {
    fill_to(file_.size());
    char extra = 0;
    LLM_REQUIRE(file_.read_at(file_.size(), &extra, 1) == 0, "--input ", file_.name(),
                ": changed while being read (grew past the ", file_.size(),
                " bytes it had when opened)");
    return sha_.hex_digest();
  }

 private:
  const InputFile& file_;
  std::vector<char> buf_;  // bytes [begin_, read_to_)
  uint64_t begin_ = 0;
  uint64_t read_to_ = 0;
  Sha256 sha_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The shards a part can go to, in document order.
enum Split { kTrain = 0, kVal = 1, kTest = 2 };

// Submits chunks in jobs, and writes finished ones to their shard in order.
class ShardFeeder {
 public:
  ShardFeeder(const Tokenizer& tok, int threads, const std::string& dir, bool check_utf8,
              bool with_test)
      : tok_(tok),
        pool_(tok, threads, check_utf8),
        train_((fs::path(dir) / "train.bin").string(), tok.vocab_size()),
        val_((fs::path(dir) / "val.bin").string(), tok.vocab_size()),
        max_in_flight_(2 * static_cast<size_t>(threads) + 2),
        prefix_(tok.doc_prefix()),
        end_(tok.doc_suffix()) {
    // The eot ends every part, once: a post-processor's suffix that already ends with it (a
    // template "$A <|endoftext|>") is not followed by a second.
    if (end_.empty() || end_.back() != tok.eot_id()) end_.push_back(tok.eot_id());
    if (with_test)
      test_ =
          std::make_unique<ShardWriter>((fs::path(dir) / "test.bin").string(), tok.vocab_size());
  }

  // Adds a chunk of a part of `split`, `first` if it starts the part and `last` if it ends it.
  void submit(Split split, std::string_view text, const std::string& source, uint64_t offset,
              bool first, bool last) {
    LLM_ASSERT(split != kTest || test_);
    job_.text += text;
    job_.chunks.push_back({job_.text.size(), source, offset});
    job_places_.push_back({split, first, last});
    DataSplitInfo& info = split == kTrain ? train_info : split == kVal ? val_info : test_info;
    info.bytes += static_cast<int64_t>(text.size());
    if (last) info.documents += 1;
    if (job_.text.size() >= kJobBytes) flush();
  }

  void finish() {
    flush();
    while (pool_.pending() > 0) write_one();
    train_.finish();
    val_.finish();
    train_info.tokens = train_.count();
    val_info.tokens = val_.count();
    if (test_) {
      test_->finish();
      test_info.tokens = test_->count();
    }
  }

  int threads() const { return pool_.threads(); }
  DataSplitInfo train_info, val_info, test_info;

 private:
  struct Place {
    Split split;
    bool first, last;
  };
  ShardWriter& shard(Split split) {
    return split == kTrain ? train_ : split == kVal ? val_ : *test_;
  }
  void flush() {
    if (job_.chunks.empty()) return;
    while (pool_.pending() >= max_in_flight_) write_one();
    pool_.submit(std::move(job_));
    pending_.push_back(std::move(job_places_));
    job_ = {};
    job_places_.clear();
  }
  void write_one() {
    const EncodedJob done = pool_.take();
    const std::vector<Place> places = std::move(pending_.front());
    pending_.pop_front();
    size_t begin = 0;
    for (size_t i = 0; i < places.size(); ++i) {
      ShardWriter& out = shard(places[i].split);
      if (places[i].first) out.append(prefix_);
      out.append(std::span<const int32_t>(done.tokens).subspan(begin, done.ends[i] - begin));
      if (places[i].last) out.append(end_);
      begin = done.ends[i];
    }
  }

  const Tokenizer& tok_;
  EncodePool pool_;
  ShardWriter train_, val_;
  std::unique_ptr<ShardWriter> test_;  // only with a test split: no test.bin otherwise
  EncodeJob job_;                      // chunks not submitted yet
  std::vector<Place> job_places_;      // where each of them goes
  std::deque<std::vector<Place>> pending_;
  const size_t max_in_flight_;
  const std::vector<int32_t> prefix_;  // before each part: the tokenizer's doc_prefix (BOS)
  std::vector<int32_t> end_;           // after each part: its doc_suffix, then the eot
};

// Cuts part [a, b) of the document into chunks and submits them.
void encode_part(const Tokenizer& tok, uint64_t chunk_bytes, DocumentStream& doc,
                 const InputFile& file, uint64_t a, uint64_t b, Split split, ShardFeeder& feeder) {
  const uint64_t context = tok.cut_context();
  const uint64_t reach = chunk_reach(tok, chunk_bytes);
  uint64_t p = a;
  while (p < b) {
    const uint64_t need = std::min(b, p + reach);
    doc.fill_to(need);
    const uint64_t from = std::max(a, p >= context ? p - context : 0);
    const PartWindow window{doc.view(from, need), from - a, need == b};
    const uint64_t e = a + chunk_end(tok, window, p - a, chunk_bytes);
    LLM_ASSERT(e > p && e <= b);
    feeder.submit(split, doc.view(p, e), file.name(), p, p == a, e == b);
    p = e;
    doc.drop_before(std::max(a, p >= context ? p - context : 0));
  }
}

}  // namespace

EncodePassResult prepare_encode_corpus(const EncodePassOptions& options, const Tokenizer& tok,
                                       const std::string& stdin_copy, const std::string& dir) {
  const auto t0 = std::chrono::steady_clock::now();
  const int threads = options.threads;
  const std::string sources_path = (fs::path(dir) / kSourcesFile).string();
  std::ofstream sources(sources_path, std::ios::binary | std::ios::trunc);
  LLM_REQUIRE(sources, "cannot write ", sources_path);
  const bool with_test = options.test_fraction > 0.0;
  ShardFeeder feeder(tok, threads, dir, tok.name() != "bytes", with_test);
  EncodePassResult result;
  CorpusFiles files(options.inputs);
  std::string path;
  while (files.next(&path)) {
    const InputFile file(prepare_open_path(path, stdin_copy), path);
    const CorpusSplit cut = corpus_split_points(file, options.val_fraction, options.test_fraction);
    DocumentStream doc(file);
    encode_part(tok, options.chunk_bytes, doc, file, 0, cut.val_begin, kTrain, feeder);
    encode_part(tok, options.chunk_bytes, doc, file, cut.val_begin, cut.test_begin, kVal, feeder);
    if (with_test)
      encode_part(tok, options.chunk_bytes, doc, file, cut.test_begin, file.size(), kTest, feeder);
    const std::string sha = doc.finish();
    sources << meta_source_line({path, static_cast<int64_t>(file.size()), sha});
    result.sources.files += 1;
    result.sources.bytes += static_cast<int64_t>(file.size());
  }
  result.skipped = files.skipped();
  feeder.finish();
  sources.close();
  LLM_REQUIRE(sources, "error while writing ", sources_path, " (disk full?)");
  result.train = feeder.train_info;
  result.val = feeder.val_info;
  result.test = feeder.test_info;
  result.threads = feeder.threads();
  result.seconds = seconds_since(t0);
  return result;
}

}  // namespace ledgerlm
