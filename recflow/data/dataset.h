// Dataset / Iterator: the input pipeline.
//
// A Dataset is an immutable description of a stream of elements (a source
// of files, and stages over it: parse, map, shuffle, batch, prefetch,
// repeat ...). MakeIterator() starts one pass over it; an Iterator yields
// elements one at a time with GetNext(). Datasets are shared
// (std::shared_ptr<const DatasetBase>) and may be iterated by several
// iterators at once; an Iterator is used by one thread at a time (stages
// that run work in the background — parallel map, interleave, prefetch —
// own their threads and hide them behind GetNext).
//
// An element is a std::vector<Tensor> ("components"), as in TensorFlow. A
// record source yields one scalar string tensor per record; a batched parse
// yields the batch layout of recflow/data/batch.h.
//
// Iterator position is checkpointable: Save() writes the state of every
// stage (file index and byte offset of sources, shuffle buffers, the RNG
// state, epoch numbers) under the iterator's prefix into an
// IteratorStateWriter; a fresh iterator from the same dataset definition
// that Restore()s that state continues exactly where the saved one was, so
// a resumed job neither repeats nor skips records. Save must be called
// between GetNext calls; background stages drain or snapshot their
// in-flight work consistently.
//
// Note [Saving the parallel stages]: Save never loses or repeats an element
// that a background thread already pulled from its input.
//   - Parallel Map finishes every call in flight (a call still queued runs on
//     the saving thread) and saves the finished-but-unconsumed results
//     (elements, or errors at their position) in order, together with its
//     input's position after the newest pulled element.
//   - Prefetch pauses its producer thread between two input GetNext calls
//     and saves the buffered elements plus the input's position.
//   - Parallel Interleave pauses its read-ahead tasks between two GetNext
//     calls and saves, per open cycle slot, the input element that opened it
//     (fn is called again on Restore), the slot iterator's position and the
//     read-ahead buffer.
//   - Cache saves the elements it holds (its whole contents once complete),
//     so a restored iterator replays them without the original process.
// Restore must be called on a fresh iterator from the same dataset
// definition, before its first GetNext; a stage's fn (Map, Interleave) must
// be deterministic for the continuation to be exact.
//
// Epochs: Repeat makes a new iterator over its input for every pass, whose
// IteratorContext::epoch is a key derived from the outer key and the pass
// number (the first pass keeps the outer key). Shuffle derives its seed
// from (seed, epoch), so each pass is shuffled differently yet
// reproducibly, and a restored iterator continues the same permutation.
//
// Invalid arguments to the builder (Batch(0), Shuffle(-1) ...) are reported
// by MakeIterator (and by DatasetBase::CheckValid) as InvalidArgument naming
// the stage and the value.
//
// Bad records: sources and parsers consult the pipeline's ErrorPolicy. With
// kSkip (the default) a bad record is dropped and counted in DataStats by
// reason; with kFail GetNext returns DataLoss / InvalidArgument naming the
// file, the line or record number and the reason.

#ifndef RECFLOW_DATA_DATASET_H_
#define RECFLOW_DATA_DATASET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"
#include "recflow/core/tensor.h"
#include "recflow/core/threadpool.h"
#include "recflow/framework/partial_shape.h"

namespace recflow::data {

using Element = std::vector<Tensor>;

// ---------------------------------------------------------------------------
// Bad-record policy and counters.

enum class ErrorMode { kSkip, kFail };

struct ErrorPolicy {
  ErrorMode mode = ErrorMode::kSkip;
};

// Counters shared by all stages of one iterator. Thread-safe.
class DataStats {
 public:
  // A record was read from a source (before parsing).
  void AddRecordsRead(int64_t n);
  // A record was dropped under ErrorMode::kSkip; `reason` is a short stable
  // tag ("bad_crc", "truncated", "wrong_field_count", "not_a_number",
  // "invalid_utf8", "line_too_long", "unreadable_file", ...). `detail` is the
  // full message of the first such record (kept for the report).
  void AddSkipped(absl::string_view reason, absl::string_view detail);

  int64_t records_read() const;
  int64_t records_skipped() const;
  // reason -> count, and reason -> first detail message.
  std::map<std::string, int64_t> skipped_by_reason() const;
  std::map<std::string, std::string> first_skip_detail() const;
  // One line per reason: "skipped 12 records: bad_crc 10 (first: ...), ...",
  // or "no bad records".
  std::string Summary() const;

