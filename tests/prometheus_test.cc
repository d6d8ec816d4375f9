// Prometheus against a real local cluster (docs/OPERATIONS.md, "Prometheus"):
// a coordinator, 2 ps, a standby and a sparse worker serve /metrics
// (metrics.port_offset), Debian's /usr/bin/prometheus scrapes them every
// second with deploy/prometheus/alerts.yml loaded, and PromQL over its HTTP
// API finds every daemon's series (rpc/prometheus_text.h), the shard the
// standby does not back up, that alert pending, and data behind every query
// of deploy/prometheus/grafana-dashboard.json. With security.tls (mutual, and
// role tokens, certificates from deploy/make_certs.sh) every daemon serves
// /metrics over HTTPS and Prometheus scrapes it with the CA, a client
// certificate and the reader token. promtool checks the example config and
// rules and runs the rules' unit tests. Skipped without the `prometheus`
// package (tests/run_all.sh installs it).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/status.pb.h"
#include "rpc/security.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;

constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr char kPromtool[] = "/usr/bin/promtool";
constexpr char kSkip[] =
    "Debian's prometheus package is not installed (/usr/bin/prometheus, "
    "/usr/bin/promtool): apt-get install prometheus (tests/run_all.sh "
    "installs it through deploy/install_deps.sh)";
// How long one check waits for Prometheus to have what it asks: a scrape a
// second, so data show within a few seconds on an idle machine.
constexpr absl::Duration kPatience = absl::Seconds(60);

std::string Example(const std::string& file) {
  return (fs::path(testing::BinDir()) / "deploy/prometheus" / file).string();
}

// The alert rules alerts.yml defines (its "- alert:" lines).
int AlertRules() {
  std::ifstream in(Example("alerts.yml"));
  int rules = 0;
  for (std::string line; std::getline(in, line);) {
    rules +=
        absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "- alert:");
  }
  return rules;
}

// A daemon of the test's cluster: its gRPC and /metrics addresses.
struct Member {
  std::string role;
  int index;
  std::string grpc;
  std::string metrics;
};

// One sample of an instant vector.
struct Sample {
  std::map<std::string, std::string> labels;
  double value = NAN;
};

std::string Describe(const std::vector<Sample>& samples) {
  std::vector<std::string> out;
  for (const Sample& s : samples) {
    std::vector<std::string> labels;
    for (const auto& [k, v] : s.labels)
      labels.push_back(absl::StrCat(k, "=", v));
    out.push_back(absl::StrCat("{", absl::StrJoin(labels, ","), "} ", s.value));
  }
  return absl::StrCat("[", absl::StrJoin(out, "; "), "]");
}

// `promtool args...`: its exit status, its output in *output.
int Promtool(std::vector<std::string> args, std::string* output) {
  static int runs = 0;
  const std::string log =
      absl::StrCat(testing::TestDir(), "/promtool-", ++runs, ".log");
  args.insert(args.begin(), kPromtool);
  const int status = testing::RunToEnd(args, log);
  *output = testing::ReadText(log);
  return status;
}

// Every sample finite and > 0, and `n` of them.
std::function<bool(const std::vector<Sample>&)> Positive(size_t n) {
  return [n](const std::vector<Sample>& s) {
    return s.size() == n &&
           std::all_of(s.begin(), s.end(), [](const Sample& x) {
             return std::isfinite(x.value) && x.value > 0;
           });
  };
}

class PrometheusTest : public testing::DaemonJobTest {
 protected:
  void SetUp() override {
    if (!fs::exists(kPrometheus) || !fs::exists(kPromtool))
      GTEST_SKIP() << kSkip;
    dir_ = testing::TestDir();
  }

  void TearDown() override {
    testing::DaemonJobTest::TearDown();
    UninstallSecurity();
  }

