// bench/scale_model: a scale model of a cluster over shaped links.
//
// Every daemon runs in a network namespace of its own (tests/netns_lab.h: the
// coordinator, each ps, each worker, and the launcher's host), every link is
// rate-limited with tc tbf to --link_mbit each way, and workers compute on
// `compute.device: simulated` (a sleep of --step_ms per step). The real
// launcher (--ssh mode through a stand-in ssh), the real Downpour loop, real
// gRPC pushes and pulls and real ps daemons do the rest. Network and compute
// are slowed down by the same factor (100 Mbit/s and 200 ms stand for
// 10 Gbit/s and 2 ms), so the links, not our 2 cores, are the bottleneck;
// each row prints the machine's CPU use and flags it when it was high.
//
//   sudo bazel run -c opt //bench:scale_model -- --markdown=/tmp/scale.md
//   bazel run -c opt //bench:scale_model -- --workers=1,16 --shards=8
//     --encodings=float32 --model=mlp10x --link_mbit=10 --step_ms=2000
//
// Per row: cluster updates/s (whole pushes the ps acknowledged per second,
// summed over the workers' own counters in the coordinator's history), over a
// steady window that starts once every worker has done --warmup_steps steps
// and ends before the first worker finishes; scaling efficiency =
// updates/s(W) / (W * updates/s(1)) for the same shards/encoding/model; the
// busiest ps link's utilisation (its bytes in + out over the window / (2 *
// rate * window): both directions' mean); and the machine's CPU use over the
// window (/proc/stat). Needs root, `ip` and `tc`. Every namespace is deleted
// at the end, also on error or Ctrl-C.
//
// --model=sparse_linear trains FTRL logistic regression on a click log that
// bench/criteo/gen_criteo generates once under --work (real gradients on the
// CPU, each step padded to --step_ms) until a worker's test AUC reaches the
// generator's Bayes AUC minus --auc_gap, and reports per row the seconds to
// it, the speed-up over 1 worker, the start-up, examples/s, staleness and
// the busiest ps link (from the lab switch's byte counters):
//   bazel-bin/bench/scale_model --model=sparse_linear --shards=8
//     --link_mbit=10 --workers=1,16
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/subprocess.h"
#include "proto/coordinator.pb.h"
#include "tests/netns_lab.h"

ABSL_FLAG(std::string, workers, "1,2,4,8,16", "worker counts (rows)");
ABSL_FLAG(std::string, shards, "1,2,4,8", "ps shard counts");
ABSL_FLAG(std::string, encodings, "float32,bf16",
          "wire encodings: float32 (the default, no key set) or any value of "
          "rpc.encoding");
ABSL_FLAG(std::string, model, "mlp",
          "models, comma-separated: mlp (MNIST MLP 784-256-128-10, 0.94 MB), "
          "mlp10x (784-2560-128-10, 9.4 MB) or sparse_linear (FTRL logistic "
          "regression on the generated click log, time to a target AUC)");
ABSL_FLAG(double, link_mbit, 100,
          "every link's rate each way, Mbit/s (100 = 10 Gbit/s scaled 100x)");
ABSL_FLAG(double, step_ms, 200,
          "compute.simulated_step_ms (200 = a 2 ms GPU step scaled 100x)");
ABSL_FLAG(int, steps, 40, "training steps per worker");
ABSL_FLAG(int, warmup_steps, 5,
          "steps every worker must have done before the measured window opens");
ABSL_FLAG(int, batch_size, 32, "training.batch_size (no compute: any value)");
ABSL_FLAG(int, block_size, 16384,
          "model.block_size in floats: small enough that 8 shards get even "
          "loads");
ABSL_FLAG(std::vector<std::string>, set, {},
          "extra section.key=value overrides for every run (e.g. "
          "training.fetch=after_push)");
ABSL_FLAG(double, cpu_flag, 70,
          "flag rows where the machine's CPU was busier than this percentage");
ABSL_FLAG(int, row_timeout_s, 600, "give up on a row after this long");
ABSL_FLAG(std::string, run_dir, "",
          "folder for the runs' configs, logs and summaries (default: a new "
          "temp dir)");
ABSL_FLAG(std::string, bin_dir, "",
          "folder holding deploy/launcher and the daemons (default: the "
          "bazel-bin this bench was built in)");
ABSL_FLAG(std::string, markdown, "",
          "also write the table as Markdown to this file");
ABSL_FLAG(double, target_accuracy, 0,
          "time to accuracy instead of throughput: workers compute real "
          "gradients on real MNIST within each simulated step "
          "(compute.simulated_real_gradients) and every run trains until a "
          "worker's test accuracy reaches this; each row reports the seconds "
          "to it and the speed-up over 1 worker (0 = throughput rows)");
ABSL_FLAG(std::string, mnist_dir, "data/mnist",
          "--target_accuracy: the MNIST files (deploy/fetch_mnist.sh)");
ABSL_FLAG(int, train_examples, 8000,
          "--target_accuracy: data.train_examples (the MNIST package holds "
          "10,000 digits; 2000 are the test set)");
ABSL_FLAG(int, eval_every_steps, 10,
          "--target_accuracy: training.eval_every_steps of every worker (on "
          "2000 test examples)");
ABSL_FLAG(double, learning_rate, 0.001,
          "--target_accuracy: Adam's learning rate");
ABSL_FLAG(std::string, work, "/tmp/downpour-scale-criteo",
          "sparse_linear: folder for the generated click log (made once by "
          "bench/criteo/gen_criteo, reused while its rows and seed match)");
ABSL_FLAG(int64_t, click_rows, 2000000,
          "sparse_linear: training rows of the click log (every worker streams "
          "its byte range of it)");
ABSL_FLAG(int64_t, click_test_rows, 20000,
          "sparse_linear: test rows (the generator's Bayes AUC is on these)");
ABSL_FLAG(
    double, auc_gap, 0.06,
    "sparse_linear: the target AUC is the generator's Bayes AUC minus "
    "this (0.06: one worker needs ~400k examples, ~5 min at 200 ms steps)");
ABSL_FLAG(int, sparse_batch_size, 256, "sparse_linear: training.batch_size");
ABSL_FLAG(double, ftrl_alpha, 0.1,
          "sparse_linear: FTRL's alpha (optimizer.learning_rate; beta 1)");
ABSL_FLAG(int, eval_rows, 5000,
          "sparse_linear: data.eval_rows, the test rows each periodic "
          "evaluation scores");
