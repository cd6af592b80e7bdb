// Checkpoint format (ckpt/checkpoint.h): round trip of pieces, ranges read back under another
// split (resharding on load), keep-last-K, `latest`, saves that fail at every stage (leaving
// nothing behind), leftovers of killed saves cleaned up, and corrupted / truncated / mismatched
// / edited checkpoints rejected with one clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "model/base/check.h"
#include "model/base/crc32c.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

// Two files, an fp32 matrix written as two pieces (as two ranks would), a u8 tensor, a bf16 one.
struct Sample {
  std::vector<float> w = std::vector<float>(6 * 5);
  std::vector<uint8_t> codes = std::vector<uint8_t>(37);
  std::vector<uint16_t> half = std::vector<uint16_t>(9);

  explicit Sample(float base) {
    for (size_t i = 0; i < w.size(); ++i) w[i] = base + 0.25f * static_cast<float>(i);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7 + base);
    for (size_t i = 0; i < half.size(); ++i) half[i] = static_cast<uint16_t>(0x3f80 + i);
  }
  std::vector<CkptPiece> pieces() const {
    return {
        {"model", "w", DType::kF32, {6, 5}, 0, 12, w.data(), {}},
        {"model", "w", DType::kF32, {6, 5}, 12, 18, w.data() + 12, {}},
        {"model", "half", DType::kBF16, {9}, 0, 9, half.data(), {}},
        {"optimizer", "w.codes.m", DType::kU8, {37}, 0, 37, codes.data(), {}},
    };
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

nlohmann::json meta_for(int64_t step) {
  return {{"trainer", {{"step", step}}}};
}

TEST(CkptFormat, Crc32cKnownAnswer) {
  // RFC 3720 (iSCSI) test vector: CRC-32C of 32 zero bytes is 0x8a9136aa; of "123456789"
  // 0xe3069283.
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);
  // Incremental = one shot.
  EXPECT_EQ(crc32c("6789", 4, crc32c("12345", 5)), 0xe3069283u);
}

TEST(CkptFormat, RoundTripAndResharding) {
  const std::string root = testing::make_temp_dir("ckpt_fmt_") + "/ckpt";
  Sample s(1.0f);
  CkptSaveResult res = checkpoint_save(root, 7, meta_for(7), s.pieces());
  EXPECT_EQ(res.dir, root + "/step_000007");
  EXPECT_EQ(res.data_bytes, 30 * 4 + 9 * 2 + 37);
  EXPECT_EQ(checkpoint_latest(root), res.dir);
  EXPECT_EQ(checkpoint_resolve(fs::path(root).parent_path().string()), res.dir);

  CheckpointReader r = CheckpointReader::open(res.dir);
  EXPECT_EQ(r.step(), 7);
  EXPECT_EQ(r.bytes(), res.bytes);
  EXPECT_EQ(r.meta()["trainer"]["step"], 7);
  r.verify_all();
  // Whole tensors come back bit for bit.
  std::vector<float> w(30);
  r.read("model", "w", DType::kF32, {6, 5}, 0, 30, w.data());
  EXPECT_EQ(std::memcmp(w.data(), s.w.data(), w.size() * 4), 0);
  std::vector<uint8_t> codes(37);
  r.read("optimizer", "w.codes.m", DType::kU8, {37}, 0, 37, codes.data());
  EXPECT_EQ(codes, s.codes);
  std::vector<float> half = r.read_f32("model", "half", {9});
  EXPECT_EQ(half[0], 1.0f);  // bf16 0x3f80 = 1
  // A range that straddles the two saved pieces (a rank of another world size).
  std::vector<float> part(10);
  r.read("model", "w", DType::kF32, {6, 5}, 7, 10, part.data());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(part[i], s.w[7 + i]);
  // The file itself is plain safetensors holding the full logical tensor.
  SafeTensorsFile f = SafeTensorsFile::open(res.dir + "/model.safetensors");
  EXPECT_EQ(f.get("w").shape, (std::vector<int64_t>{6, 5}));
  EXPECT_EQ(f.read_f32("w"), s.w);
}