  // The job: sparse_linear (FTRL) over 64-bit ids on 2 ps shards, one
  // standby (so one shard has a backup and the other none), one worker;
  // long enough to outlast the test, which stops it. Metrics on; `extra`
  // YAML appended (a security section).
  void WriteConfig(const std::string& extra = "") {
    testing::WriteSparseLibsvm(dir_ + "/train.svm", 2000, 1);
    testing::WriteSparseLibsvm(dir_ + "/test.svm", 300, 2);
    std::string yaml = testing::LoopbackConfig(
        2, 1,
        absl::StrCat("data:\n  source: libsvm\n  path: ", dir_,
                     "/train.svm\n  test_path: ", dir_,
                     "/test.svm\n"
                     "model:\n  type: sparse_linear\n  task: binary\n  "
                     "sparse_buckets: 32\n"
                     "optimizer:\n  type: ftrl\n  learning_rate: 0.2\n  l1: "
                     "0.5\n  l2: 1\n"
                     "training:\n  batch_size: 32\n  epochs: 100000\n  "
                     "eval_every_steps: 20\n"
                     "checkpoint:\n  dir: ",
                     dir_,
                     "/ckpt\n  interval_s: 1\n"
                     "metrics:\n  port_offset: 1000\n",
                     extra));
    yaml = absl::StrReplaceAll(
        yaml,
        {{"\n  workers: ", "\n  standby_ps: [127.0.0.1:0]\n  workers: "}});
    config_ = testing::WriteConfig("job.yaml", yaml);
  }

  // Starts `binary` as `name` with a --port_file; its gRPC address.
  std::string StartMember(const std::string& name, const std::string& binary,
                          std::vector<std::string> args) {
    const std::string port_file = absl::StrCat(dir_, "/", name, ".port");
    args.insert(args.end(), {"--port_file", port_file});
    if (!coordinator_.empty()) {
      args.insert(args.end(), {"--coordinator", coordinator_});
    }
    Subprocess& daemon = Start(name, binary, std::move(args));
    absl::StatusOr<std::string> address =
        testing::WaitForPort(daemon, port_file);
    EXPECT_TRUE(address.ok()) << address.status();
    return address.value_or("");
  }

  // Starts the job's daemons (a coordinator, 2 ps, a standby, a worker) and
  // reads from each one's Status its /metrics address, which must be served
  // over `scheme`; *targets: those addresses, quoted for a scrape config.
  void StartCluster(const std::string& scheme, std::vector<Member>* members,
                    std::vector<std::string>* targets) {
    coordinator_ = StartMember("coordinator", "coordinator/coordinator", {});
    ASSERT_FALSE(coordinator_.empty());
    *members = {{"coordinator", 0, coordinator_, ""}};
    for (int i = 0; i < 2; ++i) {
      members->push_back(
          {"ps", i,
           StartMember(absl::StrCat("ps-", i), "server/ps_server",
                       {"--index", absl::StrCat(i)}),
           ""});
    }
    members->push_back({"standby", 0,
                        StartMember("standby-0", "server/ps_server",
                                    {"--index", "0", "--standby"}),
                        ""});
    members->push_back(
        {"worker", 0,
         StartMember("worker-0", "worker/ps_worker", {"--index", "0"}), ""});
    // Each daemon names its /metrics endpoint in its Status.
    for (Member& m : *members) {
      ASSERT_FALSE(m.grpc.empty())
          << m.role << " " << m.index << " did not start";
      absl::StatusOr<proto::GetStatusResponse> status =
          testing::DaemonStatus(m.grpc);
      ASSERT_TRUE(status.ok()) << status.status();
      EXPECT_EQ(status->role(), m.role);
      EXPECT_EQ(status->index(), m.index);
      m.metrics = status->metrics_address();
      ASSERT_FALSE(m.metrics.empty())
          << m.role << " " << m.index << " at " << m.grpc
          << " serves no /metrics: Status metrics_address is empty "
             "(metrics.port_offset 0?)";
      EXPECT_EQ(status->metrics_scheme(), scheme) << m.role << " " << m.index;
      targets->push_back(absl::StrCat("\"", m.metrics, "\""));
    }
  }

