#include "worker/sparse_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace downpour::worker {
namespace {

// Chunks of the final evaluation, in rows (bounded memory).
constexpr int64_t kTestChunkRows = 8192;

// The error `parse` reported on `chunk`, parsed again with its first line
// numbered as in its file (the happy path never counts lines).
absl::Status ParseErrorIn(const LineParser& parse,
                          const std::vector<data::InputFile>& files,
                          const data::TextChunk& chunk, absl::Status error) {
  const data::InputFile& file = files[chunk.file];
  absl::StatusOr<int64_t> line = data::LineNumberAt(file, chunk.offset);
  if (!line.ok()) return error;
  data::SparseDataset scratch;
  absl::Status again = parse(chunk.text, file.path, *line, &scratch);
  return again.ok() ? error : again;
}

}  // namespace

StreamingBatches::Part::Part(int index, const StreamOptions& options)
    : index(index),
      reader(options.files, options.plan[index], options.buffer_bytes) {}

StreamingBatches::StreamingBatches(StreamOptions options)
    : options_(std::move(options)),
      window_(options_.shuffle_window, options_.seed) {}

StreamingBatches::~StreamingBatches() {
  Stop();
  if (reader_.joinable()) reader_.join();
}

absl::Status StreamingBatches::SetParts(
    const std::vector<PartProgress>& parts) {
  absl::MutexLock lock(&mu_);
  // The new parts first, each at its position: an error changes nothing.
  std::vector<std::shared_ptr<Part>> kept;
  for (const PartProgress& g : parts) {
    bool held = false;
    for (const std::shared_ptr<Part>& p : parts_) held |= p->index == g.part;
    if (held) continue;
    ASSIGN_OR_RETURN(std::shared_ptr<Part> p, NewPart(g));
    kept.push_back(std::move(p));
  }
  for (const std::shared_ptr<Part>& p : parts_) {
    const bool listed =
        std::any_of(parts.begin(), parts.end(),
                    [&](const PartProgress& g) { return g.part == p->index; });
    if (listed) {
      kept.push_back(p);
    } else {
      p->dropped = true;
    }
  }
  std::sort(kept.begin(), kept.end(),
            [](const std::shared_ptr<Part>& a, const std::shared_ptr<Part>& b) {
              return a->index < b->index;
            });
  parts_ = std::move(kept);
  if (!reader_.joinable()) reader_ = std::thread([this] { ReadLoop(); });
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<StreamingBatches::Part>>
StreamingBatches::NewPart(const PartProgress& g) const {
  if (g.part < 0 || g.part >= static_cast<int>(options_.plan.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("data part ", g.part, " is not one of the job's ",
                     options_.plan.size(), " parts"));
  }
  auto p = std::make_shared<Part>(g.part, options_);
  p->epoch = g.epoch;
  p->examples = g.examples;
  p->reported = g;
  if (!Finished(*p)) {
    absl::Status seek = p->reader.Seek(g.position);
    if (!seek.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data part ", g.part, " cannot go on from its saved position (epoch ",
          g.epoch, ", segment ", g.position.segment, ", byte ",
          g.position.offset, "): ", seek.message(),
          ". Did the input files change since the position was saved? Give "
          "every worker the same files; to start over, run the job without "
          "--resume"));
    }
  }
  p->bytes_done = p->reader.bytes_done();
  return p;
}

std::vector<int> StreamingBatches::parts() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> out;
  for (const std::shared_ptr<Part>& p : parts_) out.push_back(p->index);
  return out;
}

std::vector<PartProgress> StreamingBatches::Positions() const {
  absl::MutexLock lock(&mu_);
  std::vector<PartProgress> out;
  for (const std::shared_ptr<Part>& p : parts_) out.push_back(p->reported);
  return out;
}

int64_t StreamingBatches::bytes_read() const {
  absl::MutexLock lock(&mu_);
  int64_t bytes = 0;
  for (const std::shared_ptr<Part>& p : parts_) {
    const int64_t size = options_.plan[p->index].bytes();
    bytes +=
        Finished(*p) ? size * options_.epochs : size * p->epoch + p->bytes_done;
  }
  return bytes;
}

