// Tests of the safetensors reader/writer: round trips, rejection of damaged files with a clear
// message, the per-tensor checksums (written, verified, all or none), interoperability with the
// independent numpy implementation
// (tests/reference/safetensors_io.py), and the HF GPT-2 export mapping.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/hf_export.h"
#include "ckpt/hf_import.h"
#include "ckpt/safetensors.h"
#include "model/base/check.h"
#include "model/base/crc32c.h"
#include "tests/support/config_test_support.h"
#include "tests/support/safetensors_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using testing::make_temp_dir;
using testing::read_file;
using testing::write_file;

// Expects `fn` to throw an Error whose message contains every one of `parts`.
template <class Fn>
void expect_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an Error mentioning '" << parts.front() << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "error must be one line: " << what;
  }
}

struct Sample {
  std::vector<float> f32;
  std::vector<double> f64;
  std::vector<uint16_t> bf16;
  std::vector<uint16_t> f16;
  std::vector<uint8_t> u8;
  std::vector<int32_t> i32;
  std::vector<uint16_t> u16;

  Sample() {
    for (int i = 0; i < 24; ++i) f32.push_back(0.25f * static_cast<float>(i) - 3.0f);
    for (int i = 0; i < 5; ++i) f64.push_back(1.0 / (i + 3));
    for (int i = 0; i < 6; ++i) bf16.push_back(f32_to_bf16(0.5f * static_cast<float>(i) - 1.0f));
    for (int i = 0; i < 4; ++i) f16.push_back(f32_to_f16(static_cast<float>(i) + 0.5f));
    for (int i = 0; i < 7; ++i) u8.push_back(static_cast<uint8_t>(i * 30));
    for (int i = 0; i < 6; ++i) i32.push_back(i * 1000 - 2500);
    for (int i = 0; i < 3; ++i) u16.push_back(static_cast<uint16_t>(i * 20000));
  }

  void add_to(SafeTensorsWriter& w) const {
    w.add("a.f32", DType::kF32, {2, 3, 4}, f32.data());
    w.add("b.f64", DType::kF64, {5}, f64.data());
    w.add("c.bf16", DType::kBF16, {3, 2}, bf16.data());
    w.add("d.f16", DType::kF16, {4}, f16.data());
    w.add("e.u8", DType::kU8, {7}, u8.data());
    w.add("f.i32", DType::kI32, {2, 3}, i32.data());
    w.add("g.u16", DType::kU16, {3}, u16.data());
    w.add("h.empty", DType::kF32, {0, 4}, nullptr);
  }
};

// Tensor `name` of `f`, read whole as `dtype` and `shape` (checked as SafeTensorsFile::read does).
template <class T>
std::vector<T> read_as(const SafeTensorsFile& f, const std::string& name, DType dtype,
                       const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<T> out(static_cast<size_t>(numel));
  f.read(name, out.data(), dtype, shape);
  return out;
}

// Writes a file with the raw header `json_text` (padded) followed by `data_bytes` zero bytes.
void write_raw(const std::string& path, const std::string& json_text, size_t data_bytes,
               int64_t header_len_override = -1) {
  std::string header = json_text;
  header.append((8 - header.size() % 8) % 8, ' ');
  uint64_t n =
      header_len_override >= 0 ? static_cast<uint64_t>(header_len_override) : header.size();
  std::string blob(reinterpret_cast<const char*>(&n), 8);
  blob += header;
  blob.append(data_bytes, '\0');
  ASSERT_TRUE(write_file(path, blob));
}

