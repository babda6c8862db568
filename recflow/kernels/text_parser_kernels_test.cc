// recflow's text parser ops through a Session: Criteo lines written from
// synthetic rows against the batch the rows denote (data::RowsToBatch, not
// the parser), hand-written libsvm and CSV lines against their documented
// values, the SparseTensor form against the row splits, and bad lines under
// both error modes.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/fingerprint.h"
#include "recflow/data/synthetic.h"
#include "recflow/data/text_parsers.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.flat<T>().begin(), t.flat<T>().end());
}

Tensor Strings(const std::vector<std::string>& v) {
  return Tensor::FromVector<std::string>(
      v, TensorShape({static_cast<int64_t>(v.size())}));
}

using AttrFn = std::function<void(NodeBuilder*)>;

// Runs `op` over `lines` (and `origins`, [0] when empty) and returns all
// of its outputs.
absl::StatusOr<std::vector<Tensor>> RunParser(
    const std::string& op, int num_outputs, const AttrFn& attrs,
    const std::vector<std::string>& lines,
    const std::vector<std::string>& origins = {}) {
  Scope root = Scope::NewRootScope();
  Output l = ops::Placeholder(root.WithOpName("lines"), DT_STRING);
  Output o = ops::Placeholder(root.WithOpName("origins"), DT_STRING);
  NodeBuilder b("parse", op);
  b.Input(l).Input(o);
  attrs(&b);
  root.AddNode(b);
  if (!root.ok()) return root.status();
  ASSIGN_OR_RETURN(auto def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create({}, def));
  std::vector<std::string> fetches;
  for (int i = 0; i < num_outputs; ++i)
    fetches.push_back("parse:" + std::to_string(i));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run(
      {{"lines", Strings(lines)}, {"origins", Strings(origins)}}, fetches, {},
      &out));
  return out;
}

// Checks one sparse feature's four outputs against ids + row splits: the
// SparseTensor indices (row, position in row) and dense_shape (rows,
// longest row) are recomputed here from the splits.
void ExpectSparse(const Tensor& indices, const Tensor& ids, const Tensor& shape,
                  const Tensor& splits, const std::vector<int64_t>& want_ids,
                  const std::vector<int64_t>& want_splits,
                  const std::string& feature) {
  SCOPED_TRACE(feature);
  EXPECT_EQ(Values<int64_t>(ids), want_ids);
  EXPECT_EQ(Values<int64_t>(splits), want_splits);
  std::vector<int64_t> want_indices;
  int64_t longest = 0;
  for (size_t b = 0; b + 1 < want_splits.size(); ++b) {
    longest = std::max(longest, want_splits[b + 1] - want_splits[b]);
    for (int64_t j = want_splits[b]; j < want_splits[b + 1]; ++j) {
      want_indices.push_back(static_cast<int64_t>(b));
      want_indices.push_back(j - want_splits[b]);
    }
  }
  EXPECT_EQ(indices.shape(),
            TensorShape({static_cast<int64_t>(want_ids.size()), 2}));
  EXPECT_EQ(Values<int64_t>(indices), want_indices);
  EXPECT_THAT(Values<int64_t>(shape),
              ElementsAre(static_cast<int64_t>(want_splits.size()) - 1, longest));
}

// Criteo outputs: labels, dense, then n each of indices, ids, shapes,
// splits, then num_skipped.
void ExpectCriteoBatch(const std::vector<Tensor>& got, const data::Batch& want) {
  const int n = static_cast<int>(want.sparse.size());
  ASSERT_EQ(got.size(), static_cast<size_t>(3 + 4 * n));
  EXPECT_EQ(Values<float>(got[0]), Values<float>(want.labels));
  EXPECT_EQ(got[1].shape(), want.dense.shape());
  EXPECT_EQ(Values<float>(got[1]), Values<float>(want.dense));
  for (int f = 0; f < n; ++f) {
    ExpectSparse(got[2 + f], got[2 + n + f], got[2 + 2 * n + f],
                 got[2 + 3 * n + f], Values<int64_t>(want.sparse[f].ids),
                 Values<int64_t>(want.sparse[f].row_splits),
                 "feature " + std::to_string(f));
  }
  EXPECT_EQ(got.back().flat<int64_t>()[0], 0);
}

TEST(TextParserKernelTest, CriteoMatchesTheSyntheticRows) {
  data::SyntheticConfig config;
  config.seed = 7;
  auto rows = data::GenerateRows(config, data::SyntheticSplit::kTrain, 0, 300);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<std::string> lines;
  for (const data::SyntheticRow& r : *rows) {
    std::string line;
    data::AppendCriteoTsvLine(r, &line);
    line.pop_back();  // the '\n': TextLineDataset yields lines without it
    lines.push_back(line);
  }
  auto got = RunParser("RecflowParseCriteo", 3 + 4 * 26,
                       [](NodeBuilder* b) {
                         b->Attr("error_mode", std::string("fail"));
                       },
                       lines);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectCriteoBatch(*got, data::RowsToBatch(rows->data(), rows->size()));
}

