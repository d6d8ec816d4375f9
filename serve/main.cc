// serve: answers predictions of an exported sparse model over gRPC
// (proto/serve.proto) and swaps in a newer file when it changes.
#include <signal.h>
#include <unistd.h>

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "rpc/accept_watch.h"
#include "rpc/daemon.h"
#include "serve/serve_node.h"

ABSL_FLAG(std::string, model, "",
          "the exported model to serve (required): the .npz `psctl export "
          "--out PATH` writes. Replace it by rename (psctl export does) and "
          "the daemon swaps the new file in; until it exists the daemon is "
          "NOT_SERVING and Predict answers UNAVAILABLE");
ABSL_FLAG(std::string, listen, "127.0.0.1:7300",
          "host:port to serve on (port 0 = any; 0.0.0.0:7300 for every "
          "interface)");
ABSL_FLAG(double, reload_interval_s, 1,
          "how often to stat --model and load it when it changed (mtime, "
          "size or inode)");
ABSL_FLAG(int, reload_nice, 10,
          "nice value of the thread that loads a changed file (0 = as the "
          "daemon): a large model takes a core while it loads; niced, "
          "requests keep the CPU and the swap comes a little later");
ABSL_FLAG(int64_t, max_examples, 65536,
          "the most examples one Predict request may hold");
ABSL_FLAG(int64_t, max_request_bytes, 16 << 20,
          "the most bytes of keys, values and offsets one Predict request "
          "may hold");

int main(int argc, char** argv) {
  using namespace downpour;
  // Debian's Abseil is built without NDEBUG, so by default every Mutex
  // acquisition records lock-order edges in a process-wide graph (gRPC's
  // locks too): 3.7% of the daemon's CPU samples in GraphCycles and 4.1% in
  // absl's Mutex at 64 clients (perf); alternating rounds of serve_bench
  // gave 14.0-15.2k requests/s with it, 14.8-17.4k without. Lock order is
  // checked by clang's thread-safety annotations and by the tests, which
  // keep the detection on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  DaemonSetup setup = InitDaemon(
      argc, argv, "serve",
      "serve --config FILE --model model.npz [--listen HOST:PORT]: answers "
      "Predict for an exported sparse model (psctl export) and swaps in a "
      "newer file when it changes; docs/SERVING.md",
      /*has_index=*/false);
  serve::ServeNode::Options options;
  options.server.model_path = absl::GetFlag(FLAGS_model);
  if (options.server.model_path.empty()) {
    Die("serve",
        "--model PATH is required: the .npz `psctl export --out PATH` "
        "writes; see --help",
        kExitConfig);
  }
  options.server.reload_interval =
      absl::Seconds(absl::GetFlag(FLAGS_reload_interval_s));
  options.server.reload_nice = absl::GetFlag(FLAGS_reload_nice);
  options.server.max_examples = absl::GetFlag(FLAGS_max_examples);
  options.server.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  options.listen = absl::GetFlag(FLAGS_listen);

  auto node = serve::ServeNode::Start(std::move(options));
  if (!node.ok()) {
    // 1: the address could not be served, which a restart may cure; 2: the
    // model file or the flags, which it cannot.
    Die("serve", std::string(node.status().message()),
        absl::IsUnavailable(node.status()) ? kExitFailure : kExitConfig);
  }
  WritePortFile((*node)->port());
  // A listener that died (gRPC stops accepting after running out of file
  // descriptors) ends the daemon like SIGTERM, then exits 1 to be restarted.
  AcceptWatch watch("serve", (*node)->address(),
                    [] { kill(getpid(), SIGTERM); });
  const int signal = WaitForShutdownSignal();
  SPDLOG_LOGGER_INFO(Log(Logger::kServe), "signal {}: shutting down", signal);
  (*node)->Stop();
  return watch.stuck() ? kExitFailure : 0;
}