TEST(Safetensors, RoundTripAllDtypesAndMetadata) {
  const std::string dir = make_temp_dir("llm_st_");
  const std::string path = dir + "/x.safetensors";
  Sample s;
  SafeTensorsWriter w;
  s.add_to(w);
  w.set_metadata("format", "pt");
  w.set_metadata("step", "42");
  w.write_atomic(path);

  // Header starts 8-byte aligned data and uses the standard dtype names.
  const std::string blob = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, blob.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  auto header = nlohmann::json::parse(blob.substr(8, n));
  EXPECT_EQ(header["c.bf16"]["dtype"], "BF16");
  EXPECT_EQ(header["__metadata__"]["step"], "42");

  SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.tensors().size(), 8u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("step"), "42");
  EXPECT_EQ(f.find("nope"), nullptr);
  ASSERT_NE(f.find("a.f32"), nullptr);
  EXPECT_EQ(f.find("a.f32")->shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(f.find("h.empty")->numel(), 0);

  EXPECT_EQ(read_as<float>(f, "a.f32", DType::kF32, {2, 3, 4}), s.f32);
  EXPECT_EQ(read_as<double>(f, "b.f64", DType::kF64, {5}), s.f64);
  EXPECT_EQ(read_as<uint16_t>(f, "c.bf16", DType::kBF16, {3, 2}), s.bf16);
  EXPECT_EQ(read_as<uint8_t>(f, "e.u8", DType::kU8, {7}), s.u8);
  EXPECT_EQ(read_as<int32_t>(f, "f.i32", DType::kI32, {2, 3}), s.i32);
  EXPECT_EQ(read_as<uint16_t>(f, "g.u16", DType::kU16, {3}), s.u16);

  // Widening reads and partial reads.
  std::vector<float> bf = f.read_f32("c.bf16");
  for (size_t i = 0; i < bf.size(); ++i) EXPECT_EQ(bf[i], 0.5f * static_cast<float>(i) - 1.0f);
  std::vector<float> h = f.read_f32("d.f16");
  for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i], static_cast<float>(i) + 0.5f);
  std::vector<float> part(5);
  f.read_elements(f.get("a.f32"), 10, 5, part.data());
  EXPECT_EQ(part, std::vector<float>(s.f32.begin() + 10, s.f32.begin() + 15));

  // Mismatched expectations are errors naming file and tensor.
  expect_error(
      [&] {
        read_as<float>(f, "a.f32", DType::kBF16, {2, 3, 4});
      },
      {path, "a.f32", "F32", "expected BF16"});
  expect_error(
      [&] {
        read_as<float>(f, "a.f32", DType::kF32, {6, 4});
      },
      {path, "a.f32", "[2, 3, 4]", "expected [6, 4]"});
  expect_error([&] { f.get("missing.weight"); }, {path, "missing.weight"});
  expect_error([&] { f.read_f32("e.u8"); }, {"e.u8", "float"});
  std::vector<double> f64(5);
  expect_error([&] { f.read_elements(f.get("b.f64"), 3, 3, f64.data()); }, {"b.f64", "5"});
}

TEST(Safetensors, WriterRejectsDuplicatesAndLeavesNoTempFile) {
  const std::string dir = make_temp_dir("llm_st_");
  float x = 1.0f;
  SafeTensorsWriter w;
  w.add("x", DType::kF32, {1}, &x);
  expect_error([&] { w.add("x", DType::kF32, {1}, &x); }, {"'x'", "twice"});
  expect_error([&] { w.add("__metadata__", DType::kF32, {1}, &x); }, {"__metadata__"});
  expect_error([&] { w.write_atomic(dir + "/no/such/dir/x.safetensors"); },
               {"no/such/dir/x.safetensors.tmp"});
  w.write_atomic(dir + "/x.safetensors");
  EXPECT_FALSE(std::ifstream(dir + "/x.safetensors.tmp").good());
  EXPECT_EQ(SafeTensorsFile::open(dir + "/x.safetensors").read_f32("x"), std::vector<float>{1.0f});
}

