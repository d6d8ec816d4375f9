// The chaos harness by hand: an undisturbed run of the job first (the
// accuracy the others are held to), then one run per seed, each with a
// seeded random schedule of faults (tests/chaos.h), and a table of what
// happened and which invariants broke. Exit status 1 when any did.
//
//   bazel build //bench:chaos //:daemons
//   bazel-bin/bench/chaos --seeds=1-50 --faults=6
//   bazel-bin/bench/chaos --seeds=17 --faults=6    # replay seed 17
//   bazel-bin/bench/chaos --seeds=1-50 --net       # with network faults
//   bazel-bin/bench/chaos --seeds=1-50 --replication=3  # + simultaneous kills
//   bazel-bin/bench/chaos --seeds=1-50 --sparse --epochs=3  # + bucket moves
//   bazel-bin/bench/chaos --seeds=1-50 --sparse --elastic_workers --epochs=3
//
// A seed with the same --faults, --span_s and --epochs gives the same
// schedule. The short schedule in the suite is tests/chaos_test.cc.
#include "tests/chaos.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/mnist.h"
#include "common/parse_flags.h"
#include "tests/netns_lab.h"

ABSL_FLAG(std::string, seeds, "1-10",
          "seeds to run: a list and ranges, e.g. 1-50 or 3,17,40");
ABSL_FLAG(int, faults, 6, "faults per run");
ABSL_FLAG(double, span_s, 0,
          "faults fall in the first span_s seconds of training (0 = 60 % of "
          "the undisturbed run's length)");
ABSL_FLAG(int, epochs, 40, "the job's training.epochs");
ABSL_FLAG(double, tolerance, 0.03,
          "a run that succeeds must reach the undisturbed accuracy minus this");
ABSL_FLAG(double, bound_s, 240, "a launcher running longer is a hang");
ABSL_FLAG(std::string, bin_dir, "",
          "folder holding deploy/launcher and the daemons (default: the "
          "bazel-bin this binary is in)");
ABSL_FLAG(std::string, run_dir, "",
          "folder for the runs (default: a new /tmp/downpour-chaos-XXXXXX)");
ABSL_FLAG(std::string, mnist_dir, "data/mnist",
          "MNIST files (deploy/fetch_mnist.sh); synthetic digits when absent");
ABSL_FLAG(bool, net, false,
          "run every daemon on a host of its own (network namespaces on a "
          "virtual switch; needs root, ip and tc) and add network faults: a "
          "host cut off, a link shaped to a crawl");
ABSL_FLAG(int, replication, 2,
          "the job's cluster.replication: 2 (a standby per shard) or 3 (two, "
          "and simultaneous kills of a shard's primary and one of its backups "
          "join the schedule); loopback only");
ABSL_FLAG(bool, sparse, false,
          "run the sparse job instead (sparse_linear on generated LIBSVM "
          "files, streamed, 32 buckets) and add bucket moves (psctl "
          "move-buckets) to the faults; its row updates and bucket owners "
          "are judged too; loopback only. Use --epochs=3 or so");
ABSL_FLAG(bool, elastic_workers, false,
          "with --sparse: workers that join (ps_worker --join) and drain "
          "(psctl drain-worker) join the faults");
ABSL_FLAG(bool, full_disk, true,
          "fill the checkpoint folder's tmpfs as one of the faults (needs a "
          "mount namespace; left out, saying so, where none can be made)");

namespace downpour::chaos {
namespace {

std::vector<uint64_t> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> range = absl::StrSplit(part, '-');
    uint64_t lo = 0, hi = 0;
    if (range.size() == 1 && absl::SimpleAtoi(range[0], &lo)) {
      seeds.push_back(lo);
    } else if (range.size() == 2 && absl::SimpleAtoi(range[0], &lo) &&
               absl::SimpleAtoi(range[1], &hi) && lo <= hi) {
      for (uint64_t s = lo; s <= hi; ++s) seeds.push_back(s);
    } else {
      std::fprintf(stderr,
                   "chaos: --seeds '%s' is not a list of seeds and "
                   "ranges (1-50 or 3,17,40)\n",
                   text.c_str());
      std::exit(2);
    }
  }
  return seeds;
}