ABSL_FLAG(double, evals_per_s, 1,
          "sparse_linear: evaluations per second the whole cluster makes "
          "(each worker's training.eval_every_steps follows from it)");

namespace downpour::bench {
namespace {

namespace fs = std::filesystem;

volatile std::sig_atomic_t g_interrupted = 0;
void OnSignal(int) { g_interrupted = 1; }

constexpr int kCoordinatorPort = 7000;
constexpr int kPsPort = 7001;
constexpr int kWorkerPort = 7100;

struct Row {
  int workers = 0;
  int shards = 0;
  std::string encoding;
  std::string model;
  double updates_per_s = NAN;
  double steps_per_s = NAN;
  double efficiency = NAN;
  double ps_link_util = NAN;  // the busiest ps link, both directions' mean
  double cpu_busy = NAN;      // percent of all cores, over the window
  // CPU seconds of the run's own processes (launcher, daemons) per second of
  // the run, as a percent of all cores: ours alone, whatever else runs.
  double our_cpu = NAN;
  double window_s = NAN;
  double wall_s = 0;
  // --target_accuracy: seconds from launch to the first evaluation at the
  // target (the launcher's seconds_to_target), its speed-up over 1 worker,
  // and the final test accuracy.
  double seconds_to_target = NAN;
  double speedup = NAN;
  double accuracy = NAN;
  // sparse_linear: examples/s (cluster, over the window), the workers' mean
  // staleness (mean over workers) and p99 (worst worker) at the end, seconds
  // from launch until every worker had stepped, and the target AUC.
  double examples_per_s = NAN;
  double staleness_mean = NAN;
  double staleness_p99 = NAN;
  double startup_s = NAN;
  double train_speedup = NAN;  // the speed-up without start-up
  double target_auc = NAN;
  double launch_unix_s = NAN;  // when the launcher started
  std::string error;
};

bool IsSparse(const std::string& model) { return model == "sparse_linear"; }

// A run that ends at a target (accuracy or AUC) rather than after --steps.
bool IsTargetRun(const Row& row) {
  return IsSparse(row.model) || absl::GetFlag(FLAGS_target_accuracy) > 0;
}

std::vector<int> LayersOf(const std::string& model) {
  if (model == "mlp") return {784, 256, 128, 10};
  if (model == "mlp10x") return {784, 2560, 128, 10};
  return {};
}

// ---- CPU use: /proc/stat sampled in the background. ------------------------

struct CpuSample {
  double unix_s = 0;
  double busy = 0;   // jiffies not idle or iowait, all cores
  double total = 0;  // all jiffies
};

bool ReadProcStat(CpuSample* sample) {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  in >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
  if (!in || cpu != "cpu") return false;
  double total = 0;
  for (double x : v) total += x;
  sample->unix_s = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  sample->total = total;
  sample->busy = total - v[3] - v[4];  // idle, iowait
  return true;
}

// Samples /proc/stat every 200 ms while it lives.
class CpuSampler {
 public:
  CpuSampler() : thread_([this] { Loop(); }) {}
  ~CpuSampler() {
    stop_ = true;
    thread_.join();
  }
  // Percent busy between the first sample at or after `from` and the last at
  // or before `to` (unix seconds); NaN when there are not two such samples.
  double BusyPercent(double from, double to) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const CpuSample* a = nullptr;
    const CpuSample* b = nullptr;
    for (const CpuSample& s : samples_) {
      if (a == nullptr && s.unix_s >= from) a = &s;
      if (s.unix_s <= to) b = &s;
    }
    if (a == nullptr || b == nullptr || b->total <= a->total) return NAN;
    return 100 * (b->busy - a->busy) / (b->total - a->total);
  }

