// Kernels of the lookup table ops (HashTableV2, InitializeTableV2,
// LookupTableImportV2, InitializeTableFromTextFileV2, LookupTableFindV2,
// LookupTableSizeV2) through a Session: TensorFlow's semantics for text
// files (key/value index -1 = whole line, -2 = line number, offset,
// vocab_size, delimiter), duplicate keys, re-initialization, and a clear
// error for each bad input.
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/env.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = testing::TempDir() + "/lookup_table_test_" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

Tensor Strings(const std::vector<std::string>& v) {
  Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) t.flat<std::string>()[i] = v[i];
  return t;
}

// One table: "table" (HashTableV2), "init" (InitializeTableV2 of fed
// "keys"/"values"), "import" (LookupTableImportV2 of the same), "init_file"
// (InitializeTableFromTextFileV2 of fed "file" with `file_attrs`), "find"
// (LookupTableFindV2 of fed "query" with fed "default"), "size".
struct TableGraph {
  std::unique_ptr<Session> session;

  TableGraph(DataType key_dtype, DataType value_dtype,
             const std::map<std::string, int64_t>& file_attrs = {{"key_index", -1},
                                                                  {"value_index", -2}},
             const std::string& delimiter = "\t") {
    Scope root = Scope::NewRootScope();
    NodeBuilder table_b("table", "HashTableV2");
    table_b.Attr("key_dtype", key_dtype).Attr("value_dtype", value_dtype);
    Output table(root.AddNode(table_b));
    Output keys = ops::Placeholder(root.WithOpName("keys"), key_dtype);
    Output values = ops::Placeholder(root.WithOpName("values"), value_dtype);
    NodeBuilder init_b("init", "InitializeTableV2");
    init_b.Input(table).Input(keys).Input(values);
    root.AddNode(init_b);
    NodeBuilder import_b("import", "LookupTableImportV2");
    import_b.Input(table).Input(keys).Input(values);
    root.AddNode(import_b);
    Output file = ops::Placeholder(root.WithOpName("file"), DT_STRING);
    NodeBuilder file_b("init_file", "InitializeTableFromTextFileV2");
    file_b.Input(table).Input(file).Attr("delimiter", delimiter);
    for (const auto& [k, v] : file_attrs) file_b.Attr(k, v);
    root.AddNode(file_b);
    Output query = ops::Placeholder(root.WithOpName("query"), key_dtype);
    Output dflt = ops::Placeholder(root.WithOpName("default"), value_dtype);
    NodeBuilder find_b("find", "LookupTableFindV2");
    find_b.Input(table).Input(query).Input(dflt);
    root.AddNode(find_b);
    NodeBuilder size_b("size", "LookupTableSizeV2");
    size_b.Input(table);
    root.AddNode(size_b);
    auto def = root.ToGraphDef();
    EXPECT_TRUE(def.ok()) << def.status();
    auto s = Session::Create({}, *def);
    EXPECT_TRUE(s.ok()) << s.status();
    session = *std::move(s);
  }

  absl::Status Init(const Tensor& keys, const Tensor& values, const char* op = "init") {
    return session->Run({{"keys", keys}, {"values", values}}, {}, {op}, nullptr);
  }
  absl::Status InitFile(const std::string& path) {
    return session->Run({{"file", Tensor::Scalar<std::string>(path)}}, {}, {"init_file"},
                        nullptr);
  }
  absl::StatusOr<Tensor> Find(const Tensor& query, const Tensor& dflt) {
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session->Run({{"query", query}, {"default", dflt}}, {"find:0"}, {}, &out));
    return out[0];
  }
  int64_t Size() {
    std::vector<Tensor> out;
    EXPECT_TRUE(session->Run({}, {"size:0"}, {}, &out).ok());
    return out.empty() ? -1 : out[0].scalar<int64_t>();
  }
};