  // Waits until Prometheus has scraped every member (up == 1) and holds
  // each one's downpour_up under its role and index.
  void EveryMemberScraped(const std::vector<Member>& members) {
    Eventually("every target scraped", "up{job=\"downpour\"} == 1",
               Positive(members.size()));
    for (const Member& m : members) {
      Eventually(absl::StrCat(m.role, " ", m.index, " up"),
                 absl::StrCat("downpour_up{job=\"downpour\",role=\"", m.role,
                              "\",index=\"", m.index, "\"} == 1"),
                 [](const std::vector<Sample>& s) {
                   return s.size() == 1 && s[0].value == 1;
                 });
    }
  }

  // Stops Prometheus (status 0 at SIGTERM), then the daemons.
  void StopAll() {
    EXPECT_EQ(daemons_["prometheus"]->Stop(absl::Seconds(30)), 0)
        << daemons_["prometheus"]->LogTail(20);
    for (const char* name :
         {"worker-0", "standby-0", "ps-1", "ps-0", "coordinator"}) {
      daemons_[name]->Stop(absl::Seconds(20));
      EXPECT_TRUE(daemons_[name]->Poll().has_value()) << name;
    }
  }

  // Starts Prometheus with `config` on a free loopback port (tries again on
  // another when it lost the port to someone else) and waits until it is
  // ready; its address, or "" after a failure was recorded.
  std::string StartPrometheus(const std::string& config) {
    for (int attempt = 1; attempt <= 5; ++attempt) {
      const std::string address =
          absl::StrCat("127.0.0.1:", testing::ClosedLoopbackPort());
      const std::string log =
          absl::StrCat(dir_, "/prometheus-", attempt, ".log");
      Subprocess::Options options;
      options.parent_death_signal = SIGKILL;  // never outlives the test
      auto started = Subprocess::Start(
          "prometheus",
          {kPrometheus, "--config.file=" + config,
           absl::StrCat("--storage.tsdb.path=", dir_, "/prometheus-data"),
           "--web.listen-address=" + address},
          log, options);
      if (!started.ok()) {
        ADD_FAILURE() << "prometheus did not start: " << started.status();
        return "";
      }
      Subprocess& prometheus = **started;
      daemons_["prometheus"] = *std::move(started);  // TearDown kills it
      bool exited = false;
      const bool ready = testing::WaitUntil(
          [&] {
            if (prometheus.Poll().has_value()) {
              exited = true;
              return true;
            }
            auto answer = testing::HttpGet(address, "/-/ready");
            return answer.ok() && answer->code == 200;
          },
          kPatience, absl::Milliseconds(100));
      if (ready && !exited) return address;
      const std::string tail = prometheus.LogTail(20);
      if (exited && absl::StrContains(tail, "address already in use")) continue;
      ADD_FAILURE() << "prometheus " << (exited ? "exited" : "was not ready")
                    << ":\n"
                    << tail;
      return "";
    }
    ADD_FAILURE() << "prometheus found no free port in 5 tries";
    return "";
  }

  // GET `target` from Prometheus's API, parsed; false (with *error) when it
  // does not answer 200 with JSON whose status is "success".
  bool Api(const std::string& target, google::protobuf::Struct* json,
           std::string* error) {
    absl::StatusOr<testing::HttpAnswer> answer =
        testing::HttpGet(prometheus_, target);
    if (!answer.ok()) {
      *error = std::string(answer.status().message());
      return false;
    }
    if (answer->code != 200) {
      *error = absl::StrCat("HTTP ", answer->code, ": ", answer->body);
      return false;
    }
    json->Clear();
    if (!google::protobuf::util::JsonStringToMessage(answer->body, json).ok()) {
      *error = absl::StrCat("not JSON: ", answer->body);
      return false;
    }
    const auto status = json->fields().find("status");
    if (status == json->fields().end() ||
        status->second.string_value() != "success") {
      *error = answer->body;
      return false;
    }
    return true;
  }