TEST(TextParserKernelTest, CriteoWithBehaviourSequences) {
  data::SyntheticConfig config;
  config.seed = 11;
  config.history.max_length = 6;
  config.history.item_field = 3;
  auto rows = data::GenerateRows(config, data::SyntheticSplit::kTest, 5, 120);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<std::string> lines;
  for (const data::SyntheticRow& r : *rows) {
    std::string line;
    data::AppendCriteoTsvLine(r, &line, /*with_history=*/true);
    line.pop_back();
    lines.push_back(line);
  }
  auto got = RunParser("RecflowParseCriteo", 3 + 4 * 27,
                       [](NodeBuilder* b) {
                         b->Attr("num_sparse", int64_t{27})
                             .Attr("sequence_fields", std::vector<int64_t>{3});
                       },
                       lines);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectCriteoBatch(*got, data::RowsToBatchWithHistory(rows->data(),
                                                       rows->size(), 3));
}

TEST(TextParserKernelTest, CriteoOptionsAndHashIds) {
  // 3 dense, 2 categorical; no log transform; a missing dense field takes
  // dense_default; hash ids are Fingerprint64 of the field's bytes.
  auto got = RunParser("RecflowParseCriteo", 3 + 4 * 2,
                       [](NodeBuilder* b) {
                         b->Attr("num_dense", int64_t{3})
                             .Attr("num_categorical", int64_t{2})
                             .Attr("num_sparse", int64_t{2})
                             .Attr("log_transform", false)
                             .Attr("dense_default", 7.5f)
                             .Attr("id_mode", std::string("hash"));
                       },
                       {"1\t3\t\t-2\tuser42\t", "0\t\t1.5\t4\t\tzz"});
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<Tensor>& g = *got;
  EXPECT_THAT(Values<float>(g[0]), ElementsAre(1.f, 0.f));
  EXPECT_THAT(Values<float>(g[1]), ElementsAre(3.f, 7.5f, -2.f, 7.5f, 1.5f, 4.f));
  const auto id = [](const char* s) {
    return static_cast<int64_t>(Fingerprint64(s));
  };
  ExpectSparse(g[2], g[4], g[6], g[8], {id("user42")}, {0, 1, 1}, "C1");
  ExpectSparse(g[3], g[5], g[7], g[9], {id("zz")}, {0, 0, 1}, "C2");
}

TEST(TextParserKernelTest, CriteoBadLinesFailOrSkip) {
  const std::vector<std::string> lines = {
      "1\t1\t2\tab\tcd", "1\t1\t2\tab", "0\t5\tx\t01\t02", "0\t4\t3\t0f\t"};
  auto attrs = [](const std::string& mode) {
    return [mode](NodeBuilder* b) {
      b->Attr("num_dense", int64_t{2})
          .Attr("num_categorical", int64_t{2})
          .Attr("num_sparse", int64_t{2})
          .Attr("error_mode", mode);
    };
  };
  // fail: the first bad line, named by its origin, with the reason.
  auto failed = RunParser("RecflowParseCriteo", 11, attrs("fail"), lines,
                          {"day0.tsv:1", "day0.tsv:2", "day0.tsv:3", "day0.tsv:4"});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("criteo line day0.tsv:2"));
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("wrong_field_count"));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("'parse'"));
  // Without origins the line is named by its row in the batch.
  auto no_origin = RunParser("RecflowParseCriteo", 11, attrs("fail"),
                             {lines[0], lines[2]});
  ASSERT_FALSE(no_origin.ok());
  EXPECT_THAT(std::string(no_origin.status().message()), HasSubstr("row 1"));
  EXPECT_THAT(std::string(no_origin.status().message()), HasSubstr("field 2"));
  // skip: the good lines 0 and 3 remain; num_skipped counts 2.
  auto skipped = RunParser("RecflowParseCriteo", 11, attrs("skip"), lines);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  const std::vector<Tensor>& g = *skipped;
  EXPECT_THAT(Values<float>(g[0]), ElementsAre(1.f, 0.f));
  EXPECT_EQ(g[1].shape(), TensorShape({2, 2}));
  ExpectSparse(g[2], g[4], g[6], g[8],
               {data::CriteoHexId(0, 0xab), data::CriteoHexId(0, 0x0f)},
               {0, 1, 2}, "C1");
  ExpectSparse(g[3], g[5], g[7], g[9], {data::CriteoHexId(1, 0xcd)}, {0, 1, 1},
               "C2");
  EXPECT_EQ(g[10].flat<int64_t>()[0], 2);
  // Origins of the wrong length.
  auto origins = RunParser("RecflowParseCriteo", 11, attrs("skip"), lines,
                           {"a:1"});
  ASSERT_FALSE(origins.ok());
  EXPECT_THAT(std::string(origins.status().message()), HasSubstr("origins"));
}

