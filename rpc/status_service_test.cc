// The Status service and the standard health service over a real loopback
// server.
#include "rpc/status_service.h"

#include <unistd.h>

#include "common/counters.h"
#include "common/testing/status_matchers.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using HealthStatus = grpc::health::v1::HealthCheckResponse;

struct Served {
  Counters counters;
  std::unique_ptr<StatusService> service;
  StartedServer server;
};

std::unique_ptr<Served> Serve() {
  auto served = std::make_unique<Served>();
  served->service = std::make_unique<StatusService>(
      "ps", 3, &served->counters,
      [](proto::GetStatusResponse* r) { r->set_device("cpu"); });
  absl::StatusOr<StartedServer> server =
      StartServer("127.0.0.1:0", {served->service.get()}, "test");
  EXPECT_THAT(server, IsOk());
  served->server = *std::move(server);
  served->service->set_address(served->server.address);
  return served;
}

proto::GetStatusResponse GetStatus(const std::string& address) {
  auto stub = proto::Status::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(10));
  proto::GetStatusRequest request;
  proto::GetStatusResponse response;
  grpc::Status status = stub->GetStatus(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

// gRPC server reflection's answer to "list services" from the server at
// `address`, as the raw bytes of its ServerReflectionResponse (a generic
// call: this repository has no reflection client stubs; grpcurl and grpc_cli
// make the same call).
std::string ListServices(const std::string& address) {
  grpc::GenericStub stub(MakeChannel(address));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(10));
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(
      &context,
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag = nullptr;
  bool ok = false;
  auto next = [&] { return cq.Next(&tag, &ok) && ok; };
  call->StartCall(reinterpret_cast<void*>(1));
  if (!next()) return "start failed";
  // ServerReflectionRequest{list_services (field 7) = "*"}.
  const std::string request("\x3a\x01*", 3);
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  if (!next()) return "write failed";
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(3));
  std::string answer = next() ? "" : "read failed";
  std::vector<grpc::Slice> slices;
  if (answer.empty() && in.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      answer.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  call->WritesDone(reinterpret_cast<void*>(4));
  next();
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  next();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return answer;
}

// A foreign client lists the services without the .proto files.
TEST(StatusServiceTest, ServerReflectionListsTheServices) {
  std::unique_ptr<Served> served = Serve();
  const std::string answer = ListServices(served->server.address);
  EXPECT_NE(answer.find("downpour.proto.Status"), std::string::npos) << answer;
  EXPECT_NE(answer.find("grpc.health.v1.Health"), std::string::npos) << answer;
}

TEST(StatusServiceTest, ReportsCountersRatesLatencyAndMemory) {
  std::unique_ptr<Served> served = Serve();
  served->counters.stats().pulls.Increment(10);
  served->counters.stats().blocks.Set(4);
  GetStatus(served->server.address);  // one call to time
  proto::GetStatusResponse r = GetStatus(served->server.address);
  EXPECT_EQ(r.role(), "ps");
  EXPECT_EQ(r.pid(), static_cast<uint32_t>(getpid()));
  EXPECT_EQ(r.index(), 3);
  EXPECT_EQ(r.address(), served->server.address);
  EXPECT_EQ(r.device(), "cpu");
  EXPECT_EQ(r.counters().at("pulls"), 10);
  EXPECT_EQ(r.counters().at("blocks"), 4);
  EXPECT_EQ(r.rates().count("pulls"), 1u);
  EXPECT_EQ(r.rates().count("blocks"), 0u);
  EXPECT_GE(r.rate_window_seconds(), 0);
  EXPECT_GT(r.memory_rss_bytes(), 1u << 20);
  bool served_timed = false, called_timed = false;
  for (const proto::RpcLatency& l : r.latencies()) {
    if (l.name() == "served:Status/GetStatus" && l.total_count() >= 1) {
      served_timed = true;
      EXPECT_GT(l.p99_seconds(), 0);
      EXPECT_GE(l.max_seconds(), l.p50_seconds());
    }
    if (l.name() == "called:Status/GetStatus") called_timed = true;
  }
  EXPECT_TRUE(served_timed);
  EXPECT_TRUE(called_timed);
}

TEST(StatusServiceTest, ReportsStalenessQuantiles) {
  std::unique_ptr<Served> served = Serve();
  // Staleness 0, 1, 1, 2, 9: p50 (rank 3) = 1, p99 (rank 5) = 9, mean 2.6.
  for (uint64_t s : {0, 1, 1, 2, 9}) served->counters.RecordStaleness(s);
  proto::GetStatusResponse r = GetStatus(served->server.address);
  EXPECT_EQ(r.staleness_p50(), 1);
  EXPECT_EQ(r.staleness_p99(), 9);
  EXPECT_EQ(r.staleness_max(), 9);
  EXPECT_DOUBLE_EQ(r.staleness_mean(), 2.6);
  ASSERT_EQ(r.staleness_histogram_size(), 10);
  EXPECT_EQ(r.staleness_histogram(1), 2u);
  EXPECT_EQ(r.staleness_histogram(9), 1u);
}

TEST(StatusServiceTest, ServesTheStandardHealthServiceUntilShutdown) {
  std::unique_ptr<Served> served = Serve();
  auto stub =
      grpc::health::v1::Health::NewStub(MakeChannel(served->server.address));
  auto check = [&](const std::string& service, HealthStatus* response) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(10));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    return stub->Check(&context, request, response);
  };
  HealthStatus response;
  grpc::Status status = check("", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), HealthStatus::SERVING);
  EXPECT_EQ(check("no.such.Service", &response).error_code(), grpc::NOT_FOUND);
  served->server.server->GetHealthCheckService()->SetServingStatus(false);
  ASSERT_TRUE(check("", &response).ok());
  EXPECT_EQ(response.status(), HealthStatus::NOT_SERVING);
}

TEST(StatusServiceTest, LatencyNamesDropOurPackage) {
  EXPECT_EQ(LatencyName(true, "/downpour.proto.ParameterServer/Pull"),
            "served:ParameterServer/Pull");
  EXPECT_EQ(LatencyName(false, "/grpc.health.v1.Health/Check"),
            "called:grpc.health.v1.Health/Check");
}

TEST(StatusServiceTest, ResidentMemoryIsReadable) {
  EXPECT_GT(ResidentMemoryBytes(), 0u);
}

}  // namespace
}  // namespace downpour