// A piece streamed through CkptPiece::read (device memory, offloaded state) writes the same file
// bytes and the same CRCs as the same piece in host memory, whatever the chunk size: chunks of
// 7 bytes cut every tensor into several reads, none aligned to an element.
TEST(CkptFormat, StreamedPiecesEqualHostPieces) {
  const std::string base = testing::make_temp_dir("ckpt_stream_");
  Sample s(2.0f);
  const CkptSaveResult host = checkpoint_save(base + "/host", 3, meta_for(3), s.pieces());
  std::vector<CkptPiece> streamed = s.pieces();
  int reads = 0;
  for (CkptPiece& p : streamed) {
    const char* src = static_cast<const char*>(p.data);
    const size_t es = dtype_size(p.dtype);
    p.read = [src, es, &reads](int64_t offset, int64_t count, void* dst) {
      std::memcpy(dst, src + offset * es, static_cast<size_t>(count) * es);
      ++reads;
    };
    p.data = nullptr;
  }
  CkptSaveOptions o;
  o.stream_chunk_bytes = 7;
  const CkptSaveResult stream = checkpoint_save(base + "/stream", 3, meta_for(3), streamed, o);
  EXPECT_GT(reads, static_cast<int>(streamed.size()));  // several reads per piece
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "meta.json"}) {
    std::ifstream a(host.dir + "/" + file, std::ios::binary),
        b(stream.dir + "/" + file, std::ios::binary);
    const std::string ta((std::istreambuf_iterator<char>(a)), {}),
        tb((std::istreambuf_iterator<char>(b)), {});
    EXPECT_FALSE(ta.empty()) << file;
    EXPECT_EQ(ta, tb) << file << " differs between host and streamed pieces";
  }
  CheckpointReader::open(stream.dir).verify_all();
}

TEST(CkptFormat, KeepLastK) {
  const std::string root = testing::make_temp_dir("ckpt_keep_") + "/ckpt";
  Sample s(2.0f);
  CkptSaveOptions o;
  o.keep = 2;
  for (int64_t step : {10, 20, 30, 40}) checkpoint_save(root, step, meta_for(step), s.pieces(), o);
  auto all = checkpoint_list(root);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 30);
  EXPECT_EQ(all[1].first, 40);
  EXPECT_EQ(checkpoint_latest(root), root + "/step_000040");
  // Saving the same step again replaces it.
  checkpoint_save(root, 40, meta_for(40), Sample(3.0f).pieces(), o);
  EXPECT_EQ(CheckpointReader::open(root + "/step_000040").read_f32("model", "half", {9}).size(),
            9u);
}

// Entries of a checkpoint root, sorted.
std::vector<std::string> entries(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(root)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CkptFormat, FailedSaveKeepsPreviousAndLeavesNothing) {
  for (const char* stage : {"tensors", "meta", "rename", "latest"}) {
    SCOPED_TRACE(stage);
    const std::string root = testing::make_temp_dir("ckpt_int_") + "/ckpt";
    Sample good(1.0f), next(5.0f);
    checkpoint_save(root, 1, meta_for(1), good.pieces());
    CkptSaveOptions o;
    o.on_stage = [&](const std::string& at) {
      if (at == stage) throw Error(std::string("simulated failure at ") + stage);
    };
    EXPECT_THROW(checkpoint_save(root, 2, meta_for(2), next.pieces(), o), Error);
    // `latest` still names the previous checkpoint, which is intact.
    EXPECT_EQ(checkpoint_latest(root), root + "/step_000001");
    CheckpointReader r = CheckpointReader::open(checkpoint_latest(root));
    r.verify_all();
    EXPECT_EQ(r.read_f32("model", "w", {6, 5}), good.w);
    // The failed save removed what it wrote: no temporary, no step_000002.
    EXPECT_EQ(entries(root), (std::vector<std::string>{"latest", "step_000001"}));
    checkpoint_save(root, 3, meta_for(3), next.pieces());
    EXPECT_EQ(checkpoint_latest(root), root + "/step_000003");
  }
}

