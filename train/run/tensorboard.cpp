// TensorBoard event files (see tensorboard.h).
#include "train/run/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "model/base/check.h"
#include "model/base/crc32c.h"
#include "train/run/run_dir.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kPrefix = "events.out.tfevents.";

void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

template <typename T>
void put_le(std::string* out, T v) {  // x86-64 is little-endian, as the formats are
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out->append(bytes, sizeof(T));
}

// Protobuf field keys: (field number << 3) | wire type (0 varint, 1 fixed64, 2 bytes, 5 fixed32).
void put_bytes_field(std::string* out, int field, std::string_view bytes) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 2);
  put_varint(out, bytes.size());
  out->append(bytes);
}

std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_varint(&e, 1 << 3 | 1);
  put_le(&e, wall_time);
  put_varint(&e, 2 << 3 | 0);
  put_varint(&e, static_cast<uint64_t>(step));  // int64: two's complement as a varint
  return e;
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A number the record holds at `key` (JSON null, e.g. a non-finite value, is skipped).
void add_number(const json& rec, const char* key, const char* tag, std::vector<TbScalar>* out) {
  const auto it = rec.find(key);
  if (it != rec.end() && it->is_number()) out->push_back({tag, it->get<float>()});
}

// ---- reading back (resume) ----

bool get_varint(std::string_view s, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < s.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(s[(*pos)++]);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// The step of an Event; false when the bytes are not a well-formed protobuf message.
bool event_step(std::string_view e, int64_t* step) {
  *step = 0;
  size_t pos = 0;
  while (pos < e.size()) {
    uint64_t key = 0, v = 0;
    if (!get_varint(e, &pos, &key)) return false;
    switch (key & 7) {
      case 0:
        if (!get_varint(e, &pos, &v)) return false;
        if (key >> 3 == 2) *step = static_cast<int64_t>(v);
        break;
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      case 2:
        if (!get_varint(e, &pos, &v) || v > e.size()) return false;
        pos += v;
        break;
      default:
        return false;
    }
    if (pos > e.size()) return false;
  }
  return true;
}

uint32_t read_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Cuts one event file back to `step`; returns the records dropped as unreadable (0 or 1: the
// first unreadable record ends what can be trusted).
int64_t truncate_file(const std::string& path, int64_t step) {
  std::ifstream in(path, std::ios::binary);
  LLM_REQUIRE(in, "cannot read TensorBoard event file '", path, "'");
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLM_REQUIRE(!in.bad(), "cannot read TensorBoard event file '", path, "'");
  std::string kept;
  size_t pos = 0;
  int64_t broken = 0;
  bool changed = false;
  while (pos < s.size()) {
    const size_t left = s.size() - pos;
    uint64_t len = 0;
    if (left >= 16) std::memcpy(&len, s.data() + pos, 8);
    const bool head_ok =
        left >= 16 && read_u32(s.data() + pos + 8) == tb_masked_crc(crc32c(s.data() + pos, 8));
    const bool body_ok =
        head_ok && len <= left - 16 &&
        read_u32(s.data() + pos + 12 + len) == tb_masked_crc(crc32c(s.data() + pos + 12, len));
    int64_t rec_step = 0;
    if (!body_ok || !event_step(std::string_view(s).substr(pos + 12, len), &rec_step)) {
      broken = 1;
      changed = true;
      break;
    }
    const size_t rec_size = 16 + static_cast<size_t>(len);
    if (rec_step <= step)
      kept.append(s, pos, rec_size);
    else
      changed = true;
    pos += rec_size;
  }
  if (changed) write_file_atomic(path, kept);
  return broken;
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "host";
  std::string h(buf);
  for (char& c : h)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '_';
  return h.empty() ? "host" : h;
}

std::string open_or_create(const std::string& run_dir) {
  const std::vector<std::string> files = tb_event_files(run_dir);
  if (!files.empty()) return files.front();
  const double now = wall_time_now();
  return run_dir + "/" + kPrefix + std::to_string(static_cast<int64_t>(now)) + "." + host_name();
}

}  // namespace

std::vector<TbScalar> tb_scalars(const json& rec) {
  std::vector<TbScalar> out;
  if (!rec.is_object() || !rec.contains("step")) return out;
  if (rec.contains("loss")) {
    for (const char* key : {"loss", "lr", "grad_norm", "tokens_per_s", "step_ms", "optim_ms",
                            "comm_ms", "loss_scale", "skipped_steps", "tokens", "gns_g2",
                            "gns_trace", "gns_g2_ema", "gns_trace_ema", "b_simple"})
      add_number(rec, key, (std::string("train/") + key).c_str(), &out);
  }
  if (rec.contains("val_loss")) {
    add_number(rec, "val_loss", "val/loss", &out);
    add_number(rec, "val_bpb", "val/bpb", &out);
    add_number(rec, "val_ppl", "val/ppl", &out);
  }
  if (rec.contains("ckpt")) {
    add_number(rec, "ckpt_save_s", "ckpt/save_s", &out);
    add_number(rec, "ckpt_bytes", "ckpt/bytes", &out);
  }
  const auto mem = rec.find("mem");
  if (mem != rec.end() && mem->is_object()) {
    if (mem->contains("total")) {
      add_number((*mem)["total"], "current", "mem/tracked_bytes", &out);
      add_number((*mem)["total"], "peak", "mem/tracked_peak_bytes", &out);
    }
    if (mem->contains("process")) add_number((*mem)["process"], "hwm", "mem/rss_hwm_bytes", &out);
  }
  return out;
}

uint32_t tb_masked_crc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tb_frame(std::string_view data) {
  std::string out;
  const uint64_t len = data.size();
  put_le(&out, len);
  put_le(&out, tb_masked_crc(crc32c(out.data(), 8)));
  out.append(data);
  put_le(&out, tb_masked_crc(crc32c(data.data(), data.size())));
  return out;
}

std::string tb_event_scalars(double wall_time, int64_t step, const std::vector<TbScalar>& scalars) {
  std::string summary;
  for (const TbScalar& s : scalars) {
    std::string value;
    put_bytes_field(&value, 1, s.tag);
    put_varint(&value, 2 << 3 | 5);
    put_le(&value, s.value);
    put_bytes_field(&summary, 1, value);
  }
  std::string e = event_head(wall_time, step);
  put_bytes_field(&e, 5, summary);
  return e;
}

std::string tb_event_file_version(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes_field(&e, 3, "brain.Event:2");
  return e;
}

std::vector<std::string> tb_event_files(const std::string& run_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    // PATH.tmp: an atomic rewrite a kill interrupted (the next job's sweep removes it).
    if (name.starts_with(kPrefix) && !name.ends_with(".tmp") && entry.is_regular_file(ec))
      out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TensorBoardLog::TensorBoardLog(const std::string& run_dir)
    : file_(open_or_create(run_dir), "TensorBoard event file") {
  if (file_.size() == 0) file_.append(tb_frame(tb_event_file_version(wall_time_now())));
}

void TensorBoardLog::write(const json& record) {
  const std::vector<TbScalar> scalars = tb_scalars(record);
  if (scalars.empty()) return;
  file_.append(tb_frame(tb_event_scalars(wall_time_now(), record["step"].get<int64_t>(), scalars)));
}

int64_t tb_truncate(const std::string& run_dir, int64_t step) {
  int64_t broken = 0;
  for (const std::string& path : tb_event_files(run_dir)) broken += truncate_file(path, step);
  return broken;
}

}  // namespace ledgerlm