 private:
  void Loop() {
    while (!stop_) {
      CpuSample sample;
      if (ReadProcStat(&sample)) {
        absl::MutexLock lock(&mu_);
        samples_.push_back(sample);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  absl::Mutex mu_;
  std::vector<CpuSample> samples_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// ---- Link bytes: the lab switch's /proc/net/dev, sampled in the background.

// Samples every switch port's bytes (rx + tx) every 250 ms while it lives,
// from a thread that entered the switch's network namespace (the ps's own
// bytes counter holds only dense traffic, so sparse rows read the links).
class LinkSampler {
 public:
  explicit LinkSampler(std::string netns)
      : netns_(std::move(netns)), thread_([this] { Loop(); }) {}
  ~LinkSampler() {
    stop_ = true;
    thread_.join();
  }
  // The most bytes per second any of `ports` moved (in + out) between the
  // first sample at or after `from` and the last at or before `to`; NaN
  // without two such samples.
  double BusiestBytesPerS(const std::vector<std::string>& ports, double from,
                          double to) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const Sample* a = nullptr;
    const Sample* b = nullptr;
    for (const Sample& s : samples_) {
      if (a == nullptr && s.unix_s >= from) a = &s;
      if (s.unix_s <= to) b = &s;
    }
    if (a == nullptr || b == nullptr || b->unix_s <= a->unix_s) return NAN;
    double busiest = 0;
    for (const std::string& port : ports) {
      auto at = a->bytes.find(port), bt = b->bytes.find(port);
      if (at == a->bytes.end() || bt == b->bytes.end()) continue;
      busiest = std::max(busiest,
                         (bt->second - at->second) / (b->unix_s - a->unix_s));
    }
    return busiest;
  }

 private:
  struct Sample {
    double unix_s = 0;
    std::map<std::string, double> bytes;  // port -> rx + tx bytes
  };

  // /proc/net/dev of this thread's namespace: "name: rx_bytes ... (8
  // receive fields) tx_bytes ...".
  static Sample Read() {
    Sample sample;
    sample.unix_s = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
    std::ifstream in("/proc/thread-self/net/dev");
    std::string line;
    while (std::getline(in, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::vector<std::string> f =
          absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipWhitespace());
      double rx = 0, tx = 0;
      if (f.size() < 9 || !absl::SimpleAtod(f[0], &rx) ||
          !absl::SimpleAtod(f[8], &tx))
        continue;
      std::string name(absl::StripAsciiWhitespace(line.substr(0, colon)));
      sample.bytes[name] = rx + tx;
    }
    return sample;
  }

  void Loop() {
    const int fd = open(("/var/run/netns/" + netns_).c_str(), O_RDONLY);
    const bool entered = fd >= 0 && setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) close(fd);
    while (entered && !stop_) {
      Sample sample = Read();
      {
        absl::MutexLock lock(&mu_);
        samples_.push_back(std::move(sample));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

  // Constant after construction.
  const std::string netns_;
  // Protected by mu_.
  absl::Mutex mu_;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What a row's measurements read besides the history.
struct Probes {
  CpuSampler* cpu = nullptr;
  LinkSampler* links = nullptr;       // the lab switch's ports
  std::vector<std::string> ps_ports;  // each ps's port on the switch
};

// ---- One run. ---------------------------------------------------------------

std::string IpPort(const NetnsLab& lab, const std::string& role, int port) {
  return absl::StrCat(lab.host(role).ip, ":", port);
}

// True for float32, the default, which the config leaves unset.
bool IsDefaultEncoding(const std::string& encoding) {
  const absl::StatusOr<WireEncoding> parsed = ParseRpcEncoding(encoding);
  return parsed.ok() && *parsed == WireEncoding::kFloat32;
}

// training's loop settings, the same in both kinds of run (see ConfigYaml).
constexpr char kLoopYaml[] =
    "  fetch: overlap\n  n_fetch: 1\n  n_push: 1\n  max_pushes_in_flight: 1\n";

// The sections that differ in a throughput run: simulated compute, a tiny
// fixed gradient, a fixed number of steps.
std::string ThroughputYaml() {
  return absl::StrCat(
      "optimizer:\n  type: sgd\n  learning_rate: 0.01\n",
      "training:\n  batch_size: ", absl::GetFlag(FLAGS_batch_size),
      "\n  steps: ", absl::GetFlag(FLAGS_steps),
      "\n  epochs: 1\n  eval_every_steps: 0\n  target_accuracy: 0\n", kLoopYaml,
      "data:\n  source: synthetic\n  train_examples: 4096\n"
      "  test_examples: 32\n",
      "compute:\n  device: simulated\n  simulated_step_ms: ",
      absl::GetFlag(FLAGS_step_ms), "\n");
}

// The sections that differ in a time-to-accuracy run: real MNIST, real
// gradients within the simulated step, Adam, evaluations, the target.
std::string TargetYaml() {
  const std::string mnist =
      fs::absolute(absl::GetFlag(FLAGS_mnist_dir)).string();
  return absl::StrCat(
      "optimizer:\n  type: adam\n  learning_rate: ",
      absl::GetFlag(FLAGS_learning_rate), "\n",
      "training:\n  batch_size: ", absl::GetFlag(FLAGS_batch_size),
      "\n  epochs: 1000\n  eval_every_steps: ",
      absl::GetFlag(FLAGS_eval_every_steps),
      "\n  target_accuracy: ", absl::GetFlag(FLAGS_target_accuracy), "\n",
      kLoopYaml, "data:\n  source: mnist\n  path: ", mnist,
      "\n  train_examples: ", absl::GetFlag(FLAGS_train_examples),
      "\n  test_examples: 2000\n",
      "compute:\n  device: simulated\n  simulated_step_ms: ",
      absl::GetFlag(FLAGS_step_ms), "\n  simulated_real_gradients: true\n");
}

// ---- sparse_linear: the generated click log. ------------------------------

// The click log's folder: one per rows, test rows and seed, so a folder is
// reused only for the same log.
std::string ClickLogDir() {
  return absl::StrCat(absl::GetFlag(FLAGS_work), "/r",
                      absl::GetFlag(FLAGS_click_rows), "-t",
                      absl::GetFlag(FLAGS_click_test_rows), "-s1");
}

// Workers' training.eval_every_steps: the cluster evaluates about
// --evals_per_s times a second (a worker steps 1000 / --step_ms times).
int EvalEverySteps(int workers) {
  const double steps_per_s = 1000 / absl::GetFlag(FLAGS_step_ms);
  return std::max(1, static_cast<int>(std::lround(
                         workers * steps_per_s /
                         std::max(1e-3, absl::GetFlag(FLAGS_evals_per_s)))));
}

// The sections of a sparse_linear run: FTRL logistic regression over the
// streamed click log, real gradients padded to the simulated step, stopped
// at the target AUC (the launcher's seconds_to_target).
std::string SparseYaml(const Row& row) {
  const std::string dir = ClickLogDir();
  return absl::StrCat(
      "model:\n  task: binary\n  type: sparse_linear\n  sparse_buckets: 256\n",
      "optimizer:\n  type: ftrl\n  learning_rate: ",
      absl::GetFlag(FLAGS_ftrl_alpha), "\n  ftrl_beta: 1.0\n",
      "training:\n  batch_size: ", absl::GetFlag(FLAGS_sparse_batch_size),
      "\n  consistency: async\n  epochs: 100\n  eval_every_steps: ",
      EvalEverySteps(row.workers),
      "\n  seed: 42\n  target_metric: auc\n  target_value: ",
      absl::StrFormat("%.4f", row.target_auc), "\n  stop_at_target: true\n",
      "data:\n  source: criteo\n  path: ", dir,
      "/train.txt\n  test_path: ", dir,
      "/test.txt\n  shuffle_window: 20000\n  eval_rows: ",
      absl::GetFlag(FLAGS_eval_rows), "\n",
      "compute:\n  device: simulated\n  simulated_step_ms: ",
      absl::GetFlag(FLAGS_step_ms), "\n");
}

// The Bayes AUC that gen_criteo printed in `log` ("bayes_auc 0.7857").
absl::StatusOr<double> BayesAuc(const std::string& log) {
  const std::string text = ReadFile(log).value_or("");
  const size_t at = text.find("bayes_auc ");
  double auc = 0;
  if (at == std::string::npos ||
      !absl::SimpleAtod(text.substr(at + 10, text.find('\n', at) - at - 10),
                        &auc)) {
    return absl::NotFoundError(
        absl::StrCat("no 'bayes_auc' line in ", log,
                     ": delete the folder and rerun to generate the log anew"));
  }
  return auc;
}

// Generates the click log under ClickLogDir() with bin_dir's gen_criteo, or
// reuses it when its gen.log is there (written last); its Bayes AUC.
absl::StatusOr<double> PrepareClickLog(const std::string& bin_dir) {
  const std::string dir = ClickLogDir();
  const std::string log = dir + "/gen.log";
  if (fs::exists(log)) return BayesAuc(log);
  fs::create_directories(dir);
  std::printf("scale_model: generating the click log in %s\n", dir.c_str());
  std::fflush(stdout);
  fs::remove(log + ".tmp");
  auto gen = Subprocess::Start(
      "gen_criteo",
      {(fs::path(bin_dir) / "bench/criteo/gen_criteo").string(), "--out",
       dir + "/train.txt", "--rows",
       absl::StrCat(absl::GetFlag(FLAGS_click_rows)), "--test_out",
       dir + "/test.txt", "--test_rows",
       absl::StrCat(absl::GetFlag(FLAGS_click_test_rows)), "--seed", "1"},
      log + ".tmp");
  if (!gen.ok()) return gen.status();
  std::optional<int> status;
  while (!status.has_value()) status = (*gen)->Wait(absl::Seconds(1));
  if (*status != 0) {
    return absl::InternalError(
        absl::StrCat("gen_criteo exited ", *status, ": see ", log, ".tmp"));
  }
  fs::rename(log + ".tmp", log);
  return BayesAuc(log);
}

// The dense model's sections.
std::string DenseYaml(const Row& row) {
  return absl::StrCat(
      "model:\n  layers: [", absl::StrJoin(LayersOf(row.model), ", "),
      "]\n  block_size: ", absl::GetFlag(FLAGS_block_size), "\n",
      absl::GetFlag(FLAGS_target_accuracy) > 0 ? TargetYaml()
                                               : ThroughputYaml());
}

// The run's whole config. training.fetch overlap measured best: with
// after_push a step waits for its push's acknowledgement and then a pull
// (~2 transfers of the model on the worker's link), which halved one worker's
// rate (2.5 against 5.0 updates/s at 200 ms steps) and so every row's
// throughput, though it flattered the efficiency ratio. n_push = n_fetch = 1
// keeps one update per step, the figure the table reports.
std::string ConfigYaml(const NetnsLab& lab, const Row& row) {
  std::vector<std::string> ps, workers;
  for (int i = 0; i < row.shards; ++i)
    ps.push_back(IpPort(lab, absl::StrCat("ps", i), kPsPort));
  for (int i = 0; i < row.workers; ++i)
    workers.push_back(IpPort(lab, absl::StrCat("worker", i), kWorkerPort));
  const std::string encoding =
      IsDefaultEncoding(row.encoding)
          ? ""
          : absl::StrCat("  encoding: ", row.encoding, "\n");
  return absl::StrCat(
      "cluster:\n  coordinator: ", IpPort(lab, "coordinator", kCoordinatorPort),
      "\n  ps: [", absl::StrJoin(ps, ", "), "]\n  workers: [",
      absl::StrJoin(workers, ", "), "]\n",
      "heartbeat:\n  interval_s: 0.1\n  timeout_s: 10\n",
      "rpc:\n  deadline_s: 60\n  connect_timeout_s: 60\n", encoding,
      IsSparse(row.model) ? SparseYaml(row) : DenseYaml(row),
      "checkpoint:\n  dir: \"\"\n  interval_s: 0\n",
      "coordinator:\n  state_dir: \"\"\n  history_interval_s: 0.25\n"
      "  history_size: 100000\n",
      "logging:\n  level: warn\n",
      // Plaintext between the namespaces' hosts (a lab no one else reaches).
      "security:\n  insecure_network: true\n");
}

// The figures of one history sample.
struct Point {
  double time_s = 0;
  double unix_s = 0;
  int64_t min_step = 0;
  int64_t max_step = 0;
  int64_t steps = 0;
  int64_t pushes = 0;
  int64_t examples = 0;
  double staleness_mean = 0;  // mean over the workers
  double staleness_p99 = 0;   // the worst worker's
  double auc = NAN;           // the best worker's last test AUC
  bool any_finished = false;
  std::map<int, double> ps_bytes;
};

Point ToPoint(const proto::HistorySample& sample, int workers) {
  Point p;
  p.time_s = sample.time_seconds();
  p.unix_s = sample.unix_seconds();
  std::map<int, int64_t> step;
  for (const proto::MemberSample& m : sample.members()) {
    if (m.role() == "ps") p.ps_bytes[m.index()] = m.report().bytes();
    if (m.role() != "worker") continue;
    step[m.index()] = static_cast<int64_t>(m.report().step());
    p.steps += m.report().step();
    p.pushes += m.report().pushes();
    p.examples += m.report().examples();
    p.staleness_mean += m.report().mean_staleness() / workers;
    p.staleness_p99 = std::max(p.staleness_p99, m.report().staleness_p99());
    const auto auc = m.report().metrics().find("auc");
    if (auc != m.report().metrics().end() && !(auc->second <= p.auc))
      p.auc = auc->second;
    p.any_finished = p.any_finished || m.report().finished();
  }
  p.min_step = static_cast<int>(step.size()) < workers ? 0 : INT64_MAX;
  for (const auto& [index, s] : step) {
    p.min_step = std::min(p.min_step, s);
    p.max_step = std::max(p.max_step, s);
  }
  return p;
}

// Fills row's figures from the history of its run.
void Measure(const proto::GetHistoryResponse& history, Probes& probes,
             Row* row) {
  std::vector<Point> points;
  for (const proto::HistorySample& s : history.samples())
    points.push_back(ToPoint(s, row->workers));
  const int steps = absl::GetFlag(FLAGS_steps);
  const Point* first = nullptr;
  const Point* last = nullptr;
  for (const Point& p : points) {
    if (std::isnan(row->startup_s) && p.min_step >= 1)
      row->startup_s = p.unix_s - row->launch_unix_s;
    if (first == nullptr && p.min_step >= absl::GetFlag(FLAGS_warmup_steps))
      first = &p;
    // A time-to-accuracy run has no step count: it ends at the target.
    const bool bounded = !IsTargetRun(*row);
    if (first != nullptr && !p.any_finished && (!bounded || p.max_step < steps))
      last = &p;
  }
  if (first == nullptr || last == nullptr || last->time_s - first->time_s < 1) {
    row->error =
        "no steady window of 1 s or more in the history (raise --steps, or "
        "lower --warmup_steps)";
    return;
  }
  const double window = last->time_s - first->time_s;
  row->window_s = window;
  row->updates_per_s = (last->pushes - first->pushes) / window;
  row->steps_per_s = (last->steps - first->steps) / window;
  row->examples_per_s = (last->examples - first->examples) / window;
  row->staleness_mean = last->staleness_mean;
  row->staleness_p99 = last->staleness_p99;
  // The launcher reports no metrics for a simulated device; the workers do.
  if (IsSparse(row->model)) row->accuracy = points.back().auc;
  const double link_bytes_per_s = absl::GetFlag(FLAGS_link_mbit) * 1e6 / 8;
  double busiest = 0;
  for (const auto& [index, bytes] : last->ps_bytes) {
    auto at = first->ps_bytes.find(index);
    if (at == first->ps_bytes.end()) continue;
    busiest = std::max(busiest, (bytes - at->second) / window);
  }
  // sparse_linear: the ps's bytes counter holds only dense traffic.
  if (IsSparse(row->model)) {
    busiest = probes.links->BusiestBytesPerS(probes.ps_ports, first->unix_s,
                                             last->unix_s);
  }
  row->ps_link_util = busiest / (2 * link_bytes_per_s);
  row->cpu_busy = probes.cpu->BusyPercent(first->unix_s, last->unix_s);
}

// User + system seconds of the reaped children and their reaped descendants:
// the launcher reaps the daemons (through the stand-in ssh), we reap it.
double ChildrenCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// "key": value's text in a flat JSON document ("" when absent).
std::string JsonField(const std::string& json, const std::string& key) {
  const std::string quoted = absl::StrCat("\"", key, "\": ");
  const size_t at = json.find(quoted);
  if (at == std::string::npos) return "";
  const size_t from = at + quoted.size();
  return json.substr(from, json.find_first_of(",\n", from) - from);
}

// Writes the row's config to config_path and checks that it loads with
// `overrides` first, so that a key this tree lacks (rpc.encoding before the
// wire encodings land) fails the row with the loader's message.
absl::Status WriteConfig(const NetnsLab& lab, const std::string& config_path,
                         const std::vector<std::string>& overrides,
                         const Row& row) {
  absl::Status written = WriteFileAtomically(config_path, ConfigYaml(lab, row));
  if (!written.ok()) return written;
  absl::StatusOr<Config> config = LoadConfig(config_path, overrides);
  if (!config.ok()) {
    std::string error = std::string(config.status().message());
    if (!IsDefaultEncoding(row.encoding)) {
      error = absl::StrCat("encoding ", row.encoding,
                           " needs the rpc.encoding key: ", error);
    }
    return absl::InvalidArgumentError(error);
  }
  return absl::OkStatus();
}

// The launcher's command line: in the "ctl" host, over the stand-in ssh.
std::vector<std::string> LauncherArgv(
    const NetnsLab& lab, const std::string& bin_dir, const std::string& ssh,
    const std::string& dir, const std::string& config_path,
    const std::vector<std::string>& overrides, bool sparse) {
  std::vector<std::string> argv = {
      lab.ip(),
      "netns",
      "exec",
      lab.host("ctl").netns,
      (fs::path(bin_dir) / "deploy/launcher").string(),
      "--config",
      config_path,
      "--run_dir",
      dir + "/run",
      "--bin_dir",
      bin_dir,
      "--ssh",
      "--ssh_command",
      ssh,
      "--progress_s",
      "5"};
  // sparse_linear: the config's own target (training.target_metric auc).
  if (!sparse) {
    argv.push_back("--accuracy_mark");
    argv.push_back(absl::GetFlag(FLAGS_target_accuracy) > 0
                       ? absl::StrCat(absl::GetFlag(FLAGS_target_accuracy))
                       : "1");
  }
  if (!overrides.empty()) {
    argv.push_back(absl::StrCat("--set=", absl::StrJoin(overrides, ",")));
  }
  return argv;
}

// Runs the launcher to its end (bounded by --row_timeout_s and Ctrl-C) and
// sets row's wall time and our CPU; its exit status, or nullopt with
// row->error set when it could not start or did not end.
std::optional<int> RunLauncher(NetnsLab& lab,
                               const std::vector<std::string>& argv,
                               const std::string& dir, Row* row) {
  const double cpu_before = ChildrenCpuSeconds();
  const absl::Time start = absl::Now();
  row->launch_unix_s = absl::ToDoubleSeconds(start - absl::UnixEpoch());
  auto launcher = Subprocess::Start("launcher", argv, dir + "/launcher.log");
  if (!launcher.ok()) {
    row->error = std::string(launcher.status().message());
    return std::nullopt;
  }
  const absl::Time deadline =
      start + absl::Seconds(absl::GetFlag(FLAGS_row_timeout_s));
  std::optional<int> status;
  while (!status.has_value() && !g_interrupted && absl::Now() < deadline) {
    status = (*launcher)->Wait(absl::Milliseconds(200));
  }
  row->wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  if (!status.has_value()) {
    (*launcher)->Stop(absl::Seconds(10));
    lab.KillProcesses();
    row->error = g_interrupted ? "interrupted" : "timed out (--row_timeout_s)";
    return std::nullopt;
  }
  lab.KillProcesses();  // nothing should be left; make sure for the next row
  row->our_cpu = 100 * (ChildrenCpuSeconds() - cpu_before) /
                 (row->wall_s * std::thread::hardware_concurrency());
  return status;
}

// Reads the run's summary.json into row (with --target_accuracy, the time to
// the target and the final accuracy); false, with row->error set, when the
// launcher exited `status` other than 0 or the run failed.
bool ReadSummary(const std::string& dir, int status, Row* row) {
  const std::string summary = ReadFile(dir + "/run/summary.json").value_or("");
  if (status != 0 || JsonField(summary, "ok") != "true") {
    row->error = absl::StrCat("launcher exited ", status, ": ",
                              JsonField(summary, "failure"), " (see ", dir,
                              "/launcher.log)");
    return false;
  }
  if (IsTargetRun(*row)) {
    double seconds = NAN, accuracy = NAN;
    if (absl::SimpleAtod(JsonField(summary, "seconds_to_target"), &seconds)) {
      row->seconds_to_target = seconds;
    } else {
      row->error = absl::StrCat("the target was never reached (see ", dir,
                                "/launcher.log)");
    }
    if (absl::SimpleAtod(JsonField(summary, "accuracy"), &accuracy)) {
      row->accuracy = accuracy;
    }
  }
  return true;
}

void RunRow(NetnsLab& lab, const std::string& bin_dir, const std::string& ssh,
            const std::string& dir, Probes& probes, Row* row) {
  fs::create_directories(dir);
  const std::string config_path = dir + "/cluster.yaml";
  const std::vector<std::string> overrides =
      MergeOverrideFragments(absl::GetFlag(FLAGS_set));
  if (absl::Status s = WriteConfig(lab, config_path, overrides, *row);
      !s.ok()) {
    row->error = std::string(s.message());
    return;
  }
  const std::optional<int> status =
      RunLauncher(lab,
                  LauncherArgv(lab, bin_dir, ssh, dir, config_path, overrides,
                               IsSparse(row->model)),
                  dir, row);
  if (!status.has_value() || !ReadSummary(dir, *status, row)) return;
  proto::GetHistoryResponse history;
  absl::Status parsed =
      FromJson(ReadFile(dir + "/run/history.json").value_or(""),
               dir + "/run/history.json", &history);
  if (!parsed.ok()) {
    row->error = std::string(parsed.message());
    return;
  }
  Measure(history, probes, row);
}

// ---- The table.
// ---------------------------------------------------------------

// v with `precision` decimals and `suffix`; "-" for NaN (unknown).
std::string Fmt(double v, int precision, const char* suffix = "") {
  return std::isnan(v) ? "-" : absl::StrFormat("%.*f%s", precision, v, suffix);
}

// --target_accuracy rows.
std::string TargetTable(const std::vector<Row>& rows, double cpu_flag) {
  std::string out =
      "| model | shards | W | s to target | speed-up | efficiency | "
      "updates/s | final accuracy | CPU busy | our CPU |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      absl::StrAppendFormat(&out, "| %s | %d | %d | error: %s |\n", r.model,
                            r.shards, r.workers, r.error);
      continue;
    }
    absl::StrAppendFormat(
        &out, "| %s | %d | %d | %s | %s | %s | %s | %s | %s%s | %s |\n",
        r.model, r.shards, r.workers, Fmt(r.seconds_to_target, 1),
        Fmt(r.speedup, 2), Fmt(r.speedup / r.workers, 2),
        Fmt(r.updates_per_s, 2), Fmt(r.accuracy, 4), Fmt(r.cpu_busy, 0, "%"),
        r.cpu_busy > cpu_flag ? " **CPU-bound?**" : "", Fmt(r.our_cpu, 0, "%"));
  }
  return out;
}

// sparse_linear rows: time to the target AUC and why it is what it is.
std::string SparseTable(const std::vector<Row>& rows, double cpu_flag) {
  std::string out =
      "| model | link Mbit/s | shards | W | s to target | speed-up | "
      "start-up s | speed-up after start-up | updates/s | examples/s | "
      "staleness mean/p99 | busiest ps link | final AUC | CPU busy | our CPU "
      "|\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  const std::string link = Fmt(absl::GetFlag(FLAGS_link_mbit), 0);
  for (const Row& r : rows) {
    if (!IsSparse(r.model)) continue;
    if (!r.error.empty()) {
      absl::StrAppendFormat(&out, "| %s | %s | %d | %d | error: %s |\n",
                            r.model, link, r.shards, r.workers, r.error);
      continue;
    }
    absl::StrAppendFormat(
        &out,
        "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s/%s | %s | %s "
        "| %s%s | %s |\n",
        r.model, link, r.shards, r.workers, Fmt(r.seconds_to_target, 1),
        Fmt(r.speedup, 2), Fmt(r.startup_s, 1), Fmt(r.train_speedup, 2),
        Fmt(r.updates_per_s, 1), Fmt(r.examples_per_s, 0),
        Fmt(r.staleness_mean, 1), Fmt(r.staleness_p99, 0),
        Fmt(100 * r.ps_link_util, 0, "%"), Fmt(r.accuracy, 4),
        Fmt(r.cpu_busy, 0, "%"), r.cpu_busy > cpu_flag ? " **CPU-bound?**" : "",
        Fmt(r.our_cpu, 0, "%"));
  }
  return out;
}

std::string Table(const std::vector<Row>& rows, double cpu_flag) {
  std::string out =
      "| model | encoding | shards | W | updates/s | steps/s | efficiency | "
      "ps link util | CPU busy | our CPU | window s |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    const std::string cpu =
        absl::StrCat(Fmt(r.cpu_busy, 0, "%"),
                     r.cpu_busy > cpu_flag ? " **CPU-bound?**" : "");
    if (!r.error.empty()) {
      absl::StrAppendFormat(&out, "| %s | %s | %d | %d | error: %s |\n",
                            r.model, r.encoding, r.shards, r.workers, r.error);
      continue;
    }
    absl::StrAppendFormat(
        &out, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n",
        r.model, r.encoding, r.shards, r.workers, Fmt(r.updates_per_s, 2),
        Fmt(r.steps_per_s, 2), Fmt(r.efficiency, 2),
        Fmt(100 * r.ps_link_util, 0, "%"), cpu, Fmt(r.our_cpu, 0, "%"),
        Fmt(r.window_s, 1));
  }
  return out;
}

absl::StatusOr<std::vector<int>> Counts(const std::string& flag,
                                        const std::string& text, int max) {
  std::vector<int> out;
  for (absl::string_view piece :
       absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int n = 0;
    if (!absl::SimpleAtoi(piece, &n) || n < 1 || n > max) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " wants counts in 1..", max, ", got '", piece, "'"));
    }
    out.push_back(n);
  }
  if (out.empty()) return absl::InvalidArgumentError("--" + flag + " is empty");
  return out;
}

