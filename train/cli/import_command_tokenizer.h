// `import --data`: the data directory must have been prepared with the imported model's
// tokenizer. The vocab size alone proves nothing (two tokenizers of one size give unrelated ids,
// and eval then prints a plausible, meaningless loss), so what defines the ids is compared.
#pragma once

#include <string>

#include "data/meta.h"

namespace ledgerlm {

// Throws one Error unless the tokenizer of the prepared data in `data_dir` (its meta.json is
// `meta`) is the tokenizer in the model directory `model_dir`:
//   hf-bpe  the model's tokenizer.json or vocab.json + merges.txt defines the same ids (the
//           same vocabulary, merges, added tokens; either file form on either side);
//   bpe     the model's tokenizer.model is the data's, byte for byte (what export writes);
//   bytes   the model's tokenizer.json is the one export writes for the bytes tokenizer.
// A model directory with no tokenizer files cannot show which tokenizer it was trained with:
// --data is refused, naming the files expected.
void import_require_data_tokenizer(const std::string& model_dir, const std::string& data_dir,
                                   const DataMeta& meta);

}  // namespace ledgerlm