  // The instant vector `promql` evaluates to now; false (with *error) when
  // Prometheus refused the query.
  bool Query(const std::string& promql, std::vector<Sample>* samples,
             std::string* error) {
    google::protobuf::Struct json;
    if (!Api("/api/v1/query?query=" + testing::UrlEncode(promql), &json,
             error)) {
      return false;
    }
    samples->clear();
    const google::protobuf::Struct& data =
        json.fields().at("data").struct_value();
    if (data.fields().at("resultType").string_value() != "vector") {
      *error = "not an instant vector";
      return false;
    }
    for (const auto& item : data.fields().at("result").list_value().values()) {
      const auto& fields = item.struct_value().fields();
      Sample sample;
      for (const auto& [k, v] : fields.at("metric").struct_value().fields()) {
        sample.labels[k] = v.string_value();
      }
      // "value": [<unix time>, "<value>"]; "NaN", "+Inf" as strtod reads.
      const auto& value = fields.at("value").list_value();
      if (value.values_size() == 2) {
        sample.value =
            std::strtod(value.values(1).string_value().c_str(), nullptr);
      }
      samples->push_back(std::move(sample));
    }
    return true;
  }

  // Asks `promql` until `ok` holds for its samples (true), or kPatience has
  // passed (false, with a failure naming `what`, the query and the last
  // answer).
  bool Eventually(const std::string& what, const std::string& promql,
                  const std::function<bool(const std::vector<Sample>&)>& ok) {
    std::vector<Sample> samples;
    std::string error;
    std::string last = "no answer";
    const bool held = testing::WaitUntil(
        [&] {
          if (!Query(promql, &samples, &error)) {
            last = "error: " + error;
            return false;
          }
          last = Describe(samples);
          return ok(samples);
        },
        kPatience, absl::Milliseconds(250));
    if (!held) {
      ADD_FAILURE() << what << ": " << promql << " never held within "
                    << kPatience << "; last answer: " << last;
    } else {
      std::cout << "checked " << what << ": " << promql << " -> " << last
                << "\n";
    }
    return held;
  }

  std::string dir_;
  std::string coordinator_;
  std::string prometheus_;
};

TEST_F(PrometheusTest, ExampleConfigAndRulesPassPromtool) {
  std::string output;
  EXPECT_EQ(Promtool({"check", "rules", Example("alerts.yml")}, &output), 0)
      << output;
  const int rules = AlertRules();
  ASSERT_GE(rules, 6);
  EXPECT_TRUE(absl::StrContains(
      output, absl::StrCat("SUCCESS: ", rules, " rules found")))
      << output;
  // The example scrape config (its targets need not be up); it names
  // alerts.yml as its rule file, which is checked again with it.
  EXPECT_EQ(Promtool({"check", "config", Example("prometheus.yml")}, &output),
            0)
      << output;
  // What fires when (each rule's thresholds and `for`).
  EXPECT_EQ(Promtool({"test", "rules", Example("alerts_test.yml")}, &output), 0)
      << output;
}

