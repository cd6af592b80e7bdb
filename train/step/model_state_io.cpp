// Weights and checkpoint I/O of the model state (see model_state.h): every rank reads and writes
// the parts of the logical tensors it holds, so a checkpoint written at any world size and ZeRO
// stage loads at any other. Data moves between host staging and backend buffers only through
// the backend's copies.
#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "ckpt/finite_weights.h"
#include "ckpt/safetensors.h"
#include "data/sha256.h"
#include "model/base/check.h"
#include "train/step/model_state.h"
#include "train/step/zero_units.h"

namespace ledgerlm {
namespace {

std::string state_tensor_name(const ParamTable& table, const StateView& v) {
  return v.param >= 0 ? table.params[static_cast<size_t>(v.param)].name + "." + v.name
                      : "optim." + v.name;
}

// The host buffer frozen_sha256() hashes through (the checkpoint writer's default chunk).
constexpr int64_t kFrozenHashChunkBytes = 4 << 20;

}  // namespace

void ModelState::init_weights(uint64_t seed) {
  std::vector<float> values;
  int cached = -1;
  set_weights([&](int param, int64_t begin, int64_t count, float* dst) {
    if (cached != param) {  // keyed on the whole table's index: the same values frozen or not
      values.resize(static_cast<size_t>(model_table_.params[static_cast<size_t>(param)].numel));
      gpt_init_tensor(model_table_, param, seed, values.data());
      cached = param;
    }
    std::copy(values.begin() + begin, values.begin() + begin + count, dst);
  });
}

namespace {

// fp32 values in the compute dtype's bytes (frozen weights are stored as the compute copy).
std::vector<char> to_dtype_bytes(const std::vector<float>& v, DType dt) {
  std::vector<char> out(v.size() * dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t b = dt == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

}  // namespace

// Every tensor part this rank's fp32 weights hold (master(), as the placement table says), then
// the compute copy from them; then the frozen weights (whole on every rank, rounded to nearest).
void ModelState::set_weights(const WeightReader& read, const WeightFilter& keep) {
  std::vector<float> host;
  Tensor target(master(), DType::kF32);
  for (const TensorPlacement& tp : placement_.tensors) {
    const Span& m = tp.master;
    const int full = table_.params[static_cast<size_t>(tp.param)].full_index;
    const int param = full >= 0 ? full : tp.param;
    if (m.count == 0 || (keep && !keep(param))) continue;
    host.resize(static_cast<size_t>(m.count));
    read(param, m.begin, m.count, host.data());
    state_backend().copy_from_host(target.offset(m.at), host.data(), m.count);
  }
  frozen_sha256_.clear();
  for (const ParamInfo& p : frozen_table_.params) {
    if (keep && !keep(p.full_index)) continue;
    host.resize(static_cast<size_t>(p.numel));
    read(p.full_index, 0, p.numel, host.data());
    const std::vector<char> bytes = to_dtype_bytes(host, plan_.params);
    backend_.copy_from_host(frozen().offset(p.offset), bytes.data(), p.numel);
  }
  write_compute_copy(0, Rounding::kNearest);
  all_gather_compute_copy();
  if (zero_units_) zero_units_->invalidate();
}

void ModelState::load_weights(const std::string& path) {
  SafeTensorsFile f = SafeTensorsFile::open(path);
  for (const auto& p : model_table_.params) {
    if (p.lora != ParamInfo::Lora::kNone && f.find(p.name) == nullptr) continue;  // a base model
    const SafeTensorInfo& info = f.get(p.name);
    LLM_REQUIRE(info.shape == p.shape, "weights file '", path, "': tensor '", p.name,
                "' has shape ", safetensors_shape_string(info.shape), ", the model expects ",
                safetensors_shape_string(p.shape));
  }
  std::vector<float> whole;
  int cached = -1;
  set_weights(
      [&](int param, int64_t begin, int64_t count, float* dst) {
        if (cached != param) {
          const ParamInfo& p = model_table_.params[static_cast<size_t>(param)];
          whole = f.read_f32(p.name);  // checksum verified where the file has one
          require_finite_weights("weights file '" + path + "'", p.name, p.shape, whole);
          cached = param;
        }
        std::copy(whole.begin() + begin, whole.begin() + begin + count, dst);
      },
      [&](int param) {
        return f.find(model_table_.params[static_cast<size_t>(param)].name) != nullptr;
      });
}

void ModelState::checkpoint_load_weights(const CheckpointReader& ckpt) {
  if (param_table_has_frozen(model_table_)) {
    // --init-from into a run with frozen tensors: every base tensor from the checkpoint (adapter
    // factors may be absent: they start from their init).
    for (const auto& p : model_table_.params)
      LLM_REQUIRE(ckpt.has("model", p.name) || p.lora != ParamInfo::Lora::kNone, "checkpoint '",
                  ckpt.dir(), "': model.safetensors has no tensor '", p.name,
                  "' (a different architecture, or a checkpoint of a run with frozen tensors: "
                  "start from its model.safetensors)");
    std::vector<float> whole;
    int cached = -1;
    set_weights(
        [&](int param, int64_t begin, int64_t count, float* dst) {
          const ParamInfo& p = model_table_.params[static_cast<size_t>(param)];
          if (cached != param) {
            whole = ckpt.read_f32("model", p.name, p.shape);
            require_finite_weights("checkpoint '" + ckpt.dir() + "': model.safetensors", p.name,
                                   p.shape, whole);
            cached = param;
          }
          std::copy(whole.begin() + begin, whole.begin() + begin + count, dst);
        },
        [&](int param) {
          return ckpt.has("model", model_table_.params[static_cast<size_t>(param)].name);
        });
    return;
  }
  checkpoint_load_trained(ckpt, true);
}

void ModelState::checkpoint_load_trained(const CheckpointReader& ckpt, bool refuse_non_finite) {
  for (const auto& p : table_.params)
    LLM_REQUIRE(ckpt.has("model", p.name), "checkpoint '", ckpt.dir(),
                "': model.safetensors has no tensor '", p.name, "' (a different architecture?)");
  const size_t stored = ckpt.tensor_names("model").size();
  LLM_REQUIRE(stored == table_.params.size(), "checkpoint '", ckpt.dir(),
              "': model.safetensors has ", stored, " tensors, the model has ", table_.params.size(),
              " (a different architecture?)");
  std::vector<float> whole;
  int cached = -1;
  // Only the trained tensors: the frozen weights keep what the run's start put there.
  const int64_t frozen_count = static_cast<int64_t>(frozen_table_.params.size());
  std::vector<bool> trained(model_table_.params.size(), frozen_count == 0);
  for (const ParamInfo& p : table_.params)
    if (p.full_index >= 0) trained[static_cast<size_t>(p.full_index)] = true;
  set_weights(
      [&](int param, int64_t begin, int64_t count, float* dst) {
        const ParamInfo& p = model_table_.params[static_cast<size_t>(param)];
        if (cached != param) {
          whole = ckpt.read_f32("model", p.name, p.shape);
          if (refuse_non_finite)
            require_finite_weights("checkpoint '" + ckpt.dir() + "': model.safetensors", p.name,
                                   p.shape, whole);
          cached = param;
        }
        std::copy(whole.begin() + begin, whole.begin() + begin + count, dst);
      },
      [&](int param) { return trained[static_cast<size_t>(param)]; });
}

void ModelState::checkpoint_load(const CheckpointReader& ckpt) {
  checkpoint_load_trained(ckpt);  // the compute copy is now the master rounded to nearest
  if (plan_.separate_master) {
    // A saved compute copy of the same dtype holds the same bits; read it so that a checkpoint
    // is restored exactly as it was written (and its checksums are exercised).
    const int64_t es = static_cast<int64_t>(dtype_size(plan_.params));
    std::vector<char> host;
    for (const TensorPlacement& tp : placement_.tensors) {
      const ParamInfo& p = table_.params[static_cast<size_t>(tp.param)];
      const Span& c = tp.compute;
      if (c.count == 0 || !ckpt.has("compute", p.name) ||
          ckpt.info("compute", p.name).dtype != plan_.params)
        continue;
      host.resize(static_cast<size_t>(c.count * es));
      ckpt.read("compute", p.name, plan_.params, p.shape, c.begin, c.count, host.data());
      backend_.copy_from_host(params().offset(c.at), host.data(), c.count);
    }
    if (zero_units_) zero_units_->invalidate();
  }
  std::vector<std::string> expected;
  std::vector<char> host;
  for (const StateView& v : optim_->state_views()) {
    const std::string name = state_tensor_name(table_, v);
    LLM_REQUIRE(ckpt.has("optimizer", name), "checkpoint '", ckpt.dir(),
                "': optimizer.safetensors has no state '", name, "' that optimizer ",
                optim_->name(), " with this config needs");
    host.resize(static_cast<size_t>(v.numel) * dtype_size(v.dtype));
    if (v.host) {  // host-memory statistics: read in place
      ckpt.read("optimizer", name, v.dtype, v.shape, v.param_begin, v.numel, v.data);
    } else {
      ckpt.read("optimizer", name, v.dtype, v.shape, v.param_begin, v.numel, host.data());
      state_backend().copy_from_host(Tensor(v.data, v.dtype), host.data(), v.numel);
    }
    expected.push_back(name);
  }
  if (world() > 1) {  // the states every rank needs together
    std::string mine;
    for (const std::string& name : expected) mine += name + "\n";
    expected.clear();
    for (const std::string& text : comm_->all_gather_text(mine)) {
      std::istringstream lines(text);
      for (std::string name; std::getline(lines, name);) expected.push_back(name);
    }
  }
  std::sort(expected.begin(), expected.end());
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  for (const std::string& name : ckpt.tensor_names("optimizer"))
    LLM_REQUIRE(std::binary_search(expected.begin(), expected.end(), name), "checkpoint '",
                ckpt.dir(), "': optimizer.safetensors holds state '", name, "' that optimizer ",
                optim_->name(), " with this config does not use");
}

std::vector<CkptPiece> ModelState::weight_pieces(const std::string& file, const float* weights) {
  std::vector<CkptPiece> pieces;
  // What "model" holds: the fp32 master (or WEIGHTS in its layout), or the compute copy itself
  // when master = none.
  const bool compute = file == "compute" || plan_.master_none;
  const DType dt = compute ? plan_.params : DType::kF32;
  const char* base = compute   ? static_cast<const char*>(params_.data())
                     : weights ? reinterpret_cast<const char*>(weights)
                               : reinterpret_cast<const char*>(master());
  const int64_t es = static_cast<int64_t>(dtype_size(dt));
  if (!placement_.writes_checkpoint) return pieces;
  for (const TensorPlacement& tp : placement_.tensors) {
    const ParamInfo& p = table_.params[static_cast<size_t>(tp.param)];
    // This rank's part: as its master (or sharded compute copy) holds it, which at stage 0 is the
    // whole tensor; the whole compute copy of stages 1-2 is written piece by piece as well.
    const Span& m = tp.master;
    if (m.count == 0) continue;
    const int64_t at = compute ? tp.compute.at_of(m.begin) : m.at;
    pieces.push_back({file, p.name, dt, p.shape, m.begin, m.count, base + at * es, {}});
  }
  return pieces;
}

// Pieces point into backend memory: where that is not host memory, the bytes are staged in host
// copies (held until the next call) so the writers never dereference a device buffer.
void ModelState::stage_pieces(Backend& be, std::vector<CkptPiece>* pieces, size_t first) {
  if (be.memory_space() == MemSpace::kHost) return;
  for (size_t i = first; i < pieces->size(); ++i) {
    CkptPiece& p = (*pieces)[i];
    std::vector<char>& host =
        staging_.emplace_back(static_cast<size_t>(p.count) * dtype_size(p.dtype));
    be.copy_to_host(host.data(), Tensor(const_cast<void*>(p.data), p.dtype), p.count);
    p.data = host.data();
  }
}

// Checkpoint pieces in backend memory that is not host memory are streamed from it through the
// checkpoint writer's bounded buffer (CkptPiece::read): no host copy of the whole state.
void ModelState::stream_pieces(Backend& be, std::vector<CkptPiece>* pieces, size_t first) {
  if (be.memory_space() == MemSpace::kHost) return;
  for (size_t i = first; i < pieces->size(); ++i) {
    CkptPiece& p = (*pieces)[i];
    const Tensor src(const_cast<void*>(p.data), p.dtype);
    p.read = [&be, src](int64_t offset, int64_t count, void* dst) {
      be.copy_to_host(dst, src.offset(offset), count);
    };
    p.data = nullptr;
  }
}

std::vector<CkptPiece> ModelState::checkpoint_pieces() {
  std::vector<CkptPiece> pieces = weight_pieces("model");
  stream_pieces(state_backend(), &pieces, 0);  // the master: through the offload backend if any
  if (plan_.separate_master) {  // the compute copy too, in its own dtype (what the ledger counts)
    const size_t first = pieces.size();
    std::vector<CkptPiece> c = weight_pieces("compute");
    pieces.insert(pieces.end(), c.begin(), c.end());
    stream_pieces(backend_, &pieces, first);
  }
  if (!placement_.writes_checkpoint) return pieces;
  for (const StateView& v : optim_->state_views()) {
    if (!v.write) continue;  // the same values are written by the rank holding element 0
    CkptPiece piece;
    piece.file = "optimizer";
    piece.name = state_tensor_name(table_, v);
    piece.dtype = v.dtype;
    piece.shape = v.shape;
    piece.begin = v.param_begin;
    piece.count = v.numel;
    piece.data = v.data;
    pieces.push_back(std::move(piece));
    if (!v.host) stream_pieces(state_backend(), &pieces, pieces.size() - 1);
  }
  return pieces;
}

std::string ModelState::frozen_sha256() {
  if (frozen_.empty()) return "";
  if (!frozen_sha256_.empty()) return frozen_sha256_;
  // No whole host copy: that would be a second copy of the base model at checkpoint time,
  // outside the ledger. Host memory is hashed in place; device memory streams through one
  // bounded host buffer (the checkpoint writer's chunk size). The digest is the same: SHA-256 of
  // the same bytes in the same order.
  const int64_t es = static_cast<int64_t>(dtype_size(plan_.params));
  const int64_t chunk = std::min<int64_t>(kFrozenHashChunkBytes / es, frozen_table_.total);
  const bool in_place = backend_.memory_space() == MemSpace::kHost;
  std::vector<char> buffer(in_place ? 0 : static_cast<size_t>(chunk * es));
  Sha256 hasher;
  for (int64_t done = 0; done < frozen_table_.total; done += chunk) {
    const int64_t n = std::min(chunk, frozen_table_.total - done);
    const char* bytes = static_cast<const char*>(frozen_.data()) + done * es;
    if (!in_place) {
      backend_.copy_to_host(buffer.data(), frozen().offset(done), n);
      bytes = buffer.data();
    }
    hasher.update(std::string_view(bytes, static_cast<size_t>(n * es)));
  }
  frozen_sha256_ = hasher.hex_digest();
  return frozen_sha256_;
}

// The frozen tensors as whole host copies in the compute dtype (every rank holds them all).
std::vector<CkptPiece> ModelState::frozen_pieces() {
  std::vector<CkptPiece> pieces;
  const int64_t es = static_cast<int64_t>(dtype_size(plan_.params));
  for (const ParamInfo& p : frozen_table_.params)
    pieces.push_back({"model",
                      p.name,
                      plan_.params,
                      p.shape,
                      0,
                      p.numel,
                      static_cast<const char*>(frozen_.data()) + p.offset * es,
                      {}});
  return pieces;
}

void ModelState::save_weights(const std::string& path) {
  staging_.clear();
  // The run's weights: the average of the iterates where there is one (optim.ema_half_life).
  std::vector<CkptPiece> pieces = weight_pieces("model", optim_->averaged_weights());
  stage_pieces(state_backend(), &pieces, 0);  // the master: through the offload backend if any
  std::vector<CkptPiece> frozen = frozen_pieces();
  const size_t trained_pieces = pieces.size();
  pieces.insert(pieces.end(), frozen.begin(), frozen.end());
  stage_pieces(backend_, &pieces, trained_pieces);
  frozen.assign(pieces.begin() + static_cast<std::ptrdiff_t>(trained_pieces), pieces.end());
  pieces.resize(trained_pieces);
  if (world() == 1) {
    SafeTensorsWriter w;
    for (const CkptPiece& p : pieces) w.add(p.name, p.dtype, p.shape, p.data);
    for (const CkptPiece& p : frozen) w.add(p.name, p.dtype, p.shape, p.data);
    w.set_metadata("format", "ledgerlm-weights");
    w.set_metadata("format_version", "1");
    w.write_atomic(path);
    return;
  }
  // Several ranks: rank 0 assembles the whole tensors from every rank's parts (a host copy of
  // the weights, held only while writing) and writes the file.
  const DType dt =
      pieces.empty() ? (plan_.master_none ? plan_.params : DType::kF32) : pieces[0].dtype;
  const int64_t es = static_cast<int64_t>(dtype_size(dt));
  std::map<std::string, std::vector<char>> whole;
  if (layout_.rank == 0)
    for (const auto& p : table_.params) whole[p.name].assign(static_cast<size_t>(p.numel * es), 0);
  for (int r = 0; r < world(); ++r) {
    // Rank r's parts travel as (name, begin, count) records, then the bytes.
    std::string mine;
    std::vector<char> bytes;
    if (r == layout_.rank) {
      for (const CkptPiece& p : pieces) {
        mine += p.name + " " + std::to_string(p.begin) + " " + std::to_string(p.count) + "\n";
        const char* d = static_cast<const char*>(p.data);
        bytes.insert(bytes.end(), d, d + p.count * es);
      }
    }
    const std::vector<std::string> index = comm_->all_gather_text(mine);
    int64_t total = static_cast<int64_t>(bytes.size());
    comm_->broadcast(&total, sizeof total, r);
    bytes.resize(static_cast<size_t>(total));
    comm_->broadcast(bytes.data(), total, r);
    if (layout_.rank != 0) continue;
    std::istringstream lines(index[static_cast<size_t>(r)]);
    std::string name;
    int64_t begin = 0, count = 0, at = 0;
    while (lines >> name >> begin >> count) {
      std::memcpy(whole[name].data() + begin * es, bytes.data() + at,
                  static_cast<size_t>(count * es));
      at += count * es;
    }
  }
  if (layout_.rank == 0) {
    SafeTensorsWriter w;
    for (const auto& p : table_.params) w.add(p.name, dt, p.shape, whole[p.name].data());
    for (const CkptPiece& p : frozen) w.add(p.name, p.dtype, p.shape, p.data);
    w.set_metadata("format", "ledgerlm-weights");
    w.set_metadata("format_version", "1");
    w.write_atomic(path);
  }
  comm_->barrier();
}

}  // namespace ledgerlm