// The rows to run: every model x encoding x shards x workers.
struct Grid {
  std::vector<int> workers;
  std::vector<int> shards;
  std::vector<std::string> encodings;
  std::vector<std::string> models;
};

// The grid from the flags. False (after saying why) for a bad flag.
bool ParseGrid(Grid* grid) {
  absl::StatusOr<std::vector<int>> workers =
      Counts("workers", absl::GetFlag(FLAGS_workers), 48);
  absl::StatusOr<std::vector<int>> shards =
      Counts("shards", absl::GetFlag(FLAGS_shards), 32);
  for (const auto* counts : {&workers, &shards}) {
    if (!counts->ok()) {
      std::fprintf(stderr, "scale_model: %s\n",
                   std::string(counts->status().message()).c_str());
      return false;
    }
  }
  grid->workers = *std::move(workers);
  grid->shards = *std::move(shards);
  grid->encodings =
      absl::StrSplit(absl::GetFlag(FLAGS_encodings), ',', absl::SkipEmpty());
  grid->models =
      absl::StrSplit(absl::GetFlag(FLAGS_model), ',', absl::SkipEmpty());
  for (const std::string& m : grid->models) {
    if (LayersOf(m).empty() && !IsSparse(m)) {
      std::fprintf(stderr,
                   "scale_model: --model wants mlp, mlp10x or sparse_linear, "
                   "got '%s'\n",
                   m.c_str());
      return false;
    }
  }
  if (absl::GetFlag(FLAGS_steps) <= absl::GetFlag(FLAGS_warmup_steps) + 2) {
    std::fprintf(stderr,
                 "scale_model: --steps must exceed --warmup_steps + 2\n");
    return false;
  }
  return true;
}

