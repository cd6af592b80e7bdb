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

std::vector<int32_t> EncodePool::take() {
  LLM_ASSERT(taken_ < submitted_, "EncodePool::take with nothing submitted");
  std::unique_lock<std::mutex> lock(mu_);
  job_done_.wait(lock, [&] { return done_.count(taken_) > 0; });
  auto it = done_.find(taken_);
  Done d = std::move(it->second);
  done_.erase(it);
  ++taken_;
  lock.unlock();
  if (d.error) std::rethrow_exception(d.error);
  return std::move(d.tokens);
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
      size_t bad = 0;
      LLM_REQUIRE(!check_utf8_ || utf8_is_valid(job.text, &bad), "--input ", job.source,
                  ": not valid UTF-8 text (bad byte at offset ", job.offset + bad,
                  "); use --tokenizer bytes for binary data");
      d.tokens.reserve(job.text.size() / 3 + 16);
      encoder->encode(job.text, &d.tokens);
    } catch (...) {
      d.error = std::current_exception();
      d.tokens.clear();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.emplace(item.first, std::move(d));
    }
    job_done_.notify_all();
  }
}

}  // namespace ledgerlm
