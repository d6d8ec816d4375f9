#include "rpc/wire_format.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/push_sequence.h"
#include "gtest/gtest.h"

namespace downpour::wire {
namespace {

std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// `bytes` cut into slices of `piece` bytes, as gRPC may deliver them.
grpc::ByteBuffer Sliced(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    slices.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::vector<float> Ramp(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.25f * i;
  return v;
}

proto::PushRequest SampleRequest(const std::vector<float>& a,
                                 const std::vector<float>& b) {
  proto::PushRequest request;
  request.set_placement_epoch(7);
  request.set_worker_id(-1);  // negative ints take 10-byte varints
  request.set_sequence(MakeSequence(3, 99));
  request.set_clock(12);
  proto::BlockData* first = request.add_blocks();
  first->set_block_id(300);
  first->set_version(1ull << 40);
  first->set_data(a.data(), a.size() * 4);
  proto::BlockData* second = request.add_blocks();
  second->set_block_id(0);
  second->set_encoding(proto::Encoding(1));
  second->set_data(b.data(), b.size() * 4);
  return request;
}

void ExpectSame(const PushView& got, const proto::PushRequest& want) {
  EXPECT_EQ(got.placement_epoch, want.placement_epoch());
  EXPECT_EQ(got.worker_id, want.worker_id());
  EXPECT_EQ(got.sequence, want.sequence());
  EXPECT_EQ(got.clock, want.clock());
  ASSERT_EQ(got.blocks.size(), static_cast<size_t>(want.blocks_size()));
  for (size_t i = 0; i < got.blocks.size(); ++i) {
    const proto::BlockData& w = want.blocks(i);
    EXPECT_EQ(got.blocks[i].id, w.block_id());
    EXPECT_EQ(got.blocks[i].version, w.version());
    EXPECT_EQ(got.blocks[i].encoding, w.encoding());
    EXPECT_EQ(std::string(got.blocks[i].data, got.blocks[i].size), w.data());
  }
}

TEST(WireFormatTest, SerializedPushIsAProtobufPushRequest) {
  const std::vector<float> a = Ramp(1000, 1), b = Ramp(3, -2);
  const proto::PushRequest want = SampleRequest(a, b);
  for (bool pinned : {false, true}) {
    SendPins pins;
    std::string bytes;
    {
      const grpc::ByteBuffer buffer =
          SerializePush(ViewOf(want), pinned ? &pins : nullptr);
      bytes = Bytes(buffer);
    }
    pins.WaitReleased();  // the buffer is gone: nothing pinned
    proto::PushRequest got;
    ASSERT_TRUE(got.ParseFromString(bytes)) << "pinned " << pinned;
    EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
  }
}

TEST(WireFormatTest, PinnedPayloadsAreNotCopied) {
  const std::vector<float> a = Ramp(64, 0);
  proto::PushRequest request;
  proto::BlockData* block = request.add_blocks();
  block->set_block_id(1);
  block->set_data(a.data(), a.size() * 4);
  PushView view = ViewOf(request);
  view.blocks[0].data = reinterpret_cast<const char*>(a.data());
  SendPins pins;
  grpc::ByteBuffer buffer = SerializePush(view, &pins);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  bool found = false;
  for (const grpc::Slice& s : slices) {
    found |= reinterpret_cast<const char*>(s.begin()) ==
             reinterpret_cast<const char*>(a.data());
  }
  EXPECT_TRUE(found) << "no slice points at the gradient itself";
}

TEST(WireFormatTest, ParsesProtobufPushesInAnySlicing) {
  const std::vector<float> a = Ramp(1000, 1), b = Ramp(3, -2);
  const proto::PushRequest want = SampleRequest(a, b);
  const std::string bytes = want.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, bytes.size()}) {
    Arena arena;
    PushView got;
    int64_t in_place = 0, copied = 0;
    const grpc::ByteBuffer buffer = Sliced(bytes, piece);
    ASSERT_TRUE(ParsePush(buffer, &arena, &got, &in_place, &copied).ok())
        << piece;
    ExpectSame(got, want);
    EXPECT_EQ(in_place + copied, (1000 + 3) * 4) << piece;
    for (const BlockRef& block : got.blocks) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(block.data) % 4, 0u);
    }
  }
}