// Sets up the lab's hosts for the largest row (the launcher's "ctl", the
// coordinator, every ps and worker) and shapes every link to --link_mbit.
// False (after saying why) when it cannot; *hosts_made counts the hosts.
bool BuildLab(const Grid& grid, NetnsLab& lab, size_t* hosts_made) {
  const int max_workers =
      *std::max_element(grid.workers.begin(), grid.workers.end());
  const int max_shards =
      *std::max_element(grid.shards.begin(), grid.shards.end());
  std::vector<std::pair<std::string, int>> hosts = {{"ctl", 2},
                                                    {"coordinator", 10}};
  for (int i = 0; i < max_shards; ++i)
    hosts.push_back({absl::StrCat("ps", i), 11 + i});
  for (int i = 0; i < max_workers; ++i)
    hosts.push_back({absl::StrCat("worker", i), 100 + i});
  *hosts_made = hosts.size();
  const std::string why_not = lab.SetUp(hosts);
  if (!why_not.empty()) {
    std::fprintf(stderr, "scale_model: cannot build the lab: %s\n",
                 why_not.c_str());
    return false;
  }
  LinkShape shape;
  shape.rate_mbit = absl::GetFlag(FLAGS_link_mbit);
  for (const NetnsHost& h : lab.hosts()) {
    const std::string error = lab.ShapeLink(h.role, shape);
    if (!error.empty()) {
      std::fprintf(stderr, "scale_model: cannot shape %s: %s\n", h.role.c_str(),
                   error.c_str());
      return false;
    }
  }
  return true;
}