// Fills `options` from the flags, setting up the network lab in `lab` with
// --net. False (after saying why) when --net finds no network namespaces.
bool MakeOptions(Options* options, std::unique_ptr<NetnsLab>* lab) {
  options->bin_dir = bench::BinDirOr(absl::GetFlag(FLAGS_bin_dir));
  options->work_dir = bench::RunDirOr(absl::GetFlag(FLAGS_run_dir), "chaos");
  std::error_code made;
  std::filesystem::create_directories(options->work_dir, made);
  if (absl::GetFlag(FLAGS_net)) {
    // Before any thread: this process moves into the lab's "ctl" host.
    *lab = std::make_unique<NetnsLab>(options->work_dir, "dpch");
    if (std::string why = SetUpLab(lab->get()); !why.empty()) {
      std::fprintf(stderr, "chaos: --net: no network namespaces here: %s\n",
                   why.c_str());
      return false;
    }
    options->lab = lab->get();
  }
  const std::string mnist = absl::GetFlag(FLAGS_mnist_dir);
  if (std::filesystem::exists(mnist + "/" + MnistDigitFile(9))) {
    options->mnist_dir = std::filesystem::absolute(mnist).string();
  }
  options->epochs = absl::GetFlag(FLAGS_epochs);
  options->sparse = absl::GetFlag(FLAGS_sparse);
  if (absl::GetFlag(FLAGS_elastic_workers) && !options->sparse) {
    std::fprintf(stderr, "chaos: --elastic_workers needs --sparse\n");
    return false;
  }
  options->replication = absl::GetFlag(FLAGS_replication);
  if (options->replication < 2 || options->replication > 3) {
    std::fprintf(stderr, "chaos: --replication must be 2 or 3, got %d\n",
                 options->replication);
    return false;
  }
  options->bound = absl::Seconds(absl::GetFlag(FLAGS_bound_s));
  options->full_disk = absl::GetFlag(FLAGS_full_disk);
  if (options->full_disk) {
    if (std::string why = CanMountTmpfs(); !why.empty()) {
      std::printf("chaos: no full-disk faults: %s\n", why.c_str());
      options->full_disk = false;
    }
  }
  return true;
}

// Prints the undisturbed run, which is held to its own invariants (no loss at
// all); true when they held.
bool UndisturbedHeld(const Observed& observed, const Judge& judge) {
  const std::vector<std::string> broken = CheckInvariants(observed, judge);
  std::printf(
      "undisturbed: %s, accuracy %.4f, %.1f s%s%s\n", observed.outcome.c_str(),
      observed.accuracy, observed.seconds,
      broken.empty() ? "" : "; BROKEN: ", absl::StrJoin(broken, "; ").c_str());
  return broken.empty();
}

// Prints one seed's row of the table and what was done in the run.
void PrintRow(uint64_t seed, Outcome& run,
              const std::vector<std::string>& broken) {
  const Observed& o = run.observed;
  std::string outcome = o.outcome.substr(0, 28);
  if (o.outcome.size() > 28) {
    // The whole outcome (a failure's reason) on the next line.
    run.done.insert(run.done.begin(), o.outcome.substr(0, 300));
  }
  std::printf("%5llu %-28s %8.4f %7.1f %9llu %7d  %s\n",
              static_cast<unsigned long long>(seed), outcome.c_str(),
              o.accuracy, o.seconds,
              static_cast<unsigned long long>(o.acked_pushes_lost),
              o.worker_ends,
              broken.empty() ? "held" : absl::StrJoin(broken, "; ").c_str());
  for (const std::string& done : run.done) {
    std::printf("        %s\n", done.c_str());
  }
  if (o.sparse) {
    std::printf("        row updates held %llu, acknowledged %llu (+%llu)\n",
                static_cast<unsigned long long>(o.held_row_updates),
                static_cast<unsigned long long>(o.acked_row_updates),
                static_cast<unsigned long long>(o.acked_row_slack));
    for (const std::string& move : o.moves) {
      std::printf("        %s\n", move.c_str());
    }
  }
}

