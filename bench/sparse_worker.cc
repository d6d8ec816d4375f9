// bench/sparse_worker: a sparse worker's examples per second with
// communication on against the same worker with communication off (issue
// 46): the real SparseLoop on a streamed click log in Criteo's format, one
// worker against in-process ps shards over real loopback gRPC (LocalCluster),
// three ways in one run, each rep in the same order:
//   off         the same steps without talking to the ps (rows and dense
//               parameters stay zero, nothing is pushed); the next batch is
//               drawn and its keys sorted in the background, as overlap does
//   after_push  each step pulls its rows, computes, and waits for its push
//               (training.fetch after_push)
//   overlap     step t+1's rows are pulled while step t computes and pushes
//               go out in the background (training.fetch overlap,
//               max_pushes_in_flight 1)
//
//   bazel build -c opt //bench:sparse_worker //bench/criteo:gen_criteo
//   bazel-bin/bench/criteo/gen_criteo --out /tmp/c/train.txt --bytes 100M \
//       --test_out /tmp/c/test.txt --test_rows 1000
//   bazel-bin/bench/sparse_worker --train=/tmp/c/train.txt
//       --test=/tmp/c/test.txt
//
// Prints, per model and mode, the median examples/s over --reps, the ratio
// to `off`, the process's CPU time per example and its cores in use (CPU
// seconds / wall seconds: worker and ps together), the training thread's
// shares of waiting for its pull and its
// push, and the staleness of its pushes (updates applied to the dense
// blocks between the pull and the push: the worker's own pushes in flight,
// as one worker runs).
#include <time.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "bench/local_cluster.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "data/input_parts.h"
#include "worker/backend_factory.h"
#include "worker/grpc_ps_client.h"
#include "worker/sparse_loop.h"
#include "worker/sparse_stream.h"

ABSL_FLAG(std::string, config, "deploy/configs/criteo_stream.yaml",
          "the job's YAML (model, optimizer, training.batch_size)");
ABSL_FLAG(std::string, train, "", "a Criteo-format training file (required)");
ABSL_FLAG(std::string, test, "", "a Criteo-format test file (required)");
ABSL_FLAG(std::string, models, "sparse_linear,wide_deep",
          "model.type values, comma-separated");
ABSL_FLAG(int, shards, 1, "ps shards (in this process)");
ABSL_FLAG(int, steps, 400, "training steps per sample");
ABSL_FLAG(int, reps, 3, "samples per figure (median)");
ABSL_FLAG(std::vector<std::string>, set, {},
          "config overrides, section.key=value, as the launcher's --set");