// Prints one row's figures as soon as it ran.
void PrintRow(const Row& row, double cpu_flag) {
  std::printf(
      "  %s %s S=%d W=%-2d updates/s %s  eff %s  ps link %s  CPU %s%s  "
      "ours %s  (%.0f s)%s%s%s\n",
      row.model.c_str(), row.encoding.c_str(), row.shards, row.workers,
      Fmt(row.updates_per_s, 2).c_str(), Fmt(row.efficiency, 2).c_str(),
      Fmt(100 * row.ps_link_util, 0, "%").c_str(),
      Fmt(row.cpu_busy, 0, "%").c_str(),
      row.cpu_busy > cpu_flag ? " (CPU-bound?)" : "",
      Fmt(row.our_cpu, 0, "%").c_str(), row.wall_s,
      std::isnan(row.seconds_to_target)
          ? ""
          : absl::StrFormat("  to %g in %.1f s, speed-up %s",
                            IsSparse(row.model)
                                ? row.target_auc
                                : absl::GetFlag(FLAGS_target_accuracy),
                            row.seconds_to_target, Fmt(row.speedup, 2))
                .c_str(),
      row.error.empty() ? "" : "  error: ", row.error.c_str());
  std::fflush(stdout);
}

// Runs every row of the grid (until Ctrl-C), printing each; the efficiency
// and speed-up are against the 1-worker row of the same model, encoding and
// shards.
std::vector<Row> RunRows(const Grid& grid, NetnsLab& lab,
                         const std::string& bin_dir, const std::string& ssh,
                         const std::string& run_root, Probes& probes,
                         double cpu_flag, double target_auc) {
  std::vector<Row> rows;
  for (const std::string& model : grid.models) {
    // The sparse path has one wire format: rows run once, as float32.
    for (const std::string& encoding : IsSparse(model)
                                           ? std::vector<std::string>{"float32"}
                                           : grid.encodings) {
      for (int s : grid.shards) {
        double base = NAN;          // updates/s with 1 worker
        double base_seconds = NAN;  // seconds to the target with 1 worker
        double base_train = NAN;    // the same less its start-up
        for (int w : grid.workers) {
          if (g_interrupted) break;
          Row row{w, s, encoding, model};
          row.target_auc = target_auc;
          RunRow(lab, bin_dir, ssh,
                 absl::StrCat(run_root, "/", model, "-", encoding, "-s", s,
                              "-w", w),
                 probes, &row);
          if (w == 1 && row.error.empty()) {
            base = row.updates_per_s;
            base_seconds = row.seconds_to_target;
            base_train = row.seconds_to_target - row.startup_s;
          }
          row.efficiency = row.updates_per_s / (w * base);
          row.speedup = base_seconds / row.seconds_to_target;
          row.train_speedup =
              base_train / (row.seconds_to_target - row.startup_s);
          PrintRow(row, cpu_flag);
          rows.push_back(row);
        }
      }
    }
  }
  return rows;
}

