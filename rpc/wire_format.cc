// Protobuf wire format by hand for the two bulk messages: varint tags and
// lengths around payload slices.
#include "rpc/wire_format.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc/slice.h"

namespace downpour::wire {
namespace {

// Field numbers (proto/ps.proto).
constexpr uint32_t kPushEpoch = 1, kPushWorker = 2, kPushSequence = 3,
                   kPushBlocks = 4, kPushClock = 5, kPushKey = 6,
                   kPushSparse = 7, kPushReplyValues = 8;
constexpr uint32_t kAckVersions = 1, kAckDuplicate = 2, kAckBlocks = 3,
                   kAckRefused = 4;
constexpr uint32_t kSparseTable = 1, kSparseKeys = 2, kSparseValues = 3,
                   kSparseCounts = 4;
constexpr uint32_t kBlockId = 1, kBlockVersion = 2, kBlockEncoding = 3,
                   kBlockData = 4;
constexpr uint32_t kPullBlocks = 1;
// The codec writes and reads exactly ps.proto's encoding: a field renumbered
// there fails the build here.
static_assert(kPushEpoch == proto::PushRequest::kPlacementEpochFieldNumber);
static_assert(kPushWorker == proto::PushRequest::kWorkerIdFieldNumber);
static_assert(kPushSequence == proto::PushRequest::kSequenceFieldNumber);
static_assert(kPushBlocks == proto::PushRequest::kBlocksFieldNumber);
static_assert(kPushClock == proto::PushRequest::kClockFieldNumber);
static_assert(kPushKey == proto::PushRequest::kPushKeyFieldNumber);
static_assert(kPushSparse == proto::PushRequest::kSparseFieldNumber);
static_assert(kPushReplyValues == proto::PushRequest::kReplyValuesFieldNumber);
static_assert(kAckVersions == proto::PushResponse::kVersionsFieldNumber);
static_assert(kAckDuplicate == proto::PushResponse::kDuplicateFieldNumber);
static_assert(kAckBlocks == proto::PushResponse::kBlocksFieldNumber);
static_assert(kAckRefused == proto::PushResponse::kRefusedFieldNumber);
static_assert(kSparseTable == proto::SparseRows::kTableFieldNumber);
static_assert(kSparseKeys == proto::SparseRows::kKeysFieldNumber);
static_assert(kSparseValues == proto::SparseRows::kValuesFieldNumber);
static_assert(kSparseCounts == proto::SparseRows::kCountsFieldNumber);
static_assert(kBlockId == proto::BlockData::kBlockIdFieldNumber);
static_assert(kBlockVersion == proto::BlockData::kVersionFieldNumber);
static_assert(kBlockEncoding == proto::BlockData::kEncodingFieldNumber);
static_assert(kBlockData == proto::BlockData::kDataFieldNumber);
static_assert(kPullBlocks == proto::PullResponse::kBlocksFieldNumber);
constexpr int kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5;
constexpr size_t kMaxVarint = 10;

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

char* PutTag(char* p, uint32_t field, int type) {
  return PutVarint(p, (uint64_t{field} << 3) | type);
}

// A BlockData message's bytes before its payload: the fields and the
// payload's tag and length (the payload is the message's last field).
size_t BlockFieldsSize(const BlockRef& b) {
  // Zero fields are left out, as protobuf does.
  size_t n = 0;
  if (b.id != 0) n += 1 + VarintSize(b.id);
  if (b.version != 0) n += 1 + VarintSize(b.version);
  if (b.encoding != 0) n += 1 + VarintSize(static_cast<uint64_t>(b.encoding));
  return n + 1 + VarintSize(b.size);
}

// The block's tag and length in its parent, then its fields up to the
// payload. REQUIRES: room for 2 * kMaxVarint + BlockFieldsSize(b) bytes.
char* PutBlockPrefix(char* p, uint32_t field, const BlockRef& b) {
  p = PutTag(p, field, kLen);
  p = PutVarint(p, BlockFieldsSize(b) + b.size);
  if (b.id != 0) {
    p = PutTag(p, kBlockId, kVarint);
    p = PutVarint(p, b.id);
  }
  if (b.version != 0) {
    p = PutTag(p, kBlockVersion, kVarint);
    p = PutVarint(p, b.version);
  }
  if (b.encoding != 0) {
    p = PutTag(p, kBlockEncoding, kVarint);
    p = PutVarint(p, static_cast<uint64_t>(static_cast<int64_t>(b.encoding)));
  }
  p = PutTag(p, kBlockData, kLen);
  return PutVarint(p, b.size);
}

absl::Status Malformed(const char* what, const char* why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed ", what, ": ", why));
}

// A cursor over a message's slices, with an end (a nested message's limit).
class Reader {
 public:
  explicit Reader(const grpc::ByteBuffer& buffer) {
    (void)buffer.Dump(&slices_);
    for (const grpc::Slice& s : slices_) left_ += s.size();
  }

