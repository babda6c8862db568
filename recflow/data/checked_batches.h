// The checks between parsing text lines and training on them: a batch
// whose lines were all bad is skipped and counted, and a data file none of
// whose lines is good is an error naming it (docs/formats/text.md, "Bad
// records").
//
//   Dataset ds = Dataset::TextLine(files, {}, {.lines_per_element = 1024,
//                                              .emit_origin = true});
//   ds = ds.Map(CountingParseFn(parser, quiet_parser), threads, dtypes, shapes);
//   ds = CheckedBatches(ds, {.data_name = "the data x.tsv", .records = stats,
//                            .batches = batch_stats});
//
// The parse step (CountingParseFn) counts, per batch, how many lines of
// each file it read and how many of them were good, and passes those counts
// as two extra components; the CheckedBatches stage above it consumes them.
// Both are thread-compatible as Dataset stages are; BatchStats is
// thread-safe.
#ifndef RECFLOW_DATA_CHECKED_BATCHES_H_
#define RECFLOW_DATA_CHECKED_BATCHES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "recflow/data/dataset.h"
#include "recflow/data/text_parsers.h"

namespace recflow::data {

// Batches the input skipped because none of their lines was good.
struct BatchStats {
  std::atomic<int64_t> empty_batches{0};
};

// The parse step: {lines, origins} (TextLineOptions::emit_origin) -> the
// parser's batch plus two components that CheckedBatches consumes: the
// files the lines came from (string [k], in order) and, per file, its lines
// and good lines in this batch (int64 [k, 2]). `quiet` is the same parser
// counting nothing (a batch spanning files is re-parsed per file with it
// when some of its lines were bad).
MapFn CountingParseFn(std::shared_ptr<const TextParser> parser,
                      std::shared_ptr<const TextParser> quiet);

struct CheckedBatchesOptions {
  // Each element holds every line of its files (no sharding by batch), so
  // a file without a good line can be told; else only a whole pass without
  // one is an error.
  bool whole_files = true;
  std::string data_name;                     // for messages: "the data X"
  std::shared_ptr<DataStats> records;        // bad-record counts, for messages
  std::shared_ptr<BatchStats> batches;       // counts the skipped batches
};

// Over CountingParseFn's output: drops its two count components, skips (and
// counts) batches with no row, and returns InvalidArgument naming a file
// once it has been read to its end without a good line (whole_files), or
// naming the data when a whole pass had lines but none good. The batch
// read together with that news is kept and returned by the next GetNext
// (and saved with the position). Stateless between files otherwise; its
// input keeps the stage's prefix, so positions saved without the stage
// restore.
Dataset CheckedBatches(const Dataset& counted, CheckedBatchesOptions options);

// "N batches of only bad lines skipped", or "" when none was (null: none).
std::string SkippedBatchesNote(const BatchStats* batches);

// "input: <records' summary>; <SkippedBatchesNote> (bad lines are skipped
// and counted; ...)", or "" when nothing was skipped. Either may be null.
std::string SkippedRecordsReport(const DataStats* records, const BatchStats* batches);

}  // namespace recflow::data

#endif  // RECFLOW_DATA_CHECKED_BATCHES_H_