// What the table's columns mean and how the runs were made; `begin` is when
// the first row started.
std::string Legend(bool target, bool dense, double cpu_flag, absl::Time begin) {
  const std::string links = absl::StrFormat(
      "Links %.0f Mbit/s each way (tc tbf on both ends of every veth), "
      "compute.device simulated at %.0f ms per step",
      absl::GetFlag(FLAGS_link_mbit), absl::GetFlag(FLAGS_step_ms));
  const std::string cpu_legend = absl::StrFormat(
      "CPU busy: the whole machine (%u cores, other jobs included), flagged "
      "above %.0f%%; our CPU: the run's own processes' CPU seconds per second "
      "of the whole run (startup included), as a share of all cores. %.0f s "
      "in all.\n",
      std::thread::hardware_concurrency(), cpu_flag,
      absl::ToDoubleSeconds(absl::Now() - begin));
  if (!dense) return absl::StrCat(links, ". ", cpu_legend);
  return target
             ? absl::StrFormat(
                   "%s, with real gradients of real MNIST (%d training "
                   "examples, Adam %g, batch %d) computed on the CPU within "
                   "each "
                   "step, which is then padded to its time. s to target: "
                   "launch "
                   "to the first evaluation at %g (every %d steps per worker, "
                   "2000 test examples); speed-up: s(1) / s(W); efficiency: "
                   "speed-up / W; updates/s: whole pushes acknowledged per "
                   "second "
                   "(cluster) after every worker's %d warm-up steps. %s",
                   links, absl::GetFlag(FLAGS_train_examples),
                   absl::GetFlag(FLAGS_learning_rate),
                   absl::GetFlag(FLAGS_batch_size),
                   absl::GetFlag(FLAGS_target_accuracy),
                   absl::GetFlag(FLAGS_eval_every_steps),
                   absl::GetFlag(FLAGS_warmup_steps), cpu_legend)
             : absl::StrFormat(
                   "%s, %d steps per worker; the window opens once every "
                   "worker "
                   "has done %d steps and closes before the first finishes. "
                   "updates/s: whole pushes acknowledged per second (cluster); "
                   "efficiency: updates/s(W) / (W * updates/s(1)); ps link "
                   "util: "
                   "the busiest ps's bytes in+out / (2 * rate * window), over "
                   "the "
                   "window like CPU busy. %s",
                   links, absl::GetFlag(FLAGS_steps),
                   absl::GetFlag(FLAGS_warmup_steps), cpu_legend);
}