  size_t left() const { return left_; }

  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte = 0;
      if (!ReadByte(&byte)) return false;
      *v |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  bool Skip(size_t n) {
    if (n > left_) return false;
    while (n > 0) {
      const size_t step = std::min(n, Here());
      Advance(step);
      n -= step;
    }
    return true;
  }

  // The next n bytes in place when they lie in one slice that outlives this
  // Reader, else nullptr (nothing read). An inlined slice (a small one, up to
  // GRPC_SLICE_INLINED_SIZE bytes) holds its bytes inside the grpc_slice
  // itself, i.e. in slices_, which dies with the Reader: never in place.
  const char* Contiguous(size_t n) {
    if (n > left_ || n > Here()) return nullptr;
    if (Inlined(slices_[slice_])) return nullptr;
    const char* p =
        reinterpret_cast<const char*>(slices_[slice_].begin()) + at_;
    Advance(n);
    return p;
  }

  bool CopyTo(char* out, size_t n) {
    if (n > left_) return false;
    while (n > 0) {
      const size_t step = std::min(n, Here());
      std::memcpy(out,
                  reinterpret_cast<const char*>(slices_[slice_].begin()) + at_,
                  step);
      out += step;
      n -= step;
      Advance(step);
    }
    return true;
  }

  // Skips a field of wire type `type`; false on a bad type or truncation.
  bool SkipField(int type) {
    uint64_t n = 0;
    switch (type) {
      case kVarint:
        return ReadVarint(&n);
      case kFixed64:
        return Skip(8);
      case kFixed32:
        return Skip(4);
      case kLen:
        return ReadVarint(&n) && Skip(n);
      default:
        return false;
    }
  }

 private:
  // Bytes left in the current slice (skipping empty ones).
  size_t Here() {
    while (slice_ < slices_.size() && at_ == slices_[slice_].size()) {
      ++slice_;
      at_ = 0;
    }
    return slice_ < slices_.size() ? slices_[slice_].size() - at_ : 0;
  }
  void Advance(size_t n) {
    at_ += n;
    left_ -= n;
  }
  bool ReadByte(uint8_t* byte) {
    if (left_ == 0 || Here() == 0) return false;
    *byte = slices_[slice_].begin()[at_];
    Advance(1);
    return true;
  }

  // True when `s` holds its bytes inside itself (grpc::Slice::c_slice()
  // would tell, but takes a reference).
  static bool Inlined(const grpc::Slice& s) {
    const auto* self = reinterpret_cast<const uint8_t*>(&s);
    return s.begin() >= self && s.begin() < self + sizeof(s);
  }

