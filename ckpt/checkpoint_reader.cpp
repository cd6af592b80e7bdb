// Opening and verifying checkpoints for reading (see checkpoint.h).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_crc.h"
#include "model/base/check.h"

namespace ledgerlm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint32_t parse_crc(const json& v, const std::string& where) {
  LLM_REQUIRE(v.is_string(), where, ": missing 'crc'");
  const std::string s = v.get<std::string>();
  LLM_REQUIRE(s.rfind("crc32c:", 0) == 0 && s.size() == 15, where, ": malformed crc '", s, "'");
  return static_cast<uint32_t>(std::stoul(s.substr(7), nullptr, 16));
}

// meta.json records the step, the loader position and the config a resume continues from: an
// edit would silently rewind or change the run, so it carries a checksum of its own.
void check_meta_checksum(const json& m, const std::string& meta_path) {
  const json& recorded = m.value(kCheckpointMetaChecksumKey, json());
  LLM_REQUIRE(recorded.is_string(), "checkpoint file '", meta_path, "': missing '",
              kCheckpointMetaChecksumKey, "'");
  const std::string actual = checkpoint_meta_checksum(m);
  LLM_REQUIRE(recorded.get<std::string>() == actual, "checkpoint file '", meta_path,
              "' fails its checksum (", actual, ", it records ", recorded.get<std::string>(),
              "): it was edited or damaged");
}

}  // namespace

