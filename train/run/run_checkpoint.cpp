// Checkpoint meta.json, resume checks and --resume / --init-from resolution (see
// run_checkpoint.h).
#include "train/run/run_checkpoint.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>

#include "model/base/check.h"
#include "train/config/config_file.h"
#include "train/config/config_keys.h"
#include "train/run/run_dir.h"

namespace ledgerlm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double number_or(const json& j, const char* key, double fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

// An integer field of a checkpoint's meta.json record, or `fallback` when absent; a field of
// another type is one Error naming the file.
int64_t int_or(const json& j, const char* key, int64_t fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  LLM_REQUIRE(v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= INT64_MAX),
              where, ": '", key, "' must be an integer (got ", v.dump(), ")");
  return v.get<int64_t>();
}

// model.ffn_hidden = 0 and = 4 x n_embd are one model: compared by the width they give.
void resolve_ffn_width(RunConfig* cfg) {
  cfg->model.ffn_hidden = cfg->model.ffn_width();
}
// model.n_kv_head = 0 and = n_head are one model likewise.
void resolve_kv_heads(RunConfig* cfg) {
  cfg->model.n_kv_head = cfg->model.kv_heads();
}

}  // namespace

json finite_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

const char* master_text(const PrecisionPlan& plan) {
  return plan.separate_master ? "fp32" : (plan.master_none ? "none" : "fp32 (= params)");
}

json checkpoint_meta(const RunConfig& cfg, ModelState& state, const LoopState& ls,
                     const RunLedger& ledger, int world) {
  const PrecisionPlan& plan = state.plan();
  const LossScalerState& sc = state.scaler().state();
  json components = json::array();
  for (const StateComponent& c : state.optimizer().state_components())
    if (!c.scratch)  // step scratch (Muon's exchange buffers) is not state: never checkpointed
      components.push_back({{"name", c.name}, {"dtype", dtype_name(c.dtype)}, {"bytes", c.bytes}});
  json ledger_rec = json::object();
  ledger.add_measured(&ledger_rec);
  RunConfig copy = cfg;
  return {
      {"trainer",
       {{"step", ls.step},
        {"tokens_seen", ls.tokens},
        {"train_seconds", ls.train_seconds},
        {"skipped_steps", ls.skipped},
        {"best_val_loss", finite_or_null(ls.best_val)},
        {"best_val_bpb", finite_or_null(ls.best_bpb)},
        {"last_val_loss", finite_or_null(ls.last_val)}}},
      {"data_loader",
       {{"step", ls.step},
        {"micro", 0},
        {"note", "the loader is a pure function of (seed, step, micro): nothing else to save"}}},
      {"rng",
       {{"seed", cfg.train.seed},
        {"note",
         "counter-based: init, data order, dropout and stochastic rounding are functions of "
         "(seed, step, micro-batch, layer, element); seed and step restore them"}}},
      {"schedule",
       {{"name", cfg.optim.schedule},
        {"step", ls.step},
        {"note", "the LR is a pure function of (config, step)"}}},
      {"loss_scaler",
       {{"enabled", plan.scaler_on},
        {"dynamic", plan.scaler_dynamic},
        {"scale", sc.scale},
        {"good_steps", sc.good_steps},
        {"skipped_steps", sc.skipped_steps},
        {"consecutive_skips", sc.consecutive_skips}}},
      {"model",
       {{"vocab_size", cfg.model.vocab_size},
        {"padded_vocab", cfg.model.padded_vocab()},
        {"n_layer", cfg.model.n_layer},
        {"n_head", cfg.model.n_head},
        {"n_embd", cfg.model.n_embd},
        {"ffn_hidden", cfg.model.ffn_width()},
        {"position", cfg.model.position},
        {"rope_theta", cfg.model.rope_theta},
        {"n_kv_head", cfg.model.kv_heads()},
        {"qk_norm", cfg.model.qk_norm},
        {"block_size", cfg.model.block_size},
        {"num_params", state.table().num_params},
        {"compute_dtype", dtype_name(plan.params)},
        {"master", master_text(plan)},
        {"weights_note",
         "model.safetensors holds the fp32 master (compute.safetensors the compute copy, the "
         "master rounded to nearest), or the compute copy itself when master = none"}}},
      {"frozen",
       {{"tensors", state.frozen_table().params.size()},
        {"num_params", state.frozen_table().num_params},
        {"sha256", state.frozen_sha256()},
        {"init_from", state.base_source()},
        {"note",
         "frozen tensors (train.freeze, [lora]) are not in this checkpoint: a resume rebuilds them "
         "from the seed's init and init_from, and refuses weights with another sha256"}}},
      {"optimizer", {{"name", state.optimizer().name()}, {"components", components}}},
      {"layout",
       {{"world_size", world},
        {"zero_stage", cfg.dist.zero},
        {"block", state.table().options.block},
        {"flat_elements", state.table().total},
        {"note", "tensors are stored whole and unpadded; each rank writes its element ranges"}}},
      {"config", run_config_flat(cfg)},
      {"config_toml", config_to_toml(config_keys(copy))},
      {"ledger", ledger_rec.value("mem", json::object())}};
}

