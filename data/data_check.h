// A prepared data directory checked as a whole, before a run uses it: meta.json, the tokenizer
// it names (tokenizer.model must load as a ledgerlm BPE model, or the hf-bpe files as a GPT-2
// tokenizer, whose vocabulary size and eot id are meta.json's) and the headers of its token shards,
// train, val and test when meta.json has a test split (token width for the vocabulary, token counts
// equal to meta.json's, the CRC over header and checksum table). `ledgerlm train` runs it
// before it creates or locks anything, so an edited meta.json or a missing or garbage tokenizer is
// refused at the start, not after the training when eval or sample first load the tokenizer. The
// loader checks every token value when it reads the shards.
#pragma once

#include <string>

#include "data/meta.h"

namespace ledgerlm {

struct DataCheck {
  DataMeta meta;
  std::string tokenizer_id;  // see data_tokenizer_id
};

// Throws Error naming the file and what does not agree.
DataCheck data_check(const std::string& dir);

// The identity of a data directory's tokenizer: "bytes", "bpe:" + the SHA-256 of its
// tokenizer.model, or "hf-bpe:" + the SHA-256 of its tokenizer.json (of the `sha256sum` listing
// of vocab.json and merges.txt when it has those instead; tokenizer_hf_id). Runs and checkpoints
// record it (data.tokenizer_id), so a tokenizer swapped for another with the same vocabulary size
// is refused on resume, eval and sample.
std::string data_tokenizer_id(const std::string& dir, const DataMeta& meta);

}  // namespace ledgerlm