// Sparse rows (PushRequest.sparse) travel through the hand-written codec
// both ways, in any slicing, beside blocks.
TEST(WireFormatTest, SparseRowsTravelBothWays) {
  const std::vector<float> a = Ramp(10, 1), grads = Ramp(3, -1);
  proto::PushRequest want = SampleRequest(a, a);
  want.set_push_key(0xfeedbeef);
  const std::vector<uint64_t> keys = {1, 1ULL << 40, ~0ULL};
  const std::vector<uint32_t> counts = {1, 2, 3};
  proto::SparseRows* rows = want.add_sparse();
  rows->set_table(0);
  rows->set_keys(keys.data(), keys.size() * 8);
  rows->set_values(grads.data(), grads.size() * 4);
  rows->set_counts(counts.data(), counts.size() * 4);
  proto::SparseRows* other = want.add_sparse();
  other->set_table(7);
  other->set_keys(keys.data(), 8);
  other->set_values(grads.data(), 4);
  proto::PushRequest got;
  ASSERT_TRUE(got.ParseFromString(Bytes(SerializePush(ViewOf(want), nullptr))));
  EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
  const std::string bytes = want.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{5}, size_t{64}, bytes.size()}) {
    Arena arena;
    PushView view;
    ASSERT_TRUE(ParsePush(Sliced(bytes, piece), &arena, &view).ok()) << piece;
    ExpectSame(view, want);
    EXPECT_EQ(view.push_key, 0xfeedbeefu);
    ASSERT_EQ(view.sparse.size(), 2u) << piece;
    for (size_t i = 0; i < 2; ++i) {
      const proto::SparseRows& w = want.sparse(i);
      const SparseRef& r = view.sparse[i];
      EXPECT_EQ(r.table, w.table());
      EXPECT_EQ(std::string(r.keys, r.keys_size), w.keys()) << piece;
      EXPECT_EQ(std::string(r.values, r.values_size), w.values()) << piece;
      EXPECT_EQ(std::string(r.counts == nullptr ? "" : r.counts, r.counts_size),
                w.counts())
          << piece;
    }
  }
  // Truncated anywhere: refused, never read past the end.
  for (size_t cut = 0; cut < bytes.size(); cut += 3) {
    Arena arena;
    PushView view;
    absl::Status status =
        ParsePush(Sliced(bytes.substr(0, cut), 4), &arena, &view);
    if (!status.ok()) {
      EXPECT_TRUE(absl::IsInvalidArgument(status)) << cut;
    }
  }
}

// Found by tools/fuzz/ps_fuzzer (ASan: heap-use-after-free): a payload
// that arrived in a small slice, which gRPC inlines into the grpc_slice
// struct, was referenced in place, i.e. inside the parser's copy of that
// struct, freed when ParsePush returned.
TEST(WireFormatTest, PayloadsInInlinedSlicesAreCopied) {
  const std::vector<float> a = Ramp(2, 1);
  const proto::PushRequest want = SampleRequest(a, Ramp(0, 0));
  const std::string bytes = want.SerializeAsString();
  const size_t payload = bytes.find(std::string(
      reinterpret_cast<const char*>(a.data()), a.size() * sizeof(float)));
  ASSERT_NE(payload, std::string::npos);
  for (size_t lead = 0; lead < 4; ++lead) {
    // [head][lead bytes + the 8-byte payload][tail]: the middle slice is
    // inlined (at most GRPC_SLICE_INLINED_SIZE bytes).
    const size_t cut = payload - lead, end = payload + a.size() * sizeof(float);
    std::vector<grpc::Slice> slices = {
        grpc::Slice(bytes.data(), cut),
        grpc::Slice(bytes.data() + cut, end - cut),
        grpc::Slice(bytes.data() + end, bytes.size() - end)};
    const auto* self = reinterpret_cast<const uint8_t*>(&slices[1]);
    ASSERT_TRUE(slices[1].begin() >= self &&
                slices[1].begin() < self + sizeof(grpc::Slice))
        << "not inlined";
    const grpc::ByteBuffer buffer(slices.data(), slices.size());
    Arena arena;
    PushView got;
    int64_t in_place = 0, copied = 0;
    ASSERT_TRUE(ParsePush(buffer, &arena, &got, &in_place, &copied).ok());
    ExpectSame(got, want);
    EXPECT_EQ(in_place, 0) << lead;
    EXPECT_EQ(copied, 8) << lead;
  }
}

