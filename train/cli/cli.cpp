// The ledgerlm command line: subcommands and their flags. Errors from any subcommand are
// printed as one line ("ledgerlm: error: ...") with a non-zero exit.
#include "train/cli/cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "data/prepare.h"
#include "model/base/check.h"
#include "train/cli/commands.h"
#include "train/cli/memory_command.h"
#include "train/comm/comm.h"
#include "train/run/build_info.h"
#include "train/run/run_dir.h"
#include "train/run/test_stop_hook.h"

namespace ledgerlm {
namespace {

// Levenshtein distance: how many one-character edits turn a into b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "did you mean 'train'?" when a command is within two edits (or a prefix), else a pointer to
// the help.
std::string nearest_command_hint(const std::string& word, const std::vector<std::string>& names) {
  const std::string* best = nullptr;
  size_t best_d = 3;
  for (const std::string& n : names) {
    const size_t d = n.rfind(word, 0) == 0 && !word.empty() ? 0 : edit_distance(word, n);
    if (d < best_d) {
      best_d = d;
      best = &n;
    }
  }
  return best ? "did you mean '" + *best + "'?" : std::string("see ledgerlm --help");
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// An error on this rank alone, under mpirun: the others may be waiting for it in a collective.
// Rank 0 reports it itself; another rank hands the line to rank 0, which records it in the run's
// summary, reports it and ends the job; only if rank 0 does not (it is stalled too) does this
// rank report it and end the job.
[[noreturn]] void end_job_alone(Comm& comm, const char* what) {
  const std::string line =
      error_message("rank ", comm.rank(), ": ", what, " (ending every rank of the job)");
  comm.hand_failure_to_lead(line);
  std::fprintf(stderr, "ledgerlm: error: %s\n", line.c_str());
  std::fflush(stderr);
  comm.abort(1);
  std::_Exit(1);  // not reached (abort() does not return; the compiler cannot see it)
}

}  // namespace

int cli_main(int argc, char** argv, Comm* shared_comm) {
  CLI::App app{"ledgerlm: a small, fast GPT trainer with an honest memory ledger"};
  app.require_subcommand(1);
  app.set_version_flag("--version", build_version_text(),
                       "the version and the git commit this binary was built from (and whether "
                       "it had uncommitted changes), then exit");
  app.set_help_all_flag("--help-all", "help for every subcommand");

  PrepareOptions prep;
  std::string prep_input;
  auto* prepare =
      app.add_subcommand("prepare", "tokenize a corpus into train/val(/test) token shards");
  prepare->add_option("--input", prep_input, "a text file, a directory of files, or - (stdin)")
      ->required();
  prepare->add_option("--out", prep.out_dir, "output directory (must not exist)")->required();
  prepare
      ->add_option("--tokenizer", prep.tokenizer,
                   "bpe (sentencepiece) | bytes | hf:DIR (a Hugging Face GPT-2 tokenizer) | "
                   "from:DIR (the tokenizer of a prepared data directory)")
      ->capture_default_str();
  prepare->add_option("--vocab-size", prep.vocab_size, "BPE vocabulary size")
      ->capture_default_str();
  prepare
      ->add_option("--val-fraction", prep.val_fraction,
                   "fraction of each document's bytes held out for validation: its end, or just "
                   "before the test part with --test-fraction")
      ->capture_default_str();
  prepare
      ->add_option("--test-fraction", prep.test_fraction,
                   "fraction of each document's bytes held out as the test split (test.bin, read "
                   "only by eval --split test): its end; 0: no test split. val + test must be "
                   "below 1")
      ->capture_default_str();
  prepare->add_option("--seed", prep.seed, "tokenizer training seed")->capture_default_str();
  prepare
      ->add_option("--threads", prep.threads,
                   "encoding threads (0: every core this process may use); the tokens are the "
                   "same for any number")
      ->capture_default_str();
  uint64_t prep_sample_mb = kDefaultBpeSampleBytes / 1'000'000;
  prepare
      ->add_option("--bpe-sample-mb", prep_sample_mb,
                   "bpe: train the tokenizer on at most this many MB (10^6 bytes) of the training "
                   "text, in windows spread evenly over it (all of it when it is smaller)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  // Tests only: the chunk size of the parallel encoder (it never changes the tokens).
  prepare->add_option("--chunk-bytes", prep.chunk_bytes)
      ->group("")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));