int64_t StreamingBatches::bytes_total() const {
  absl::MutexLock lock(&mu_);
  int64_t bytes = 0;
  for (const std::shared_ptr<Part>& p : parts_) {
    bytes += options_.plan[p->index].bytes() * options_.epochs;
  }
  return bytes;
}

void StreamingBatches::Stop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
}

bool StreamingBatches::failed() const {
  absl::MutexLock lock(&mu_);
  return !error_.ok();
}

double StreamingBatches::wait_seconds() const {
  absl::MutexLock lock(&mu_);
  return wait_seconds_;
}

bool StreamingBatches::ReaderMayGo() const {
  if (stop_ || !error_.ok()) return true;
  if (queue_.size() >= options_.queue_chunks) return false;
  return std::any_of(
      parts_.begin(), parts_.end(),
      [this](const std::shared_ptr<Part>& p) { return !Finished(*p); });
}

bool StreamingBatches::ChunkOrEnd() const {
  if (!queue_.empty() || stop_ || !error_.ok()) return true;
  return !reading_ && std::all_of(parts_.begin(), parts_.end(),
                                  [this](const std::shared_ptr<Part>& p) {
                                    return Finished(*p);
                                  });
}

std::shared_ptr<StreamingBatches::Part> StreamingBatches::NextPart() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &StreamingBatches::ReaderMayGo));
  if (stop_ || !error_.ok()) return nullptr;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const size_t k = (next_part_ + i) % parts_.size();
    if (Finished(*parts_[k])) continue;
    next_part_ = k + 1;
    reading_ = true;
    return parts_[k];
  }
  return nullptr;  // not reached: ReaderMayGo saw an unfinished part
}

void StreamingBatches::ReadLoop() {
  while (true) {
    std::shared_ptr<Part> part = NextPart();
    if (part == nullptr) return;
    absl::Status status = ReadChunk(part.get());
    absl::MutexLock lock(&mu_);
    reading_ = false;
    if (!status.ok()) {
      if (error_.ok()) error_ = std::move(status);
      return;
    }
  }
}

