// Training data loader implementing ledgerlm's global data order.
//
// Windows. A window is seq+1 consecutive train tokens (inputs = the first seq, targets = the
// same shifted by one). Epoch e uses non-overlapping windows of stride seq starting at a seeded
// offset o_e in [0, seq) (so window boundaries move between epochs); W windows per epoch, the
// same W for every epoch. The windows of epoch e are visited in a seeded pseudo-random order: a
// 4-round Feistel bijection on [0, W) (cycle-walking) keyed by rng_bits(seed, kData, e, ...).
// Concatenating epochs gives an infinite window sequence; global index g maps to epoch g / W.
// Everything is a pure function of (seed, g): there is no generator state to save.
//
// Global batch. Step s uses the G = world * micro_batch * accum windows g in [s*G, (s+1)*G).
// Within the step, window i (0 <= i < G) belongs to slot i / micro_batch, and slot k is taken by
// micro-batch m = k / world on rank r = k % world, i.e. rank r at micro m takes
//   i in [(m*world + r) * micro_batch, (m*world + r + 1) * micro_batch).
// For any factorisation world x micro_batch x accum with the same G, the slices of a step
// partition the same G windows, and concatenating them in (m, r) order gives them in order; so a
// run resumed on another world size or accumulation sees exactly the same data per step.
//
// Position = (step, micro): all a checkpoint needs to store.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/shard.h"
#include "model/base/memory.h"

namespace ledgerlm {

struct LoaderConfig {
  int64_t seq = 256;        // tokens per window (model context)
  int64_t micro_batch = 8;  // windows per rank per micro-batch
  int64_t accum = 1;        // micro-batches per step (gradient accumulation)
  int world = 1;            // ranks
  int rank = 0;
  uint64_t seed = 1234;

  int64_t global_windows() const { return static_cast<int64_t>(world) * micro_batch * accum; }
  void validate() const;  // throws Error naming the offending value
};

// Starts of up to `max_windows` (all when <= 0) non-overlapping windows of seq+1 tokens in a split
// of `num_tokens`, spread evenly over it: slot floor(k * available / count) of the `available`
// slots. The one rule for evaluation windows (the run's val loss and `ledgerlm eval`).
std::vector<int64_t> evenly_spaced_windows(int64_t num_tokens, int64_t seq, int64_t max_windows);

// Fills inputs[0..seq) = tokens[start, start+seq) and targets[0..seq) = tokens[start+1, ...).
void window_fill(const TokenArray& tokens, int64_t start, int64_t seq, int32_t* inputs,
                 int32_t* targets);

class DataLoader {
 public:
  // Loads DIR/train.bin and DIR/val.bin, checked against DIR/meta.json (vocab, width, counts).
  DataLoader(const std::string& data_dir, const LoaderConfig& config, MemoryTracker* tracker);
  // From token arrays already in memory (tests, tools). `val` may be empty.
  DataLoader(TokenArray train, TokenArray val, const LoaderConfig& config);

  const LoaderConfig& config() const { return config_; }
  const TokenArray& train_tokens() const { return train_; }
  const TokenArray& val_tokens() const { return val_; }
  int64_t windows_per_epoch() const { return windows_per_epoch_; }

  // Train-token offset of the window with global index g in the infinite window sequence.
  int64_t window_start(int64_t global_index) const;
  // Global indices of the windows this rank takes at (step, micro), in batch-row order.
  std::vector<int64_t> slice_windows(int64_t step, int64_t micro) const;
  // Fills inputs and targets, each [micro_batch, seq] row-major, for (step, micro). Pure.
  void batch_at(int64_t step, int64_t micro, int32_t* inputs, int32_t* targets) const;
  // Up to max_windows (all when <= 0) evenly spaced, non-overlapping val window starts for
  // windows of `seq`, the same on every call and every rank. Throws Error if val is too short.
  std::vector<int64_t> val_windows(int64_t seq, int64_t max_windows) const;
  void val_window_fill(int64_t start, int64_t seq, int32_t* inputs, int32_t* targets) const {
    window_fill(val_, start, seq, inputs, targets);
  }
  // Reads what a run starting at `step` reads first: this rank's windows of that step and, when
  // val_max > 0, the val windows of (val_seq, val_max). The shards' blocks are verified on first
  // read (shard.h), so damage there is reported before a run creates anything, rather than at
  // its first step.
  void read_first(int64_t step, int64_t val_seq, int64_t val_max) const;

 private:
  void init();
  int64_t epoch_offset(uint64_t epoch) const;

  LoaderConfig config_;
  TokenArray train_;
  TokenArray val_;
  std::string origin_;  // the data dir, for error messages
  int64_t windows_per_epoch_ = 0;
  bool random_offsets_ = false;
};

// The Feistel bijection used for an epoch's order, exposed for tests: a permutation of [0, n).
int64_t loader_permute(uint64_t seed, uint64_t epoch, int64_t index, int64_t n);

}  // namespace ledgerlm