  TrainCommand train_cmd;
  auto* train =
      app.add_subcommand("train", "train a model (every config key is a --section.key flag)");
  config_register_flags(train, &train_cmd.config, &train_cmd.request.run);
  train->add_option("--resume", train_cmd.request.resume,
                    "auto | PATH: continue from a checkpoint");
  train->add_option("--init-from", train_cmd.request.init_from,
                    "start from the weights of a run or checkpoint");
  train->add_flag("--tensors", train_cmd.request.print_tensors,
                  "print rank 0's per-tensor table before step 1: optimizer group, the state "
                  "tensors allocated (dtype x elements, bytes), owner rank, ranks holding pieces");

  EvalCommand eval_cmd;
  auto* eval = app.add_subcommand("eval", "loss per token and bits per byte of a trained run");
  eval->add_option("--run", eval_cmd.run_dir, "run directory (runs/NAME)")->required();
  eval->add_option("--split", eval_cmd.split,
                   "val | train | test (test: a data dir prepared with --test-fraction)")
      ->capture_default_str();
  eval->add_option("--text", eval_cmd.text_file, "evaluate on this text file instead");
  eval->add_option("--max-windows", eval_cmd.max_windows, "limit the windows (0: whole split)");
  eval->add_option("--batch", eval_cmd.batch, "windows per forward")->capture_default_str();
  eval->add_option("--threads", eval_cmd.threads, "CPU threads (0: all cores)");
  eval->add_option("--device", eval_cmd.device, "cpu | cuda | auto (cuda when a GPU is visible)")
      ->capture_default_str();

  SampleCommand sample_cmd;
  auto* sample = app.add_subcommand("sample", "generate text from a trained run");
  sample->add_option("--run", sample_cmd.run_dir, "run directory (runs/NAME)")->required();
  sample->add_option("--prompt", sample_cmd.prompt, "text to continue");
  sample->add_option("--tokens", sample_cmd.tokens, "tokens to generate")->capture_default_str();
  sample->add_option("--temperature", sample_cmd.temperature, "0: greedy")->capture_default_str();
  sample->add_option("--top-k", sample_cmd.top_k, "keep the k most likely (0: off)")
      ->capture_default_str();
  sample->add_option("--top-p", sample_cmd.top_p, "nucleus probability (1: off)")
      ->capture_default_str();
  sample->add_option("--seed", sample_cmd.seed, "sampling seed")->capture_default_str();
  sample->add_flag("--no-cache", sample_cmd.no_cache, "recompute the prefix for every token");
  sample->add_option("--threads", sample_cmd.threads, "CPU threads (0: all cores)");
  sample
      ->add_option("--device", sample_cmd.device, "cpu | cuda | auto (cuda when a GPU is visible)")
      ->capture_default_str();

  BenchCommand bench_cmd;
  auto* bench = app.add_subcommand("bench", "time training steps on random tokens");
  config_register_flags(bench, &bench_cmd.config, &bench_cmd.run);
  bench->add_option("--steps", bench_cmd.steps, "timed steps")->capture_default_str();
  bench->add_option("--warmup", bench_cmd.warmup, "untimed steps first")->capture_default_str();

  ConfigBinding show_binding;
  RunConfig show_run;
  auto* show = app.add_subcommand(
      "config", "print the resolved config (defaults, --config file, flags) as TOML");
  config_register_flags(show, &show_binding, &show_run);

  MemoryCommand memory_cmd;
  CLI::App* memory = memory_command_add(app, &memory_cmd);

  ExportCommand export_cmd;
  auto* export_app = app.add_subcommand("export", "export a run's weights for other tools");
  export_app->add_option("--run", export_cmd.run_dir, "run directory (runs/NAME)")->required();
  export_app->add_option("--format", export_cmd.format, "hf (Hugging Face GPT-2, Llama or Qwen2)")
      ->capture_default_str();
  export_app->add_option("--out", export_cmd.out_dir, "output directory (must not exist)")
      ->required();
  export_app->add_flag("--lora-only", export_cmd.lora_only,
                       "a LoRA run's adapters alone, as a PEFT adapter (adapter_model.safetensors "
                       "+ adapter_config.json), instead of the merged weights");

  ImportCommand import_cmd;
  auto* import_app = app.add_subcommand(
      "import", "a Hugging Face GPT-2, Llama or Qwen2 model as a run directory (runs/NAME)");
  import_app->add_option("--format", import_cmd.format, "hf (Hugging Face GPT-2, Llama or Qwen2)")
      ->capture_default_str();
  import_app
      ->add_option("--from", import_cmd.from, "model directory: config.json, model.safetensors")
      ->required();
  import_app->add_option("--out", import_cmd.out_dir, "run directory to create (must not exist)")
      ->required();
  import_app->add_option("--data", import_cmd.data_dir,
                         "prepared data to attach (its vocab must be the model's)");

