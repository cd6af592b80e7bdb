// Shared by the resume tests (test_resume_*), which drive the ledgerlm binary: preparing a small
// corpus once per process with the bytes tokenizer, and the command-line flags of the tiny model
// (L2 H2 C32 T32 B4, one thread, no periodic eval) that every run in these tests trains.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// Writes `text` as corpus.txt in a fresh temp dir named after `prefix`, runs `ledgerlm prepare`
// on it (bytes tokenizer) and returns the prepared data directory.
inline std::string resume_prepare_corpus(const std::string& prefix, const std::string& text) {
  const std::string tmp = make_temp_dir(prefix);
  write_file(tmp + "/corpus.txt", text);
  auto r = run_command(ledgerlm_binary() + " prepare --input " + tmp + "/corpus.txt --out " + tmp +
                       "/data --tokenizer bytes");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return tmp + "/data";
}

// Flags of a run `name` under `out` training the tiny model on the data in `data_dir`.
inline std::string resume_tiny_flags(const std::string& data_dir, const std::string& out,
                                     const std::string& name) {
  return " --data.dir " + data_dir + " --train.out_dir " + out + " --train.name " + name +
         " --model.n_layer 2 --model.n_head 2 --model.n_embd 32 --model.block_size 32"
         " --train.seq_len 32 --train.micro_batch 4 --train.eval_interval 0"
         " --train.eval_windows 4 --train.log_interval 100 --train.threads 1";
}

}  // namespace ledgerlm::testing