  std::vector<grpc::Slice> slices_;
  size_t slice_ = 0;
  size_t at_ = 0;
  size_t left_ = 0;
};

// Reads a BlockData's length, then the block up to its payload, which it
// leaves under the cursor: header fields into *b (b->size = payload bytes, 0
// for none); *end = r.left() once the block is consumed.
absl::Status ReadBlockHeader(Reader& r, const char* what, BlockRef* b,
                             size_t* end_out) {
  uint64_t length = 0;
  if (!r.ReadVarint(&length) || length > r.left()) {
    return Malformed(what, "block runs past the message");
  }
  const size_t end = r.left() - length;
  *end_out = end;
  // Bytes left before the block's end; 0 once a varint has run past it (a
  // hostile tag can), so that no length check below can wrap around.
  auto room = [&r, end] { return r.left() > end ? r.left() - end : 0; };
  while (r.left() > end) {
    uint64_t tag = 0, v = 0;
    if (!r.ReadVarint(&tag)) return Malformed(what, "truncated block tag");
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const int type = static_cast<int>(tag & 7);
    if (field == kBlockData && type == kLen) {
      if (!r.ReadVarint(&v) || v > room()) {
        return Malformed(what, "block payload runs past its block");
      }
      b->size = v;
      // The payload must end the block so that the caller consumes it in
      // place; fields after it (legal protobuf, never written by us) are
      // refused rather than buffered.
      if (r.left() - v != end) {
        return Malformed(what, "fields after a block's payload");
      }
      return absl::OkStatus();
    }
    if (type == kVarint && (field == kBlockId || field == kBlockVersion ||
                            field == kBlockEncoding)) {
      if (!r.ReadVarint(&v)) return Malformed(what, "truncated block field");
      if (field == kBlockId) {
        if (v > UINT32_MAX) return Malformed(what, "block id out of range");
        b->id = static_cast<uint32_t>(v);
      } else if (field == kBlockVersion) {
        b->version = v;
      } else {
        b->encoding = static_cast<int32_t>(static_cast<int64_t>(v));
      }
    } else if (!r.SkipField(type)) {
      return Malformed(what, "bad field in a block");
    }
    if (r.left() < end) return Malformed(what, "block overruns its length");
  }
  return absl::OkStatus();  // a block without payload (size 0)
}

// Reads a SparseRows message (its length first) into *rows. Each array is
// referenced in place when it lies in one slice, else copied into `arena`.
absl::Status ReadSparseRows(Reader& r, const char* what, Arena* arena,
                            SparseRef* rows, int64_t* bytes_in_place,
                            int64_t* bytes_copied) {
  uint64_t length = 0;
  if (!r.ReadVarint(&length) || length > r.left()) {
    return Malformed(what, "sparse rows run past the message");
  }
  const size_t end = r.left() - length;
  // As in ReadBlockHeader: never negative, whatever a varint overran.
  auto room = [&r, end] { return r.left() > end ? r.left() - end : 0; };
  while (r.left() > end) {
    uint64_t tag = 0, v = 0;
    if (!r.ReadVarint(&tag)) return Malformed(what, "truncated sparse tag");
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const int type = static_cast<int>(tag & 7);
    if (field == kSparseTable && type == kVarint) {
      if (!r.ReadVarint(&v) || v > UINT32_MAX) {
        return Malformed(what, "bad sparse table id");
      }
      rows->table = static_cast<uint32_t>(v);
    } else if ((field == kSparseKeys || field == kSparseValues ||
                field == kSparseCounts) &&
               type == kLen) {
      if (!r.ReadVarint(&v) || v > room()) {
        return Malformed(what, "sparse array runs past its rows");
      }
      const char* data = v == 0 ? nullptr : r.Contiguous(v);
      if (data != nullptr) {
        if (bytes_in_place != nullptr) *bytes_in_place += v;
      } else if (v > 0) {
        char* copy = arena->Allocate(v);
        if (!r.CopyTo(copy, v))
          return Malformed(what, "truncated sparse array");
        data = copy;
        if (bytes_copied != nullptr) *bytes_copied += v;
      }
      if (field == kSparseKeys) {
        rows->keys = data;
        rows->keys_size = v;
      } else if (field == kSparseValues) {
        rows->values = data;
        rows->values_size = v;
      } else {
        rows->counts = data;
        rows->counts_size = v;
      }
    } else if (!r.SkipField(type)) {
      return Malformed(what, "bad field in sparse rows");
    }
    if (r.left() < end)
      return Malformed(what, "sparse rows overrun their length");
  }
  return absl::OkStatus();
}

// A SparseRows message as field `field` of its parent, bytes and all.
void AppendSparseRows(std::string* out, uint32_t field, const SparseRef& rows) {
  size_t inner = 0;
  if (rows.table != 0) inner += 1 + VarintSize(rows.table);
  for (size_t n : {rows.keys_size, rows.values_size, rows.counts_size}) {
    if (n > 0) inner += 1 + VarintSize(n) + n;
  }
  char head[2 * kMaxVarint + 1 + kMaxVarint];
  char* p = PutTag(head, field, kLen);
  p = PutVarint(p, inner);
  if (rows.table != 0) {
    p = PutTag(p, kSparseTable, kVarint);
    p = PutVarint(p, rows.table);
  }
  out->append(head, p - head);
  const std::pair<uint32_t, std::pair<const char*, size_t>> arrays[] = {
      {kSparseKeys, {rows.keys, rows.keys_size}},
      {kSparseValues, {rows.values, rows.values_size}},
      {kSparseCounts, {rows.counts, rows.counts_size}}};
  for (const auto& [f, array] : arrays) {
    if (array.second == 0) continue;
    char tag[2 * kMaxVarint];
    char* q = PutTag(tag, f, kLen);
    q = PutVarint(q, array.second);
    out->append(tag, q - tag);
    out->append(array.first, array.second);
  }
}

}  // namespace

SendPins::~SendPins() { WaitReleased(); }

grpc::Slice SendPins::Pin(const char* data, size_t size) {
  {
    absl::MutexLock lock(&mu_);
    ++pinned_;
  }
  // gRPC never writes through a slice it sends.
  return grpc::Slice(const_cast<char*>(data), size, &SendPins::Release, this);
}

void SendPins::Release(void* self) {
  auto* pins = static_cast<SendPins*>(self);
  absl::MutexLock lock(&pins->mu_);
  --pins->pinned_;
}

void SendPins::WaitReleased() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int64_t* pinned) { return *pinned == 0; }, &pinned_));
}