json resume_check_config(const CheckpointReader& ckpt, const RunConfig& cfg) {
  const json& toml = ckpt.meta().value("config_toml", json());
  LLM_REQUIRE(toml.is_string(), "checkpoint file '", ckpt.dir(), "/meta.json': no saved config");
  // The saved config goes through the same typed loader as a config file.
  RunConfig saved_cfg;
  std::vector<ConfigKey> saved = config_keys(saved_cfg);
  const std::set<std::string> present =
      config_load_toml(toml.get<std::string>(),
                       "checkpoint file '" + ckpt.dir() + "/meta.json' (config_toml)", saved);
  RunConfig now_cfg = cfg;
  if (present.count("model.ffn_hidden")) {
    resolve_ffn_width(&saved_cfg);
    resolve_ffn_width(&now_cfg);
  }
  if (present.count("model.n_kv_head")) {
    resolve_kv_heads(&saved_cfg);
    resolve_kv_heads(&now_cfg);
  }
  const std::vector<ConfigKey> now = config_keys(now_cfg);
  json changed = json::object();
  for (size_t i = 0; i < now.size(); ++i) {
    const std::string key = now[i].full();
    if (!present.count(key)) continue;  // a key added since the checkpoint was written
    if (config_value_text(now[i]) == config_value_text(saved[i])) continue;
    const std::string before = config_display_text(saved[i]),
                      now_text = config_display_text(now[i]);
    // The architecture and what the saved state means (KeyRole, declared with each key).
    LLM_REQUIRE(now[i].role == KeyRole::kSetting, "cannot resume from '", ckpt.dir(), "': ", key,
                " = ", now_text, " but the checkpoint was saved with ", key, " = ", before,
                " (the architecture, optimizer and tokenizer cannot change on resume; "
                "--init-from starts a new run from the weights)");
    // The checkpoint's optimizer state is stored in precision.state's dtype: another dtype
    // would otherwise surface as a tensor of the "wrong" dtype, which reads like file damage.
    LLM_REQUIRE(key != "precision.state", "cannot resume from '", ckpt.dir(), "': ", key, " = ",
                now_text, " but the checkpoint was saved with ", key, " = ", before,
                " (its optimizer state is stored in that dtype; resume with ", key, " = ", before,
                ", or --init-from starts a new run from the weights)");
    changed[key] = {{"from", before}, {"to", now_text}};
  }
  return changed;
}

json resume_global_batch_change(const CheckpointReader& ckpt, const RunConfig& cfg, int world) {
  const json& meta = ckpt.meta();
  const json& config = meta.value("config", json());
  const std::string where = "checkpoint file '" + ckpt.dir() + "/meta.json'";
  if (!meta.contains("world_size") || !config.is_object()) return nullptr;
  // meta.json's flat config holds each value as its TOML text.
  auto saved_int = [&](const char* key) -> int64_t {
    const json& v = config.value(key, json());
    int64_t out = 0;
    const std::string text = v.is_string() ? v.get<std::string>() : "";
    const auto res = std::from_chars(text.data(), text.data() + text.size(), out);
    LLM_REQUIRE(res.ec == std::errc() && res.ptr == text.data() + text.size() && out > 0, where,
                ": config '", key, "' must be a positive integer (got ", v.dump(), ")");
    return out;
  };
  const int64_t w0 = int_or(meta, "world_size", 1, where);
  const int64_t m0 = saved_int("train.micro_batch"), a0 = saved_int("train.accum");
  const int64_t m1 = cfg.train.micro_batch, a1 = cfg.train.accum;
  const int64_t from = w0 * m0 * a0, to = static_cast<int64_t>(world) * m1 * a1;
  if (from == to) return nullptr;
  auto arrow = [](int64_t a, int64_t b) { return std::to_string(a) + "->" + std::to_string(b); };
  return {{"from", from},
          {"to", to},
          {"world", arrow(w0, world)},
          {"micro_batch", arrow(m0, m1)},
          {"accum", arrow(a0, a1)}};
}

void restore_loop_state(const CheckpointReader& ckpt, LoopState* ls) {
  const std::string where = "checkpoint file '" + ckpt.dir() + "/meta.json'";
  const json& t = ckpt.meta().contains("trainer") ? ckpt.meta()["trainer"] : json();
  LLM_REQUIRE(t.is_object() && t.contains("step") && t.contains("tokens_seen"), where,
              ": missing trainer state");
  ls->step = int_or(t, "step", -1, where);
  LLM_REQUIRE(ls->step == ckpt.step(), where, ": trainer step ", ls->step,
              " differs from the checkpoint step ", ckpt.step());
  ls->tokens = int_or(t, "tokens_seen", -1, where);
  LLM_REQUIRE(ls->tokens >= 0, where, ": negative tokens_seen");
  ls->train_seconds = number_or(t, "train_seconds", 0.0);
  ls->skipped = int_or(t, "skipped_steps", 0, where);
  ls->best_val = number_or(t, "best_val_loss", INFINITY);
  ls->best_bpb = number_or(t, "best_val_bpb", INFINITY);
  ls->last_val = number_or(t, "last_val_loss", NAN);
}