 private:
  mutable Mutex mu_;
  int64_t read_ = 0;
  int64_t skipped_ = 0;
  std::map<std::string, int64_t> by_reason_;
  std::map<std::string, std::string> first_detail_;
};

// Handles a bad record per policy: with kSkip counts it and returns OK (the
// caller drops the record); with kFail returns `error` (which must name the
// file and line/record and the reason).
absl::Status HandleBadRecord(const ErrorPolicy& policy, DataStats* stats,
                             absl::string_view reason, absl::Status error);

// ---------------------------------------------------------------------------
// Iterator state (checkpointable position).

// A flat map of named scalars, strings and tensors. Keys are
// "<iterator prefix>/<name>". Serializes to bytes (a recflow-own proto-free
// format: length-prefixed entries with a crc32c trailer) so it can be stored
// as one string tensor in a checkpoint.
class IteratorState {
 public:
  void WriteInt(const std::string& key, int64_t v);
  void WriteString(const std::string& key, std::string v);
  void WriteTensor(const std::string& key, const Tensor& t);

  bool Contains(const std::string& key) const;
  // NotFound naming the key when absent; InvalidArgument when of another kind.
  absl::StatusOr<int64_t> ReadInt(const std::string& key) const;
  absl::StatusOr<std::string> ReadString(const std::string& key) const;
  absl::StatusOr<Tensor> ReadTensor(const std::string& key) const;

  std::string Serialize() const;
  // DataLoss on a truncated or corrupted blob.
  static absl::StatusOr<IteratorState> Parse(absl::string_view bytes);

  size_t size() const;

 private:
  struct Entry {
    enum Kind { kInt, kString, kTensor } kind;
    int64_t i = 0;
    std::string s;
    Tensor t;
  };
  std::map<std::string, Entry> entries_;
};

// ---------------------------------------------------------------------------
// Iteration context: what every stage of one iterator shares.

class IteratorResources;  // Private to recflow/data (dataset_internal.h).

struct IteratorContext {
  Env* env = nullptr;  // Env::Default() when null.
  ErrorPolicy error_policy;
  std::shared_ptr<DataStats> stats;  // Created by MakeIterator if null.
  // Threads for parallel stages (map, interleave, parse). When null a
  // parallel stage with num_parallel_calls > 1 creates its own pool.
  ThreadPool* thread_pool = nullptr;

  // Set by the pipeline, not by callers. Pass key of the current epoch (see
  // "Epochs" above): 0 outside any Repeat.
  uint64_t epoch = 0;
  // Per-iterator state that must outlive one pass of a stage (Cache's
  // contents under Repeat). Created by MakeIterator; a stage run with a
  // null `resources` keeps such state per pass only.
  std::shared_ptr<IteratorResources> resources;
};

class DatasetBase;

class IteratorBase {
 public:
  virtual ~IteratorBase() = default;

  // Produces the next element. At the end sets *end_of_sequence = true and
  // leaves *out empty; further calls keep returning end of sequence. An
  // error is sticky only if the stage says so; callers should stop.
  virtual absl::Status GetNext(Element* out, bool* end_of_sequence) = 0;

  // Writes / reads this stage's position (and its inputs', recursively)
  // under prefix().
  virtual absl::Status Save(IteratorState* state) = 0;
  virtual absl::Status Restore(const IteratorState& state) = 0;

  const std::string& prefix() const { return prefix_; }
  const IteratorContext& context() const { return *ctx_; }
  DataStats* stats() const { return ctx_->stats.get(); }

 protected:
  IteratorBase(std::shared_ptr<const IteratorContext> ctx, std::string prefix)
      : ctx_(std::move(ctx)), prefix_(std::move(prefix)) {}
  std::string Key(absl::string_view name) const;  // prefix_ + "/" + name

  std::shared_ptr<const IteratorContext> ctx_;
  std::string prefix_;
};

class DatasetBase : public std::enable_shared_from_this<DatasetBase> {
 public:
  virtual ~DatasetBase() = default;