bool SendPins::WaitReleased(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](int64_t* pinned) { return *pinned == 0; }, &pinned_),
      timeout);
}

int64_t SendPins::pinned() {
  absl::MutexLock lock(&mu_);
  return pinned_;
}

grpc::ByteBuffer SerializePush(const PushView& push, SendPins* pins) {
  std::vector<grpc::Slice> slices;
  std::string head(7 * (1 + kMaxVarint), '\0');
  char* p = head.data();
  if (push.placement_epoch != 0) {
    p = PutTag(p, kPushEpoch, kVarint);
    p = PutVarint(p, push.placement_epoch);
  }
  if (push.worker_id != 0) {
    p = PutTag(p, kPushWorker, kVarint);
    p = PutVarint(p,
                  static_cast<uint64_t>(static_cast<int64_t>(push.worker_id)));
  }
  if (push.sequence != 0) {
    p = PutTag(p, kPushSequence, kVarint);
    p = PutVarint(p, push.sequence);
  }
  if (push.clock != 0) {
    p = PutTag(p, kPushClock, kVarint);
    p = PutVarint(p, push.clock);
  }
  if (push.push_key != 0) {
    p = PutTag(p, kPushKey, kVarint);
    p = PutVarint(p, push.push_key);
  }
  if (push.reply_values) {
    p = PutTag(p, kPushReplyValues, kVarint);
    p = PutVarint(p, 1);
  }
  // Each block's prefix joins the bytes before it; its payload is a slice of
  // its own (referenced when pinned).
  std::string pending(head.data(), p - head.data());
  for (const BlockRef& b : push.blocks) {
    char prefix[2 * kMaxVarint + 4 * (1 + kMaxVarint)];
    char* end = PutBlockPrefix(prefix, kPushBlocks, b);
    pending.append(prefix, end - prefix);
    if (b.size == 0) continue;
    slices.emplace_back(pending);
    pending.clear();
    slices.push_back(pins != nullptr ? pins->Pin(b.data, b.size)
                                     : grpc::Slice(b.data, b.size));
  }
  // Sparse rows are copied into the message (they are built per push).
  for (const SparseRef& rows : push.sparse) {
    AppendSparseRows(&pending, kPushSparse, rows);
  }
  if (!pending.empty() || slices.empty()) slices.emplace_back(pending);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

char* Arena::Allocate(size_t bytes) {
  chunks.push_back(std::make_unique<float[]>((bytes + 3) / 4));
  return reinterpret_cast<char*>(chunks.back().get());
}

namespace {

constexpr char kPushWhat[] = "push request";

// A push's block: its header, and its payload in place when aligned, else
// copied into `arena`.
absl::Status ReadPushBlock(Reader& r, Arena* arena, BlockRef* b,
                           int64_t* bytes_in_place, int64_t* bytes_copied) {
  size_t end = 0;
  if (absl::Status s = ReadBlockHeader(r, kPushWhat, b, &end); !s.ok()) {
    return s;
  }
  if (b->size > 0) {
    const char* in_place = r.Contiguous(b->size);
    if (in_place != nullptr &&
        reinterpret_cast<uintptr_t>(in_place) % alignof(float) == 0) {
      b->data = in_place;
      if (bytes_in_place != nullptr) *bytes_in_place += b->size;
    } else {
      char* copy = arena->Allocate(b->size);
      if (in_place != nullptr) {
        std::memcpy(copy, in_place, b->size);
      } else if (!r.CopyTo(copy, b->size)) {
        return Malformed(kPushWhat, "truncated payload");
      }
      b->data = copy;
      if (bytes_copied != nullptr) *bytes_copied += b->size;
    }
  }
  if (r.left() != end) return Malformed(kPushWhat, "block length mismatch");
  return absl::OkStatus();
}

// A varint field of a push: epoch, worker, sequence, key, reply_values or
// clock.
void SetPushField(uint32_t field, uint64_t v, PushView* push) {
  switch (field) {
    case kPushEpoch:
      push->placement_epoch = v;
      break;
    case kPushWorker:
      push->worker_id = static_cast<int32_t>(static_cast<int64_t>(v));
      break;
    case kPushSequence:
      push->sequence = v;
      break;
    case kPushKey:
      push->push_key = v;
      break;
    case kPushReplyValues:
      push->reply_values = v != 0;
      break;
    default:
      push->clock = v;
  }
}

}  // namespace

absl::Status ParsePush(const grpc::ByteBuffer& buffer, Arena* arena,
                       PushView* push, int64_t* bytes_in_place,
                       int64_t* bytes_copied) {
  constexpr const char* kWhat = kPushWhat;
  Reader r(buffer);
  *push = PushView();
  while (r.left() > 0) {
    uint64_t tag = 0, v = 0;
    if (!r.ReadVarint(&tag)) return Malformed(kWhat, "truncated tag");
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const int type = static_cast<int>(tag & 7);
    if (field == kPushBlocks && type == kLen) {
      BlockRef b;
      if (absl::Status s =
              ReadPushBlock(r, arena, &b, bytes_in_place, bytes_copied);
          !s.ok()) {
        return s;
      }
      push->blocks.push_back(b);
      continue;
    }
    if (field == kPushSparse && type == kLen) {
      SparseRef rows;
      if (absl::Status s = ReadSparseRows(r, kWhat, arena, &rows,
                                          bytes_in_place, bytes_copied);
          !s.ok()) {
        return s;
      }
      push->sparse.push_back(rows);
      continue;
    }
    if (type == kVarint && (field == kPushEpoch || field == kPushWorker ||
                            field == kPushSequence || field == kPushClock ||
                            field == kPushKey || field == kPushReplyValues)) {
      if (!r.ReadVarint(&v)) return Malformed(kWhat, "truncated field");
      SetPushField(field, v, push);
    } else if (!r.SkipField(type)) {
      return Malformed(kWhat, "bad field");
    }
  }
  return absl::OkStatus();
}

size_t PullReplyBound(size_t num_blocks, size_t payload_bytes) {
  return payload_bytes + num_blocks * (2 * kMaxVarint + 4 * (1 + kMaxVarint));
}

PullReplyBuilder::PullReplyBuilder(size_t num_blocks, size_t payload_bytes,
                                   uint32_t field)
    : capacity_(PullReplyBound(num_blocks, payload_bytes)), field_(field) {
  grpc_slice raw = grpc_slice_malloc(std::max<size_t>(capacity_, 1));
  base_ = reinterpret_cast<char*>(GRPC_SLICE_START_PTR(raw));
  slice_ = grpc::Slice(raw, grpc::Slice::STEAL_REF);
}

char* PullReplyBuilder::AddBlock(uint32_t id, uint64_t version,
                                 int32_t encoding, size_t size) {
  BlockRef b{id, version, encoding, nullptr, size};
  char* p = PutBlockPrefix(base_ + used_, field_, b);
  used_ = p - base_ + size;
  return p;
}

grpc::ByteBuffer PullReplyBuilder::Finish() {
  grpc::Slice used = slice_.sub(0, used_);
  return grpc::ByteBuffer(&used, 1);
}

namespace {

// A PushResponse's field other than its blocks (duplicate, refused,
// versions, packed or not) into *ack; *read false when `field` is none of
// those.
absl::Status ReadAckField(Reader& r, const char* what, uint32_t field, int type,
                          PushAck* ack, bool* read) {
  if (field == kAckDuplicate && type == kVarint) {
    uint64_t v = 0;
    if (!r.ReadVarint(&v)) return Malformed(what, "truncated field");
    ack->duplicate = v != 0;
    *read = true;
    return absl::OkStatus();
  }
  if (field == kAckRefused && type == kLen) {
    uint64_t length = 0;
    if (!r.ReadVarint(&length) || length > r.left()) {
      return Malformed(what, "truncated field");
    }
    ack->refused.resize(length);
    if (!r.CopyTo(ack->refused.data(), length)) {
      return Malformed(what, "truncated field");
    }
    *read = true;
    return absl::OkStatus();
  }
  if (field == kAckVersions && type == kVarint) {
    uint64_t v = 0;
    if (!r.ReadVarint(&v)) return Malformed(what, "truncated field");
    ack->versions.push_back(v);
    *read = true;
    return absl::OkStatus();
  }
  if (field == kAckVersions && type == kLen) {  // packed
    uint64_t length = 0;
    if (!r.ReadVarint(&length) || length > r.left()) {
      return Malformed(what, "truncated field");
    }
    const size_t end = r.left() - length;
    while (r.left() > end) {
      uint64_t v = 0;
      if (!r.ReadVarint(&v) || r.left() < end) {
        return Malformed(what, "bad packed versions");
      }
      ack->versions.push_back(v);
    }
    *read = true;
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

// The blocks of field `blocks_field` of a PullResponse or PushResponse; with
// `ack`, also the PushResponse's versions, duplicate and refused.
absl::Status ParseBlocks(const char* what, const grpc::ByteBuffer& buffer,
                         uint32_t blocks_field, const BlockFn& block,
                         PushAck* ack) {
  const char* kWhat = what;
  Reader r(buffer);
  while (r.left() > 0) {
    uint64_t tag = 0;
    if (!r.ReadVarint(&tag)) return Malformed(kWhat, "truncated tag");
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const int type = static_cast<int>(tag & 7);
    if (ack != nullptr) {
      bool read = false;
      absl::Status s = ReadAckField(r, kWhat, field, type, ack, &read);
      if (!s.ok()) return s;
      if (read) continue;
    }
    if (field != blocks_field || type != kLen) {
      if (!r.SkipField(type)) return Malformed(kWhat, "bad field");
      continue;
    }
    BlockRef b;
    size_t end = 0;
    if (absl::Status s = ReadBlockHeader(r, kWhat, &b, &end); !s.ok()) {
      return s;
    }
    bool copied = false;
    absl::Status s =
        block(b, [&](char* out) { copied = r.CopyTo(out, b.size); });
    if (!s.ok()) return s;
    if (!copied && !r.Skip(b.size))
      return Malformed(kWhat, "truncated payload");
    if (r.left() != end) return Malformed(kWhat, "block length mismatch");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParsePullReply(const grpc::ByteBuffer& buffer,
                            const BlockFn& block) {
  return ParseBlocks("pull reply", buffer, kPullBlocks, block, nullptr);
}

absl::Status ParsePushReply(const grpc::ByteBuffer& buffer, PushAck* ack,
                            const BlockFn& block) {
  *ack = PushAck();
  return ParseBlocks("push reply", buffer, kAckBlocks, block, ack);
}

}  // namespace downpour::wire