// Runs one seed's schedule and prints its row, with the command that replays
// it when an invariant broke; true when the run started and all held.
bool SeedHeld(Harness& harness, uint64_t seed, double span,
              const Layout& layout, const Judge& judge, const Options& options,
              int* lossless) {
  const std::vector<Fault> faults =
      MakeSchedule(seed, absl::GetFlag(FLAGS_faults), span, layout);
  absl::StatusOr<Outcome> run = harness.Run(seed, faults);
  if (!run.ok()) {
    std::printf("%5llu could not start: %s\n",
                static_cast<unsigned long long>(seed),
                std::string(run.status().message()).c_str());
    return false;
  }
  const std::vector<std::string> broken = CheckInvariants(run->observed, judge);
  // A run that ended with a summary and reported no loss.
  if (!run->observed.outcome.empty() && run->observed.acked_pushes_lost == 0) {
    ++*lossless;
  }
  PrintRow(seed, *run, broken);
  if (!broken.empty()) {
    std::printf(
        "        replay: bazel-bin/bench/chaos --seeds=%llu "
        "--faults=%d --span_s=%.2f --epochs=%d%s%s%s%s%s; run folder %s\n",
        static_cast<unsigned long long>(seed), absl::GetFlag(FLAGS_faults),
        span, options.epochs, layout.network ? " --net" : "",
        options.replication == 3 ? " --replication=3" : "",
        options.full_disk ? "" : " --full_disk=false",
        layout.sparse ? " --sparse" : "",
        layout.elastic_workers ? " --elastic_workers" : "",
        run->run_dir.c_str());
  }
  std::fflush(stdout);
  return broken.empty();
}

int Run() {
  Options options;
  std::unique_ptr<NetnsLab> lab;
  if (!MakeOptions(&options, &lab)) return 2;
  std::printf(
      "chaos: runs under %s, data %s\n", options.work_dir.c_str(),
      options.mnist_dir.empty() ? "synthetic" : options.mnist_dir.c_str());
  Harness harness(options);
  absl::StatusOr<Outcome> reference = harness.Run(0, {});
  if (!reference.ok()) {
    std::fprintf(stderr, "chaos: %s\n",
                 std::string(reference.status().message()).c_str());
    return 1;
  }
  Judge judge;
  judge.reference_accuracy = reference->observed.accuracy;
  judge.tolerance = absl::GetFlag(FLAGS_tolerance);
  if (!UndisturbedHeld(reference->observed, judge)) return 1;
  double span = absl::GetFlag(FLAGS_span_s);
  if (span <= 0) span = 0.6 * reference->observed.seconds;
  Layout layout;
  layout.full_disk = options.full_disk;
  layout.network = lab != nullptr;
  layout.simultaneous = options.replication >= 3;
  layout.sparse = options.sparse;
  layout.elastic_workers = absl::GetFlag(FLAGS_elastic_workers);
  int violated = 0, lossless = 0, seeds = 0;
  std::printf("\n%5s %-28s %8s %7s %9s %7s  %s\n", "seed", "outcome",
              "accuracy", "seconds", "lost", "w.ended", "invariants");
  for (uint64_t seed : ParseSeeds(absl::GetFlag(FLAGS_seeds))) {
    if (!SeedHeld(harness, seed, span, layout, judge, options, &lossless)) {
      ++violated;
    }
    ++seeds;
  }
  std::printf(
      "\nchaos: %d run(s) broke an invariant; %d of %d lost 0 "
      "acknowledged pushes (cluster.replication %d%s)\n",
      violated, lossless, seeds, options.replication,
      options.sparse ? ", sparse" : "");
  return violated == 0 ? 0 : 1;
}

}  // namespace
}  // namespace downpour::chaos

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "chaos [--seeds=1-10] [--faults=6] [--span_s=S] [--epochs=6] "
      "[--tolerance=0.03]\n  Runs a real cluster through seeded random faults "
      "(kill -9, SIGSTOP, a primary and its successor, a full checkpoint "
      "disk; with --net, hosts cut off and links at a crawl) and checks the "
      "invariants of tests/chaos.h after each run.");
  downpour::ParseFlags(argc, argv);
  return downpour::chaos::Run();
}
