// Keeps deploy/ in step with the real daemons: every --flag that a Kubernetes
// manifest, a systemd unit or a Dockerfile passes to a binary is one that
// binary accepts (read from its --helpfull), the Kubernetes cluster file loads,
// the replica counts match it, and every pod has gRPC health probes on its
// port. Where the tools are installed it also runs the schema validators:
// systemd-analyze verify (Debian's systemd), and, with
// DOWNPOUR_K8S_VALIDATOR_DIR set by deploy/validate.sh --install-only,
// kubernetes-models (npm) for the manifests and dockerfile-utils (npm) for the
// Dockerfiles.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "yaml-cpp/yaml.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::Not;

// Binary name as it appears in a command -> its path under the runfiles.
const std::map<std::string, std::string>& Binaries() {
  static const auto* binaries = new std::map<std::string, std::string>{
      {"coordinator", "coordinator/coordinator"},
      {"ps_server", "server/ps_server"},
      {"ps_worker", "worker/ps_worker"},
      {"psctl", "tools/psctl"}};
  return *binaries;
}

std::string Runfile(const std::string& path) {
  return (fs::path(testing::BinDir()) / path).string();
}

// Runs `binary --helpfull` and returns the flag names it lists.
std::set<std::string> AcceptedFlags(const std::string& binary) {
  const std::string log = testing::TestDir() + "/" + binary + ".help";
  auto process = Subprocess::Start(
      binary, {Runfile(Binaries().at(binary)), "--helpfull"}, log);
  EXPECT_TRUE(process.ok());
  if (!process.ok()) return {};
  (*process)->Wait(absl::Seconds(60));
  const std::string text = ReadFile(log).value_or("");
  std::set<std::string> flags;
  const std::regex definition(R"(^ {4}--([a-z0-9_]+) \()");
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::smatch match;
    const std::string l(line);
    if (std::regex_search(l, match, definition)) flags.insert(match[1]);
  }
  EXPECT_GT(flags.size(), 3u) << binary << " --helpfull printed:\n" << text;
  return flags;
}

struct FlagUse {
  std::string binary;
  std::string flag;
  std::string where;
};

