// The optimizer traits table (see optim_traits.h): one row per built-in optimizer. Each row's
// states list what the optimizer's on_init allocates, in its order; the planner, the per-tensor
// prediction and the ledger's checks against the real allocation read them from here.
#include "optim/optim_traits.h"

#include <deque>
#include <mutex>

#include "model/base/check.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

using C = StateCovers;
using D = StateDtypeRule;
using X = StateExtent;

// A parameter-shaped component: one element per parameter element, in precision.state.
StateComponentTraits per_element(const char* name, MemTag tag, C covers = C::kAll,
                                 const char* group = "all") {
  StateComponentTraits s;
  s.name = name;
  s.tag = tag;
  s.covers = covers;
  s.group = group;
  return s;
}

StateComponentTraits with_dtype(StateComponentTraits s, D dtype) {
  s.dtype = dtype;
  return s;
}

StateComponentTraits with_extent(StateComponentTraits s, X extent) {
  s.extent = extent;
  return s;
}

StateComponentTraits when(StateComponentTraits s, bool (*present)(const OptimConfig&)) {
  s.present = present;
  return s;
}

StateComponentTraits block_aligned(StateComponentTraits s) {
  s.block_aligned = true;
  return s;
}

std::deque<OptimTraits> built_ins() {
  std::deque<OptimTraits> t;
  const MemTag M = MemTag::kOptimM, V = MemTag::kOptimV, Mom = MemTag::kOptimMomentum;
  {
    OptimTraits o;
    o.name = "sgd";
    o.create = optimizer_create_sgd;
    o.states = {
        when(per_element("momentum", Mom), [](const OptimConfig& c) { return c.momentum > 0.0; })};
    o.schedules = true;
    o.keys = {"momentum", "nesterov", "wd_mode"};
    t.push_back(o);
  }
  {
    OptimTraits o;
    o.name = "adamw";
    o.create = optimizer_create_adamw;
    o.states = {per_element("m", M), per_element("v", V)};
    o.schedules = true;
    t.push_back(o);
  }
  {
    OptimTraits o;
    o.name = "lamb";
    o.create = optimizer_create_lamb;
    o.states = {per_element("m", M), per_element("v", V)};
    o.whole = WholeTensor::kReducedSums;
    o.whole_tensor_bytes = 12;  // the moments pass: w, m, v
    o.keys = {"lamb_phi", "trust_lo", "trust_hi"};
    t.push_back(o);
  }
  {
    OptimTraits o;
    o.name = "lars";
    o.create = optimizer_create_lars;
    o.states = {per_element("momentum", Mom)};
    o.whole = WholeTensor::kReducedSums;
    o.whole_tensor_bytes = 8;  // the apply pass: w, momentum
    o.keys = {"lars_eta", "lars_exclude_1d"};
    t.push_back(o);
  }
  {
    // Matrices keep row and column statistics (whole, on every rank holding a part of the
    // matrix), vectors a full second moment of the elements held.
    OptimTraits o;
    o.name = "adafactor";
    o.create = optimizer_create_adafactor;
    const MemTag F = MemTag::kOptimFactored;
    o.states = {
        with_dtype(with_extent(per_element("row", F, C::kPrimary), X::kRows), D::kF32),
        with_dtype(with_extent(per_element("col", F, C::kPrimary), X::kCols), D::kF32),
        per_element("v", V, C::kSecondary),
        when(per_element("m", M), [](const OptimConfig& c) { return c.adafactor_beta1 > 0.0; })};
    o.primary = adafactor_factors;
    o.whole = WholeTensor::kReducedSums;
    o.whole_tensor_bytes = 12;  // the vector and apply passes: w, m, v
    o.keys = {"adafactor_eps1",  "adafactor_eps2",          "adafactor_d",
              "adafactor_beta1", "adafactor_relative_step", "adafactor_decay_rate"};
    t.push_back(o);
  }
  {
    // Quantized tensors: 8-bit codes in whole blocks plus one fp32 absmax per block; the others
    // (small ones, embeddings when asked) keep fp32 m and v whatever precision.state says.
    OptimTraits o;
    o.name = "adamw8bit";
    o.create = optimizer_create_adamw8bit;
    const MemTag Codes = MemTag::kOptimCodes, Abs = MemTag::kOptimAbsmax;
    o.states = {
        block_aligned(with_dtype(per_element("codes.m", Codes, C::kPrimary), D::kU8)),
        block_aligned(with_dtype(per_element("codes.v", Codes, C::kPrimary), D::kU8)),
        with_dtype(with_extent(per_element("absmax.m", Abs, C::kPrimary), X::kPerBlock), D::kF32),
        with_dtype(with_extent(per_element("absmax.v", Abs, C::kPrimary), X::kPerBlock), D::kF32),
        with_dtype(per_element("m", M, C::kSecondary), D::kF32),
        with_dtype(per_element("v", V, C::kSecondary), D::kF32)};
    o.primary = adamw8bit_quantizes;
    o.keys = {"block_size", "embedding_fp32_state"};
    t.push_back(o);
  }
  {
    OptimTraits o;
    o.name = "lion";
    o.create = optimizer_create_lion;
    o.states = {per_element("m", M)};
    o.keys = {"lion_beta1", "lion_beta2"};
    o.notes = lion_notes;
    t.push_back(o);
  }
  {
    OptimTraits o;
    o.name = "adamw_schedulefree";
    o.create = optimizer_create_schedulefree;
    o.states = {per_element("z", MemTag::kOptimZ), per_element("v", V)};
    o.host_scalars = 3;
    o.trains_off_master = true;
    o.keys = {"sf_weight_lr_power"};
    o.validate = schedulefree_validate;
    t.push_back(o);
  }
  {
    OptimTraits o;
    o.name = "ademamix";
    o.create = optimizer_create_ademamix;
    o.states = {per_element("m1", M), per_element("nu", V), per_element("m2", M)};
    o.host_scalars = 1;
    o.keys = {"ademamix_beta3", "ademamix_alpha", "ademamix_warmup"};
    o.run_length_key = "ademamix_warmup";
    o.needs_run_length = [](const OptimConfig& c) { return c.ademamix_warmup == 0; };
    o.validate = ademamix_validate;
    o.notes = ademamix_notes;
    t.push_back(o);
  }
  {
    // Compact per group: momentum over the orthogonalised parts, m and v over the rest (no
    // padding between tensors in either).
    OptimTraits o;
    o.name = "muon";
    o.create = optimizer_create_muon;
    o.states = {per_element("momentum", Mom, C::kPrimary, "matrix"),
                per_element("m", M, C::kSecondary, "embedding,nodecay"),
                per_element("v", V, C::kSecondary, "embedding,nodecay")};
    o.primary = muon_matrix;
    o.whole = WholeTensor::kOnOwner;
    o.keys = {"muon_momentum", "muon_nesterov",  "ns_steps",
              "ns_eps",        "muon_adjust_lr", "muon_adamw_lr"};
    t.push_back(o);
  }
  return t;
}

