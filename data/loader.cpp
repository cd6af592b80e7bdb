// The global-order data loader (see loader.h for the order and the slicing rule).
#include "data/loader.h"

#include <bit>
#include <filesystem>

#include "data/meta.h"
#include "model/base/check.h"
#include "model/base/rng.h"

namespace ledgerlm {
namespace {

// rng_bits coordinates: a = epoch; b separates the Feistel rounds (bits 40..42, R below bit 32)
// from the per-epoch window offset (bit 48), so no two uses share random numbers.
constexpr uint64_t kRoundShift = 40;
constexpr uint64_t kOffsetTag = uint64_t{1} << 48;

}  // namespace

int64_t loader_permute(uint64_t seed, uint64_t epoch, int64_t index, int64_t n) {
  LLM_ASSERT(n > 0 && index >= 0 && index < n);
  if (n == 1) return 0;
  // Balanced Feistel network on 2*half bits >= bit_width(n-1): a bijection on [0, 4^half).
  // Cycle-walking (re-apply until the value lands in [0, n)) restricts it to a bijection on
  // [0, n); since 4^half < 4n, it takes fewer than 4 passes on average.
  const int bits = std::bit_width(static_cast<uint64_t>(n - 1));
  const int half = (bits + 1) / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  uint64_t x = static_cast<uint64_t>(index);
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      auto r = rng_bits(seed, RngStream::kData, epoch, (round << kRoundShift) | right);
      uint64_t f = (r[0] | (static_cast<uint64_t>(r[1]) << 32)) & mask;
      uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << half) | right;
  } while (x >= static_cast<uint64_t>(n));
  return static_cast<int64_t>(x);
}

void LoaderConfig::validate() const {
  LLM_REQUIRE(seq >= 1, "data loader: seq ", seq, " must be >= 1");
  LLM_REQUIRE(micro_batch >= 1, "data loader: micro_batch ", micro_batch, " must be >= 1");
  LLM_REQUIRE(accum >= 1, "data loader: accum ", accum, " must be >= 1");
  LLM_REQUIRE(world >= 1, "data loader: world ", world, " must be >= 1");
  LLM_REQUIRE(rank >= 0 && rank < world, "data loader: rank ", rank, " must be in [0, ", world,
              ")");
}

void window_fill(const TokenArray& tokens, int64_t start, int64_t seq, int32_t* inputs,
                 int32_t* targets) {
  LLM_ASSERT(start >= 0 && start + seq + 1 <= tokens.size(), "window ", start, "+", seq + 1,
             " outside ", tokens.size(), " tokens of ", tokens.path());
  tokens.copy(start, seq, inputs);
  tokens.copy(start + 1, seq, targets);
}

DataLoader::DataLoader(const std::string& data_dir, const LoaderConfig& config,
                       MemoryTracker* tracker)
    : config_(config), origin_(data_dir) {
  namespace fs = std::filesystem;
  DataMeta meta = meta_read(data_dir);
  train_ = shard_load((fs::path(data_dir) / "train.bin").string(), tracker, meta.vocab_size);
  val_ = shard_load((fs::path(data_dir) / "val.bin").string(), tracker, meta.vocab_size);
  LLM_REQUIRE(train_.size() == meta.train.tokens && val_.size() == meta.val.tokens, data_dir,
              ": token counts in train.bin/val.bin (", train_.size(), "/", val_.size(),
              ") differ from meta.json (", meta.train.tokens, "/", meta.val.tokens, ")");
  init();
}

DataLoader::DataLoader(TokenArray train, TokenArray val, const LoaderConfig& config)
    : config_(config), train_(std::move(train)), val_(std::move(val)), origin_("<memory>") {
  init();
}

void DataLoader::init() {
  config_.validate();
  const int64_t n = train_.size();
  const int64_t seq = config_.seq;
  LLM_REQUIRE(n >= seq + 1, origin_, ": the train split has ", n,
              " tokens, fewer than one window of seq+1 = ", seq + 1,
              " (use a smaller seq or more text)");
  // With a random offset o < seq, window w ends at o + (w+1)*seq + 1 <= n for every o iff
  // W = n/seq - 1. Tiny splits (n < 2*seq) use offset 0 and W = (n-1)/seq instead.
  random_offsets_ = n >= 2 * seq;
  windows_per_epoch_ = random_offsets_ ? n / seq - 1 : (n - 1) / seq;
}