TEST_F(PrometheusTest, ScrapesEveryDaemonOfALocalCluster) {
  WriteConfig();
  // The cluster: every daemon on 127.0.0.1 with ephemeral ports.
  std::vector<Member> members;
  std::vector<std::string> targets;
  StartCluster("http", &members, &targets);
  if (HasFatalFailure()) return;

  // Prometheus scraping all of them every second, with the example rules.
  const std::string config = testing::WriteConfig(
      "prometheus.yml",
      absl::StrCat("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                   "  evaluation_interval: 1s\n"
                   "rule_files:\n  - ",
                   Example("alerts.yml"),
                   "\n"
                   "scrape_configs:\n  - job_name: downpour\n"
                   "    static_configs:\n      - targets: [",
                   absl::StrJoin(targets, ", "), "]\n"));
  prometheus_ = StartPrometheus(config);
  ASSERT_FALSE(prometheus_.empty());

  // Prometheus's own view: every target up, and each daemon's own series
  // under its role and index.
  EveryMemberScraped(members);
  // The coordinator: heartbeats it served.
  Eventually("coordinator heartbeats",
             "downpour_rpc_calls_total{job=\"downpour\",role=\"coordinator\","
             "call=\"served:Coordinator/Heartbeat\"} > 0",
             Positive(1));
  // Both ps: pushes applied, pulls served per second, push latency,
  // checkpoints; the staleness histogram's p99.
  Eventually("pushes on both ps",
             "downpour_pushes_total{job=\"downpour\",role=\"ps\"} > 0",
             Positive(2));
  Eventually("pull rate on both ps",
             "rate(downpour_pulls_total{job=\"downpour\",role=\"ps\"}[5s]) > 0",
             Positive(2));
  // Staleness is counted per dense block update: the ps holding the bias
  // block has a p99; a ps holding only sparse rows has an empty histogram
  // (p99 NaN, which the comparison drops).
  Eventually("staleness p99 of a ps",
             "histogram_quantile(0.99, "
             "downpour_staleness_bucket{job=\"downpour\",role=\"ps\"}) >= 0",
             [](const std::vector<Sample>& s) {
               return !s.empty() && std::isfinite(s[0].value);
             });
  Eventually(
      "push latency p99 on both ps",
      "histogram_quantile(0.99, "
      "downpour_rpc_duration_seconds_bucket{job=\"downpour\",role=\"ps\","
      "call=\"served:ParameterServer/Push\"}) > 0",
      Positive(2));
  Eventually(
      "checkpoints on both ps",
      "downpour_checkpoints_written_total{job=\"downpour\",role=\"ps\"} > 0 "
      "and on (instance) "
      "downpour_checkpoint_failing{job=\"downpour\",role=\"ps\"} == 0",
      Positive(2));
  // The worker: its test AUC, examples, not waiting for a ps.
  Eventually(
      "worker test auc",
      "downpour_test_metric{job=\"downpour\",role=\"worker\",metric=\"auc\"}",
      [](const std::vector<Sample>& s) {
        return s.size() == 1 && s[0].value > 0 && s[0].value <= 1;
      });
  Eventually(
      "worker examples",
      "rate(downpour_examples{job=\"downpour\",role=\"worker\"}[5s]) > 0",
      Positive(1));
  Eventually("worker not waiting",
             "downpour_waiting_for_ps{job=\"downpour\",role=\"worker\"} == 0",
             [](const std::vector<Sample>& s) { return s.size() == 1; });

  // Replication: the standby backs up one shard (in sync: 1); the other
  // shard has no backup (0), and the rule for it is pending (then firing).
  std::string unreplicated;
  Eventually("one shard backed up, one not",
             "downpour_backup_in_sync{job=\"downpour\",role=\"ps\"}",
             [&](const std::vector<Sample>& s) {
               if (s.size() != 2 || s[0].value + s[1].value != 1) return false;
               unreplicated = s[s[0].value == 0 ? 0 : 1].labels.at("index");
               return true;
             });
  Eventually("the shard without a backup alerts",
             "ALERTS{alertname=\"DownpourShardWithoutBackup\"}",
             [&](const std::vector<Sample>& s) {
               return s.size() == 1 &&
                      s[0].labels.at("index") == unreplicated &&
                      s[0].labels.at("role") == "ps";
             });
  // Every rule of alerts.yml evaluates without an error.
  {
    const int rules = AlertRules();
    std::string error, last;
    const bool healthy = testing::WaitUntil(
        [&] {
          google::protobuf::Struct json;
          if (!Api("/api/v1/rules", &json, &error)) {
            last = error;
            return false;
          }
          int ok = 0, all = 0;
          for (const auto& group : json.fields()
                                       .at("data")
                                       .struct_value()
                                       .fields()
                                       .at("groups")
                                       .list_value()
                                       .values()) {
            for (const auto& rule : group.struct_value()
                                        .fields()
                                        .at("rules")
                                        .list_value()
                                        .values()) {
              ++all;
              ok += rule.struct_value().fields().at("health").string_value() ==
                    "ok";
            }
          }
          last = absl::StrCat(ok, " of ", all, " rules healthy");
          return all == rules && ok == all;
        },
        kPatience, absl::Milliseconds(250));
    EXPECT_TRUE(healthy) << last;
  }

  // Every query of the Grafana dashboard parses and finds data here
  // ($__rate_interval is Grafana's; 5 s is four scrapes).
  {
    std::ifstream in(Example("grafana-dashboard.json"));
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    google::protobuf::Struct dashboard;
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(text, &dashboard).ok())
        << "grafana-dashboard.json is not JSON";
    int queries = 0;
    for (const auto& panel :
         dashboard.fields().at("panels").list_value().values()) {
      const auto& fields = panel.struct_value().fields();
      const std::string title = fields.at("title").string_value();
      for (const auto& target : fields.at("targets").list_value().values()) {
        const std::string expr = absl::StrReplaceAll(
            target.struct_value().fields().at("expr").string_value(),
            {{"$__rate_interval", "5s"}});
        ++queries;
        Eventually("dashboard panel \"" + title + "\"", expr,
                   [](const std::vector<Sample>& s) { return !s.empty(); });
      }
    }
    EXPECT_GE(queries, 10);
  }

  // Everything stops: Prometheus at SIGTERM (status 0), then the daemons.
  StopAll();
}