// The legend of the sparse_linear table.
std::string SparseLegend(double bayes_auc) {
  return absl::StrFormat(
      "sparse_linear: FTRL (alpha %g, beta 1) logistic regression, batch %d, "
      "on the generated click log (%d training rows streamed, seed 1; Bayes "
      "AUC %.4f on its %d test rows), real gradients on the CPU padded to "
      "each %.0f ms step. s to target: launch to the first evaluation (%d "
      "test rows, about %g a second over the cluster) at AUC >= %.4f (Bayes "
      "- %g); speed-up: s(1) / s(W), same shards and links; start-up s: "
      "launch until every worker had stepped; speed-up after start-up: the "
      "same ratio of (s to target - start-up s); updates/s, examples/s: "
      "cluster, "
      "after every worker's %d warm-up steps until the target; staleness: "
      "the workers' mean (mean over workers) and p99 (worst worker) at the "
      "end; busiest ps link: the busiest ps's veth bytes in+out (the lab "
      "switch's counters) / (2 * rate * window); final AUC: the best worker's "
      "last evaluation, the final one on every test row (the target is "
      "checked on the first %d).\n",
      absl::GetFlag(FLAGS_ftrl_alpha), absl::GetFlag(FLAGS_sparse_batch_size),
      absl::GetFlag(FLAGS_click_rows), bayes_auc,
      absl::GetFlag(FLAGS_click_test_rows), absl::GetFlag(FLAGS_step_ms),
      absl::GetFlag(FLAGS_eval_rows), absl::GetFlag(FLAGS_evals_per_s),
      bayes_auc - absl::GetFlag(FLAGS_auc_gap), absl::GetFlag(FLAGS_auc_gap),
      absl::GetFlag(FLAGS_warmup_steps), absl::GetFlag(FLAGS_eval_rows));
}

// The tables of the rows (dense, then sparse_linear) with their legends.
std::string Tables(const std::vector<Row>& rows, double cpu_flag,
                   absl::Time begin, double bayes_auc) {
  std::vector<Row> dense;
  for (const Row& r : rows)
    if (!IsSparse(r.model)) dense.push_back(r);
  const bool target = absl::GetFlag(FLAGS_target_accuracy) > 0;
  std::string out;
  if (!dense.empty()) {
    out = absl::StrCat(
        target ? TargetTable(dense, cpu_flag) : Table(dense, cpu_flag), "\n");
  }
  if (dense.size() < rows.size()) {
    absl::StrAppend(&out, SparseTable(rows, cpu_flag), "\n",
                    SparseLegend(bayes_auc));
  }
  return absl::StrCat(out, Legend(target, !dense.empty(), cpu_flag, begin));
}

// The lab's switch namespace: it names its hosts' namespaces <prefix>-<k>
// and its switch's <prefix>-sw (tests/netns_lab.cc).
std::string SwitchNetns(const NetnsLab& lab) {
  const std::string& host0 = lab.hosts().front().netns;
  return host0.substr(0, host0.rfind('-')) + "-sw";
}

// Each ps host's port on the lab's switch.
std::vector<std::string> PsPorts(const NetnsLab& lab) {
  std::vector<std::string> ports;
  for (const NetnsHost& h : lab.hosts()) {
    if (absl::StartsWith(h.role, "ps")) ports.push_back(h.port);
  }
  return ports;
}

int Main() {
  Grid grid;
  if (!ParseGrid(&grid)) return 2;
  const std::string bin_dir = BinDirOr(absl::GetFlag(FLAGS_bin_dir));
  const std::string run_root =
      fs::absolute(RunDirOr(absl::GetFlag(FLAGS_run_dir), "scale")).string();
  fs::create_directories(run_root);

  const double gap = absl::GetFlag(FLAGS_auc_gap);
  const absl::StatusOr<double> bayes_auc =
      std::any_of(grid.models.begin(), grid.models.end(), IsSparse)
          ? PrepareClickLog(bin_dir)
          : absl::StatusOr<double>(gap);
  if (!bayes_auc.ok()) {
    std::fprintf(stderr, "scale_model: %s\n",
                 bayes_auc.status().ToString().c_str());
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  NetnsLab lab(run_root, "dpsm");  // deleted on every return below
  size_t hosts = 0;
  if (!BuildLab(grid, lab, &hosts)) return 1;
  const std::string ssh = lab.WriteSsh(run_root + "/netns_ssh");
  std::printf(
      "scale_model: %zu hosts in namespaces, links %.0f Mbit/s each way, "
      "%.0f ms steps, %d steps per worker, %u cores; runs under %s\n",
      hosts, absl::GetFlag(FLAGS_link_mbit), absl::GetFlag(FLAGS_step_ms),
      absl::GetFlag(FLAGS_steps), std::thread::hardware_concurrency(),
      run_root.c_str());
  std::fflush(stdout);

  CpuSampler cpu;
  LinkSampler links(SwitchNetns(lab));
  Probes probes{&cpu, &links, PsPorts(lab)};
  const double cpu_flag = absl::GetFlag(FLAGS_cpu_flag);
  const absl::Time begin = absl::Now();
  const std::vector<Row> rows = RunRows(grid, lab, bin_dir, ssh, run_root,
                                        probes, cpu_flag, *bayes_auc - gap);
  const std::string text = Tables(rows, cpu_flag, begin, *bayes_auc);
  std::printf("\n%s", text.c_str());
  const std::string markdown = absl::GetFlag(FLAGS_markdown);
  if (!markdown.empty()) {
    absl::Status written = WriteFileAtomically(markdown, text);
    if (!written.ok()) {
      std::fprintf(stderr, "scale_model: %s\n", written.ToString().c_str());
      return 1;
    }
  }
  if (g_interrupted) return 130;
  for (const Row& r : rows) {
    if (!r.error.empty()) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "a scale model of a cluster: daemons in network namespaces, links "
      "shaped with tc, simulated compute; prints cluster updates/s and "
      "scaling efficiency per workers x shards x encoding x model");
  absl::ParseCommandLine(argc, argv);
  return downpour::bench::Main();
}
