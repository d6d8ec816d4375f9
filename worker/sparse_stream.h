// A sparse worker's training data streamed from its byte-range parts of the
// input files (data/input_parts.h), in bounded memory: a reader thread reads
// and parses the parts a chunk at a time into a queue of a few chunks, and
// the training thread draws minibatches from a ShuffleWindow the queue
// fills. Each epoch reads the parts again. The worker reports each part's
// position (segment, byte offset, epoch, examples read), and a part handed
// to it with a position (an adopted part, a resumed job) is read on from
// there.
//
//   ASSIGN_OR_RETURN(StreamSource source, OpenStreamSource(config.data, task));
//   StreamingBatches batches(std::move(source.options));
//   batches.SetParts({{/*part=*/1}});          // from its start
//   SparseLoop loop(spec, ps, ..., &batches, ...);
//
// What a restart loses or repeats: a part's position is just after the
// last rows that entered the shuffle window, so the rows in the window but
// not yet trained (at most data.shuffle_window, plus one chunk) are skipped
// when another worker or a resumed job continues from it; the rows still
// queued are read again.
#ifndef DOWNPOUR_WORKER_SPARSE_STREAM_H_
#define DOWNPOUR_WORKER_SPARSE_STREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/config.h"
#include "data/input_parts.h"
#include "data/sparse_dataset.h"
#include "worker/line_parsers.h"
#include "worker/sparse_batches.h"

namespace downpour::worker {

// One part's progress: where its reader is, the epoch being read (equal to
// the epochs to read when it is done) and the examples read in that epoch.
struct PartProgress {
  int part = 0;
  data::PartPosition position;
  int32_t epoch = 0;
  int64_t examples = 0;
};

struct StreamOptions {
  std::vector<data::InputFile> files;
  std::vector<data::InputPart> plan;  // every part of the job
  LineParser parse;
  int epochs = 1;  // 0: read on for ever (training.steps ends the job)
  size_t shuffle_window = 20000;
  uint64_t seed = 0;
  size_t queue_chunks = 4;  // parsed chunks waiting for the window
  size_t buffer_bytes = size_t{256} << 10;  // text per chunk
};

// Thread-safe but for Next(), which one training thread calls.
class StreamingBatches : public SparseBatches {
 public:
  explicit StreamingBatches(StreamOptions options);
  ~StreamingBatches() override;  // stops and joins the reader

  StreamingBatches(const StreamingBatches&) = delete;
  StreamingBatches& operator=(const StreamingBatches&) = delete;

  // The parts to read now: a part not read yet starts at its progress (a
  // default PartProgress: its start); a part read already goes on where it
  // is; a part no longer listed is dropped (its rows read so far stay in the
  // window). Starts the reader on the first call. InvalidArgument for a part
  // outside the plan or a position outside its part.
  absl::Status SetParts(const std::vector<PartProgress>& parts)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<int> parts() const ABSL_LOCKS_EXCLUDED(mu_);
  // Every part's progress, in part order.
  std::vector<PartProgress> Positions() const ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes of the parts read so far over all epochs, and what all epochs
  // read (0 when epochs is 0).
  int64_t bytes_read() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t bytes_total() const ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<bool> Next(int batch, data::SparseDataset* out,
                            std::vector<int32_t>* epochs) override
      ABSL_LOCKS_EXCLUDED(mu_);
  int64_t rows_per_epoch() const override { return -1; }
  int64_t total_batches() const override { return -1; }
  double wait_seconds() const override ABSL_LOCKS_EXCLUDED(mu_);
  // True once reading or parsing failed (Next returned the error).
  bool failed() const ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Part {
    Part(int index, const StreamOptions& options);
    const int index;
    data::PartReader reader;  // the reader thread's only
    // The reader's place: the epoch it reads, the examples it read in it.
    int32_t epoch = 0;
    int64_t examples = 0;
    int64_t bytes_done = 0;  // of this epoch
    // What Positions() reports: just after the last chunk that entered the
    // window (rows still queued are not counted as read).
    PartProgress reported;
    bool dropped = false;
  };
  struct Chunk {
    data::SparseDataset rows;
    PartProgress after;  // the part's progress once these rows are read
  };

  // A part to read from `progress`; InvalidArgument for a part outside
  // the plan or a position the reader cannot seek to.
  absl::StatusOr<std::shared_ptr<Part>> NewPart(
      const PartProgress& progress) const;
  bool Finished(const Part& part) const {
    return options_.epochs > 0 && part.epoch >= options_.epochs;
  }
  // Await conditions: the reader may read a chunk (or must end); the
  // training thread has a chunk to take (or nothing more will come).
  bool ReaderMayGo() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ChunkOrEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // The next part with rows left to read, round robin; null when stopped.
  std::shared_ptr<Part> NextPart() ABSL_LOCKS_EXCLUDED(mu_);
  // Reads and parses one chunk of `part` (or starts its next epoch).
  absl::Status ReadChunk(Part* part) ABSL_LOCKS_EXCLUDED(mu_);
  // The parse error of a chunk, with its line numbered in its file.
  absl::Status ParseError(const data::TextChunk& chunk);
  // Whether a chunk of `part` waits in the queue.
  bool Queued(int part) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A chunk entered the window: its part's reported progress moves on.
  void NoteRead(const PartProgress& after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves queued chunks into the window until it is full or nothing more
  // will come. false when stopped.
  absl::StatusOr<bool> FillWindow(size_t batch) ABSL_LOCKS_EXCLUDED(mu_);

  const StreamOptions options_;
  ShuffleWindow window_;  // training thread only

  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Part>> parts_ ABSL_GUARDED_BY(mu_);
  size_t next_part_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Chunk> queue_ ABSL_GUARDED_BY(mu_);
  // Emptied chunks' buffers, reused by the reader: rows parsed in one thread
  // and freed in another would otherwise pile up in the reader's malloc
  // arena.
  std::vector<data::SparseDataset> spare_ ABSL_GUARDED_BY(mu_);
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // a chunk is being read
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  double wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread reader_;
};

// The test file(s) of a streamed job: the first `sample_rows` rows kept for
// the periodic evaluations, and every row streamed chunk by chunk for the
// final one.
class StreamingTestSet : public SparseTestSet {
 public:
  // Reads the sample; the reader's and parser's errors.
  static absl::StatusOr<std::unique_ptr<StreamingTestSet>> Open(
      std::vector<data::InputFile> files, LineParser parse,
      int64_t sample_rows);

  const data::SparseDataset& sample() const override { return sample_; }
  absl::Status ForEachChunk(
      const std::function<absl::Status(const data::SparseDataset&)>& fn)
      const override;

 private:
  StreamingTestSet(std::vector<data::InputFile> files, LineParser parse)
      : files_(std::move(files)), parse_(std::move(parse)) {}
  // Reads every row in chunks of about `rows` rows, calling fn on each,
  // until fn returns false.
  absl::Status Read(
      int64_t rows,
      const std::function<absl::StatusOr<bool>(data::SparseDataset*)>& fn)
      const;

  const std::vector<data::InputFile> files_;
  const LineParser parse_;
  data::SparseDataset sample_;
};

// What a streamed job's worker reads: its train files, the parser and the
// test set.
struct StreamSource {
  std::vector<data::InputFile> train_files;
  LineParser parse;
  std::unique_ptr<StreamingTestSet> test;
};

// Expands data.path and data.test_path, makes the parser and reads the test
// sample: the errors of each (a missing file, a bad test line) before
// training starts.
absl::StatusOr<StreamSource> OpenStreamSource(const DataSection& data,
                                              Task task);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_SPARSE_STREAM_H_