absl::Status StreamingBatches::ReadChunk(Part* part) {
  data::TextChunk text;
  ASSIGN_OR_RETURN(const bool more, part->reader.Next(&text));
  if (!more) {
    int32_t epoch;
    {
      absl::MutexLock lock(&mu_);
      epoch = ++part->epoch;
      part->examples = 0;
      part->bytes_done = 0;
      if (Finished(*part) && !Queued(part->index)) {
        part->reported = {part->index, data::PartPosition(), epoch, 0};
      }
    }
    if (options_.epochs > 0 && epoch >= options_.epochs) {
      return absl::OkStatus();
    }
    return part->reader.Seek(data::PartPosition());
  }
  Chunk chunk;
  {
    absl::MutexLock lock(&mu_);
    if (!spare_.empty()) {
      chunk.rows = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  absl::Status parsed =
      options_.parse(text.text, options_.files[text.file].path,
                     text.offset == 0 ? 1 : 0, &chunk.rows);
  if (!parsed.ok()) {
    return ParseErrorIn(options_.parse, options_.files, text,
                        std::move(parsed));
  }
  absl::MutexLock lock(&mu_);
  if (part->dropped) return absl::OkStatus();
  part->examples += chunk.rows.rows();
  part->bytes_done = part->reader.bytes_done();
  chunk.after = {part->index, text.next, part->epoch, part->examples};
  queue_.push_back(std::move(chunk));
  return absl::OkStatus();
}

bool StreamingBatches::Queued(int part) const {
  return std::any_of(queue_.begin(), queue_.end(),
                     [part](const Chunk& c) { return c.after.part == part; });
}

void StreamingBatches::NoteRead(const PartProgress& after) {
  for (const std::shared_ptr<Part>& p : parts_) {
    if (p->index != after.part) continue;
    p->reported = after;
    // The part's last chunk of its last epoch: it is done.
    if (Finished(*p) && !Queued(p->index)) {
      p->reported = {p->index, data::PartPosition(), p->epoch, 0};
    }
  }
}

absl::StatusOr<bool> StreamingBatches::FillWindow(size_t batch) {
  while (!window_.Full(batch)) {
    Chunk chunk;
    {
      absl::MutexLock lock(&mu_);
      if (!ChunkOrEnd()) {
        const absl::Time start = absl::Now();
        mu_.Await(absl::Condition(this, &StreamingBatches::ChunkOrEnd));
        wait_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
      }
      if (!error_.ok()) return error_;
      if (stop_) return false;
      if (queue_.empty()) return true;  // every part read: drain
      chunk = std::move(queue_.front());
      queue_.pop_front();
      NoteRead(chunk.after);
    }
    for (int64_t r = 0; r < chunk.rows.rows(); ++r) {
      window_.Add(chunk.rows, r, chunk.after.epoch);
    }
    ClearRows(&chunk.rows);
    absl::MutexLock lock(&mu_);
    if (spare_.size() <= options_.queue_chunks) {
      spare_.push_back(std::move(chunk.rows));
    }
  }
  return true;
}

absl::StatusOr<bool> StreamingBatches::Next(int batch, data::SparseDataset* out,
                                            std::vector<int32_t>* epochs) {
  const size_t want = static_cast<size_t>(std::max(1, batch));
  ASSIGN_OR_RETURN(const bool go, FillWindow(want));
  if (!go || window_.size() == 0) return false;
  ClearRows(out);
  epochs->clear();
  const size_t n = std::min(want, window_.size());
  for (size_t i = 0; i < n; ++i) epochs->push_back(window_.Take(out));
  return true;
}

absl::StatusOr<std::unique_ptr<StreamingTestSet>> StreamingTestSet::Open(
    std::vector<data::InputFile> files, LineParser parse, int64_t sample_rows) {
  std::unique_ptr<StreamingTestSet> set(
      new StreamingTestSet(std::move(files), std::move(parse)));
  if (sample_rows <= 0) return set;
  RETURN_IF_ERROR(set->Read(
      sample_rows, [&](data::SparseDataset* chunk) -> absl::StatusOr<bool> {
        for (int64_t r = 0; r < std::min(chunk->rows(), sample_rows); ++r) {
          AppendRow(*chunk, r, &set->sample_);
        }
        return false;
      }));
  return set;
}

absl::Status StreamingTestSet::ForEachChunk(
    const std::function<absl::Status(const data::SparseDataset&)>& fn) const {
  return Read(kTestChunkRows,
              [&](data::SparseDataset* chunk) -> absl::StatusOr<bool> {
                RETURN_IF_ERROR(fn(*chunk));
                return true;
              });
}

absl::Status StreamingTestSet::Read(
    int64_t rows,
    const std::function<absl::StatusOr<bool>(data::SparseDataset*)>& fn) const {
  data::PartReader reader(files_, data::PlanParts(files_, 1)[0]);
  data::SparseDataset chunk;
  data::TextChunk text;
  while (true) {
    ASSIGN_OR_RETURN(const bool more, reader.Next(&text));
    if (more) {
      absl::Status parsed = parse_(text.text, files_[text.file].path,
                                   text.offset == 0 ? 1 : 0, &chunk);
      if (!parsed.ok()) {
        return ParseErrorIn(parse_, files_, text, std::move(parsed));
      }
    }
    if (chunk.rows() >= rows || (!more && chunk.rows() > 0)) {
      ASSIGN_OR_RETURN(const bool go, fn(&chunk));
      if (!go) return absl::OkStatus();
      ClearRows(&chunk);
    }
    if (!more) return absl::OkStatus();
  }
}

absl::StatusOr<StreamSource> OpenStreamSource(const DataSection& data,
                                              Task task) {
  StreamSource source;
  ASSIGN_OR_RETURN(source.train_files, data::ExpandInputs(InputPatterns(data)));
  absl::StatusOr<std::vector<data::InputFile>> test_files =
      data::ExpandInputs({data.test_path});
  if (!test_files.ok()) {
    // ExpandInputs names data.path in its messages.
    return absl::Status(
        test_files.status().code(),
        absl::StrCat(
            "data.test_path: ",
            absl::StripPrefix(test_files.status().message(), "data.path: ")));
  }
  ASSIGN_OR_RETURN(source.parse,
                   MakeLineParser(data, task, source.train_files));
  ASSIGN_OR_RETURN(source.test,
                   StreamingTestSet::Open(*std::move(test_files), source.parse,
                                          data.eval_rows));
  return source;
}

}  // namespace downpour::worker
