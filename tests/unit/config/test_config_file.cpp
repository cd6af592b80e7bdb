// Config files through toml++ and the typed key registry: what CLI11's own TOML reader got
// wrong (a `#` inside a quoted value cut it, a repeated table was merged, strings were accepted
// for numbers and 1 for true, a syntax error was reported as an unknown key) and what the
// resolved config.toml must survive (any UTF-8 path, quotes, backslashes, control characters).
// Also the run-name rule and the flag parser's strictness.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "model/base/check.h"
#include "tests/support/test_util.h"
#include "train/config/config_file.h"
#include "train/config/config_keys.h"
#include "train/config/run_config.h"

namespace ledgerlm {
namespace {

using testing::error_of;

// Loads `text` into a fresh RunConfig; returns the error message ("" on success).
std::string load(const std::string& text, RunConfig* config = nullptr) {
  RunConfig local;
  RunConfig& c = config ? *config : local;
  return error_of([&] { config_load_toml(text, "config file 't.toml'", config_keys(c)); });
}

void expect_error(const std::string& text, std::initializer_list<std::string> needles) {
  const std::string err = load(text);
  ASSERT_FALSE(err.empty()) << "accepted:\n" << text;
  EXPECT_EQ(err.rfind("config file 't.toml': ", 0), 0u) << err;
  for (const auto& n : needles) EXPECT_NE(err.find(n), std::string::npos) << n << " in: " << err;
}

// Each key's role (what a resume refuses, what --init-from adopts) is declared with the key. Every
// [model] key gives the tensors their shapes except the two that do not (dropout, recompute): a
// new model key declared as a plain setting fails here rather than resuming a checkpoint into
// another architecture. The keys whose change would misread the saved state are named.
TEST(ConfigKeyRoles, ModelKeysAreArchitectureAndTheSavedStateKeysAreNamed) {
  RunConfig c;
  std::set<std::string> state;
  for (const ConfigKey& k : config_keys(c)) {
    if (k.section == "model") {
      const bool setting = k.key == "dropout" || k.key == "recompute";
      EXPECT_EQ(k.role, setting ? KeyRole::kSetting : KeyRole::kArchitecture) << k.full();
    } else {
      EXPECT_NE(k.role, KeyRole::kArchitecture) << k.full() << ": not a [model] key";
    }
    if (k.role == KeyRole::kSavedState) state.insert(k.full());
  }
  EXPECT_EQ(state, (std::set<std::string>{"optim.name", "optim.ema_half_life", "lora.rank",
                                          "lora.targets", "data.tokenizer_id", "train.freeze"}));
}

TEST(ConfigFile, HashInsideQuotedValueIsKept) {
  RunConfig c;
  ASSERT_EQ(load("[train]\nout_dir = \"runs#1 x\"  # a comment\nname = 'a-b' # c\n"
                 "[data]\ndir = \"d#a\\\"t\"\n",
                 &c),
            "");
  EXPECT_EQ(c.train.out_dir, "runs#1 x");
  EXPECT_EQ(c.train.name, "a-b");
  EXPECT_EQ(c.data.dir, "d#a\"t");
}

TEST(ConfigFile, RepeatedTableRefusedWithItsLine) {
  expect_error("[model]\nn_layer = 2\n\n[model]\nn_head = 2\n", {"line 4", "model"});
}

TEST(ConfigFile, DuplicateKeyRefused) {
  expect_error("[model]\nn_layer = 2\nn_layer = 3\n", {"line 3", "n_layer"});
}

TEST(ConfigFile, ValuesMustHaveTheirKeysType) {
  expect_error("[optim]\nlr = \"3e-3\"\n",
               {"optim.lr", "expects a number", "got a string", "line 2"});
  expect_error("[train]\noverwrite = 1\n", {"train.overwrite", "true or false", "got an integer"});
  expect_error("[model]\nn_layer = 2.0\n", {"model.n_layer", "an integer", "got a float"});
  expect_error("[model]\nn_layer = \"2\"\n", {"model.n_layer", "got a string"});
  expect_error("[train]\nname = 1\n", {"train.name", "expects a string"});
  expect_error("[train]\nmax_steps = [1, 2]\n", {"train.max_steps", "got an array"});
  expect_error("[train]\nmax_steps = 1979-05-27\n", {"train.max_steps", "got a date"});
  expect_error("[optim]\nlr = inf\n", {"optim.lr", "finite"});
  expect_error("[optim]\nlr = nan\n", {"optim.lr", "finite"});
  expect_error("[model.sub]\nn = 1\n", {"model.sub"});
}

TEST(ConfigFile, IntegerAcceptedForFloatKey) {
  RunConfig c;
  ASSERT_EQ(load("[optim]\nlr = 1\n[train]\nmax_seconds = 270\n", &c), "");
  EXPECT_EQ(c.optim.lr, 1.0);
  EXPECT_EQ(c.train.max_seconds, 270.0);
}

TEST(ConfigFile, SyntaxErrorNamesLineAndColumnNotAKey) {
  const std::string err = load("[model]\nn_layer = 2\n[train\nmax_steps = 3\n");
  EXPECT_NE(err.find("not valid TOML at line 3, column"), std::string::npos) << err;
  EXPECT_EQ(err.find("unknown key"), std::string::npos) << err;
  expect_error("[train]\nname = \"unterminated\n", {"not valid TOML at line 2"});
}

TEST(ConfigFile, UnknownKeysAndSections) {
  expect_error("[train]\nbogus = 3\n", {"unknown key 'train.bogus'", "line 2"});
  expect_error("[nosuch]\nmax_steps = 2\n", {"unknown key 'nosuch.max_steps'"});
  expect_error("[nosuch]\n", {"unknown section [nosuch]"});
  expect_error("max_steps = 2\n", {"'max_steps' must be inside a [section]"});
  expect_error("[[model]]\nn_layer = 2\n", {"'model' must be inside a [section]"});
}

// Non-ASCII characters where toml++ 3.3.0 asks "is this whitespace?" (its answer comes from a
// switch without a case for U+00A1..U+0499): they are not whitespace, so they stay in the string
// after a line-ending backslash and are a syntax error after a value.
TEST(ConfigFile, NonAsciiIsNotWhitespace) {
  RunConfig c;
  ASSERT_EQ(load("[data]\ndir = \"\"\"a\\\n   \xC3\xA9"
                 "b\"\"\"\n",
                 &c),
            "");
  EXPECT_EQ(c.data.dir,
            "a\xC3\xA9"
            "b");
  expect_error("[model]\nblock_size = 2\xCB\xBF\n", {"not valid TOML at line 2"});
  expect_error("[model]\nblock_size = 2 \xC3\xA9\n", {"not valid TOML at line 2"});
}

TEST(ConfigFile, ReturnsTheKeysItSet) {
  RunConfig c;
  auto set = config_load_toml("[model]\nn_layer = 3\n[optim]\nlr = 0.5\n", "t", config_keys(c));
  EXPECT_EQ(set, (std::set<std::string>{"model.n_layer", "optim.lr"}));
}

// The resolved config.toml reads back to the same values, whatever the strings hold.
TEST(ConfigFile, ResolvedConfigRoundTrips) {
  RunConfig a;
  a.data.dir = "/data/d a#t\"q\\b\tc\nd\x7f/\xE4\xB8\xAD\xE6\x96\x87";
  a.train.out_dir = "runs #1";
  a.train.name = "exp-1.v2_x";
  a.optim.lr = 0.000123456789;
  a.optim.eps = 1e-300;
  a.train.max_steps = 9007199254740993;  // not representable as a double
  a.train.overwrite = true;
  const std::string text = config_to_toml(config_keys(a));
  RunConfig b;
  ASSERT_EQ(load(text, &b), "") << text;
  EXPECT_EQ(config_to_toml(config_keys(b)), text);
  EXPECT_EQ(b.data.dir, a.data.dir);
  EXPECT_EQ(b.optim.lr, a.optim.lr);
  EXPECT_EQ(b.train.max_steps, a.train.max_steps);
}

TEST(ConfigFlags, StrictTextParsing) {
  RunConfig c;
  auto keys = config_keys(c);
  auto key = [&](const std::string& name) {
    for (const auto& k : keys)
      if (k.full() == name) return k;
    ADD_FAILURE() << name;
    return keys.front();
  };
  auto set = [&](const std::string& name, const std::string& v) {
    return error_of([&] { config_set(key(name), v, "flag --" + name); });
  };
  EXPECT_NE(set("train.overwrite", "1"), "");
  EXPECT_NE(set("train.overwrite", "yes"), "");
  EXPECT_EQ(set("train.overwrite", "true"), "");
  EXPECT_TRUE(c.train.overwrite);
  EXPECT_NE(set("optim.lr", "inf"), "");
  EXPECT_NE(set("optim.lr", "3e-3x"), "");
  EXPECT_EQ(set("train.max_steps", "1e6"), "");  // integral values written as floats
  EXPECT_EQ(c.train.max_steps, 1000000);
  EXPECT_NE(set("train.max_steps", "1.5"), "");
  EXPECT_NE(set("data.dir", "bad\xff utf8"), "");
  EXPECT_EQ(set("data.dir", "d a#t"), "");
}

// dist.comm: auto (the default) | mpi | nccl; anything else is refused naming the key.
TEST(ConfigKeys, DistCommIsAutoMpiOrNccl) {
  DistConfig d;
  EXPECT_EQ(d.comm, "auto");
  for (const char* ok : {"auto", "mpi", "nccl"}) {
    d.comm = ok;
    EXPECT_EQ(error_of([&] { d.validate(); }), "") << ok;
  }
  d.comm = "gloo";
  EXPECT_EQ(error_of([&] { d.validate(); }),
            "dist.comm: expected one of auto, mpi, nccl (got 'gloo')");
  RunConfig c;
  EXPECT_EQ(load("[dist]\ncomm = \"mpi\"\n", &c), "");
  EXPECT_EQ(c.dist.comm, "mpi");
}

// dist.timeout_s: seconds > 0 (0 or less would end every job at its first collective), its
// help states the rule of the timeout in effect, and the resolved config records it.
TEST(ConfigKeys, DistTimeoutIsPositiveSecondsWithItsRuleInTheHelp) {
  DistConfig d;
  EXPECT_EQ(d.timeout_s, 600.0);
  EXPECT_EQ(error_of([&] { d.validate(); }), "");
  for (double bad : {0.0, -5.0}) {
    d.timeout_s = bad;
    const std::string err = error_of([&] { d.validate(); });
    EXPECT_EQ(err.rfind("dist.timeout_s: expected seconds > 0 (got ", 0), 0u) << err;
  }
  EXPECT_NE(load("[dist]\ntimeout_s = \"30\"\n"), "") << "a string is not seconds";
  RunConfig c;
  EXPECT_EQ(load("[dist]\ntimeout_s = 30\n", &c), "");
  EXPECT_EQ(c.dist.timeout_s, 30.0);
  std::string help;
  for (const ConfigKey& k : config_keys(c))
    if (k.full() == "dist.timeout_s") help = k.help;
  EXPECT_NE(help.find("max(this, 5 x the slowest step, evaluation or save so far)"),
            std::string::npos)
      << help;
  EXPECT_NE(config_to_toml(config_keys(c))
                .find("[dist]\nzero = 0\nreshard_after_forward = "
                      "true\ntimeout_s = 30.0\n"),
            std::string::npos);
}

TEST(RunName, LettersDigitsDotUnderscoreDash) {
  auto refused = [](const std::string& name) {
    TrainConfig t;
    t.max_steps = 1;
    t.name = name;
    return error_of([&] { t.validate(); });
  };
  for (const char* bad : {"", ".", "..", "exp#1", "a/b", "a b", "\"a", "x\xE4\xB8\xAD"})
    EXPECT_NE(refused(bad).find("train.name"), std::string::npos) << "'" << bad << "'";
  for (const char* good : {"run", "exp-1.v2_x", "...", "-a", "A9"})
    EXPECT_EQ(refused(good), "") << good;
}

// lora.rank = 0 means no adapters; a config that also set lora.targets (or alpha, dropout) with it
// used to train every weight in silence. Refused in one line naming the keys; their defaults,
// which every resolved config.toml writes, stay accepted with rank 0.
TEST(ConfigValidate, LoraKeysWithRankZeroRefusedByName) {
  auto validated = [](const std::string& text) {
    RunConfig c;
    c.model.vocab_size = 256;
    c.train.max_steps = 1;
    std::string err = load(text, &c);
    if (err.empty()) err = error_of([&] { c.validate(); });
    return err;
  };
  std::string err = validated("[lora]\ntargets = \"qkv,mlp_fc\"\n");
  EXPECT_NE(err.find("lora.rank = 0"), std::string::npos) << err;
  EXPECT_NE(err.find("lora.targets = \"qkv,mlp_fc\""), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  err = validated("[lora]\nrank = 0\nalpha = 32.0\ndropout = 0.1\n");
  EXPECT_NE(err.find("lora.alpha = 32, lora.dropout = 0.1"), std::string::npos) << err;
  EXPECT_EQ(err.find("lora.targets"), std::string::npos) << err;
  // Off with every [lora] key at its default (as config.toml writes them), and on with rank >= 1.
  EXPECT_EQ(validated("[lora]\nrank = 0\nalpha = 16.0\ndropout = 0.0\ntargets = \"qkv\"\n"), "");
  EXPECT_EQ(validated("[lora]\nrank = 4\ntargets = \"qkv,mlp_fc\"\ndropout = 0.1\n"), "");
  RunConfig defaults;
  defaults.model.vocab_size = 256;
  defaults.train.max_steps = 1;
  EXPECT_EQ(validated(config_to_toml(config_keys(defaults))), "");
}

// lora.targets takes any of Llama's q, k, v, o, gate, up, down (q, k, v each on its own); the
// fused qkv's one adapter beside q, k or v's (the same rows twice) and a gate adapter on a model
// without a gate are refused in one line naming the key.
TEST(ConfigValidate, LoraTargetsLlamaNamesEachOnItsOwn) {
  auto validated = [](const std::string& targets, const std::string& mlp) {
    ModelConfig m;
    m.vocab_size = 256;
    m.mlp = mlp;
    m.lora.rank = 4;
    m.lora.targets = targets;
    return error_of([&] { m.validate(); });
  };
  for (const char* ok : {"q", "k,v", "q,o", "gate", "q,k,v,o,gate,up,down", "qkv,gate,up"})
    EXPECT_EQ(validated(ok, "swiglu"), "") << ok;
  std::string err = validated("qkv,k", "swiglu");
  EXPECT_NE(err.find("lora.targets"), std::string::npos) << err;
  EXPECT_NE(err.find("qkv"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  err = validated("q,gate", "gelu");
  EXPECT_NE(err.find("lora.targets: 'gate'"), std::string::npos) << err;
  EXPECT_NE(err.find("model.mlp = gelu"), std::string::npos) << err;
  err = validated("q,w", "swiglu");
  EXPECT_NE(err.find("lora.targets: 'w'"), std::string::npos) << err;
}

}  // namespace
}  // namespace ledgerlm

namespace ledgerlm {
namespace {

// A directory given as --config used to read as an empty file: every key at its default, the
// default model trained, exit 0. Now refused by name, with what was expected.
TEST(ConfigFile, DirectoryRefusedByName) {
  const std::string dir = testing::make_temp_dir("config_dir_");
  RunConfig c;
  const std::string e = testing::error_of([&] { config_load_file(dir, config_keys(c)); });
  EXPECT_NE(e.find("config file '" + dir + "' is a directory; expected a TOML file"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace ledgerlm