void restore_scaler(const CheckpointReader& ckpt, ModelState& state) {
  const std::string where = "checkpoint file '" + ckpt.dir() + "/meta.json'";
  const json& s = ckpt.meta().contains("loss_scaler") ? ckpt.meta()["loss_scaler"] : json();
  const bool enabled = s.is_object() && s.contains("enabled") && s["enabled"].is_boolean() &&
                       s["enabled"].get<bool>();
  if (!state.plan().scaler_on || !enabled) return;  // nothing to carry over
  LossScalerState st;
  st.scale = number_or(s, "scale", 0.0);
  LLM_REQUIRE(std::isfinite(st.scale) && st.scale > 0, where, ": loss scale ", st.scale,
              " is not a positive number");
  st.good_steps = int_or(s, "good_steps", 0, where);
  st.skipped_steps = int_or(s, "skipped_steps", 0, where);
  st.consecutive_skips = int_or(s, "consecutive_skips", 0, where);
  state.scaler().load_state(st);
}

void restore_frozen(ModelState& state, const CheckpointReader& ckpt, uint64_t seed) {
  if (state.frozen_table().params.empty()) return;
  const std::string where = "checkpoint file '" + ckpt.dir() + "/meta.json'";
  const json& f = ckpt.meta().contains("frozen") ? ckpt.meta()["frozen"] : json();
  LLM_REQUIRE(f.is_object() && f.contains("sha256") && f["sha256"].is_string() &&
                  f.contains("init_from") && f["init_from"].is_string(),
              where, ": no record of the frozen base weights (frozen.sha256, frozen.init_from)");
  const std::string source = f["init_from"].get<std::string>();
  state.init_weights(seed);
  if (!source.empty()) init_from(state, source);
  const std::string want = f["sha256"].get<std::string>(), got = state.frozen_sha256();
  LLM_REQUIRE(got == want, where, ": the frozen base weights (",
              source.empty() ? std::string("the seed's init") : "from '" + source + "'",
              ") have sha256 ", got, ", the run was trained on ", want,
              ": the base changed since; restore it or start a new run");
}

void init_from(ModelState& state, const std::string& path) {
  LLM_REQUIRE(fs::exists(path), "--init-from: '", path, "' does not exist");
  state.set_base_source(fs::absolute(path).lexically_normal().string());
  if (fs::is_regular_file(path)) return state.load_weights(path);
  if (!fs::exists(fs::path(path) / "meta.json") && fs::exists(fs::path(path) / "model.safetensors"))
    return state.load_weights((fs::path(path) / "model.safetensors").string());
  state.checkpoint_load_weights(CheckpointReader::open(checkpoint_resolve(path)));
}

std::vector<std::string> init_from_architecture(const std::string& path,
                                                const std::set<std::string>& explicit_keys,
                                                RunConfig* cfg) {
  std::vector<std::string> taken;
  if (path.empty() || !fs::is_regular_file(fs::path(path) / "config.toml")) return taken;
  RunConfig source = run_load_config(path);
  const std::vector<ConfigKey> theirs = config_keys(source), ours = config_keys(*cfg);
  for (size_t i = 0; i < ours.size(); ++i) {
    const std::string key = ours[i].full();
    if (ours[i].role != KeyRole::kArchitecture) continue;  // the tensors' shapes alone
    const std::string value = config_value_text(theirs[i]);
    const bool unset =
        !explicit_keys.count(key) || (key == "model.vocab_size" && cfg->model.vocab_size == 0);
    if (!unset) {
      // model.ffn_hidden = 0 and = 4 x n_embd are one width (n_embd, before it, agrees by now).
      const bool same_width =
          (key == "model.ffn_hidden" && cfg->model.ffn_width() == source.model.ffn_width()) ||
          (key == "model.n_kv_head" && cfg->model.kv_heads() == source.model.kv_heads());
      LLM_REQUIRE(same_width || config_value_text(ours[i]) == value, "--init-from '", path,
                  "': its model has ", key, " = ", value, " but ", key, " = ",
                  config_display_text(ours[i]),
                  " was set (config file or flag); leave it unset to take the run's");
      continue;
    }
    // The unquoted text: a string key's value text is TOML-quoted (model.norm).
    const std::string raw = config_display_text(theirs[i]);
    config_set(ours[i], raw, "--init-from '" + path + "/config.toml'");
    taken.push_back(key + " = " + raw);
  }
  return taken;
}

std::string resume_source(const std::string& resume, const std::string& run_dir) {
  if (resume != "auto") return checkpoint_resolve(resume);
  std::string latest = checkpoint_latest(run_dir + "/ckpt");
  if (latest.empty())
    LLM_REQUIRE(
        !fs::exists(run_dir + "/metrics.jsonl"), "--resume auto: run '", run_dir,
        "' has no checkpoint to resume from (pass --train.overwrite true to start it over)");
  return latest;
}

}  // namespace ledgerlm
