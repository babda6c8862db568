// Criteo TSV, libsvm and CSV lines (recflow/data/text_parsers.h).
//
// Input: a few option bytes, then the text, split into lines at '\n'. Every
// batch a parser returns must validate against its schema, and hold one row
// per line when bad lines are errors rather than skipped.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "recflow/data/text_parsers.h"
#include "tests/fuzz/fuzz_target.h"

namespace recflow::fuzz {
namespace {

using data::Batch;
using data::TextParser;

void ParseAndCheck(const TextParser& parser, bool fail_on_bad, absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  absl::StatusOr<Batch> batch = parser.Parse(lines);
  Note(absl::StrCat(parser.format(), ": ", lines.size(), " lines -> ",
                    batch.ok() ? absl::StrCat(batch->batch_size, " rows")
                               : batch.status().ToString()));
  if (!batch.ok()) {
    FUZZ_CHECK(fail_on_bad, "a skipping parser failed: " + batch.status().ToString());
    return;
  }
  absl::Status valid = batch->Validate(parser.schema());
  FUZZ_CHECK(valid.ok(), valid.ToString());
  FUZZ_CHECK(batch->batch_size <= static_cast<int64_t>(lines.size()),
             absl::StrCat(batch->batch_size, " rows from ", lines.size(), " lines"));
  if (fail_on_bad) {
    FUZZ_CHECK(batch->batch_size == static_cast<int64_t>(lines.size()),
               absl::StrCat(batch->batch_size, " rows from ", lines.size(), " accepted lines"));
  }
}

data::BadRecordOptions BadRecords(FuzzInput& in, bool* fail_on_bad) {
  data::BadRecordOptions bad;
  *fail_on_bad = in.ConsumeBool();
  bad.policy.mode = *fail_on_bad ? data::ErrorMode::kFail : data::ErrorMode::kSkip;
  bad.stats = std::make_shared<data::DataStats>();
  bad.max_line_bytes = in.ConsumeIntInRange(1, 4096);
  return bad;
}

}  // namespace

RECFLOW_FUZZ_TARGET(criteo_lines) {
  FuzzInput in(data, size);
  data::CriteoOptions options;
  bool fail_on_bad = false;
  options.bad_records = BadRecords(in, &fail_on_bad);
  options.num_dense = static_cast<int>(in.ConsumeIntInRange(0, 13, 1));
  options.num_categorical = static_cast<int>(in.ConsumeIntInRange(0, 26, 1));
  options.log_transform = in.ConsumeBool();
  options.id_mode = in.ConsumeBool() ? data::CriteoOptions::IdMode::kHash
                                     : data::CriteoOptions::IdMode::kHex;
  const int sequences = static_cast<int>(in.ConsumeIntInRange(0, 2, 1));
  for (int s = 0; s < sequences; ++s) {
    options.sequence_fields.push_back(static_cast<int>(in.ConsumeIntInRange(-1, 26, 1)));
  }
  options.max_sequence_length = in.ConsumeIntInRange(0, 16, 1);
  auto parser = data::CriteoParser::Create(options);
  if (!parser.ok()) {  // e.g. a sequence field out of range
    Note(parser.status().ToString());
    return 0;
  }
  ParseAndCheck(**parser, fail_on_bad, in.ConsumeRest());
  return 0;
}

RECFLOW_FUZZ_SEEDS(criteo_lines) {
  // Options: kSkip, max_line_bytes 4096 - 1, 13 dense, 26 categorical,
  // log transform, hex ids, no sequences.
  const std::string options = std::string("\x00\xff\x0f\x0d\x1a\x01\x00\x00\x10", 9);
  const std::string sequence_options = std::string("\x01\xff\x0f\x02\x03\x01\x00\x01\x02\x10", 10);
  return {
      {"criteo_two_lines",
       options +
           "1\t5\t\t3\t-1\t0\t1.5\t2\t\t\t\t\t\t9\t68fd1e64\t\t05db9164\t8cf07265\ta\tb\tc\td\te"
           "\tf\t1\t2\t3\t4\t5\t6\t7\t8\t9\ta\tb\tc\td\te\tf\t0\n"
           "0\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\r"},
      {"criteo_bad_lines", options + "2\tx\n1\t1\t1\n\n1\t99999999999\tzz"},
      {"criteo_sequences", sequence_options + "1\t1\t2\ta\tb\tc\t01,02,03\n0\t\t\t\t\t\t"},
  };
}

RECFLOW_FUZZ_TARGET(libsvm_lines) {
  FuzzInput in(data, size);
  data::LibsvmOptions options;
  bool fail_on_bad = false;
  options.bad_records = BadRecords(in, &fail_on_bad);
  options.binary_labels = in.ConsumeBool();
  auto parser = data::LibsvmParser::Create(options);
  FUZZ_CHECK(parser.ok(), parser.status().ToString());
  ParseAndCheck(**parser, fail_on_bad, in.ConsumeRest());
  return 0;
}

RECFLOW_FUZZ_SEEDS(libsvm_lines) {
  const std::string options = std::string("\x00\xff\x0f\x01", 4);
  return {
      {"libsvm_lines", options + "+1 1:0.5 7:1e3 qid:3 # a comment\n-1\t2:-4.25\n0 3:1"},
      {"libsvm_bad", options + "2 1:x\n1 -3:1\n1 1:nan\n1 1:1 1:2\n\n   \n"},
      {"libsvm_regression", std::string("\x01\xff\x0f\x00", 4) + "3.5 1:2 100000000000:1"},
  };
}

RECFLOW_FUZZ_TARGET(csv_lines) {
  FuzzInput in(data, size);
  data::CsvOptions options;
  bool fail_on_bad = false;
  options.bad_records = BadRecords(in, &fail_on_bad);
  const char delimiters[] = {',', '\t', ';', ' ', '|', '"'};
  options.delimiter = delimiters[in.ConsumeIntInRange(0, sizeof(delimiters) - 1, 1)];
  options.has_header = in.ConsumeBool();
  options.quoting = in.ConsumeBool();
  options.trim_whitespace = in.ConsumeBool();
  const int columns = static_cast<int>(in.ConsumeIntInRange(1, 6, 1));
  for (int c = 0; c < columns; ++c) {
    data::CsvColumn column;
    column.name = absl::StrCat("c", c);
    column.kind = static_cast<data::CsvColumn::Kind>(in.ConsumeIntInRange(0, 3, 1));
    column.id_type = in.ConsumeBool() ? data::CsvColumn::IdType::kInt64
                                      : data::CsvColumn::IdType::kString;
    const char separators[] = {'\0', '|', ' ', ','};
    column.multi_value_separator = separators[in.ConsumeIntInRange(0, 3, 1)];
    options.columns.push_back(column);
  }
  auto parser = data::CsvParser::Create(options);
  if (!parser.ok()) {  // two label columns, a separator equal to the delimiter, ...
    Note(parser.status().ToString());
    return 0;
  }
  ParseAndCheck(**parser, fail_on_bad, in.ConsumeRest());
  return 0;
}

RECFLOW_FUZZ_SEEDS(csv_lines) {
  // kSkip, 4095 bytes, ',', header, quoting, trim; 4 columns: label, dense,
  // sparse string ids split at '|', sparse int64 ids.
  const std::string options = std::string("\x00\xff\x0f\x00\x01\x01\x01\x03", 8) +
                              std::string("\x00\x00\x00" "\x01\x00\x00" "\x02\x00\x01"
                                          "\x02\x01\x00", 12);
  return {
      {"csv_lines", options + "c0,c1,c2,c3\n1,0.5,a|b|c,7\n0, 2 ,\"x,y\",-3\n0,,,"},
      {"csv_bad", options + "1,2\n1,x,a,b\n\"unterminated,1,2,3\n1,1,a,99999999999999999999\n"},
  };
}

}  // namespace recflow::fuzz