namespace downpour::bench {
namespace {

constexpr const char* kModes[] = {"off", "after_push", "overlap"};

struct Sample {
  double examples_per_s = 0;
  double cpu_us_per_example = 0;  // the whole process: worker and ps
  double cores = 0;               // process CPU seconds / wall seconds
  double wait_pull = 0, wait_push = 0;
  double staleness_mean = 0, staleness_p99 = 0;
};

Config JobConfig(const std::string& model) {
  std::vector<std::string> sets = {
      absl::StrCat("model.type=", model),
      absl::StrCat("data.path=", absl::GetFlag(FLAGS_train)),
      absl::StrCat("data.test_path=", absl::GetFlag(FLAGS_test)),
      "data.eval_rows=100",
      "training.eval_every_steps=0",
      absl::StrCat("training.steps=", absl::GetFlag(FLAGS_steps)),
      "rpc.deadline_s=30",
      "rpc.connect_timeout_s=10",
      "cluster.replication=1",
  };
  if (model == "wide_deep") {
    sets.push_back("wide_deep.dim=8");
    sets.push_back("wide_deep.hidden=[32, 16]");
  }
  for (const std::string& s : absl::GetFlag(FLAGS_set)) sets.push_back(s);
  auto config = LoadConfig(absl::GetFlag(FLAGS_config), sets);
  CheckOrExit(config.status(), "sparse_worker", "--config");
  config->cluster.ps.assign(absl::GetFlag(FLAGS_shards), "127.0.0.1:0");
  config->cluster.workers.assign(1, "127.0.0.1:0");
  return *std::move(config);
}

Sample TrainOnce(const Config& config, const ModelSpec& spec,
                 worker::SparsePs* ps, worker::ComputeBackend* backend,
                 const std::string& mode) {
  auto source = worker::OpenStreamSource(config.data, spec.task());
  CheckOrExit(source.status(), "sparse_worker", "data");
  worker::StreamOptions stream;
  stream.files = source->train_files;
  stream.plan = data::PlanParts(stream.files, 1);
  stream.parse = source->parse;
  stream.epochs = 0;  // training.steps ends it
  stream.shuffle_window = static_cast<size_t>(config.data.shuffle_window);
  stream.seed = config.training.seed;
  auto batches = std::make_unique<worker::StreamingBatches>(std::move(stream));
  CheckOrExit(batches->SetParts({worker::PartProgress{}}), "sparse_worker",
              "parts");
  worker::SparseLoop::Options options;
  options.training = config.training;
  // off draws and sorts the next batch in the background as overlap does:
  // the same worker, only without the ps.
  options.training.fetch =
      mode == "after_push" ? FetchMode::kAfterPush : FetchMode::kOverlap;
  options.num_shards = static_cast<int>(config.cluster.ps.size());
  options.no_communication = mode == "off";
  options.backend = backend;
  worker::SparseLoop loop(spec, ps, std::move(batches), nullptr, options);
  timespec t0, t1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  const absl::Time wall0 = absl::Now();
  CheckOrExit(loop.Run(), "sparse_worker", mode);
  const double wall = absl::ToDoubleSeconds(absl::Now() - wall0);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
  const double cpu = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
  const worker::WorkerStats s = loop.stats();
  Sample sample;
  sample.examples_per_s = s.examples_per_sec;
  sample.cpu_us_per_example =
      s.examples > 0 ? 1e6 * cpu / static_cast<double>(s.examples) : 0;
  sample.cores = wall > 0 ? cpu / wall : 0;
  sample.wait_pull = s.share_wait_pull;
  sample.wait_push = s.share_wait_push;
  sample.staleness_mean = s.mean_staleness;
  sample.staleness_p99 = s.staleness_p99;
  return sample;
}

void RunModel(const std::string& model) {
  const Config config = JobConfig(model);
  auto cluster = LocalCluster::Start(config);
  CheckOrExit(cluster.status(), "sparse_worker", "start cluster");
  auto spec = ModelSpec::Create(config.model);
  CheckOrExit(spec.status(), "sparse_worker", "model");
  Counters counters;
  worker::GrpcPsClient client(*spec, (*cluster)->coordinator_client(),
                              config.rpc, 0, &counters);
  CheckOrExit(client.Connect(), "sparse_worker", "connect");
  std::unique_ptr<worker::ComputeBackend> backend;
  if (model == "wide_deep") {
    auto made =
        worker::MakeBackend(config.compute, *spec, config.training.batch_size);
    CheckOrExit(made.status(), "sparse_worker", "backend");
    backend = *std::move(made);
  }
  TrainOnce(config, *spec, &client, backend.get(), "overlap");  // warm up
  std::vector<std::vector<Sample>> samples(3);
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    for (int m = 0; m < 3; ++m) {
      samples[m].push_back(
          TrainOnce(config, *spec, &client, backend.get(), kModes[m]));
    }
  }
  auto median = [](const std::vector<Sample>& v, double Sample::*field) {
    std::vector<double> x;
    for (const Sample& s : v) x.push_back(s.*field);
    return Median(x);
  };
  const double off = median(samples[0], &Sample::examples_per_s);
  for (int m = 0; m < 3; ++m) {
    const double rate = median(samples[m], &Sample::examples_per_s);
    absl::PrintF(
        "%-13s %-10s %12.0f %8.2f %8.2f %6.2f %9.1f %9.1f %9.2f %9.1f\n", model,
        kModes[m], rate, rate / off,
        median(samples[m], &Sample::cpu_us_per_example),
        median(samples[m], &Sample::cores),
        100 * median(samples[m], &Sample::wait_pull),
        100 * median(samples[m], &Sample::wait_push),
        median(samples[m], &Sample::staleness_mean),
        median(samples[m], &Sample::staleness_p99));
  }
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "a sparse worker's examples/s with communication on (after_push, "
      "overlap) against off, on a Criteo-format log; see the source's header");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_train).empty() || absl::GetFlag(FLAGS_test).empty()) {
    std::fprintf(stderr,
                 "sparse_worker: --train and --test name Criteo-format files "
                 "(bench/criteo/gen_criteo writes them)\n");
    return 2;
  }
  absl::PrintF(
      "== sparse worker: %d steps a sample, medians of %d, %d ps shard(s) in "
      "this process over 127.0.0.1, one worker ==\n",
      absl::GetFlag(FLAGS_steps), absl::GetFlag(FLAGS_reps),
      absl::GetFlag(FLAGS_shards));
  absl::PrintF("%-13s %-10s %12s %8s %8s %6s %9s %9s %9s %9s\n", "model",
               "mode", "examples/s", "vs off", "cpu us/ex", "cores", "pull %",
               "push %", "stale", "stale99");
  for (const std::string& model : std::vector<std::string>(
           absl::StrSplit(absl::GetFlag(FLAGS_models), ','))) {
    downpour::bench::RunModel(model);
  }
  return 0;
}