TEST(TextParserKernelTest, Libsvm) {
  const auto fail = [](NodeBuilder* b) {
    b->Attr("error_mode", std::string("fail"));
  };
  // labels, indices, ids, weights, dense_shape, row_splits, num_skipped.
  auto got = RunParser("RecflowParseLibsvm", 7, fail,
                       {"+1 3:0.5 10:2 # a comment", "-1", "1.0\t7:1.5 qid:3 "});
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<Tensor>& g = *got;
  EXPECT_THAT(Values<float>(g[0]), ElementsAre(1.f, 0.f, 1.f));
  EXPECT_THAT(Values<float>(g[3]), ElementsAre(0.5f, 2.f, 1.5f));
  ExpectSparse(g[1], g[2], g[4], g[5], {3, 10, 7}, {0, 2, 2, 3}, "features");
  EXPECT_EQ(g[6].flat<int64_t>()[0], 0);
  auto bad = RunParser("RecflowParseLibsvm", 7, fail, {"1 1:1", "2 1:1"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("row 1"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("bad_label"));
  auto real = RunParser("RecflowParseLibsvm", 7,
                        [](NodeBuilder* b) { b->Attr("binary_labels", false); },
                        {"2.5 1:1", "x 1:1"});
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_THAT(Values<float>((*real)[0]), ElementsAre(2.5f));
  EXPECT_EQ((*real)[6].flat<int64_t>()[0], 1);
}

AttrFn CsvAttrs(bool has_header, const std::string& mode) {
  return [=](NodeBuilder* b) {
    b->Attr("column_names",
            std::vector<std::string>{"y", "price", "cats", "title", "note"})
        .Attr("column_kinds",
              std::vector<std::string>{"label", "dense", "sparse", "sparse",
                                       "ignore"})
        .Attr("id_types",
              std::vector<std::string>{"string", "string", "int64", "string",
                                       "string"})
        .Attr("multi_value_separators",
              std::vector<std::string>{"", "", "|", "", ""})
        .Attr("dense_defaults", std::vector<float>{0.f, 4.f, 0.f, 0.f, 0.f})
        .Attr("num_sparse", int64_t{2})
        .Attr("has_header", has_header)
        .Attr("error_mode", mode);
  };
}

TEST(TextParserKernelTest, Csv) {
  // labels, dense, 2 x (indices, ids, shapes, splits), num_skipped.
  auto got = RunParser(
      "RecflowParseCsv", 11, CsvAttrs(/*has_header=*/true, "fail"),
      {"y,price,cats,title,note", "1,2.5,3|4,abc,zzz", "0,,,\"x,y\",q"},
      {"items.csv:1", "items.csv:2", "items.csv:3"});
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<Tensor>& g = *got;
  EXPECT_THAT(Values<float>(g[0]), ElementsAre(1.f, 0.f));
  EXPECT_EQ(g[1].shape(), TensorShape({2, 1}));
  EXPECT_THAT(Values<float>(g[1]), ElementsAre(2.5f, 4.f));
  ExpectSparse(g[2], g[4], g[6], g[8], {3, 4}, {0, 2, 2}, "cats");
  ExpectSparse(g[3], g[5], g[7], g[9],
               {static_cast<int64_t>(Fingerprint64("abc")),
                static_cast<int64_t>(Fingerprint64("x,y"))},
               {0, 1, 2}, "title");
  EXPECT_EQ(g[10].flat<int64_t>()[0], 1);  // the header line
  auto bad = RunParser("RecflowParseCsv", 11, CsvAttrs(false, "fail"),
                       {"1,2.5,3|4,abc,zzz", "1,2,3"}, {"a.csv:7", "a.csv:8"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("a.csv:8"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("wrong_field_count"));
  auto skip = RunParser("RecflowParseCsv", 11, CsvAttrs(false, "skip"),
                        {"1,2.5,3|4,abc,zzz", "1,2,3", "0,x,1,a,b"});
  ASSERT_TRUE(skip.ok()) << skip.status();
  EXPECT_THAT(Values<float>((*skip)[0]), ElementsAre(1.f));
  EXPECT_EQ((*skip)[10].flat<int64_t>()[0], 2);
}

TEST(TextParserKernelTest, BadAttrsFailWhenTheKernelIsMade) {
  // A CSV schema the parser refuses (two label columns) fails at run time
  // with the parser's message; the shape function cannot see it.
  auto got = RunParser("RecflowParseCsv", 3,  // labels, dense, num_skipped
                       [](NodeBuilder* b) {
                         b->Attr("column_names", std::vector<std::string>{"a", "b"})
                             .Attr("column_kinds",
                                   std::vector<std::string>{"label", "label"})
                             .Attr("num_sparse", int64_t{0});
                       },
                       {"1,2"});
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("label"));
}

}  // namespace
}  // namespace recflow
