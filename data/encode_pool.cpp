// Ordered parallel encoding of text chunks (see encode_pool.h).
#include "data/encode_pool.h"

#include <sched.h>

#include "model/base/check.h"

namespace ledgerlm {

int encode_default_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

EncodePool::EncodePool(const Tokenizer& tok, int threads, bool check_utf8)
    : tok_(tok), check_utf8_(check_utf8) {
  LLM_REQUIRE(threads >= 1, "--threads ", threads, " must be >= 1");
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

EncodePool::~EncodePool() {
  {
    // Chunks nobody will take (an error ended the pass) are dropped, not encoded.
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  job_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void EncodePool::submit(EncodeJob job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(submitted_++, std::move(job));
  }
  job_ready_.notify_one();
}

EncodedJob EncodePool::take() {
  LLM_ASSERT(taken_ < submitted_, "EncodePool::take with nothing submitted");
  std::unique_lock<std::mutex> lock(mu_);
  job_done_.wait(lock, [&] { return done_.count(taken_) > 0; });
  auto it = done_.find(taken_);
  Done d = std::move(it->second);
  done_.erase(it);
  ++taken_;
  lock.unlock();
  if (d.error) std::rethrow_exception(d.error);
  return std::move(d.encoded);
}

void EncodePool::work() {
  std::unique_ptr<TokenEncoder> encoder = tok_.make_encoder();
  while (true) {
    std::pair<uint64_t, EncodeJob> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      job_ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    Done d;
    try {
      const EncodeJob& job = item.second;
      d.encoded.tokens.reserve(job.text.size() / 3 + 16);
      size_t begin = 0;
      for (const EncodeJob::Chunk& c : job.chunks) {
        const std::string_view text = std::string_view(job.text).substr(begin, c.end - begin);
        size_t bad = 0;
        LLM_REQUIRE(!check_utf8_ || utf8_is_valid(text, &bad), "--input ", c.source,
                    ": not valid UTF-8 text (bad byte at offset ", c.offset + bad,
                    "); use --tokenizer bytes for binary data");
        encoder->encode(text, &d.encoded.tokens);
        d.encoded.ends.push_back(d.encoded.tokens.size());
        begin = c.end;
      }
    } catch (...) {
      d.error = std::current_exception();
      d.encoded = {};
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.emplace(item.first, std::move(d));
    }
    job_done_.notify_all();
  }
}

}  // namespace ledgerlm
