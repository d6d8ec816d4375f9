// ps_worker: one Downpour SGD worker.
#include <cblas.h>

#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/daemon.h"
#include "common/logging.h"
#include "coordinator/member_agent.h"
#include "common/server_util.h"
#include "common/status_service.h"
#include "coordinator/coordinator_client.h"
#include "worker/backend_factory.h"
#include "worker/dataset.h"
#include "worker/downpour.h"
#include "worker/ps_client.h"

ABSL_FLAG(std::string, listen, "",
          "host:port of this worker's Status endpoint (overrides "
          "cluster.workers[index]; port 0 = any)");
ABSL_FLAG(std::string, data_path, "", "data folder (overrides data.path)");
ABSL_FLAG(std::string, device, "",
          "compute backend: auto, cpu or cuda (overrides compute.device)");
ABSL_FLAG(int, gpu, -1,
          "which GPU a cuda worker uses (overrides compute.gpu; -1 keeps it)");

namespace {

using namespace downpour;

std::vector<std::string> Overrides() {
  std::vector<std::string> overrides;
  if (!absl::GetFlag(FLAGS_data_path).empty()) {
    overrides.push_back("data.path=" + absl::GetFlag(FLAGS_data_path));
  }
  if (!absl::GetFlag(FLAGS_device).empty()) {
    overrides.push_back("compute.device=" + absl::GetFlag(FLAGS_device));
  }
  if (absl::GetFlag(FLAGS_gpu) != -1) {
    overrides.push_back(absl::StrCat("compute.gpu=", absl::GetFlag(FLAGS_gpu)));
  }
  return overrides;
}

proto::MemberReport Report(const worker::WorkerStats& stats,
                           const Counters& counters, const std::string& device) {
  proto::MemberReport report;
  report.set_step(stats.step);
  report.set_examples(stats.examples);
  report.set_examples_per_sec(stats.examples_per_sec);
  report.set_loss(stats.loss);
  report.set_accuracy(stats.accuracy);
  report.set_pulls(counters.Get("pulls"));
  report.set_pushes(counters.Get("pushes"));
  report.set_bytes(counters.Get("bytes_in") + counters.Get("bytes_out"));
  report.set_mean_staleness(stats.mean_staleness);
  report.set_finished(stats.finished);
  report.set_device(device);
  return report;
}

}  // namespace