// Finds "<.../binary> ... --flag ..." in a command line (shell or exec form).
void ScanCommand(const std::string& command, const std::string& where,
                 std::vector<FlagUse>* uses) {
  std::string binary;
  for (absl::string_view word :
       absl::StrSplit(command, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    word = absl::StripPrefix(absl::StripSuffix(word, ","), "[");
    word = absl::StripSuffix(absl::StripSuffix(word, ","), "]");
    word = absl::StripPrefix(absl::StripSuffix(word, "\""), "\"");
    const std::string base = fs::path(std::string(word)).filename().string();
    if (Binaries().count(base) && absl::StrContains(word, "/")) {
      binary = base;
    } else if (!binary.empty() && absl::StartsWith(word, "--")) {
      std::string flag(word.substr(2));
      flag = flag.substr(0, flag.find('='));
      uses->push_back({binary, flag, where});
    } else if (word == "&&" || word == ";") {
      binary.clear();
    }
  }
}

std::vector<std::string> Files(const std::string& dir,
                               const std::string& suffix) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(Runfile(dir))) {
    if (absl::EndsWith(entry.path().string(), suffix))
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<YAML::Node> K8sObjects() {
  std::vector<YAML::Node> objects;
  for (const std::string& file : Files("deploy/k8s", ".yaml")) {
    for (const YAML::Node& doc : YAML::LoadAllFromFile(file)) {
      if (doc.IsMap()) objects.push_back(doc);
    }
  }
  return objects;
}

// Containers of a workload object, or none.
std::vector<YAML::Node> Containers(const YAML::Node& object) {
  std::vector<YAML::Node> out;
  // yaml-cpp throws when indexing a missing key's node: step by step.
  const YAML::Node spec = object["spec"];
  if (!spec || !spec.IsMap() || !spec["template"]) return out;
  const YAML::Node pod = spec["template"]["spec"];
  if (!pod) return out;
  for (const char* key : {"containers", "initContainers"}) {
    if (pod[key]) {
      for (const YAML::Node& c : pod[key]) out.push_back(c);
    }
  }
  return out;
}

std::string Join(const YAML::Node& list) {
  std::vector<std::string> words;
  if (list) {
    for (const YAML::Node& w : list) words.push_back(w.as<std::string>());
  }
  return absl::StrJoin(words, " ");
}

std::vector<FlagUse> AllFlagUses() {
  std::vector<FlagUse> uses;
  for (const YAML::Node& object : K8sObjects()) {
    for (const YAML::Node& c : Containers(object)) {
      ScanCommand(absl::StrCat(Join(c["command"]), " ", Join(c["args"])),
                  absl::StrCat("k8s ", object["kind"].as<std::string>(), " ",
                               object["metadata"]["name"].as<std::string>()),
                  &uses);
    }
  }
  for (const std::string& unit : Files("deploy/systemd", ".service")) {
    std::ifstream in(unit);
    for (std::string line; std::getline(in, line);) {
      if (absl::StartsWith(line, "Exec"))
        ScanCommand(line.substr(line.find('=') + 1), unit, &uses);
    }
  }
  for (const std::string& dockerfile : Files("deploy/docker", ".Dockerfile")) {
    std::ifstream in(dockerfile);
    std::string entrypoint, cmd, healthcheck, previous;
    for (std::string line; std::getline(in, line);) {
      std::string text = absl::StrCat(previous, line);
      if (absl::EndsWith(text, "\\")) {  // continued on the next line
        previous = text.substr(0, text.size() - 1);
        continue;
      }
      previous.clear();
      if (absl::StartsWith(text, "ENTRYPOINT")) entrypoint = text.substr(10);
      if (absl::StartsWith(text, "CMD")) cmd = text.substr(3);
      if (absl::StartsWith(text, "HEALTHCHECK")) healthcheck = text;
    }
    ScanCommand(absl::StrCat(entrypoint, " ", cmd), dockerfile, &uses);
    ScanCommand(healthcheck, dockerfile, &uses);
  }
  return uses;
}

TEST(DeployManifestsTest, EveryFlagPassedIsOneTheBinaryAccepts) {
  std::map<std::string, std::set<std::string>> accepted;
  for (const auto& [name, path] : Binaries())
    accepted[name] = AcceptedFlags(name);
  const std::vector<FlagUse> uses = AllFlagUses();
  std::set<std::string> binaries_seen;
  for (const FlagUse& use : uses) {
    binaries_seen.insert(use.binary);
    EXPECT_TRUE(accepted[use.binary].count(use.flag))
        << use.where << " passes --" << use.flag << " to " << use.binary
        << ", which does not accept it";
  }
  // The scan found the daemons in the manifests, units and Dockerfiles.
  EXPECT_EQ(binaries_seen, (std::set<std::string>{"coordinator", "ps_server",
                                                  "ps_worker", "psctl"}));
  EXPECT_GT(uses.size(), 20u);
}

TEST(DeployManifestsTest, ScannerSeesFlagsInEveryForm) {
  std::vector<FlagUse> uses;
  ScanCommand(
      "exec /opt/downpour/bin/ps_server --config /etc/x.yaml --index "
      "\"${HOSTNAME##*-}\"",
      "shell", &uses);
  ScanCommand(
      "[\"/opt/downpour/bin/psctl\", \"health\", \"--address\", "
      "\"127.0.0.1:7000\"]",
      "exec", &uses);
  ScanCommand("/bin/ps_worker --set=a.b=1 && /bin/true --not_ours", "chain",
              &uses);
  ASSERT_EQ(uses.size(), 4u);
  EXPECT_EQ(uses[0].flag, "config");
  EXPECT_EQ(uses[1].flag, "index");
  EXPECT_EQ(uses[2].binary, "psctl");
  EXPECT_EQ(uses[2].flag, "address");
  EXPECT_EQ(uses[3].flag, "set");
}

TEST(DeployManifestsTest, KubernetesClusterFileLoadsAndCountsMatch) {
  std::string cluster_yaml;
  int ps_replicas = -1, worker_completions = -1, joined_completions = -1;
  int joined_ps = 0;
  for (const YAML::Node& object : K8sObjects()) {
    const std::string kind = object["kind"].as<std::string>();
    const std::string name =
        object["metadata"] ? object["metadata"]["name"].as<std::string>() : "";
    if (kind == "ConfigMap")
      cluster_yaml = object["data"]["cluster.yaml"].as<std::string>();
    if (kind == "StatefulSet" && name == "downpour-ps")
      ps_replicas = object["spec"]["replicas"].as<int>();
    // ps-joined.yaml: ps that join the running job, each a new shard (no
    // --index at its first start; the pod script finds its index after).
    if (kind == "StatefulSet" && name == "downpour-ps-joined") {
      ++joined_ps;
      const std::string script = Join(Containers(object)[0]["args"]);
      EXPECT_THAT(script, ::testing::HasSubstr("--join"));
      EXPECT_THAT(script, ::testing::HasSubstr("--advertise \"$me\""));
    }
    if (kind == "Job" && name == "downpour-workers")
      worker_completions = object["spec"]["completions"].as<int>();
    // workers-joined.yaml: workers that join the running job.
    if (kind == "Job" && name == "downpour-workers-joined") {
      joined_completions = object["spec"]["completions"].as<int>();
      std::vector<std::string> args;
      for (const YAML::Node& c : Containers(object)) {
        for (const YAML::Node& a : c["args"])
          args.push_back(a.as<std::string>());
      }
      EXPECT_THAT(args, Contains("--join"));
      EXPECT_THAT(args, Not(Contains("--index")));
    }
  }
  ASSERT_FALSE(cluster_yaml.empty());
  absl::StatusOr<Config> config =
      ParseConfig(cluster_yaml, "deploy/k8s/configmap.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(ps_replicas, static_cast<int>(config->cluster.ps.size()));
  EXPECT_EQ(worker_completions,
            static_cast<int>(config->cluster.workers.size()));
  ASSERT_GT(joined_completions, 0) << "deploy/k8s/workers-joined.yaml";
  EXPECT_EQ(joined_ps, 1) << "deploy/k8s/ps-joined.yaml";
  EXPECT_LE(joined_completions,
            config->cluster.max_workers -
                static_cast<int>(config->cluster.workers.size()))
      << "the joining workers need free slots (cluster.max_workers)";
}

TEST(DeployManifestsTest, ExampleConfigsLoad) {
  const std::vector<std::string> configs = Files("deploy/configs", ".yaml");
  EXPECT_GE(configs.size(), 2u);
  for (const std::string& file : configs) {
    absl::StatusOr<Config> config = LoadConfig(file);
    EXPECT_TRUE(config.ok()) << config.status();
  }
}

TEST(DeployManifestsTest, EveryPodHasGrpcHealthProbesOnItsPort) {
  int containers = 0;
  for (const YAML::Node& object : K8sObjects()) {
    for (const YAML::Node& c : Containers(object)) {
      ++containers;
      const std::string name = c["name"].as<std::string>();
      ASSERT_TRUE(c["ports"]) << name;
      const int port = c["ports"][0]["containerPort"].as<int>();
      for (const char* probe : {"readinessProbe", "livenessProbe"}) {
        ASSERT_TRUE(c[probe]) << name << " has no " << probe;
        if (c[probe]["grpc"]) {  // plaintext: Kubernetes' own gRPC probe
          EXPECT_EQ(c[probe]["grpc"]["port"].as<int>(), port)
              << name << " " << probe;
          continue;
        }
        // TLS: psctl checks grpc.health.v1 with the config's security.
        ASSERT_TRUE(c[probe]["exec"])
            << name << " has no gRPC health " << probe;
        const std::string command = Join(c[probe]["exec"]["command"]);
        EXPECT_THAT(command, ::testing::HasSubstr("psctl health --address"))
            << name << " " << probe;
        EXPECT_THAT(command, ::testing::HasSubstr(absl::StrCat(":", port, " ")))
            << name << " " << probe;
        EXPECT_THAT(command, ::testing::HasSubstr("--config /etc/downpour/"))
            << name << " " << probe;
      }
      EXPECT_TRUE(c["resources"]["requests"]["cpu"]) << name;
      if (name == "worker") {
        EXPECT_TRUE(c["resources"]["limits"]["nvidia.com/gpu"])
            << "workers request a GPU";
      }
    }
  }
  // coordinator, ps, workers, workers and ps that join
  EXPECT_EQ(containers, 5);
}

// Runs `argv`, returns (exit status, output).
std::pair<int, std::string> RunTool(const std::string& name,
                                    const std::vector<std::string>& argv) {
  const std::string log = testing::TestDir() + "/" + name + ".out";
  auto process = Subprocess::Start(name, argv, log);
  if (!process.ok()) return {-1, std::string(process.status().message())};
  const int status = (*process)->Wait(absl::Seconds(120)).value_or(-1);
  return {status, ReadFile(log).value_or("")};
}

TEST(DeployManifestsTest, SystemdUnitsVerify) {
  const char* analyze = "/usr/bin/systemd-analyze";
  if (!fs::exists(analyze))
    GTEST_SKIP() << "systemd-analyze not installed (Debian: systemd)";
  // verify insists that ExecStart binaries exist: point the units at ours.
  const std::string dir = testing::TestDir() + "/units";
  fs::create_directories(dir);
  std::vector<std::string> argv = {analyze, "verify"};
  for (const std::string& unit : Files("deploy/systemd", ".service")) {
    std::string text = ReadFile(unit).value_or("");
    for (const auto& [name, path] : Binaries()) {
      text = std::regex_replace(
          text, std::regex("/opt/downpour/bin/" + name + "\\b"), Runfile(path));
    }
    std::string file = fs::path(unit).filename().string();
    if (absl::StrContains(file, "@."))
      file = absl::StrReplaceAll(file, {{"@.", "@0."}});
    std::ofstream(dir + "/" + file) << text;
    argv.push_back(dir + "/" + file);
  }
  const auto [status, output] = RunTool("systemd-analyze", argv);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, ::testing::Not(::testing::HasSubstr("Unknown")))
      << output;
}

// The npm validators, installed by deploy/validate.sh --install-only.
std::string ValidatorDir() {
  const char* dir = std::getenv("DOWNPOUR_K8S_VALIDATOR_DIR");
  if (dir == nullptr ||
      !fs::exists(fs::path(dir) / "node_modules/kubernetes-models"))
    return "";
  return dir;
}

TEST(DeployManifestsTest, KubernetesSchemaValidation) {
  const std::string dir = ValidatorDir();
  if (dir.empty() || !fs::exists("/usr/bin/node")) {
    GTEST_SKIP()
        << "kubernetes-models not installed: run ./deploy/validate.sh (or set "
           "DOWNPOUR_K8S_VALIDATOR_DIR to its install folder)";
  }
  std::vector<std::string> argv = {
      "/usr/bin/env", "NODE_PATH=" + dir + "/node_modules", "/usr/bin/node",
      Runfile("deploy/k8s/validate.js")};
  for (const std::string& file : Files("deploy/k8s", ".yaml"))
    argv.push_back(file);
  const auto [status, output] = RunTool("k8s-validate", argv);
  EXPECT_EQ(status, 0) << output;
  // Every object of the manifests (the kustomization itself is no
  // Kubernetes object).
  int objects = 0;
  for (const YAML::Node& object : K8sObjects()) {
    objects += object["kind"].as<std::string>() != "Kustomization";
  }
  EXPECT_THAT(output, ::testing::HasSubstr(
                          absl::StrCat(objects, " objects valid, 0 invalid")))
      << output;
}

TEST(DeployManifestsTest, DockerfilesLint) {
  const std::string dir = ValidatorDir();
  const std::string lint = dir + "/node_modules/.bin/dockerfile-utils";
  if (dir.empty() || !fs::exists(lint) || !fs::exists("/usr/bin/node")) {
    GTEST_SKIP() << "dockerfile-utils not installed: run ./deploy/validate.sh";
  }
  for (const std::string& file : Files("deploy/docker", ".Dockerfile")) {
    const auto [status, output] =
        RunTool("dockerfile-lint", {"/usr/bin/node", lint, "lint", file});
    EXPECT_EQ(status, 0) << file << ":\n" << output;
  }
}

}  // namespace
}  // namespace downpour