TEST(Safetensors, TruncatedFileIsRejected) {
  const std::string dir = make_temp_dir("llm_st_");
  const std::string path = dir + "/t.safetensors";
  Sample s;
  SafeTensorsWriter w;
  s.add_to(w);
  w.write_atomic(path);
  const std::string blob = read_file(path);
  // Cut inside the data section: the last tensor's range runs past the end.
  ASSERT_TRUE(write_file(path, blob.substr(0, blob.size() - 3)));
  expect_error([&] { SafeTensorsFile::open(path); }, {path, "truncated"});
  // Cut inside the header.
  ASSERT_TRUE(write_file(path, blob.substr(0, 20)));
  expect_error([&] { SafeTensorsFile::open(path); }, {path, "header length", "truncated"});
  // Shorter than the length prefix.
  ASSERT_TRUE(write_file(path, blob.substr(0, 5)));
  expect_error([&] { SafeTensorsFile::open(path); }, {path, "too short"});
  // Trailing garbage is not silently accepted either.
  ASSERT_TRUE(write_file(path, blob + "xyz"));
  expect_error([&] { SafeTensorsFile::open(path); }, {path, "trailing"});
}

TEST(Safetensors, BadHeadersAreRejected) {
  const std::string dir = make_temp_dir("llm_st_");
  const std::string p = dir + "/bad.safetensors";
  auto entry = [](const char* dtype, const char* shape, int64_t b, int64_t e) {
    return std::string("{\"dtype\":\"") + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
           std::to_string(b) + "," + std::to_string(e) + "]}";
  };
  auto open = [&] { SafeTensorsFile::open(p); };

  write_raw(p, "{}", 0, int64_t{1} << 40);  // absurd header length
  expect_error(open, {p, "header length", "not plausible"});
  write_raw(p, "{\"w\": ", 0);
  expect_error(open, {p, "not valid JSON"});
  write_raw(p, "[1, 2]", 0);
  expect_error(open, {p, "JSON object"});
  // A number JSON cannot hold (found by fuzz_safetensors: it escaped as a library exception).
  write_raw(p, "{\"w\": 22.4444E2222222222}", 0);
  expect_error(open, {p, "not valid JSON"});
  write_raw(p, "{\"w\":" + entry("F32", "[4]", 0, 16) + "}", 8);  // offsets past the data
  expect_error(open, {p, "'w'", "[0, 16]", "past the data section"});
  write_raw(p, "{\"w\":" + entry("F32", "[4]", 0, 12) + "}", 12);  // size != dtype x shape
  expect_error(open, {p, "'w'", "12 bytes", "needs 16"});
  write_raw(p, "{\"w\":" + entry("F31", "[4]", 0, 16) + "}", 16);
  expect_error(open, {p, "'w'", "unsupported dtype 'F31'"});
  write_raw(p, "{\"w\":" + entry("F32", "[-4]", 0, 16) + "}", 16);
  expect_error(open, {p, "'w'", "non-negative"});
  write_raw(p, "{\"w\":" + entry("F32", "[4]", 8, 4) + "}", 16);
  expect_error(open, {p, "'w'", "increasing"});
  write_raw(p, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4);
  expect_error(open, {p, "'w'", "data_offsets"});
  // Two tensors sharing bytes, and a hole between tensors.
  write_raw(p, "{\"a\":" + entry("F32", "[2]", 0, 8) + ",\"b\":" + entry("F32", "[2]", 4, 12) + "}",
            12);
  expect_error(open, {p, "overlaps"});
  write_raw(p, "{\"a\":" + entry("F32", "[1]", 0, 4) + ",\"b\":" + entry("F32", "[1]", 8, 12) + "}",
            12);
  expect_error(open, {p, "hole", "'b'"});
  write_raw(p, "{\"__metadata__\":{\"k\":3}}", 0);
  expect_error(open, {p, "__metadata__", "'k'"});
  expect_error([&] { SafeTensorsFile::open(dir + "/absent.safetensors"); },
               {"absent.safetensors", "cannot open"});
}

