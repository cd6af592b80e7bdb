// Opening and verifying checkpoints for reading (see checkpoint.h).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "model/base/check.h"
#include "model/base/crc32c.h"
#include "model/base/input_file.h"

namespace ledgerlm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A piece as meta.json records it (CheckpointReader::PieceRecord is private).
struct PieceRecordView {
  int64_t begin = 0, count = 0;
  uint32_t crc = 0;
};

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Typed access to meta.json: a field of the wrong type is one Error naming `where`, never a JSON
// library exception or an out-of-range conversion.
const json& member(const json& obj, const char* key, const std::string& where) {
  LLM_REQUIRE(obj.is_object() && obj.contains(key), where, ": missing '", key, "'");
  return obj.at(key);
}

int64_t member_int(const json& obj, const char* key, const std::string& where) {
  const json& v = member(obj, key, where);
  LLM_REQUIRE(v.is_number_integer() && (!v.is_number_unsigned() ||
                                        v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)),
              where, ": '", key, "' must be an integer (got ", v.dump(), ")");
  return v.get<int64_t>();
}

const json& member_object(const json& obj, const char* key, const std::string& where) {
  const json& v = member(obj, key, where);
  LLM_REQUIRE(v.is_object(), where, ": '", key, "' must be an object");
  return v;
}

uint32_t parse_crc(const json& p, const std::string& where) {
  const json& v = member(p, "crc", where);
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  uint32_t crc = 0;
  LLM_REQUIRE(crc32c_parse(s, &crc), where, ": malformed crc '", s, "'");
  return crc;
}

// Data files are plain names "STEM.safetensors" inside the checkpoint directory.
bool is_data_file_name(const std::string& name) {
  const std::string ext = ".safetensors";
  if (name.size() <= ext.size() || name.compare(name.size() - ext.size(), ext.size(), ext) != 0)
    return false;
  for (char c : name.substr(0, name.size() - ext.size()))
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      return false;
  return name[0] != '.';
}

// meta.json records the step, the loader position and the config a resume continues from: an
// edit would silently rewind or change the run, so it carries a checksum of its own.
void check_meta_checksum(const json& m, const std::string& meta_path) {
  const json& recorded =
      m.contains(kCheckpointMetaChecksumKey) ? m[kCheckpointMetaChecksumKey] : json();
  LLM_REQUIRE(recorded.is_string(), "checkpoint file '", meta_path, "': missing '",
              kCheckpointMetaChecksumKey, "'");
  const std::string actual = checkpoint_meta_checksum(m);
  LLM_REQUIRE(recorded.get<std::string>() == actual, "checkpoint file '", meta_path,
              "' fails its checksum (", actual, ", it records ", recorded.get<std::string>(),
              "): it was edited or damaged");
}

json read_meta(const std::string& meta_path, int64_t* bytes) {
  const int fd = input_file_open(meta_path, "checkpoint file");
  LLM_REQUIRE(fd >= 0, "checkpoint file '", meta_path, "' cannot be read (", errno_text(), ")");
  const std::string text = input_file_read_fd(fd, meta_path, "checkpoint file");
  *bytes += static_cast<int64_t>(text.size());
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(error_message("checkpoint file '", meta_path, "' is not valid JSON (", e.what(), ")"));
  }
}

// Format, version, checksum, completeness and step of a parsed meta.json.
int64_t check_meta_header(const json& m, const std::string& meta_path) {
  const std::string where = "checkpoint file '" + meta_path + "'";
  LLM_REQUIRE(m.is_object() && m.contains("format") && m["format"].is_string() &&
                  m["format"].get<std::string>() == kCheckpointFormat,
              where, ": not a ledgerlm checkpoint (format field is not '", kCheckpointFormat, "')");
  LLM_REQUIRE(m.contains("format_version") && m["format_version"].is_number_integer(), where,
              ": missing integer 'format_version'");
  const int64_t version = member_int(m, "format_version", where);
  LLM_REQUIRE(version == 1 || version == kCheckpointFormatVersion, where, ": format version ",
              version, ", this ledgerlm reads versions 1 to ", kCheckpointFormatVersion);
  if (version >= 2) check_meta_checksum(m, meta_path);
  LLM_REQUIRE(m.contains("complete") && m["complete"].is_boolean() && m["complete"].get<bool>(),
              where, ": the checkpoint is marked incomplete");
  LLM_REQUIRE(m.contains("step") && m["step"].is_number_integer(), where,
              ": missing integer 'step'");
  const int64_t step = member_int(m, "step", where);
  LLM_REQUIRE(step >= 0, where, ": negative step ", step);
  member_object(m, "files", where);
  return step;
}

// The pieces meta.json lists for one tensor; they must tile it exactly.
std::vector<PieceRecordView> read_pieces(const json& t, const SafeTensorInfo& info,
                                         const std::string& tw) {
  const json& list = member(t, "pieces", tw);
  LLM_REQUIRE(list.is_array(), tw, ": 'pieces' must be an array");
  std::vector<PieceRecordView> pieces;
  for (const json& p : list) {
    PieceRecordView pr;
    pr.begin = member_int(p, "begin", tw);
    pr.count = member_int(p, "count", tw);
    pr.crc = parse_crc(p, tw);
    pieces.push_back(pr);
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const PieceRecordView& a, const PieceRecordView& b) { return a.begin < b.begin; });
  int64_t covered = 0;
  for (const PieceRecordView& pr : pieces) {
    LLM_REQUIRE(pr.begin == covered && pr.count >= 0 && pr.count <= info.numel() - covered, tw,
                ": its pieces in meta.json do not tile the tensor (gap or overlap at element ",
                covered, ")");
    covered += pr.count;
  }
  LLM_REQUIRE(covered == info.numel(), tw, ": its pieces cover ", covered, " of ", info.numel(),
              " elements");
  return pieces;
}

