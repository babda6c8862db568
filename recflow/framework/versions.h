// GraphDef versions (tensorflow/core/public/version.h's TF_GRAPH_DEF_VERSION
// scheme): every GraphDef carries the version of the program that wrote it
// (`producer`) and the oldest reader that may load it (`min_consumer`).
// TensorFlow keeps old graphs loading by keying a few semantics on the
// producer; recflow applies the same rules where it implements the op (see
// InferenceContext::graph_def_version):
//   - producer <= 21: a Placeholder whose `shape` attr is a scalar means
//     "any shape" (older writers could not say unknown);
//   - producer < 21: reduction axes may have any rank ([[1, 2]] = [1, 2]).
#ifndef RECFLOW_FRAMEWORK_VERSIONS_H_
#define RECFLOW_FRAMEWORK_VERSIONS_H_

#include "absl/status/status.h"
#include "recflow/proto/graph.pb.h"

namespace recflow {

// The producer version recflow writes into the graphs it builds: the
// TensorFlow GraphDef version whose semantics recflow follows (that of the
// TensorFlow 2 SavedModels recflow is checked against).
inline constexpr int kGraphDefVersion = 1569;
// The oldest producer recflow loads (TensorFlow loads all of them).
inline constexpr int kGraphDefVersionMinProducer = 0;
// What recflow writes as `min_consumer`: any reader may try.
inline constexpr int kGraphDefVersionMinConsumer = 0;

// The VersionDef recflow writes.
tensorflow::VersionDef CurrentGraphDefVersions();

// OK when recflow may load a graph with these versions; else InvalidArgument
// saying which rule refused it (as TensorFlow's CheckVersions), with `what`
// ("GraphDef", "the SavedModel's graph") naming the graph.
absl::Status CheckGraphDefVersions(const tensorflow::VersionDef& versions,
                                   absl::string_view what = "GraphDef");

// The versions of a graph made by importing `imported` into `existing`:
// the older producer, the newer min_consumer, both lists of bad consumers
// (TensorFlow's importer does the same, so shape rules of the older writer
// apply to the whole graph).
tensorflow::VersionDef MergeGraphDefVersions(const tensorflow::VersionDef& existing,
                                             const tensorflow::VersionDef& imported);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_VERSIONS_H_