// Every tensor's CRC-32C is in __metadata__ as "checksum.NAME"; each read of a whole tensor (raw,
// widened, by elements) verifies it, a partial read verifies the whole tensor, and one flipped
// byte anywhere in a tensor's data is one line naming the file and that tensor, while the other
// tensors still read. The other metadata is kept as set.
TEST(Safetensors, ChecksumsAreWrittenAndVerified) {
  const std::string dir = make_temp_dir("llm_st_");
  const std::string path = dir + "/c.safetensors";
  Sample s;
  SafeTensorsWriter w;
  s.add_to(w);
  w.set_metadata("format", "pt");
  w.write_atomic(path);
  const std::string pristine = read_file(path);
  {
    const SafeTensorsFile f = SafeTensorsFile::open(path);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    EXPECT_EQ(f.metadata().at("checksum.a.f32"),
              crc32c_text(crc32c(s.f32.data(), s.f32.size() * sizeof(float))));
    EXPECT_EQ(f.metadata().at("checksum.h.empty"), crc32c_text(crc32c(nullptr, 0)));
    for (const SafeTensorInfo& t : f.tensors()) {
      EXPECT_TRUE(t.has_checksum) << t.name;
      std::vector<char> buf(static_cast<size_t>(t.bytes));
      f.read(t.name, buf.data(), t.dtype, t.shape);  // all verify
    }
    EXPECT_EQ(f.metadata().size(), f.tensors().size() + 1);
  }
  expect_error([&] { w.set_metadata("checksum.a.f32", "crc32c:00000000"); },
               {"checksum.a.f32", "reserved"});

  // One flipped bit in each tensor's data in turn (first, middle and last byte).
  const char* names[] = {"a.f32", "b.f64", "c.bf16", "d.f16", "e.u8", "f.i32", "g.u16"};
  for (const char* name : names) {
    const int64_t bytes = SafeTensorsFile::open(path).get(name).bytes;
    for (int64_t byte : {int64_t{0}, bytes / 2, bytes - 1}) {
      ASSERT_TRUE(write_file(path, pristine));
      testing::flip_file_byte(path, testing::raw_tensor_file_offset(path, name, byte));
      const SafeTensorsFile f = SafeTensorsFile::open(path);  // the header is intact
      const SafeTensorInfo& t = f.get(name);
      const std::vector<std::string> parts = {path, std::string("'") + name + "'",
                                              "fails its checksum", "damaged"};
      std::vector<char> buf(static_cast<size_t>(t.bytes));
      expect_error([&] { f.read(name, buf.data(), t.dtype, t.shape); }, parts);
      expect_error([&] { f.read_elements(t, 0, t.numel(), buf.data()); }, parts);
      expect_error([&] { f.read_elements(t, t.numel() - 1, 1, buf.data()); }, parts);
      if (t.dtype != DType::kU8 && t.dtype != DType::kI32 && t.dtype != DType::kU16)
        expect_error([&] { f.read_f32(name); }, parts);
      for (const char* other : names)  // the others are intact
        if (std::string(other) != name) {
          const SafeTensorInfo& o = f.get(other);
          std::vector<char> ob(static_cast<size_t>(o.bytes));
          f.read(other, ob.data(), o.dtype, o.shape);
        }
    }
  }
  // A changed checksum record is the same mismatch.
  ASSERT_TRUE(write_file(path, pristine));
  testing::RawSafetensors raw = testing::raw_safetensors_read(path);
  raw.header["__metadata__"]["checksum.b.f64"] = "crc32c:0badf00d";
  testing::raw_safetensors_write(path, raw);
  expect_error([&] { SafeTensorsFile::open(path).read_f32("b.f64"); },
               {path, "'b.f64'", "crc32c:0badf00d", "damaged"});
}

