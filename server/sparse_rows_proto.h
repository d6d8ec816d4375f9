// SparseTable::Rows as the ReplicaSparseRows message and a block as the
// ReplicaBlock message, and back: the forms rows and blocks travel in between
// ps (replica cuts, live moves).
#ifndef DOWNPOUR_SERVER_SPARSE_ROWS_PROTO_H_
#define DOWNPOUR_SERVER_SPARSE_ROWS_PROTO_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/ps.pb.h"
#include "server/block_store.h"
#include "server/sparse_table.h"

namespace downpour::server {

// `in` as rows; InvalidArgument, beginning with `what` ("replicate"), when
// its optimizer is unknown, its arrays are not whole values or their lengths
// disagree.
absl::Status ToRows(const proto::ReplicaSparseRows& in, const char* what,
                    SparseTable::Rows* out);

// Rows [begin, begin + n) of `rows` of table `table` into *out, with the
// table's figures (evicted keys not included).
void FromRows(uint32_t table, const SparseTable::Rows& rows, size_t begin,
              size_t n, proto::ReplicaSparseRows* out);

// `block` as a ReplicaBlock (values and state as float32 bytes).
void FromBlock(const BlockStore::BlockSnapshot& block,
               proto::ReplicaBlock* out);

// `in` as a block; InvalidArgument, beginning with `what` ("replicate"), when
// its values or state are not whole float32 values or not all finite (a ps
// holds finite values only: such a block is corrupt or forged).
absl::Status ToBlock(const proto::ReplicaBlock& in, const char* what,
                     BlockStore::BlockSnapshot* out);

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_SPARSE_ROWS_PROTO_H_