CheckpointReader CheckpointReader::open(const std::string& dir) {
  CheckpointReader r;
  r.dir_ = dir;
  const std::string meta_path = (fs::path(dir) / "meta.json").string();
  LLM_REQUIRE(fs::is_directory(dir), "checkpoint '", dir, "' does not exist");
  LLM_REQUIRE(fs::exists(meta_path), "checkpoint '", dir,
              "': no meta.json (an incomplete or foreign directory)");
  {
    std::ifstream f(meta_path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    r.bytes_ += static_cast<int64_t>(ss.str().size());
    try {
      r.meta_ = json::parse(ss.str());
    } catch (const json::exception& e) {
      fail(error_message("checkpoint file '", meta_path, "' is not valid JSON (", e.what(), ")"));
    }
  }
  const json& m = r.meta_;
  LLM_REQUIRE(m.is_object() && m.value("format", "") == kCheckpointFormat, "checkpoint file '",
              meta_path, "': not a ledgerlm checkpoint (format field is not '", kCheckpointFormat,
              "')");
  LLM_REQUIRE(m.contains("format_version") && m["format_version"].is_number_integer(),
              "checkpoint file '", meta_path, "': missing integer 'format_version'");
  const int64_t version = m["format_version"].get<int64_t>();
  LLM_REQUIRE(version == 1 || version == kCheckpointFormatVersion, "checkpoint file '", meta_path,
              "': format version ", version, ", this ledgerlm reads versions 1 to ",
              kCheckpointFormatVersion);
  if (version >= 2) check_meta_checksum(m, meta_path);
  LLM_REQUIRE(m.value("complete", false), "checkpoint file '", meta_path,
              "': the checkpoint is marked incomplete");
  LLM_REQUIRE(m.contains("step") && m["step"].is_number_integer(), "checkpoint file '", meta_path,
              "': missing integer 'step'");
  r.step_ = m["step"].get<int64_t>();
  LLM_REQUIRE(m.contains("files") && m["files"].is_object(), "checkpoint file '", meta_path,
              "': missing object 'files'");

  for (const auto& [fname, desc] : m["files"].items()) {
    const std::string path = (fs::path(dir) / fname).string();
    const std::string where = "checkpoint file '" + path + "'";
    LLM_REQUIRE(fname.size() > 12 && fname.substr(fname.size() - 12) == ".safetensors" &&
                    fname.find('/') == std::string::npos,
                "checkpoint file '", meta_path, "': bad data file name '", fname, "'");
    LLM_REQUIRE(fs::exists(path), where, " is missing");
    const int64_t expected = desc.value("bytes", static_cast<int64_t>(-1));
    const int64_t actual = static_cast<int64_t>(fs::file_size(path));
    LLM_REQUIRE(actual == expected, where, " is ", actual, " bytes but meta.json records ",
                expected, " (truncated or replaced)");
    DataFile df;
    df.path = path;
    df.file = std::make_unique<SafeTensorsFile>(SafeTensorsFile::open(path));
    LLM_REQUIRE(desc.contains("tensors") && desc["tensors"].is_object(), "checkpoint file '",
                meta_path, "': no tensor list for '", fname, "'");
    for (const auto& [name, t] : desc["tensors"].items()) {
      const std::string tw = where + ": tensor '" + name + "'";
      const SafeTensorInfo* info = df.file->find(name);
      LLM_REQUIRE(info != nullptr, tw, " is listed in meta.json but absent from the file");
      DType dt;
      LLM_REQUIRE(dtype_parse_safetensors(t.value("dtype", ""), &dt) && dt == info->dtype, tw,
                  ": dtype ", dtype_safetensors_name(info->dtype), " in the file, ",
                  t.value("dtype", "?"), " in meta.json");
      LLM_REQUIRE(t.contains("shape") && t["shape"].get<std::vector<int64_t>>() == info->shape, tw,
                  ": shape ", safetensors_shape_string(info->shape), " in the file, ",
                  t.value("shape", json::array()).dump(), " in meta.json");
      std::vector<PieceRecord> pieces;
      for (const json& p : t.value("pieces", json::array())) {
        PieceRecord pr;
        pr.begin = p.value("begin", static_cast<int64_t>(-1));
        pr.count = p.value("count", static_cast<int64_t>(-1));
        pr.crc = parse_crc(p.value("crc", json()), tw);
        pieces.push_back(pr);
      }
      std::sort(pieces.begin(), pieces.end(),
                [](const PieceRecord& a, const PieceRecord& b) { return a.begin < b.begin; });
      int64_t covered = 0;
      for (const PieceRecord& pr : pieces) {
        LLM_REQUIRE(pr.begin == covered && pr.count >= 0, tw,
                    ": its pieces in meta.json do not tile the tensor (gap or overlap at element ",
                    covered, ")");
        covered += pr.count;
      }
      LLM_REQUIRE(covered == info->numel(), tw, ": its pieces cover ", covered, " of ",
                  info->numel(), " elements");
      df.pieces[name] = std::move(pieces);
    }
    LLM_REQUIRE(df.pieces.size() == df.file->tensors().size(), where, " holds ",
                df.file->tensors().size(), " tensors but meta.json lists ", df.pieces.size());
    r.bytes_ += actual;
    r.files_.emplace(fname.substr(0, fname.size() - 12), std::move(df));
  }
  return r;
}

const CheckpointReader::DataFile& CheckpointReader::data_file(const std::string& file) const {
  auto it = files_.find(file);
  LLM_REQUIRE(it != files_.end(), "checkpoint '", dir_, "' has no ", file, ".safetensors");
  return it->second;
}

bool CheckpointReader::has(const std::string& file, const std::string& name) const {
  auto it = files_.find(file);
  return it != files_.end() && it->second.pieces.count(name) > 0;
}

std::vector<std::string> CheckpointReader::tensor_names(const std::string& file) const {
  std::vector<std::string> names;
  auto it = files_.find(file);
  if (it == files_.end()) return names;
  for (const auto& [name, p] : it->second.pieces) names.push_back(name);
  return names;
}

const SafeTensorInfo& CheckpointReader::info(const std::string& file,
                                             const std::string& name) const {
  return data_file(file).file->get(name);
}

void CheckpointReader::read_checked(const DataFile& f, const SafeTensorInfo& info, int64_t begin,
                                    int64_t count, void* dst) const {
  const int64_t es = static_cast<int64_t>(dtype_size(info.dtype));
  const int64_t end = begin + count;
  std::vector<char> piece_bytes;
  for (const PieceRecord& p : f.pieces.at(info.name)) {
    const int64_t lo = std::max(begin, p.begin), hi = std::min(end, p.begin + p.count);
    if (lo >= hi) continue;
    // The CRC covers the whole piece, so read all of it even when only a part is needed.
    piece_bytes.resize(static_cast<size_t>(p.count * es));
    f.file->read_elements(info, p.begin, p.count, piece_bytes.data());
    const uint32_t crc = ckpt_crc32c(piece_bytes.data(), piece_bytes.size());
    LLM_REQUIRE(crc == p.crc, "checkpoint file '", f.path, "': tensor '", info.name, "' elements [",
                p.begin, ", ", p.begin + p.count, ") fail their checksum (", ckpt_crc_text(crc),
                ", meta.json records ", ckpt_crc_text(p.crc), "): the file is corrupted");
    std::memcpy(static_cast<char*>(dst) + (lo - begin) * es,
                piece_bytes.data() + (lo - p.begin) * es, static_cast<size_t>((hi - lo) * es));
  }
}

void CheckpointReader::read(const std::string& file, const std::string& name, DType dtype,
                            const std::vector<int64_t>& shape, int64_t begin, int64_t count,
                            void* dst) const {
  const DataFile& f = data_file(file);
  const SafeTensorInfo* info = f.file->find(name);
  LLM_REQUIRE(info != nullptr, "checkpoint file '", f.path, "' has no tensor '", name, "'");
  LLM_REQUIRE(info->dtype == dtype, "checkpoint file '", f.path, "': tensor '", name, "' is ",
              dtype_name(info->dtype), ", expected ", dtype_name(dtype));
  LLM_REQUIRE(info->shape == shape, "checkpoint file '", f.path, "': tensor '", name,
              "' has shape ", safetensors_shape_string(info->shape), ", expected ",
              safetensors_shape_string(shape));
  LLM_ASSERT(begin >= 0 && count >= 0 && begin + count <= shape_numel(shape));
  read_checked(f, *info, begin, count, dst);
}

std::vector<float> CheckpointReader::read_f32(const std::string& file, const std::string& name,
                                              const std::vector<int64_t>& shape) const {
  const DataFile& f = data_file(file);
  const SafeTensorInfo* info = f.file->find(name);
  LLM_REQUIRE(info != nullptr, "checkpoint file '", f.path, "' has no tensor '", name, "'");
  LLM_REQUIRE(info->shape == shape, "checkpoint file '", f.path, "': tensor '", name,
              "' has shape ", safetensors_shape_string(info->shape), ", expected ",
              safetensors_shape_string(shape));
  const int64_t n = info->numel();
  std::vector<char> raw(static_cast<size_t>(info->bytes));
  read_checked(f, *info, 0, n, raw.data());
  std::vector<float> out(static_cast<size_t>(n));
  switch (info->dtype) {
    case DType::kF32:
      std::memcpy(out.data(), raw.data(), raw.size());
      break;
    case DType::kBF16:
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        out[i] = info->dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      break;
    default:
      fail(error_message("checkpoint file '", f.path, "': tensor '", name, "' is ",
                         dtype_name(info->dtype), ", expected a float dtype"));
  }
  return out;
}

void CheckpointReader::verify_all() const {
  std::vector<char> buf;
  for (const auto& [stem, f] : files_) {
    for (const SafeTensorInfo& info : f.file->tensors()) {
      buf.resize(static_cast<size_t>(info.bytes));
      read_checked(f, info, 0, info.numel(), buf.data());
    }
  }
}

}  // namespace ledgerlm