// A file has a checksum for every tensor or none: a missing one, one for a tensor the file lacks
// or a malformed one is a damaged header. A file with none (written before them, or by another
// tool) reads as ever, unverified.
TEST(Safetensors, ChecksumRecordsAreAllOrNone) {
  const std::string dir = make_temp_dir("llm_st_");
  const std::string path = dir + "/r.safetensors";
  Sample s;
  SafeTensorsWriter w;
  s.add_to(w);
  w.set_metadata("format", "ledgerlm-weights");
  w.write_atomic(path);
  const testing::RawSafetensors pristine = testing::raw_safetensors_read(path);

  testing::RawSafetensors raw = pristine;
  raw.header["__metadata__"].erase("checksum.d.f16");
  testing::raw_safetensors_write(path, raw);
  expect_error([&] { SafeTensorsFile::open(path); }, {path, "'d.f16'", "no checksum", "damaged"});

  raw = pristine;
  raw.header["__metadata__"]["checksum.z.absent"] = "crc32c:00000000";
  testing::raw_safetensors_write(path, raw);
  expect_error([&] { SafeTensorsFile::open(path); }, {path, "'z.absent'", "does not hold"});

  for (const char* bad :
       {"crc32c:1234567", "crc32c:12345678x", "crc32:12345678", "0x12345678", "crc32c:1234567g"}) {
    raw = pristine;
    raw.header["__metadata__"]["checksum.e.u8"] = bad;
    testing::raw_safetensors_write(path, raw);
    expect_error([&] { SafeTensorsFile::open(path); }, {path, "'e.u8'", bad, "damaged"});
  }

  // No checksums at all: the file loads and reads, damaged data unnoticed as before.
  testing::raw_safetensors_write(path, pristine);
  testing::strip_checksums(path);
  testing::flip_file_byte(path, testing::raw_tensor_file_offset(path, "a.f32", 5));
  const SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.metadata().at("format"), "ledgerlm-weights");
  for (const SafeTensorInfo& t : f.tensors()) EXPECT_FALSE(t.has_checksum) << t.name;
  EXPECT_NE(f.read_f32("a.f32"), s.f32);
  EXPECT_EQ(f.read_f32("d.f16").size(), 4u);
}

// C++ writes, numpy reads and writes 2x+1 of every tensor, C++ reads that back.
TEST(Safetensors, InteroperatesWithPythonImplementation) {
  const std::string dir = make_temp_dir("llm_st_");
  Sample s;
  SafeTensorsWriter w;
  s.add_to(w);
  w.set_metadata("origin", "c++");
  w.write_atomic(dir + "/in.safetensors");

  const std::string cmd = "OMP_NUM_THREADS=2 " + testing::python3() + " " + testing::source_dir() +
                          "/tests/reference/safetensors_roundtrip.py " + dir + "/in.safetensors " +
                          dir + "/out.safetensors";
  auto res = testing::run_command(cmd);
  ASSERT_EQ(res.exit_code, 0) << cmd << "\n" << res.output;
  EXPECT_NE(res.output.find("c.bf16 BF16 [3, 2]"), std::string::npos) << res.output;
  // The independent CRC-32C agrees with ours on every tensor, and ours with its.
  EXPECT_NE(res.output.find("verified 8 checksums"), std::string::npos) << res.output;

  SafeTensorsFile f = SafeTensorsFile::open(dir + "/out.safetensors");
  EXPECT_EQ(f.metadata().at("origin"), "c++");
  EXPECT_EQ(f.metadata().at("python"), "yes");
  EXPECT_EQ(f.tensors().size(), 8u);
  for (const SafeTensorInfo& t : f.tensors()) EXPECT_TRUE(t.has_checksum) << t.name;
  // All values and their images are exactly representable, so equality is exact.
  const auto f32 = read_as<float>(f, "a.f32", DType::kF32, {2, 3, 4});
  for (size_t i = 0; i < f32.size(); ++i) EXPECT_EQ(f32[i], 2 * s.f32[i] + 1) << i;
  const auto f64 = read_as<double>(f, "b.f64", DType::kF64, {5});
  for (size_t i = 0; i < f64.size(); ++i) EXPECT_DOUBLE_EQ(f64[i], 2 * s.f64[i] + 1) << i;
  const auto bf = read_as<uint16_t>(f, "c.bf16", DType::kBF16, {3, 2});
  for (size_t i = 0; i < bf.size(); ++i)
    EXPECT_EQ(bf[i], f32_to_bf16(2 * bf16_to_f32(s.bf16[i]) + 1));
  std::vector<float> h = f.read_f32("d.f16");
  for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i], 2 * f16_to_f32(s.f16[i]) + 1);
  const auto u8 = read_as<uint8_t>(f, "e.u8", DType::kU8, {7});
  for (size_t i = 0; i < u8.size(); ++i) EXPECT_EQ(u8[i], static_cast<uint8_t>(2 * s.u8[i] + 1));
  const auto i32 = read_as<int32_t>(f, "f.i32", DType::kI32, {2, 3});
  for (size_t i = 0; i < i32.size(); ++i) EXPECT_EQ(i32[i], 2 * s.i32[i] + 1);
  const auto u16 = read_as<uint16_t>(f, "g.u16", DType::kU16, {3});
  for (size_t i = 0; i < u16.size(); ++i)
    EXPECT_EQ(u16[i], static_cast<uint16_t>(2 * s.u16[i] + 1));
  EXPECT_EQ(f.get("h.empty").shape, (std::vector<int64_t>{0, 4}));
}