  // Starts a pass. `prefix` names this stage in saved state (stages append
  // "/<StageName>" for their input's iterator).
  virtual std::unique_ptr<IteratorBase> MakeIteratorInternal(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const = 0;

  virtual const std::vector<DataType>& output_dtypes() const = 0;
  virtual const std::vector<PartialShape>& output_shapes() const = 0;
  // "Batch(4096, drop_remainder)<-Map<-TFRecord(3 files)" style.
  virtual std::string DebugString() const = 0;

  // OK, or the InvalidArgument of an invalid builder argument in this stage
  // or any stage below it. MakeIterator fails with it; an iterator made from
  // an invalid dataset returns it from GetNext.
  virtual absl::Status CheckValid() const { return absl::OkStatus(); }
};

using DatasetPtr = std::shared_ptr<const DatasetBase>;

// A map function: element -> element. Must be thread-safe (parallel map
// calls it concurrently) and deterministic for reproducible pipelines.
using MapFn = std::function<absl::StatusOr<Element>(Element)>;

// A complete iterator over a pipeline, with its context.
class Iterator {
 public:
  absl::Status GetNext(Element* out, bool* end_of_sequence) {
    return impl_->GetNext(out, end_of_sequence);
  }
  // Position as bytes (IteratorState::Serialize) / restore from them.
  absl::StatusOr<std::string> SaveToString();
  absl::Status RestoreFromString(absl::string_view bytes);
  absl::Status Save(IteratorState* state) { return impl_->Save(state); }
  absl::Status Restore(const IteratorState& state) {
    return impl_->Restore(state);
  }
  DataStats& stats() { return *ctx_->stats; }

 private:
  friend class Dataset;
  DatasetPtr dataset_;  // Keeps the pipeline alive; destroyed last.
  std::shared_ptr<const IteratorContext> ctx_;
  std::unique_ptr<IteratorBase> impl_;
};

// ---------------------------------------------------------------------------
// The fluent builder: value type over a DatasetPtr.
//
//   ASSIGN_OR_RETURN(auto files, ListFiles(env, {"/data/day_*.tfrecord"}));
//   Dataset ds = Dataset::TFRecord(files, {.num_shards=4, .shard_index=1})
//                    .Shuffle(10000, /*seed=*/7)
//                    .Batch(4096, /*drop_remainder=*/true)
//                    .Map(ParseCriteoBatchFn(spec), /*num_parallel_calls=*/2)
//                    .Prefetch(2);
//   ASSIGN_OR_RETURN(Iterator it, ds.MakeIterator());

struct ShardOptions {
  int num_shards = 1;  // Files are split: file i goes to shard i % num_shards.
  int shard_index = 0;
};

struct TextLineOptions {
  // Lines longer than this are bad records ("line_too_long").
  int64_t max_line_bytes = 1 << 20;
  int64_t read_buffer_bytes = 1 << 20;
  // 1: each element is one scalar string. k > 1: each element is a string
  // vector [<= k] of consecutive lines (a "line batch", so that a batched
  // parser avoids one element per line; the last one of the input may be
  // shorter).
  int64_t lines_per_element = 1;
  // Adds a second component naming where each line came from, for parser
  // errors: a string "path:LINE" (1-based), scalar or [<= k] like the lines.
  bool emit_origin = false;
};

struct BatchOptions {
  // Batch components of unknown dim 0 ragged (values + row_splits); false:
  // stack every component densely (tf.data's semantics).
  bool ragged = true;
};

struct TFRecordOptions {
  // Records longer than this are bad ("record_too_long"), never allocated.
  int64_t max_record_bytes = int64_t{1} << 28;
  int64_t read_buffer_bytes = 1 << 20;
  int64_t records_per_element = 1;  // As TextLineOptions::lines_per_element.
  bool emit_origin = false;         // "path:record N" (0-based record index).
};

// Expands glob patterns (*, ?, [..] in the last path component) and plain
// paths into a sorted, de-duplicated file list. NotFound naming the pattern
// when a pattern matches nothing (a plain path that does not exist matches
// nothing); InvalidArgument for a glob character in a directory component.
// Directories matched by a glob are left out. `env` null: Env::Default().
absl::StatusOr<std::vector<std::string>> ListFiles(
    Env* env, const std::vector<std::string>& patterns);

class Dataset {
 public:
  explicit Dataset(DatasetPtr impl) : impl_(std::move(impl)) {}

  // Sources. Files are read in the given order (after sharding).
  // Elements: one scalar string per line (without the '\n' or "\r\n"; a
  // last line without '\n' counts; empty lines are empty strings). An empty
  // file gives no elements. Bad records per ErrorPolicy: a file that cannot
  // be opened or read ("unreadable_file"; kFail returns the Env's error,
  // e.g. NotFound, naming the path) and a line longer than max_line_bytes
  // ("line_too_long"; kFail: DataLoss naming "path:LINE"). A multi-line
  // element interrupted by such an error is returned first (shorter); the
  // error comes with the next GetNext. Position: file index and byte offset
  // (a restore seeks there). Files are read with read_buffer_bytes reads
  // through IteratorContext::env; the only per-line allocation is the
  // element's std::string.
  static Dataset TextLine(std::vector<std::string> files,
                          ShardOptions shard = {}, TextLineOptions opts = {});
  // Elements: one scalar string per record.
  static Dataset TFRecord(std::vector<std::string> files,
                          ShardOptions shard = {}, TFRecordOptions opts = {});
  // Elements: the given tensors' slices along dim 0 (all components must
  // have the same dim 0). For tests and in-memory data.
  static Dataset FromTensorSlices(Element components);
  // Elements: 0..n-1 as int64 scalars.
  static Dataset Range(int64_t n);