// With security.tls (mutual, with role tokens) /metrics is HTTPS with each
// daemon's certificate: Prometheus scrapes it with the cluster's CA, a client
// certificate and the reader token (docs/OPERATIONS.md, "Prometheus").
TEST_F(PrometheusTest, ScrapesEveryDaemonOverHttpsWithSecurityTls) {
  const std::string certs = dir_ + "/certs";
  auto make = Subprocess::Start(
      "make_certs",
      {testing::BinDir() + "/deploy/make_certs.sh", "--out", certs, "--ps", "2",
       "--standby", "1", "--workers", "1"},
      dir_ + "/make_certs.log");
  ASSERT_TRUE(make.ok()) << make.status();
  ASSERT_EQ((*make)->Wait(absl::Seconds(60)), 0) << (*make)->LogTail(20);
  WriteConfig(absl::StrCat(
      "security:\n  tls: true\n  mutual_tls: true\n  ca_file: ", certs,
      "/ca.pem\n  cert_file: ", certs, "/{name}.pem\n  key_file: ", certs,
      "/{name}.key\n  ps_token_file: ", certs,
      "/ps.token\n  worker_token_file: ", certs,
      "/worker.token\n  admin_token_file: ", certs,
      "/admin.token\n  reader_token_file: ", certs, "/reader.token\n"));
  // The test reads each daemon's Status over TLS, as psctl does.
  absl::StatusOr<Config> config = LoadConfig(config_);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(
      InstallSecurity(config->security, "client", CallerRole::kAdmin).ok());

  std::vector<Member> members;
  std::vector<std::string> targets;
  StartCluster("https", &members, &targets);
  if (HasFatalFailure()) return;
  // Plain HTTP to a daemon's /metrics gets no answer.
  absl::StatusOr<testing::HttpAnswer> plain =
      testing::HttpGet(members[0].metrics, "/metrics");
  EXPECT_TRUE(!plain.ok() || plain->code == 0)
      << "plain HTTP answered " << plain->code << ": " << plain->body;

  // Prometheus: https, the CA to check the daemons, the client certificate
  // that mutual TLS demands, the reader token.
  const std::string prometheus_config = testing::WriteConfig(
      "prometheus.yml",
      absl::StrCat("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                   "scrape_configs:\n  - job_name: downpour\n"
                   "    scheme: https\n"
                   "    tls_config:\n      ca_file: ",
                   certs, "/ca.pem\n", "      cert_file: ", certs,
                   "/client.pem\n", "      key_file: ", certs, "/client.key\n",
                   "    authorization:\n      credentials_file: ", certs,
                   "/reader.token\n", "    static_configs:\n      - targets: [",
                   absl::StrJoin(targets, ", "), "]\n"));
  prometheus_ = StartPrometheus(prometheus_config);
  ASSERT_FALSE(prometheus_.empty());
  EveryMemberScraped(members);
  // Data behind a rate: scrapes keep succeeding.
  Eventually("pushes on both ps",
             "downpour_pushes_total{job=\"downpour\",role=\"ps\"} > 0",
             Positive(2));
  StopAll();
}

}  // namespace
}  // namespace downpour