// The HF mapping: transposes Conv1D weights, drops padded vocab rows, and inverts exactly.
TEST(HfExport, MappingRoundTripAndConfig) {
  // vocab 70 padded to 128
  ModelConfig cfg = testing::model_config_of({.vocab = 70, .L = 2, .H = 2, .C = 16, .block = 8});
  const ParamTable table = param_table_build(cfg);
  std::vector<float> params(static_cast<size_t>(table.total), 0.0f);
  for (const ParamInfo& p : table.params)
    for (int64_t i = 0; i < p.numel; ++i)
      params[static_cast<size_t>(p.offset + i)] = static_cast<float>(p.offset + i) * 1e-3f + 1.0f;

  std::vector<HfTensor> hf = hf_tensors_from_params(table, Tensor(params.data(), DType::kF32));
  ASSERT_EQ(hf.size(), table.params.size());
  for (const HfTensor& t : hf) EXPECT_NE(t.name, "lm_head.weight");
  const ParamInfo& wte = table.find("embed.wte");
  EXPECT_EQ(hf[0].name, "transformer.wte.weight");
  EXPECT_EQ(hf[0].shape, (std::vector<int64_t>{70, 16}));
  const ParamInfo& qkv = table.find("block.1.attn.qkv.weight");  // ours (3C, C)
  const HfTensor* c_attn = nullptr;
  for (const HfTensor& t : hf)
    if (t.name == "transformer.h.1.attn.c_attn.weight") c_attn = &t;
  ASSERT_NE(c_attn, nullptr);
  EXPECT_EQ(c_attn->shape, (std::vector<int64_t>{16, 48}));
  // HF (in=c, out=r) equals ours (out=r, in=c).
  EXPECT_EQ(c_attn->data[5 * 48 + 40], params[static_cast<size_t>(qkv.offset + 40 * 16 + 5)]);

  const std::string dir = make_temp_dir("llm_hf_");
  hf_write_safetensors(dir + "/model.safetensors", hf);
  hf_write_config_json(dir + "/config.json", cfg);
  SafeTensorsFile f = SafeTensorsFile::open(dir + "/model.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.find("lm_head.weight"), nullptr);
  auto config = nlohmann::json::parse(read_file(dir + "/config.json"));
  EXPECT_EQ(config["vocab_size"], 70);
  EXPECT_EQ(config["n_positions"], 8);
  EXPECT_EQ(config["activation_function"], "gelu_new");
  EXPECT_EQ(config["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(config["tie_word_embeddings"], true);

  // Inverse, into bf16 storage too: padded vocab rows come back as zeros.
  std::vector<HfTensor> back = hf_read_safetensors(dir + "/model.safetensors");
  std::vector<float> again(params.size(), -7.0f);
  params_from_hf_tensors(table, back, Tensor(again.data(), DType::kF32));
  for (const ParamInfo& p : table.params) {
    for (int64_t i = 0; i < p.numel; ++i) {
      const bool pad = &p == &wte && i >= wte.hf_rows * cfg.n_embd;
      const size_t k = static_cast<size_t>(p.offset + i);
      ASSERT_EQ(again[k], pad ? 0.0f : params[k]) << p.name << "[" << i << "]";
    }
  }
  std::vector<uint16_t> bf(params.size());
  params_from_hf_tensors(table, back, Tensor(bf.data(), DType::kBF16));
  EXPECT_EQ(bf[static_cast<size_t>(qkv.offset + 7)],
            f32_to_bf16(params[static_cast<size_t>(qkv.offset + 7)]));

  // Missing, misshapen and unknown tensors are errors naming them; lm_head is tolerated.
  back.push_back({"lm_head.weight", {70, 16}, std::vector<float>(70 * 16)});
  params_from_hf_tensors(table, back, Tensor(again.data(), DType::kF32));
  back.push_back({"transformer.h.9.mlp.c_fc.weight", {1}, {0.0f}});
  expect_error([&] { params_from_hf_tensors(table, back, Tensor(again.data(), DType::kF32)); },
               {"transformer.h.9.mlp.c_fc.weight", "not a parameter"});
  back.pop_back();
  auto attn = std::find_if(back.begin(), back.end(), [](const HfTensor& t) {
    return t.name == "transformer.h.0.attn.c_attn.weight";
  });
  ASSERT_NE(attn, back.end());
  attn->shape = {48, 16};  // our layout instead of HF's
  expect_error([&] { params_from_hf_tensors(table, back, Tensor(again.data(), DType::kF32)); },
               {"transformer.h.0.attn.c_attn.weight", "[48, 16]", "expected [16, 48]"});
  back.erase(attn);
  expect_error([&] { params_from_hf_tensors(table, back, Tensor(again.data(), DType::kF32)); },
               {"missing tensor"});
}

// An untied head (model.tie_embeddings = false) exports as lm_head.weight (real vocab rows) with
// tie_word_embeddings false, and the import reads it back as final.lm_head, bit for bit, beside a
// different wte (a tied import would refuse that lm_head).
TEST(HfExport, UntiedHeadRoundTripsAsLmHead) {
  ModelConfig cfg;
  cfg.vocab_size = 70;  // padded to 128
  cfg.n_layer = 1;
  cfg.n_head = 2;
  cfg.n_embd = 16;
  cfg.block_size = 8;
  cfg.tie_embeddings = false;
  const ParamTable table = param_table_build(cfg);
  std::vector<float> params(static_cast<size_t>(table.total), 0.0f);
  for (const ParamInfo& p : table.params)
    for (int64_t i = 0; i < p.hf_rows * (p.numel / p.shape[0]); ++i)
      params[static_cast<size_t>(p.offset + i)] = static_cast<float>(p.offset + i) * 1e-3f - 1.0f;
  const std::string dir = make_temp_dir("llm_hf_untied_");
  hf_write_safetensors(dir + "/model.safetensors",
                       hf_tensors_from_params(table, Tensor(params.data(), DType::kF32)));
  hf_write_config_json(dir + "/config.json", cfg);
  SafeTensorsFile f = SafeTensorsFile::open(dir + "/model.safetensors");
  ASSERT_NE(f.find("lm_head.weight"), nullptr);
  EXPECT_EQ(f.get("lm_head.weight").shape, (std::vector<int64_t>{70, 16}));
  const HfModel model = hf_read_model_dir(dir);
  EXPECT_FALSE(model.config.tie_embeddings);
  const ParamTable back_table = param_table_build(model.config);
  ASSERT_EQ(back_table.total, table.total);
  std::vector<float> again(params.size(), -7.0f);
  hf_model_to_params(model, back_table, Tensor(again.data(), DType::kF32));
  for (const ParamInfo& p : table.params)
    EXPECT_EQ(std::memcmp(again.data() + p.offset, params.data() + p.offset,
                          static_cast<size_t>(p.numel) * sizeof(float)),
              0)
        << p.name;
}

}  // namespace
}  // namespace ledgerlm