  CompareCommand compare_cmd;
  auto* compare = app.add_subcommand(
      "compare", "runs side by side: their summaries and the config keys that differ");
  compare->add_option("runs", compare_cmd.run_dirs, "run directories (runs/NAME ...)")
      ->required()
      ->expected(1, -1);
  compare->add_flag("--json", compare_cmd.json, "print one JSON object");
  compare->add_flag("--tsv", compare_cmd.tsv,
                    "one tab-separated row per run: the keys that differ, then the summary's "
                    "figures");

  auto* study = app.add_subcommand(
      "study", "a study as a file: plan its runs, run them, report their statistics");
  study->require_subcommand(1);
  StudyPlanCommand study_plan_cmd;
  auto* study_plan_app =
      study->add_subcommand("plan", "expand STUDY.toml into DIR/manifest.json (one entry a run)");
  study_plan_app->add_option("study", study_plan_cmd.study_file, "the study file (TOML)")
      ->required();
  study_plan_app->add_option("--out", study_plan_cmd.out_dir, "the study directory")->required();
  StudyRunCommand study_run_cmd;
  auto* study_run_app =
      study->add_subcommand("run", "train the manifest's unfinished runs into DIR/runs/");
  study_run_app->add_option("dir", study_run_cmd.dir, "the study directory")->required();
  study_run_app->add_option("-j,--jobs", study_run_cmd.jobs, "runs at a time (cores / N each)")
      ->capture_default_str();
  study_run_app->add_flag("--print-commands", study_run_cmd.print_commands,
                          "print one `ledgerlm train` line per unfinished run; run nothing");
  study_run_app->add_flag("--slurm", study_run_cmd.slurm,
                          "submit the runs neither finished nor queued as an sbatch job array "
                          "(DIR/slurm/), recorded in the manifest");
  study_run_app
      ->add_option("--ranks-per-run", study_run_cmd.ranks_per_run,
                   "start every run on N ranks (mpirun -np N) at its planned global batch: the "
                   "micro-batch shared out anew (0: the ranks the plan gives it)")
      ->capture_default_str();
  study_run_app->add_option("--partition", study_run_cmd.partition, "--slurm: sbatch --partition");
  study_run_app->add_option("--time", study_run_cmd.time,
                            "--slurm: each run's time limit (sbatch --time); a run stopped at it "
                            "requeues and resumes");
  study_run_app
      ->add_option("--cpus-per-run", study_run_cmd.cpus_per_run,
                   "--slurm: CPUs (train.threads) per rank of a run")
      ->capture_default_str();
  study_run_app
      ->add_option("--max-parallel", study_run_cmd.max_parallel,
                   "--slurm: at most this many runs at a time (the array's %K; 0: no "
                   "limit)")
      ->capture_default_str();
  study_run_app
      ->add_option("--stop-ahead", study_run_cmd.stop_ahead,
                   "--slurm: seconds before the time limit at which a run is told to "
                   "save and stop (sbatch --signal=B:USR1@N)")
      ->capture_default_str();
  study_run_app
      ->add_option("--sbatch-arg", study_run_cmd.sbatch_args,
                   "--slurm: one argument passed to sbatch as it is (repeat it for more)")
      ->allow_extra_args(false);
  study_run_app->add_flag("--dry-run", study_run_cmd.dry_run,
                          "--slurm: print the job script and the sbatch line; submit nothing");
  study_run_app->add_flag(
      "--next", study_run_cmd.slurm_next,
      "--slurm: the step each submission's job array is followed by (a job that waits for it): "
      "the finished runs' evaluations, then sweep widening and finals, and what they add "
      "submitted");
  StudyStatusCommand study_status_cmd;
  auto* study_status_app = study->add_subcommand(
      "status",
      "each run: finished, running, queued (Slurm), stopped, failed or not started; a total");
  study_status_app->add_option("dir", study_status_cmd.dir, "the study directory")->required();
  StudyReportCommand study_report_cmd;
  auto* study_report_app = study->add_subcommand(
      "report", "DIR/REPORT.md and PNGs from the finished runs (scripts/study_report.py)");
  study_report_app->add_option("dir", study_report_cmd.dir, "the study directory")->required();
  study_report_app->add_option(
      "--python", study_report_cmd.python,
      "the Python with numpy, scipy and matplotlib (default: $LEDGERLM_PYTHON, "
      "else /usr/bin/python3)");
  study_report_app->add_option(
      "--script", study_report_cmd.script,
      "the report program (default: scripts/study_report.py, found relative to this binary: "
      "PREFIX/share/ledgerlm/ when installed, else the checkout)");
  study_report_app->add_option(
      "--publish", study_report_cmd.publish,
      "then copy the report, its PNGs, the manifest and each run's summary, config, evaluation "
      "and gzipped metrics (no weights) into this directory (e.g. results/NAME)");
  study_report_app->add_flag(
      "--allow-dirty", study_report_cmd.allow_dirty,
      "report runs trained by a build with uncommitted changes (refused without it; the report "
      "then says so at its top)");
  study_report_app->add_flag(
      "--allow-mixed-builds", study_report_cmd.allow_mixed,
      "report runs trained by different builds (refused without it; the report then says so at "
      "its top)");

