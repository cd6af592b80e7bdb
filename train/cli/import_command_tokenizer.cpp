// import --data: the data's tokenizer against the model directory's (see the header).
#include "train/cli/import_command_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/hf_bpe_files.h"
#include "data/tokenizer_json.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  LLM_REQUIRE(in.good(), "import: cannot read '", path.string(), "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// "DIR/tokenizer.json" or "DIR/vocab.json + merges.txt": the files hf_bpe_files reads.
std::string hf_files_text(const std::string& dir) {
  if (fs::exists(fs::path(dir) / "tokenizer.json"))
    return (fs::path(dir) / "tokenizer.json").string();
  return (fs::path(dir) / "vocab.json").string() + " + merges.txt";
}

}  // namespace

void import_require_data_tokenizer(const std::string& model_dir, const std::string& data_dir,
                                   const DataMeta& meta) {
  const fs::path m(model_dir);
  const bool hf_json = fs::exists(m / "tokenizer.json");
  const bool hf_pair = fs::exists(m / "vocab.json") && fs::exists(m / "merges.txt");
  const bool spm = fs::exists(m / "tokenizer.model");
  LLM_REQUIRE(hf_json || hf_pair || spm, "import --data: '", model_dir,
              "' has no tokenizer (expected tokenizer.json, vocab.json + merges.txt, or "
              "tokenizer.model beside config.json), so nothing shows that '",
              data_dir,
              "' was prepared with the model's tokenizer; add the model's tokenizer files or "
              "import without --data");
  const std::string hint = hf_json || hf_pair
                               ? " (prepare the data with the model's tokenizer: prepare "
                                 "--tokenizer hf:" +
                                     model_dir + ")"
                               : " (prepare the data with the tokenizer the model was trained "
                                 "with)";
  auto mismatch = [&](const std::string& why) {
    fail(error_message("import: the data in '", data_dir,
                       "' was not prepared with the model's tokenizer: ", why, hint));
  };

  if (meta.tokenizer == "hf-bpe") {
    if (!hf_json && !hf_pair)
      mismatch("the data's is a Hugging Face BPE, the model's is '" +
               (m / "tokenizer.model").string() + "'");
    const std::string diff =
        hf_bpe_difference(hf_bpe_read(model_dir), "the model's '" + hf_files_text(model_dir) + "'",
                          hf_bpe_read(data_dir), "the data's '" + hf_files_text(data_dir) + "'");
    if (!diff.empty()) mismatch(diff);
  } else if (meta.tokenizer == "bpe") {
    const fs::path data_model = fs::path(data_dir) / "tokenizer.model";
    if (!spm)
      mismatch("the data's is ledgerlm's BPE ('" + data_model.string() + "'), the model's is '" +
               hf_files_text(model_dir) + "'");
    if (read_all(m / "tokenizer.model") != read_all(data_model))
      mismatch("'" + (m / "tokenizer.model").string() + "' differs from '" + data_model.string() +
               "'");
  } else if (meta.tokenizer == "bytes") {
    // The tokenizer.json export writes for a run on bytes (token b is byte b); it does not
    // depend on the context length, which only tokenizer_config.json states.
    if (!hf_json ||
        read_all(m / "tokenizer.json") !=
            hf_tokenizer_files_bytes(static_cast<int32_t>(meta.eot_id), 0).tokenizer_json)
      mismatch("the data's is one token per byte (bytes), the model's is '" +
               (spm && !hf_json ? (m / "tokenizer.model").string() : hf_files_text(model_dir)) +
               "'");
  } else {
    mismatch("the data's tokenizer kind '" + meta.tokenizer + "' is unknown");
  }
}

}  // namespace ledgerlm