// Saving a step that exists moves the old directory aside; a failure before `latest` is written
// brings it back, a success removes it.
TEST(CkptFormat, FailedSameStepSaveRestoresTheOldOne) {
  const std::string root = testing::make_temp_dir("ckpt_same_") + "/ckpt";
  Sample good(1.0f), next(5.0f);
  checkpoint_save(root, 4, meta_for(4), good.pieces());
  CkptSaveOptions o;
  o.on_stage = [](const std::string& at) {
    if (at == "latest") throw Error("simulated failure");
  };
  EXPECT_THROW(checkpoint_save(root, 4, meta_for(4), next.pieces(), o), Error);
  EXPECT_EQ(entries(root), (std::vector<std::string>{"latest", "step_000004"}));
  EXPECT_EQ(CheckpointReader::open(root + "/step_000004").read_f32("model", "w", {6, 5}), good.w);
  checkpoint_save(root, 4, meta_for(4), next.pieces());
  EXPECT_EQ(entries(root), (std::vector<std::string>{"latest", "step_000004"}));
  EXPECT_EQ(CheckpointReader::open(root + "/step_000004").read_f32("model", "w", {6, 5}), next.w);
}

// A save never removes temporaries it did not make (another process may be writing them); the
// leftovers of killed saves go when the run's lock is taken (checkpoint_remove_stale).
TEST(CkptFormat, StaleTemporariesRemovedOnlyOnRequest) {
  const std::string root = testing::make_temp_dir("ckpt_stale_") + "/ckpt";
  Sample good(1.0f);
  checkpoint_save(root, 1, meta_for(1), good.pieces());
  checkpoint_save(root, 2, meta_for(2), good.pieces());
  fs::create_directories(root + "/.tmp_step_000003_999999");
  ASSERT_TRUE(testing::write_file(root + "/.tmp_step_000003_999999/model.safetensors", "x"));
  // Killed while re-saving step 2: step_000002 was moved aside, the new one not yet renamed in.
  fs::rename(root + "/step_000002", root + "/.old_step_000002");
  CkptSaveOptions keep5;
  keep5.keep = 5;
  checkpoint_save(root, 5, meta_for(5), good.pieces(), keep5);
  EXPECT_TRUE(fs::exists(root + "/.tmp_step_000003_999999/model.safetensors"));
  ASSERT_TRUE(testing::write_file(root + "/latest.tmp", "step_0000"));  // killed mid-write
  EXPECT_EQ(checkpoint_remove_stale(root), 3);
  EXPECT_EQ(entries(root),
            (std::vector<std::string>{"latest", "step_000001", "step_000002", "step_000005"}));
  CheckpointReader::open(root + "/step_000002").verify_all();
  // A moved-aside copy whose step is back in place is simply removed.
  fs::create_directories(root + "/.old_step_000005");
  EXPECT_EQ(checkpoint_remove_stale(root), 1);
  EXPECT_FALSE(fs::exists(root + "/.old_step_000005"));
}

class CkptDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::make_temp_dir("ckpt_dmg_") + "/ckpt";
    dir_ = checkpoint_save(root_, 4, meta_for(4), sample_.pieces()).dir;
  }
  void rewrite(const std::string& name, const std::function<void(std::string&)>& edit) {
    std::string text = testing::read_file(dir_ + "/" + name);
    edit(text);
    ASSERT_TRUE(testing::write_file(dir_ + "/" + name, text));
  }
  Sample sample_{1.0f};
  std::string root_, dir_;
};

TEST_F(CkptDamage, FlippedDataByteFailsChecksum) {
  rewrite("optimizer.safetensors", [](std::string& t) { t[t.size() - 3] ^= 0x10; });
  CheckpointReader r = CheckpointReader::open(dir_);
  const std::string err = error_of([&] { r.verify_all(); });
  EXPECT_NE(err.find("optimizer.safetensors"), std::string::npos) << err;
  EXPECT_NE(err.find("w.codes.m"), std::string::npos) << err;
  EXPECT_NE(err.find("checksum"), std::string::npos) << err;
}