// A tensor's record in meta.json against the file's header: dtype and shape agree.
void check_tensor_record(const json& t, const SafeTensorInfo& info, const std::string& tw) {
  LLM_REQUIRE(t.is_object(), tw, ": its record in meta.json must be an object");
  const json& dtype = member(t, "dtype", tw);
  DType dt;
  LLM_REQUIRE(dtype.is_string() && dtype_parse_safetensors(dtype.get<std::string>(), &dt) &&
                  dt == info.dtype,
              tw, ": dtype ", dtype_safetensors_name(info.dtype), " in the file, ", dtype.dump(),
              " in meta.json");
  const json& shape = member(t, "shape", tw);
  bool same = shape.is_array() && shape.size() == info.shape.size();
  for (size_t i = 0; same && i < info.shape.size(); ++i)
    same = shape[i].is_number_integer() && !shape[i].is_number_float() &&
           shape[i].get<int64_t>() == info.shape[i];
  LLM_REQUIRE(same, tw, ": shape ", safetensors_shape_string(info.shape), " in the file, ",
              shape.dump(), " in meta.json");
}

}  // namespace

CheckpointReader CheckpointReader::open(const std::string& dir) {
  CheckpointReader r;
  r.dir_ = dir;
  const std::string meta_path = (fs::path(dir) / "meta.json").string();
  LLM_REQUIRE(fs::is_directory(dir), "checkpoint '", dir, "' does not exist");
  LLM_REQUIRE(fs::exists(meta_path), "checkpoint '", dir,
              "': no meta.json (an incomplete or foreign directory)");
  r.meta_ = read_meta(meta_path, &r.bytes_);
  r.step_ = check_meta_header(r.meta_, meta_path);
  for (const auto& [fname, desc] : r.meta_["files"].items()) {
    LLM_REQUIRE(is_data_file_name(fname), "checkpoint file '", meta_path, "': bad data file name '",
                fname, "'");
    r.open_data_file(fname, desc, meta_path);
  }
  return r;
}

void CheckpointReader::open_data_file(const std::string& fname, const json& desc,
                                      const std::string& meta_path) {
  const std::string path = (fs::path(dir_) / fname).string();
  const std::string where = "checkpoint file '" + path + "'";
  LLM_REQUIRE(desc.is_object(), "checkpoint file '", meta_path, "': the record of '", fname,
              "' must be an object");
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  LLM_REQUIRE(!ec, where, " is missing");
  const int64_t expected = member_int(desc, "bytes", "checkpoint file '" + meta_path + "'");
  const int64_t actual = static_cast<int64_t>(size);
  LLM_REQUIRE(actual == expected, where, " is ", actual, " bytes but meta.json records ", expected,
              " (truncated or replaced)");
  DataFile df;
  df.path = path;
  df.file = std::make_unique<SafeTensorsFile>(SafeTensorsFile::open(path));
  const json& tensors = member(desc, "tensors", "checkpoint file '" + meta_path + "'");
  LLM_REQUIRE(tensors.is_object(), "checkpoint file '", meta_path, "': no tensor list for '", fname,
              "'");
  for (const auto& [name, t] : tensors.items()) {
    const std::string tw = where + ": tensor '" + name + "'";
    const SafeTensorInfo* info = df.file->find(name);
    LLM_REQUIRE(info != nullptr, tw, " is listed in meta.json but absent from the file");
    check_tensor_record(t, *info, tw);
    for (const PieceRecordView& p : read_pieces(t, *info, tw))
      df.pieces[name].push_back(PieceRecord{p.begin, p.count, p.crc});
    df.pieces[name];  // a tensor with no elements has no pieces
  }
  LLM_REQUIRE(df.pieces.size() == df.file->tensors().size(), where, " holds ",
              df.file->tensors().size(), " tensors but meta.json lists ", df.pieces.size());
  bytes_ += actual;
  files_.emplace(fname.substr(0, fname.size() - 12), std::move(df));
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
    const uint32_t crc = crc32c(piece_bytes.data(), piece_bytes.size());
    LLM_REQUIRE(crc == p.crc, "checkpoint file '", f.path, "': tensor '", info.name, "' elements [",
                p.begin, ", ", p.begin + p.count, ") fail their checksum (", crc32c_text(crc),
                ", meta.json records ", crc32c_text(p.crc), "): the file is corrupted");
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
    case DType::kF64:  // optimizer-wide scalars (step counts, running maxima)
      for (int64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, raw.data() + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      break;
    default:
      fail(error_message("checkpoint file '", f.path, "': tensor '", name, "' is ",
                         dtype_name(info->dtype), ", expected a float dtype"));
  }
  return out;
}

std::string checkpoint_meta_checksum(const nlohmann::json& meta) {
  nlohmann::json copy = meta;
  if (copy.is_object()) copy.erase(kCheckpointMetaChecksumKey);
  // Parsed JSON holds valid UTF-8 only; replace guards hand-built records all the same.
  const std::string text = copy.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return crc32c_text(crc32c(text.data(), text.size()));
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