TEST(LookupTableKernelsTest, InitializeFindSize) {
  std::mt19937_64 rng(21);
  for (DataType kt : {DT_INT64, DT_STRING}) {
    TableGraph g(kt, DT_FLOAT);
    EXPECT_EQ(g.Size(), 0);
    // Random distinct keys and values; lookups of present and absent keys.
    std::map<std::string, float> ref;
    const int n = 200;
    Tensor keys(kt, TensorShape({n})), values(DT_FLOAT, TensorShape({n}));
    std::vector<int64_t> ints;
    for (int i = 0; i < n; ++i) {
      const int64_t k = static_cast<int64_t>(rng() % 1000000) * 2;  // even: present
      const float v = std::uniform_real_distribution<float>(-5, 5)(rng);
      if (kt == DT_INT64) {
        keys.flat<int64_t>()[i] = k;
      } else {
        keys.flat<std::string>()[i] = "w" + std::to_string(k);
      }
      values.flat<float>()[i] = v;
      ref.try_emplace(std::to_string(k), v);
      ints.push_back(k);
    }
    // Duplicate keys in random draws must carry one value: make them so.
    for (int i = 0; i < n; ++i) values.flat<float>()[i] = ref[std::to_string(ints[i])];
    auto miss = g.Find(kt == DT_INT64 ? Tensor::Scalar<int64_t>(1) : Tensor::Scalar<std::string>("x"),
                       Tensor::Scalar<float>(-1.f));
    EXPECT_TRUE(absl::IsFailedPrecondition(miss.status())) << miss.status();
    EXPECT_THAT(std::string(miss.status().message()), HasSubstr("Table not initialized."));
    ASSERT_TRUE(g.Init(keys, values).ok());
    EXPECT_EQ(g.Size(), static_cast<int64_t>(ref.size()));
    Tensor query(kt, TensorShape({4, 5}));
    std::vector<float> want;
    for (int i = 0; i < 20; ++i) {
      const int64_t k = (i % 2 == 0) ? ints[rng() % n] : static_cast<int64_t>(rng() % 1000) * 2 + 1;
      if (kt == DT_INT64) {
        query.flat<int64_t>()[i] = k;
      } else {
        query.flat<std::string>()[i] = "w" + std::to_string(k);
      }
      auto it = ref.find(std::to_string(k));
      want.push_back(it == ref.end() ? -7.5f : it->second);
    }
    auto got = g.Find(query, Tensor::Scalar<float>(-7.5f));
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->shape(), TensorShape({4, 5}));
    for (int i = 0; i < 20; ++i) EXPECT_EQ(got->flat<float>()[i], want[i]) << i;
    // The same data again is fine; other data is refused.
    EXPECT_TRUE(g.Init(keys, values).ok());
    values.flat<float>()[0] += 1.f;
    absl::Status s = g.Init(keys, values);
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("already initialized with different data"));
  }
}

TEST(LookupTableKernelsTest, DuplicateKeysAndBadInputs) {
  TableGraph g(DT_STRING, DT_INT64);
  // A key twice with the same value is fine; with two values it is TF's
  // FailedPrecondition naming the key, and the table stays empty.
  absl::Status s = g.Init(Strings({"a", "b", "a"}), Tensor::FromVector<int64_t>({1, 2, 3}),
                          "import");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("Key a has 1 and trying to add value 3"));
  EXPECT_EQ(g.Size(), 0);
  // Lengths, ranks and dtypes.
  s = g.Init(Strings({"a", "b"}), Tensor::FromVector<int64_t>({1}));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("same size 2 vs 1"));
  ASSERT_TRUE(g.Init(Strings({"a", "b", "a"}), Tensor::FromVector<int64_t>({1, 2, 1}),
                     "import").ok());
  EXPECT_EQ(g.Size(), 2);
  auto got = g.Find(Strings({"b", "zz", "a"}), Tensor::Scalar<int64_t>(-1));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->flat<int64_t>()[0], 2);
  EXPECT_EQ(got->flat<int64_t>()[1], -1);
  EXPECT_EQ(got->flat<int64_t>()[2], 1);
  got = g.Find(Strings({"a"}), Tensor::FromVector<int64_t>({1, 2}));
  EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("'default_value'"));
  // A table of a dtype tables cannot hold.
  TableGraph bad(DT_FLOAT, DT_INT64);
  EXPECT_EQ(bad.session->Run({}, {"size:0"}, {}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LookupTableKernelsTest, VocabularyFile) {
  // The vocabulary tables of index_table_from_file: key = whole line,
  // value = line number.
  const std::string vocab = WriteFile("vocab", "apple\nbanana\r\ncherry\n");
  TableGraph g(DT_STRING, DT_INT64);
  ASSERT_TRUE(g.InitFile(vocab).ok());
  EXPECT_EQ(g.Size(), 3);
  auto got = g.Find(Strings({"cherry", "apple", "durian", "banana"}), Tensor::Scalar<int64_t>(-1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->flat<int64_t>()[0], 2);
  EXPECT_EQ(got->flat<int64_t>()[1], 0);
  EXPECT_EQ(got->flat<int64_t>()[2], -1);
  EXPECT_EQ(got->flat<int64_t>()[3], 1);
  // A second initialization from a file leaves the table as it is.
  const std::string other = WriteFile("other", "zebra\n");
  EXPECT_TRUE(g.InitFile(other).ok());
  EXPECT_EQ(g.Size(), 3);

  // Columns, a delimiter, an offset and vocab_size: key = column 1 (int64),
  // value = column 0 (string); and line number + offset as value.
  const std::string cols = WriteFile("cols", "x,10\ny,20\nz,30\n");
  TableGraph byc(DT_INT64, DT_STRING, {{"key_index", 1}, {"value_index", 0}, {"vocab_size", 2}},
                 ",");
  ASSERT_TRUE(byc.InitFile(cols).ok());
  EXPECT_EQ(byc.Size(), 2);
  got = byc.Find(Tensor::FromVector<int64_t>({20, 30}), Tensor::Scalar<std::string>("?"));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->flat<std::string>()[0], "y");
  EXPECT_EQ(got->flat<std::string>()[1], "?");
  TableGraph off(DT_STRING, DT_INT64, {{"key_index", 0}, {"value_index", -2}, {"offset", 100}},
                 ",");
  ASSERT_TRUE(off.InitFile(cols).ok());
  got = off.Find(Strings({"z"}), Tensor::Scalar<int64_t>(-1));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->flat<int64_t>()[0], 102);
}

