// SparseTable::Rows as the ReplicaSparseRows message and back: the form rows
// travel in between ps (replica cuts, bucket moves).
#ifndef DOWNPOUR_SERVER_SPARSE_ROWS_PROTO_H_
#define DOWNPOUR_SERVER_SPARSE_ROWS_PROTO_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/ps.pb.h"
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

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_SPARSE_ROWS_PROTO_H_
