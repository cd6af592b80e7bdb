// The text the bpe tokenizer is trained on, read in bounded memory: every document's train part
// when together they hold at most the cap (--bpe-sample-mb, 100 MB by default): the same text as
// training on everything, so a corpus under the cap gets the tokenizer it always got. Over the
// cap, `cap` bytes in windows of kSampleWindowBytes spread evenly over the train parts taken as
// one stream (window k of S starts at floor(k * total / S)), each trimmed to whole lines where it
// holds a line break (else to whole UTF-8 characters): a function of the text and the cap only,
// and spread over the whole corpus rather than taken from its start. Val text is never sampled.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus.h"

namespace ledgerlm {

inline constexpr uint64_t kDefaultBpeSampleBytes = 100'000'000;
inline constexpr uint64_t kSampleWindowBytes = uint64_t{64} << 10;

// Calls `visit` for every document in order with its file and the length of its train part.
using TrainPartVisitor = std::function<void(const InputFile& file, uint64_t train_bytes)>;
using DocumentWalk = std::function<void(const TrainPartVisitor& visit)>;

struct BpeSample {
  std::string text;                     // the sampled bytes
  std::vector<std::string_view> parts;  // into `text`: the training texts, in order
  uint64_t train_bytes = 0;             // of all train parts together
  bool whole = false;                   // every train part, whole (train_bytes <= cap)
};

// Walks the documents (once, or twice when over the cap) and returns the sample. Every sampled
// byte must be valid UTF-8: an Error names the file and the offset of a bad byte.
BpeSample bpe_sample(const DocumentWalk& walk, uint64_t cap_bytes);

}  // namespace ledgerlm