TEST(LookupTableKernelsTest, VocabularyFileBadInputs) {
  struct Case {
    std::string contents;
    std::map<std::string, int64_t> attrs;
    DataType key, value;
    absl::StatusCode code;
    const char* error;
  };
  const std::map<std::string, int64_t> line = {{"key_index", -1}, {"value_index", -2}};
  for (const Case& c : std::vector<Case>{
           {"a\n\nb\n", line, DT_STRING, DT_INT64, absl::StatusCode::kInvalidArgument,
            "empty line found at line 1"},
           {"a\nb\na\n", line, DT_STRING, DT_INT64, absl::StatusCode::kFailedPrecondition,
            "Key a has 0 and trying to add value 2"},
           {"a\tb\nc\n", {{"key_index", 0}, {"value_index", 1}}, DT_STRING, DT_STRING,
            absl::StatusCode::kInvalidArgument, "Invalid number of columns"},
           {"a\t1\nb\tx\n", {{"key_index", 0}, {"value_index", 1}}, DT_STRING, DT_INT64,
            absl::StatusCode::kInvalidArgument, "Field x in line 1"},
           {"a\n", {{"key_index", -1}, {"value_index", -2}, {"vocab_size", 3}}, DT_STRING,
            DT_INT64, absl::StatusCode::kInvalidArgument, "Invalid vocab_size"},
           {"a\n", {{"key_index", -2}, {"value_index", -1}}, DT_INT32, DT_STRING,
            absl::StatusCode::kInvalidArgument, "Key index for line number requires table key "
                                                "dtype of int64, got int32"},
           {"a\n", line, DT_STRING, DT_FLOAT, absl::StatusCode::kInvalidArgument,
            "Value index for line number requires table value dtype of int64"},
       }) {
    TableGraph g(c.key, c.value, c.attrs);
    absl::Status s = g.InitFile(WriteFile("bad", c.contents));
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.error));
    EXPECT_EQ(g.Size(), 0);
  }
  TableGraph g(DT_STRING, DT_INT64);
  absl::Status s = g.InitFile(testing::TempDir() + "/no_such_vocabulary.txt");
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("no_such_vocabulary.txt"));
  s = g.InitFile("");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("filename cannot be empty"));
  // A delimiter of two characters is refused when the kernel is built.
  TableGraph two(DT_STRING, DT_INT64, line, "ab");
  s = two.InitFile(WriteFile("ok", "a\n"));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("delimiter should be only 1 char"));
}

}  // namespace
}  // namespace recflow