TEST(WireFormatTest, MalformedPushesAreInvalidArgument) {
  const std::vector<float> a = Ramp(10, 1), b = Ramp(3, 0);
  const std::string bytes = SampleRequest(a, b).SerializeAsString();
  for (size_t cut :
       {size_t{1}, size_t{5}, bytes.size() / 2, bytes.size() - 1}) {
    Arena arena;
    PushView got;
    const absl::Status status =
        ParsePush(Sliced(bytes.substr(0, cut), 3), &arena, &got);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << cut;
  }
}

// Found by tools/fuzz ps_fuzzer: a tag whose varint runs past the end of its
// sparse rows (or block) left the length check to wrap around, and a huge
// array length reached the arena (an allocation of 2^61 bytes).
TEST(WireFormatTest, AVarintRunningPastItsMessageIsRefusedBeforeAnyAllocation) {
  // PushRequest.sparse (field 7, length 1) holding the first byte of a
  // two-byte tag of keys (field 2, LEN: 0x92 0x00), then a length of 2^61
  // and a few bytes.
  const std::string sparse =
      std::string("\x3a\x01\x92\x00", 4) +
      std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x20", 9) +
      std::string(16, 'k');
  // PushRequest.blocks (field 4, length 1), the same trick on BlockData.data
  // (field 4, LEN: 0xa2 0x00).
  const std::string block =
      std::string("\x22\x01\xa2\x00", 4) +
      std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x20", 9) +
      std::string(16, 'd');
  for (const std::string& bytes : {sparse, block}) {
    for (size_t piece : {size_t{1}, size_t{3}, bytes.size()}) {
      Arena arena;
      PushView got;
      const absl::Status status = ParsePush(Sliced(bytes, piece), &arena, &got);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
          << piece << ": " << status;
    }
  }
}

TEST(WireFormatTest, PullReplyBuilderWritesAProtobufPullResponse) {
  const std::vector<float> a = Ramp(100, 1), b = Ramp(5, 9);
  PullReplyBuilder builder(2, (a.size() + b.size()) * 4);
  std::memcpy(builder.AddBlock(4, 17, 0, a.size() * 4), a.data(), a.size() * 4);
  std::memcpy(builder.AddBlock(70000, 0, 2, b.size() * 4), b.data(),
              b.size() * 4);
  const grpc::ByteBuffer buffer = builder.Finish();
  proto::PullResponse got;
  ASSERT_TRUE(got.ParseFromString(Bytes(buffer)));
  ASSERT_EQ(got.blocks_size(), 2);
  EXPECT_EQ(got.blocks(0).block_id(), 4u);
  EXPECT_EQ(got.blocks(0).version(), 17u);
  EXPECT_EQ(got.blocks(0).data(),
            std::string(reinterpret_cast<const char*>(a.data()), 400));
  EXPECT_EQ(got.blocks(1).block_id(), 70000u);
  EXPECT_EQ(got.blocks(1).encoding(), 2);
  EXPECT_LE(builder.size(), PullReplyBound(2, (a.size() + b.size()) * 4));
}