struct Registry {
  std::mutex mu;
  std::deque<OptimTraits> entries = built_ins();  // a deque: references survive push_back
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::unique_ptr<Optimizer> optimizer_create(const OptimConfig& config) {
  config.validate();
  if (config.ema_half_life <= 0.0) return optim_traits_of(config).create(config);
  // The optimizer itself knows nothing of the average kept beside it.
  OptimConfig plain = config;
  plain.ema_half_life = 0.0;
  plain.ema_decay = 0.0;
  return optimizer_wrap_weight_average(optim_traits_of(plain).create(plain), config);
}

std::vector<const OptimTraits*> optim_traits_all() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<const OptimTraits*> out;
  for (const OptimTraits& t : r.entries) out.push_back(&t);
  return out;
}

const OptimTraits* optim_traits_find(const std::string& name) {
  for (const OptimTraits* t : optim_traits_all())
    if (t->name == name) return t;
  return nullptr;
}

const OptimTraits& optim_traits_of(const OptimConfig& config) {
  const OptimTraits* t = optim_traits_find(config.name);
  LLM_REQUIRE(t != nullptr, "optim.name: expected ", optim_names_text(", ", " or "), " (got '",
              config.name, "')");
  return *t;
}

void optim_traits_register(OptimTraits traits) {
  LLM_REQUIRE(!traits.name.empty() && traits.create != nullptr,
              "optimizer traits: an entry needs a name and a factory");
  LLM_REQUIRE(optim_traits_find(traits.name) == nullptr, "optimizer traits: '", traits.name,
              "' is registered already");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.entries.push_back(std::move(traits));
}

std::string optim_names_text_if(bool (*pred)(const OptimTraits&), const std::string& sep,
                                const std::string& last_sep) {
  std::vector<std::string> names;
  for (const OptimTraits* t : optim_traits_all())
    if (pred == nullptr || pred(*t)) names.push_back(t->name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? last_sep : sep;
    out += names[i];
  }
  return out;
}

std::string optim_names_text(const std::string& sep, const std::string& last_sep) {
  return optim_names_text_if(nullptr, sep, last_sep);
}

DType optim_state_dtype(const StateComponentTraits& c, const OptimConfig& config) {
  switch (c.dtype) {
    case StateDtypeRule::kState:
      return config.state_dtype;
    case StateDtypeRule::kF32:
      return DType::kF32;
    case StateDtypeRule::kU8:
      return DType::kU8;
  }
  return DType::kF32;
}

bool optim_state_present(const StateComponentTraits& c, const OptimConfig& config) {
  return c.present == nullptr || c.present(config);
}

bool optim_state_covers(const StateComponentTraits& c, bool primary) {
  return c.covers == StateCovers::kAll || (c.covers == StateCovers::kPrimary) == primary;
}

double optim_state_bytes_per_param(const OptimConfig& config, double master) {
  const OptimTraits& t = optim_traits_of(config);
  // Sums of whole bytes first (exact), the per-block part divided once.
  double per_element = 0.0, per_block = 0.0;
  for (const StateComponentTraits& c : t.states) {
    if (!optim_state_present(c, config) || !optim_state_covers(c, true)) continue;
    const double bytes = static_cast<double>(dtype_size(optim_state_dtype(c, config)));
    if (c.extent == StateExtent::kPerElement) per_element += bytes;
    if (c.extent == StateExtent::kPerBlock) per_block += bytes;
  }
  if (config.ema_half_life > 0.0) per_element += 4.0;  // the fp32 average of the weights
  if (per_block == 0.0) return master + per_element;
  return master + per_element + per_block / static_cast<double>(config.block_size);
}

}  // namespace ledgerlm
