// A run's own copy of its tokenizer: runs/NAME/tokenizer/ holds the data directory's meta.json and
// tokenizer files (bpe: tokenizer.model, ~65 KB at vocab 4096; hf-bpe: tokenizer.json, or
// vocab.json + merges.txt, ~1.4 MB for GPT-2's; bytes: none). With it eval --text, sample and
// export need the run alone; the data directory is read only to train and to eval on a split.
#pragma once

#include <string>

namespace ledgerlm {

// Copies the tokenizer of the prepared data in `data_dir` into RUN_DIR/tokenizer, replacing an
// earlier copy as a whole (built beside it, then renamed).
void run_tokenizer_save(const std::string& run_dir, const std::string& data_dir);

// RUN_DIR/tokenizer when the run has its copy, else "" (runs written before the copy existed,
// runs imported without --data).
std::string run_tokenizer_dir(const std::string& run_dir);

}  // namespace ledgerlm