TEST(WireFormatTest, ParsesProtobufPullRepliesInAnySlicing) {
  const std::vector<float> a = Ramp(100, 1), b = Ramp(5, 9);
  proto::PullResponse reply;
  proto::BlockData* first = reply.add_blocks();
  first->set_block_id(2);
  first->set_version(5);
  first->set_data(a.data(), a.size() * 4);
  proto::BlockData* second = reply.add_blocks();
  second->set_block_id(3);
  second->set_data(b.data(), b.size() * 4);
  const std::string bytes = reply.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{13}, bytes.size()}) {
    std::vector<float> out(105, 0);
    std::vector<uint32_t> ids;
    const absl::Status status = ParsePullReply(
        Sliced(bytes, piece), [&](const BlockRef& b, const CopyPayload& copy) {
          ids.push_back(b.id);
          copy(reinterpret_cast<char*>(out.data() + (b.id == 2 ? 0 : 100)));
          return absl::OkStatus();
        });
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(ids, (std::vector<uint32_t>{2, 3}));
    EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 100), a);
    EXPECT_EQ(std::vector<float>(out.begin() + 100, out.end()), b);
  }
  // A refusal from the callback ends the parse.
  const absl::Status refused =
      ParsePullReply(Sliced(bytes, 8), [](const BlockRef&, const CopyPayload&) {
        return absl::InternalError("no such block");
      });
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  // Truncated replies are malformed.
  const absl::Status truncated =
      ParsePullReply(Sliced(bytes.substr(0, bytes.size() - 3), 8),
                     [](const BlockRef&, const CopyPayload& copy) {
                       std::vector<char> sink(1 << 12);
                       copy(sink.data());
                       return absl::OkStatus();
                     });
  EXPECT_EQ(truncated.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
// A push's reply with values (PushRequest.reply_values) as any protobuf
// server writes it: versions (packed), duplicate and blocks, in any slicing;
// PushReplyBuilder's field-3 blocks behind a serialized PushResponse read the
// same; cut anywhere, it is refused without reading past the end.
TEST(WireFormatTest, ParsesPushRepliesWithValues) {
  const std::vector<float> a = Ramp(100, 1);
  proto::PushResponse reply;
  reply.add_versions(7);
  reply.add_versions(300);
  reply.set_duplicate(true);
  reply.set_refused("push: block 4 gradient norm 1e+09 of worker 2 refused");
  proto::BlockData* block = reply.add_blocks();
  block->set_block_id(4);
  block->set_version(7);
  block->set_data(a.data(), a.size() * 4);
  proto::PushResponse head;  // the same, written as the ps writes it
  head.add_versions(7);
  head.add_versions(300);
  head.set_duplicate(true);
  head.set_refused(reply.refused());
  PullReplyBuilder values(1, a.size() * 4, /*field=*/3);
  std::memcpy(values.AddBlock(4, 7, 0, a.size() * 4), a.data(), a.size() * 4);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(values.Finish().Dump(&slices).ok());
  std::string built = head.SerializeAsString();
  for (const grpc::Slice& slice : slices) {
    built.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  for (const std::string& bytes : {reply.SerializeAsString(), built}) {
    for (size_t piece : {size_t{1}, size_t{7}, bytes.size()}) {
      PushAck ack;
      std::vector<float> out(100, 0);
      const absl::Status status =
          ParsePushReply(Sliced(bytes, piece), &ack,
                         [&](const BlockRef& b, const CopyPayload& copy) {
                           EXPECT_EQ(b.id, 4u);
                           EXPECT_EQ(b.version, 7u);
                           copy(reinterpret_cast<char*>(out.data()));
                           return absl::OkStatus();
                         });
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(ack.versions, (std::vector<uint64_t>{7, 300}));
      EXPECT_TRUE(ack.duplicate);
      EXPECT_EQ(ack.refused, reply.refused());
      EXPECT_EQ(out, a);
    }
    for (size_t cut = 1; cut < bytes.size(); cut += 5) {
      PushAck ack;
      const absl::Status status =
          ParsePushReply(Sliced(bytes.substr(0, cut), 4), &ack,
                         [](const BlockRef& b, const CopyPayload& copy) {
                           std::vector<char> sink(b.size);
                           copy(sink.data());
                           return absl::OkStatus();
                         });
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << cut;
    }
  }
}

}  // namespace downpour::wire