  // Stages.
  // For each input element (e.g. a file name), fn(element) gives a dataset;
  // `cycle_length` of them are read at once, `block_length` elements from
  // each in turn; with num_parallel_calls > 1 they are read ahead on
  // threads. Deterministic order by default. The element type of the
  // datasets fn returns is unknown to the builder: pass out_dtypes /
  // out_shapes so that a Batch above can tell ragged components (empty:
  // unknown, Batch then stacks every component densely).
  Dataset Interleave(std::function<absl::StatusOr<Dataset>(const Element&)> fn,
                     int cycle_length, int block_length = 1,
                     int num_parallel_calls = 1,
                     std::vector<DataType> out_dtypes = {},
                     std::vector<PartialShape> out_shapes = {}) const;
  // Applies fn to each element; with num_parallel_calls > 1 runs up to that
  // many calls at once and still yields in input order (deterministic).
  // An error returned by fn is returned by GetNext at that element's
  // position; the next GetNext goes on with the following element.
  // num_parallel_calls == -1 means NumSchedulableCPUs(). out_dtypes /
  // out_shapes declare fn's output (empty: unknown); when declared, every
  // output is checked against them (InvalidArgument naming the component).
  Dataset Map(MapFn fn, int num_parallel_calls = 1,
              std::vector<DataType> out_dtypes = {},
              std::vector<PartialShape> out_shapes = {}) const;
  // Reservoir of buffer_size elements; seed < 0 means nondeterministic.
  // Each epoch (each pass of a Repeat above this stage's input) reshuffles
  // with a seed derived from (seed, epoch).
  Dataset Shuffle(int64_t buffer_size, int64_t seed,
                  bool reshuffle_each_iteration = true) const;
  // Stacks batch_size elements along a new dim 0. Components whose dim 0
  // differs between elements (variable-length id lists) are batched ragged:
  // that component becomes two: values (concatenated) and row_splits (int64
  // [B+1]). Which components are ragged is decided by output_shapes (an
  // unknown dim 0 -> ragged).
  // REQUIRES (else InvalidArgument at MakeIterator): batch_size >= 1. An
  // input error in the middle of a batch is returned at once; the elements
  // already collected are kept and start the next batch.
  // With opts.ragged false every component is stacked densely, as tf.data's
  // batch does: elements whose shapes differ give InvalidArgument ("Cannot
  // batch tensors with different shapes in component C ...").
  Dataset Batch(int64_t batch_size, bool drop_remainder = false,
                BatchOptions opts = {}) const;
  // A background thread keeps up to buffer_size (>= 1) elements ready.
  Dataset Prefetch(int64_t buffer_size) const;
  // An input that yields nothing in a pass ends the repetition (no busy
  // loop). count >= -1.
  Dataset Repeat(int64_t count = -1) const;  // -1: forever.
  // -1: all elements (Take) / skip everything (Skip); otherwise >= 0.
  Dataset Take(int64_t count) const;
  Dataset Skip(int64_t count) const;
  // tf.data's shard: keeps the elements whose position i (0-based, counted
  // over the elements the input yields) satisfies i % num_shards == index,
  // so that num_shards workers each read a disjoint 1/num_shards of the
  // input (docs/distributed.md). Prefer sharding files (ShardOptions) when
  // there are many: here every shard still reads the whole input. An input
  // error is returned at once and takes no position (as in tf.data).
  // Position: the next element's index and the input's position.
  // REQUIRES (else InvalidArgument at MakeIterator): num_shards >= 1 and
  // 0 <= index < num_shards.
  Dataset Shard(int64_t num_shards, int64_t index) const;
  // First pass reads the input and keeps all elements in memory; later
  // passes (under Repeat) replay them.
  Dataset Cache() const;

  absl::StatusOr<Iterator> MakeIterator(IteratorContext ctx = {}) const;

  const DatasetPtr& impl() const { return impl_; }
  std::string DebugString() const { return impl_->DebugString(); }

 private:
  DatasetPtr impl_;
};

}  // namespace recflow::data

#endif  // RECFLOW_DATA_DATASET_H_