int64_t DataLoader::epoch_offset(uint64_t epoch) const {
  if (!random_offsets_) return 0;
  auto r = rng_bits(config_.seed, RngStream::kData, epoch, kOffsetTag);
  return static_cast<int64_t>((r[0] | (static_cast<uint64_t>(r[1]) << 32)) %
                              static_cast<uint64_t>(config_.seq));
}

int64_t DataLoader::window_start(int64_t global_index) const {
  LLM_ASSERT(global_index >= 0);
  const uint64_t epoch = static_cast<uint64_t>(global_index / windows_per_epoch_);
  const int64_t j = global_index % windows_per_epoch_;
  const int64_t w = loader_permute(config_.seed, epoch, j, windows_per_epoch_);
  return epoch_offset(epoch) + w * config_.seq;
}

std::vector<int64_t> DataLoader::slice_windows(int64_t step, int64_t micro) const {
  LLM_REQUIRE(step >= 0 && micro >= 0 && micro < config_.accum, "data loader: position (step ",
              step, ", micro ", micro, ") invalid for accum ", config_.accum);
  const int64_t g0 = step * config_.global_windows();
  const int64_t slot = micro * config_.world + config_.rank;
  std::vector<int64_t> out(static_cast<size_t>(config_.micro_batch));
  for (int64_t b = 0; b < config_.micro_batch; ++b) out[b] = g0 + slot * config_.micro_batch + b;
  return out;
}

void DataLoader::batch_at(int64_t step, int64_t micro, int32_t* inputs, int32_t* targets) const {
  const int64_t seq = config_.seq;
  std::vector<int64_t> windows = slice_windows(step, micro);
  for (size_t b = 0; b < windows.size(); ++b) {
    window_fill(train_, window_start(windows[b]), seq, inputs + b * seq, targets + b * seq);
  }
}

void DataLoader::read_first(int64_t step, int64_t val_seq, int64_t val_max) const {
  std::vector<int32_t> inputs(static_cast<size_t>(config_.micro_batch * config_.seq));
  std::vector<int32_t> targets(inputs.size());
  for (int64_t micro = 0; micro < config_.accum; ++micro)
    batch_at(step, micro, inputs.data(), targets.data());
  if (val_max <= 0) return;
  inputs.resize(static_cast<size_t>(val_seq));
  targets.resize(inputs.size());
  for (int64_t start : val_windows(val_seq, val_max))
    val_window_fill(start, val_seq, inputs.data(), targets.data());
}

std::vector<int64_t> DataLoader::val_windows(int64_t seq, int64_t max_windows) const {
  LLM_REQUIRE(seq >= 1, "val windows: seq ", seq, " must be >= 1");
  const int64_t n = val_.size();
  const int64_t available = n > 0 ? (n - 1) / seq : 0;
  LLM_REQUIRE(available >= 1, origin_, ": the val split has ", n,
              " tokens, fewer than one window of seq+1 = ", seq + 1,
              " (prepare with a larger --val-fraction or use a smaller seq)");
  return evenly_spaced_windows(n, seq, max_windows);
}

std::vector<int64_t> evenly_spaced_windows(int64_t num_tokens, int64_t seq, int64_t max_windows) {
  const int64_t available = num_tokens > 0 && seq > 0 ? (num_tokens - 1) / seq : 0;
  const int64_t count = max_windows <= 0 ? available : std::min(max_windows, available);
  std::vector<int64_t> starts(static_cast<size_t>(std::max<int64_t>(count, 0)));
  for (int64_t k = 0; k < count; ++k)
    starts[k] = static_cast<int64_t>(static_cast<__int128>(k) * available / count) * seq;
  return starts;
}

}  // namespace ledgerlm