  // A command word that is no command (a typo: `ledgerlm trian`, `ledgerlm --help stdy`) is named
  // with the nearest one, instead of CLI11's "A subcommand is required" (or, with --help, the
  // main help and exit 0). The main app takes no option with a value, so the first word that
  // is no flag is the command word, wherever --help stands.
  int word_at = 1;
  while (word_at < argc && argv[word_at][0] == '-') ++word_at;
  if (word_at < argc) {
    const std::string word = argv[word_at];
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      std::fprintf(stderr, "ledgerlm: error: '%s' is not a command; %s (commands: %s)\n",
                   word.c_str(), nearest_command_hint(word, names).c_str(),
                   join_names(names).c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and friends are "errors" with exit code 0: let CLI11 print them. Anything else
    // (unknown flag, ill-typed or missing value) is one line in the house format.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "ledgerlm: error: %s (see ledgerlm --help-all)\n", e.what());
    return e.get_exit_code();
  }

  // `train` under mpirun: every rank runs this; the Comm connects them. An error every rank
  // raised together (AgreedError) is reported once, by rank 0; an error on some ranks only
  // ends the whole job at once, so that no rank waits forever in a collective: rank 0 reports
  // it (and records it in the run's summary), a JobError is reported by the rank that raised it
  // (it names the ranks concerned).
  std::unique_ptr<Comm> own_comm;
  Comm* comm = shared_comm;
  try {
    if (*train && comm == nullptr) {
      own_comm = comm_create();
      comm = own_comm.get();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "ledgerlm: error: %s\n", e.what());
    return 1;
  }
  try {
    if (*prepare) {
      prep.inputs = {prep_input};
      prep.bpe_sample_bytes = prep_sample_mb * 1'000'000;
      data_prepare(prep);
      return 0;
    }
    if (*train) {
      for (int i = 0; i < argc; ++i)
        train_cmd.request.command_line += (i ? " " : "") + shell_quote(i ? argv[i] : "ledgerlm");
      // Until this rank has read the run's config, its collectives wait dist.timeout_s's
      // default. A rank that has read it waits the run's own value from then on, so that a rank
      // hung reading the config file (a stalled filesystem) ends the job within that value too
      // (the ranks' values are compared once every rank has its config: run_setup.cpp).
      comm->watch().begin_run(DistConfig{}.timeout_s);
      comm_agree(*comm, [&] {
        test_stop_in(comm->rank(), "config");  // as the rank begins reading its config
        config_apply(&train_cmd.config);
        train_cmd.request.explicit_keys = train_cmd.config.explicit_keys;
        const double timeout_s = train_cmd.request.run.dist.timeout_s;
        if (timeout_s > 0) comm->watch().begin_run(timeout_s);
      });
      return command_train(train_cmd, *comm);
    }
    if (*show) {
      config_apply(&show_binding);
      std::fputs(config_to_toml(show_binding.keys).c_str(), stdout);
      return 0;
    }
    if (*memory) return command_memory(memory_cmd);
    if (*export_app) return command_export(export_cmd);
    if (*import_app) return command_import(import_cmd);
    if (*compare) return command_compare(compare_cmd);
    if (*study_plan_app) return command_study_plan(study_plan_cmd);
    if (*study_run_app) return command_study_run(study_run_cmd);
    if (*study_report_app) return command_study_report(study_report_cmd);
    if (*study_status_app) return command_study_status(study_status_cmd);
    if (*eval) return command_eval(eval_cmd);
    if (*sample) return command_sample(sample_cmd);
    if (*bench) {
      config_apply(&bench_cmd.config);
      return command_bench(bench_cmd);
    }
  } catch (const JobError& e) {
    std::fprintf(stderr, "ledgerlm: error: %s\n", e.what());
    std::fflush(stderr);
    if (comm != nullptr && comm->world() > 1) comm->abort(1);
    return 1;
  } catch (const AgreedError& e) {
    if (comm == nullptr || comm->rank() == 0)
      std::fprintf(stderr, "ledgerlm: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    if (comm != nullptr && comm->world() > 1) end_job_alone(*comm, e.what());
    std::fprintf(stderr, "ledgerlm: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace ledgerlm
