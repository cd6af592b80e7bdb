// Threads that encode text chunks for `prepare`, handing the tokens back in the order the chunks
// were submitted: one TokenEncoder per thread (its own caches), a bounded number of jobs in
// flight (the caller takes the oldest result before submitting more), so memory stays bounded
// and the output is the same whatever the number of threads. A job holds one or more chunks,
// each encoded on its own: a corpus of many small files is handed over in jobs of many chunks
// rather than one thread handoff per file.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/tokenizer.h"

namespace ledgerlm {

struct EncodeJob {
  struct Chunk {
    size_t end = 0;       // the chunk is text[previous chunk's end, end)
    std::string source;   // the input file, for errors
    uint64_t offset = 0;  // offset of the chunk's first byte in the file, for errors
  };
  std::string text;  // the chunks, one after the other
  std::vector<Chunk> chunks;
};

struct EncodedJob {
  std::vector<int32_t> tokens;  // every chunk's ids, one after the other
  std::vector<size_t> ends;     // chunk i's ids are tokens[ends[i - 1], ends[i])
};

class EncodePool {
 public:
  // `threads` >= 1 encoding threads. With check_utf8 every chunk must be valid UTF-8 (an Error
  // names the file and the offset of the first bad byte).
  EncodePool(const Tokenizer& tok, int threads, bool check_utf8);
  ~EncodePool();
  EncodePool(const EncodePool&) = delete;
  EncodePool& operator=(const EncodePool&) = delete;

  void submit(EncodeJob job);
  // The ids of the oldest submitted job not taken yet, waiting for them; rethrows the Error its
  // encoding raised.
  EncodedJob take();
  // Jobs submitted and not taken yet.
  size_t pending() const { return submitted_ - taken_; }
  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  struct Done {
    EncodedJob encoded;
    std::exception_ptr error;
  };
  void work();

  const Tokenizer& tok_;
  const bool check_utf8_;
  std::mutex mu_;
  std::condition_variable job_ready_, job_done_;
  std::deque<std::pair<uint64_t, EncodeJob>> queue_;
  std::map<uint64_t, Done> done_;
  bool stop_ = false;
  uint64_t submitted_ = 0, taken_ = 0;
  std::vector<std::thread> workers_;
};

// The number of cores this process may run on (its CPU affinity), at least 1.
int encode_default_threads();

}  // namespace ledgerlm