TEST_F(CkptDamage, TruncatedFile) {
  rewrite("model.safetensors", [](std::string& t) { t.resize(t.size() - 5); });
  const std::string err = error_of([&] { CheckpointReader::open(dir_); });
  EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
}

TEST_F(CkptDamage, MissingFile) {
  fs::remove(dir_ + "/model.safetensors");
  const std::string err = error_of([&] { CheckpointReader::open(dir_); });
  EXPECT_NE(err.find("model.safetensors' is missing"), std::string::npos) << err;
}

TEST_F(CkptDamage, WrongFormatVersion) {
  rewrite("meta.json", [](std::string& t) {
    const std::string key = "\"format_version\": " + std::to_string(kCheckpointFormatVersion);
    ASSERT_NE(t.find(key), std::string::npos) << t;
    t.replace(t.find(key), key.size(), "\"format_version\": 99");
  });
  const std::string err = error_of([&] { CheckpointReader::open(dir_); });
  EXPECT_NE(err.find("format version 99"), std::string::npos) << err;
  EXPECT_NE(err.find("meta.json"), std::string::npos) << err;
}

// meta.json carries its own checksum: an edited step (which would rewind a resume) or any other
// edited value is refused; whitespace alone does not matter.
TEST_F(CkptDamage, EditedMetaFailsItsChecksum) {
  rewrite("meta.json", [](std::string& t) {
    const std::string key = "\"step\": 4";
    ASSERT_NE(t.find(key), std::string::npos) << t;
    t.replace(t.find(key), key.size(), "\"step\": 2");
  });
  const std::string err = error_of([&] { CheckpointReader::open(dir_); });
  EXPECT_NE(err.find("meta.json' fails its checksum"), std::string::npos) << err;
  rewrite("meta.json", [](std::string& t) { t.replace(t.find("\"step\": 2"), 9, "\"step\":  4"); });
  EXPECT_EQ(CheckpointReader::open(dir_).step(), 4);
  rewrite("meta.json", [](std::string& t) {
    const std::string key = "\"meta_crc32c\"";
    t.replace(t.find(key), key.size(), "\"other_key\"");
  });
  EXPECT_NE(error_of([&] { CheckpointReader::open(dir_); }).find("missing 'meta_crc32c'"),
            std::string::npos);
}

TEST_F(CkptDamage, GarbledMeta) {
  rewrite("meta.json", [](std::string& t) { t.resize(t.size() / 2); });
  const std::string err = error_of([&] { CheckpointReader::open(dir_); });
  EXPECT_NE(err.find("meta.json' is not valid JSON"), std::string::npos) << err;
}

TEST_F(CkptDamage, ShapeAndDtypeMismatch) {
  CheckpointReader r = CheckpointReader::open(dir_);
  std::vector<float> buf(30);
  std::string err = error_of([&] { r.read("model", "w", DType::kF32, {5, 6}, 0, 30, buf.data()); });
  EXPECT_NE(err.find("'w' has shape [6, 5], expected [5, 6]"), std::string::npos) << err;
  err = error_of([&] { r.read("model", "w", DType::kBF16, {6, 5}, 0, 30, buf.data()); });
  EXPECT_NE(err.find("expected bf16"), std::string::npos) << err;
  err = error_of([&] { r.read("model", "nope", DType::kF32, {1}, 0, 1, buf.data()); });
  EXPECT_NE(err.find("has no tensor 'nope'"), std::string::npos) << err;
}

TEST_F(CkptDamage, LatestPointingNowhere) {
  ASSERT_TRUE(testing::write_file(root_ + "/latest", "step_000099\n"));
  const std::string err = error_of([&] { checkpoint_latest(root_); });
  EXPECT_NE(err.find("step_000099"), std::string::npos) << err;
}

}  // namespace
}  // namespace ledgerlm
