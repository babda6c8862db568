// StreamTextLines: a source that follows text files as they are written, for
// online training on a live log (`recflow train --stream`,
// docs/online_learning.md).
//
//   StreamOptions o;
//   o.pattern = "/logs/clicks-*.tsv";
//   o.lines_per_element = 4096;
//   o.stop = [] { return stop_requested.load(); };
//   Dataset ds = StreamTextLines(o).Map(parse, ...);
//
// Which files, in which order: those matching `pattern` (a glob in its last
// component, as ListFiles), by name: name log files so that they sort in the
// order they are written (a timestamp or a zero-padded number). Files whose
// name ends with done_suffix are markers, never data.
//
// Following: the source reads the current file line by line; at its end it
// moves on to the next file once the current one is complete, and
// otherwise waits (polling every poll_seconds) for more lines. A file is
// complete when a file after it in name order exists (the writer moved
// on), or, with done_suffix set, only when FILE + done_suffix exists (then
// a newer file does not end it: the writer says when it is done). A line is
// taken only once its '\n' is written (a half-written last line waits); a
// complete file's last line needs none. Files are never reopened once
// complete, and a file deleted before it is read is skipped.
//
// Elements: as TextLine's (dataset.h): a string vector [<= k] of lines
// (k = lines_per_element; a scalar for k = 1), with the "path:LINE" origins
// as a second component when emit_origin. While the stream is idle, an
// element is returned short once max_wait_secs pass without a new line
// (never empty), so that a slow stream still trains.
//
// The end: `stop` (asked at every wait) returning true ends the sequence
// (after the lines gathered so far); nothing else does. Bad records: a line
// longer than max_line_bytes ("line_too_long") and a file that cannot be
// read ("unreadable_file") follow the context's ErrorPolicy (skip or fail,
// naming path:LINE or the path).
//
// Position (checkpoints): the current file's name, the byte offset and line
// number of the next unread line. A restore resumes there: the file by its
// name (neither a record repeated nor skipped), or, when that file is gone,
// the first file after it in name order.
//
// GetNext blocks while the stream waits, until lines come or `stop` says
// so: read it on the consumer's thread, not under Prefetch or a parallel
// Map (their threads read ahead, would hold a ready element back until the
// next arrives, and would wait for the stream when the iterator is
// destroyed).
//
// TFRecord streams (StreamTfRecords): the same following, over files of
// TFRecord-framed records (recflow/core/record_io.h) instead of lines. A
// record is taken once all of it (header, data and both crcs) is written; a
// half-written one waits, and one left half-written in a complete file is
// "truncated". A data crc mismatch ("bad_crc") or a length over
// max_line_bytes ("record_too_long") drops that record; a length whose crc
// does not match ("truncated": the framing is lost) drops the rest of the
// file once it is complete. Each follows the context's ErrorPolicy, naming
// the file and the record's offset. The position is the next record's byte
// offset and the records taken ("path:N" origins count records from 1).
//
// Not thread-safe, as iterators are not.
#ifndef RECFLOW_DATA_STREAM_SOURCE_H_
#define RECFLOW_DATA_STREAM_SOURCE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "recflow/data/dataset.h"

namespace recflow::data {

enum class StreamFraming { kLines, kTfRecords };

struct StreamOptions {
  std::string pattern;
  // Set by StreamTextLines / StreamTfRecords.
  StreamFraming framing = StreamFraming::kLines;
  int64_t lines_per_element = 1;
  bool emit_origin = false;
  // The longest line, or record's data, taken.
  int64_t max_line_bytes = 1 << 20;
  int64_t read_buffer_bytes = 1 << 20;
  // Seconds between looks for more lines or files (> 0).
  double poll_seconds = 0.1;
  // Seconds without a new line after which a short element is returned
  // (> 0).
  double max_wait_secs = 1;
  // When set, FILE + done_suffix marks FILE complete.
  std::string done_suffix;
  // Ends the stream when it returns true; null: never.
  std::function<bool()> stop;
};

// InvalidArgument (from MakeIterator / GetNext) for an empty pattern, a glob
// character outside the last component, lines_per_element < 1 or a
// non-positive interval.
Dataset StreamTextLines(StreamOptions options);
// The same over TFRecord files: elements of k serialized records.
Dataset StreamTfRecords(StreamOptions options);

}  // namespace recflow::data

#endif  // RECFLOW_DATA_STREAM_SOURCE_H_