int main(int argc, char** argv) {
  DaemonSetup setup = InitDaemon(
      argc, argv, "worker",
      "ps_worker --config FILE --index N: trains on its data partition with "
      "asynchronous Downpour SGD against the ps shards",
      /*has_index=*/true, Overrides);
  const Config& config = setup.config;
  const int index = setup.index;
  const std::string who = absl::StrCat("worker ", index);
  openblas_set_num_threads(1);
  auto spec = ModelSpec::Create(config.model);
  if (!spec.ok()) Die(who, std::string(spec.status().message()), 2);
  // cpu, cuda or auto (config.compute); a cuda worker without a usable GPU
  // stops here, saying why.
  auto made_backend =
      worker::MakeBackend(config.compute, *spec, config.training.batch_size);
  if (!made_backend.ok()) {
    Die(who, std::string(made_backend.status().message()), 2);
  }
  worker::ComputeBackend& backend = **made_backend;
  auto data = worker::LoadData(config.data, config.training.seed);
  if (!data.ok()) Die(who, std::string(data.status().message()), 2);
  if (data->train.dim != spec->layers().front()) {
    Die(who, absl::StrCat("the data has ", data->train.dim,
                          " features but model.layers[0] is ",
                          spec->layers().front()), 2);
  }

  Counters counters;
  absl::Mutex stats_mu;
  worker::WorkerStats last_stats;
  std::unique_ptr<worker::DownpourLoop> loop;
  auto current_stats = [&] {
    absl::MutexLock lock(&stats_mu);
    return loop != nullptr ? loop->stats() : last_stats;
  };
  StatusService status("worker", index, &counters, [&](proto::GetStatusResponse* r) {
    const worker::WorkerStats stats = current_stats();
    r->set_loss(stats.loss);
    r->set_accuracy(stats.accuracy);
    r->set_examples_per_sec(stats.examples_per_sec);
    r->set_device(backend.device());
    (*r->mutable_counters())["step"] = stats.step;
    (*r->mutable_counters())["examples"] = stats.examples;
    (*r->mutable_counters())["mean_staleness"] = stats.mean_staleness;
    (*r->mutable_counters())["test_loss"] = stats.test_loss;
    (*r->mutable_counters())["finished"] = stats.finished ? 1 : 0;
  });
  const std::string listen = absl::GetFlag(FLAGS_listen).empty()
                                 ? config.cluster.workers[index]
                                 : absl::GetFlag(FLAGS_listen);
  auto server = StartServer(listen, {&status}, who);
  if (!server.ok()) Die(who, std::string(server.status().message()), 1);
  status.set_address(server->address);
  WritePortFile(server->port);

  coordinator::CoordinatorClient client(config.cluster.coordinator, config.rpc, who);
  const std::string advertised = AdvertisedAddress(server->address, setup.advertise);
  auto registered = client.RegisterWorker(index, advertised);
  if (!registered.ok()) Die(who, std::string(registered.status().message()), 1);
  const proto::Partition partition = registered->partition();
  const worker::Dataset train = worker::PartitionParts(
      data->train, {partition.parts().begin(), partition.parts().end()},
      partition.num_parts());
  SPDLOG_LOGGER_INFO(Log(Logger::kWorker), "partition {}/{}: {} training examples on {}",
                     partition.part(), partition.num_parts(), train.size(),
                     backend.device());

  std::atomic<bool> stop_requested{false};
  worker::GrpcPsClient ps(*spec, &client, config.rpc, index, &counters,
                          [&] { return stop_requested.load(); });
  absl::Status connected = ps.Connect();
  if (!connected.ok()) Die(who, std::string(connected.message()), 1);

  worker::DownpourLoop::Options options;
  options.training = config.training;
  options.worker_index = index;
  {
    absl::MutexLock lock(&stats_mu);
    loop = std::make_unique<worker::DownpourLoop>(*spec, &backend, &ps, &train,
                                                  &data->test, options);
  }
  std::vector<int> parts(partition.parts().begin(), partition.parts().end());
  MemberAgent agent(
      &client, "worker", index, advertised, config.heartbeat.interval_s,
      [&] { return client.RegisterWorker(index, advertised).status(); },
      [&] { return Report(current_stats(), counters, backend.device()); },
      [&](const proto::HeartbeatResponse& response) {
        const std::vector<int> now(response.partition().parts().begin(),
                                   response.partition().parts().end());
        if (!now.empty() && now != parts) {
          SPDLOG_LOGGER_INFO(Log(Logger::kWorker), "data parts now [{}] (were [{}])",
                             absl::StrJoin(now, ", "), absl::StrJoin(parts, ", "));
          parts = now;
          loop->ReplaceTrainingData(std::make_shared<const worker::Dataset>(
              worker::PartitionParts(data->train, parts,
                                     response.partition().num_parts())));
        }
        if (response.stop() && !stop_requested.exchange(true)) {
          SPDLOG_LOGGER_INFO(Log(Logger::kWorker), "coordinator says stop: {}",
                             response.stop_reason());
          loop->Stop();
        }
      });
  agent.Start();

  absl::Status result;
  absl::Notification done;
  std::thread trainer([&] {
    result = loop->Run();
    done.Notify();
  });
  std::thread progress([&] {
    while (!done.WaitForNotificationWithTimeout(absl::Seconds(5))) {
      const worker::WorkerStats s = loop->stats();
      SPDLOG_LOGGER_INFO(Log(Logger::kWorker),
                         "step {} | {:.0f} examples/s | loss {:.4f} | test accuracy {:.4f}",
                         s.step, s.examples_per_sec, s.loss, s.accuracy);
    }
  });
  const int signal = WaitForShutdownSignal(&done);
  if (signal != 0) {
    SPDLOG_LOGGER_INFO(Log(Logger::kWorker), "signal {}: pushing what is owed and stopping", signal);
    stop_requested = true;
    loop->Stop();
  }
  trainer.join();
  progress.join();
  agent.Stop();  // the last heartbeat carries the final figures
  server->server->Shutdown(DeadlineIn(1));
  if (!result.ok()) {
    SPDLOG_LOGGER_ERROR(Log(Logger::kWorker), "{}", std::string(result.message()));
    return 1;
  }
  return 0;
}
