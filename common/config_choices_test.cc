// Tests of every choice's Name and Parse (the enums of the section headers,
// common/config_<section>.h): each spelling, the round trip and the error.
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::Not;

// Each choice's names and the values they parse to, in the order messages
// list them: Parse(name) gives the value, Name(value) the same name back, an
// unknown name the loader's text (without its "FILE:LINE: "), and a value cast
// from an integer "?".
template <typename E, typename Parse, typename Name>
void ExpectChoices(Parse parse, Name name,
                   const std::vector<std::pair<std::string, E>>& choices,
                   const std::string& typo, const std::string& error) {
  for (const auto& [text, value] : choices) {
    absl::StatusOr<E> parsed = parse(text);
    ASSERT_THAT(parsed, IsOk()) << text;
    EXPECT_EQ(*parsed, value) << text;
    EXPECT_EQ(std::string(name(value)), text);
  }
  EXPECT_THAT(parse(typo), StatusIs(absl::StatusCode::kInvalidArgument, error));
  EXPECT_THAT(parse(std::string(name(static_cast<E>(99)))), Not(IsOk()));
}

TEST(ConfigTest, ChoicesParseAndNameRoundTrip) {
  ExpectChoices<ComputeDevice>(
      ParseComputeDevice, ComputeDeviceName,
      {{"auto", ComputeDevice::kAuto},
       {"cpu", ComputeDevice::kCpu},
       {"cuda", ComputeDevice::kCuda},
       {"simulated", ComputeDevice::kSimulated}},
      "gpu",
      "compute.device must be one of auto, cpu, cuda, simulated; got 'gpu' "
      "(did you mean 'cpu'?)");
  ExpectChoices<Task>(ParseTask, TaskName,
                      {{"multiclass", Task::kMulticlass},
                       {"binary", Task::kBinary},
                       {"regression", Task::kRegression}},
                      "ranking",
                      "model.task must be one of multiclass, binary, "
                      "regression; got 'ranking'");
  ExpectChoices<ModelType>(
      ParseModelType, ModelTypeName,
      {{"mlp", ModelType::kMlp},
       {"linear", ModelType::kLinear},
       {"softmax", ModelType::kSoftmax},
       {"sparse_linear", ModelType::kSparseLinear},
       {"fm", ModelType::kFm},
       {"wide_deep", ModelType::kWideDeep},
       {"tensors", ModelType::kTensors}},
      "cnn",
      "model.type must be one of mlp, linear, softmax, sparse_linear, fm, "
      "wide_deep, tensors; got 'cnn'");
  ExpectChoices<Pooling>(
      ParsePooling, PoolingName,
      {{"sum", Pooling::kSum}, {"mean", Pooling::kMean}}, "max",
      "wide_deep.pooling must be one of sum, mean; got 'max'");
  ExpectChoices<OptimizerType>(
      ParseOptimizerType, OptimizerTypeName,
      {{"sgd", OptimizerType::kSgd},
       {"momentum", OptimizerType::kMomentum},
       {"adagrad", OptimizerType::kAdagrad},
       {"adam", OptimizerType::kAdam},
       {"ftrl", OptimizerType::kFtrl}},
      "adamw",
      "optimizer.type must be one of sgd, momentum, adagrad, adam, ftrl; got "
      "'adamw' (did you mean 'adam'?)");
  ExpectChoices<LrScheduleType>(
      ParseLrScheduleType, LrScheduleTypeName,
      {{"constant", LrScheduleType::kConstant},
       {"step", LrScheduleType::kStep},
       {"cosine", LrScheduleType::kCosine}},
      "linear",
      "optimizer.schedule must be one of constant, step, cosine; got "
      "'linear'");
  ExpectChoices<AsyncMomentum>(
      ParseAsyncMomentum, AsyncMomentumName,
      {{"auto", AsyncMomentum::kAuto}, {"off", AsyncMomentum::kOff}}, "on",
      "optimizer.async_momentum must be one of auto, off; got 'on'");
  ExpectChoices<FetchMode>(
      ParseFetchMode, FetchModeName,
      {{"after_push", FetchMode::kAfterPush},
       {"overlap", FetchMode::kOverlap},
       {"layerwise", FetchMode::kLayerwise}},
      "sync",
      "training.fetch must be one of after_push, overlap, layerwise; got "
      "'sync'");
  ExpectChoices<ConsistencyMode>(
      ParseConsistencyMode, ConsistencyModeName,
      {{"async", ConsistencyMode::kAsync},
       {"ssp", ConsistencyMode::kSsp},
       {"bsp", ConsistencyMode::kBsp}},
      "sync",
      "training.consistency must be one of async, ssp, bsp; got 'sync' (did "
      "you mean 'async'?)");
  ExpectChoices<DataSource>(ParseDataSource, DataSourceName,
                            {{"mnist", DataSource::kMnist},
                             {"idx", DataSource::kIdx},
                             {"csv", DataSource::kCsv},
                             {"libsvm", DataSource::kLibsvm},
                             {"synthetic", DataSource::kSynthetic},
                             {"criteo", DataSource::kCriteo}},
                            "parquet",
                            "data.source must be one of mnist, idx, csv, "
                            "libsvm, synthetic, criteo; got "
                            "'parquet'");
  ExpectChoices<MissingPolicy>(
      ParseMissingPolicy, MissingPolicyName,
      {{"error", MissingPolicy::kError},
       {"zero", MissingPolicy::kZero},
       {"mean", MissingPolicy::kMean}},
      "skip", "data.missing must be one of error, zero, mean; got 'skip'");
  // WireEncodingName (common/wire_encoding.h) spells rpc.encoding.
  ExpectChoices<WireEncoding>(
      ParseRpcEncoding, WireEncodingName,
      {{"float32", WireEncoding::kFloat32},
       {"bf16", WireEncoding::kBf16},
       {"fp16", WireEncoding::kFp16}},
      "fp32", "rpc.encoding must be one of float32, bf16, fp16; got 'fp32'");
  ExpectChoices<RestartMode>(
      ParseRestartMode, RestartModeName,
      {{"never", RestartMode::kNever}, {"on-failure", RestartMode::kOnFailure}},
      "always",
      "launcher.restart must be one of never, on-failure; got 'always'");
  ExpectChoices<LogLevel>(
      ParseLogLevel, LogLevelName,
      {{"trace", LogLevel::kTrace},
       {"debug", LogLevel::kDebug},
       {"info", LogLevel::kInfo},
       {"warn", LogLevel::kWarn},
       {"error", LogLevel::kError}},
      "INFO",
      "logging.level must be one of trace, debug, info, warn, error; got "
      "'INFO'");
}

}  // namespace
}  // namespace downpour
