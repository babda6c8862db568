// Test helpers for the model server: model directories to serve.
//
//   CopyHalfPlusTwo(base + "/123");          // TF Serving's test model
//   WriteAffineModel(base + "/7", 2.f, 7.f); // y = 2 x + 7, recflow-built
//   EXPECT_TRUE(Eventually([&] { return core->AvailableVersions("m") == want; }));
//
// Test-only (header-only, included by *_test.cc files). Not thread-safe.
#ifndef RECFLOW_SERVING_TESTING_SERVER_CORE_UTIL_H_
#define RECFLOW_SERVING_TESTING_SERVER_CORE_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "recflow/checkpoint/saved_model.h"
#include "recflow/checkpoint/testing/half_plus_two.h"
#include "recflow/core/env.h"
#include "recflow/core/record_io.h"
#include "recflow/core/testing/tf_testdata.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/proto/saved_model.pb.h"

namespace recflow::serving::testutil {

// A fresh, empty directory under the test temp dir.
inline std::string FreshDir(const std::string& name) {
  Env* env = Env::Default();
  const std::string dir = testing::TempDir() + "/serving_" + name;
  DeleteRecursively(env, dir).IgnoreError();
  EXPECT_TRUE(env->RecursivelyCreateDir(dir).ok());
  return dir;
}

// Copies half_plus_two into `dir` (written under a temporary name, then
// renamed, as a version should be published): TensorFlow's copy when the
// fixture is there (core/testing/tf_testdata.h), else recflow's stand-in
// (checkpoint/half_plus_two_test_util.h).
inline void CopyHalfPlusTwo(const std::string& dir) {
  Env* env = Env::Default();
  const std::string tmp = dir + ".tmp";
  DeleteRecursively(env, tmp).IgnoreError();
  if (!HaveTfTestData(kHalfPlusTwoTf)) {
    absl::Status s = checkpoint::testutil::WriteHalfPlusTwo(env, tmp);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(env->RenameFile(tmp, dir).ok());
    return;
  }
  const std::string tf_dir = TfTestDataPath(kHalfPlusTwoTf);
  for (const char* rel :
       {"saved_model.pb", "variables/variables.index",
        "variables/variables.data-00000-of-00001", "assets/foo.txt"}) {
    std::string data;
    ASSERT_TRUE(
        ReadFileToString(env, tf_dir + "/" + rel, &data)
            .ok());
    const std::string dst = tmp + "/" + rel;
    ASSERT_TRUE(env->RecursivelyCreateDir(Dirname(dst)).ok());
    ASSERT_TRUE(WriteStringToFile(env, dst, data).ok());
  }
  ASSERT_TRUE(env->RenameFile(tmp, dir).ok());
}

// A SavedModel computing y = a * x + b for x float [n] (signature
// "serving_default": input "x" (-1), output "y" (-1); and "scalar": output
// "b" = the scalar b, for tests of outputs without a batch dimension).
// `assets_extra` files go under assets.extra/. With dtype DT_DOUBLE, x, y,
// a and b are doubles.
inline absl::Status WriteAffineModel(
    const std::string& dir, float a, float b,
    const std::map<std::string, std::string>& assets_extra = {},
    tensorflow::DataType dtype = tensorflow::DT_FLOAT) {
  // The graph is written as NodeDefs (serving/ may not include ops/).
  tensorflow::GraphDef graph;
  auto node = [&](const std::string& name, const std::string& op,
                  std::vector<std::string> inputs) {
    tensorflow::NodeDef* n = graph.add_node();
    n->set_name(name);
    n->set_op(op);
    for (const auto& in : inputs) n->add_input(in);
    return n;
  };
  auto set_dtype = [&](tensorflow::NodeDef* n, const char* attr) {
    (*n->mutable_attr())[attr].set_type(dtype);
  };
  auto constant = [&](const std::string& name, float value) {
    tensorflow::NodeDef* n = node(name, "Const", {});
    set_dtype(n, "dtype");
    TensorToProto(dtype == tensorflow::DT_DOUBLE
                      ? Tensor::Scalar<double>(value)
                      : Tensor::Scalar<float>(value),
                  (*n->mutable_attr())["value"].mutable_tensor());
  };
  tensorflow::NodeDef* x = node("x", "Placeholder", {});
  set_dtype(x, "dtype");
  (*x->mutable_attr())["shape"].mutable_shape()->add_dim()->set_size(-1);
  constant("a", a);
  constant("b", b);
  set_dtype(node("mul", "Mul", {"x", "a"}), "T");
  set_dtype(node("y", "Add", {"mul", "b"}), "T");
  tensorflow::SavedModel sm;
  sm.set_saved_model_schema_version(1);
  tensorflow::MetaGraphDef* mg = sm.add_meta_graphs();
  mg->mutable_meta_info_def()->add_tags("serve");
  *mg->mutable_graph_def() = graph;
  auto info = [&](const std::string& name, std::vector<int64_t> dims) {
    tensorflow::TensorInfo t;
    t.set_name(name);
    t.set_dtype(dtype);
    for (int64_t d : dims) t.mutable_tensor_shape()->add_dim()->set_size(d);
    return t;
  };
  auto& sig = (*mg->mutable_signature_def())["serving_default"];
  sig.set_method_name(checkpoint::kPredictMethodName);
  (*sig.mutable_inputs())["x"] = info("x:0", {-1});
  (*sig.mutable_outputs())["y"] = info("y:0", {-1});
  auto& scalar = (*mg->mutable_signature_def())["scalar"];
  scalar.set_method_name(checkpoint::kPredictMethodName);
  (*scalar.mutable_inputs())["x"] = info("x:0", {-1});
  (*scalar.mutable_outputs())["b"] = info("b:0", {});
  checkpoint::SavedModelWriteOptions options;
  options.assets_extra = assets_extra;
  return checkpoint::WriteSavedModel(Env::Default(), dir, sm, options);
}

// Polls `done` every 10 ms for up to 10 s; its last answer.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// A TFRecord file's bytes holding `records`.
inline std::string TfRecords(const std::vector<std::string>& records) {
  Env* env = Env::Default();
  const std::string path = testing::TempDir() + "/serving_records.tmp";
  auto file = env->NewWritableFile(path);
  EXPECT_TRUE(file.ok());
  RecordWriter writer(file->get());
  for (const std::string& r : records) EXPECT_TRUE(writer.WriteRecord(r).ok());
  EXPECT_TRUE((*file)->Close().ok());
  std::string data;
  EXPECT_TRUE(ReadFileToString(env, path, &data).ok());
  return data;
}

}  // namespace recflow::serving::testutil

#endif  // RECFLOW_SERVING_TESTING_SERVER_CORE_UTIL_H_
