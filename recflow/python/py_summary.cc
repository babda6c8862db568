// Bindings for tf.summary and the serving client (docs/python.md):
//
//   EventFileWriter(logdir, filename_suffix)   train::SummaryWriter, the event
//       .write_event(bytes) .flush() .close()   file writer `recflow train` uses;
//       .write_summary(bytes, step, wall_time, seen_tags)   add_summary's fast path
//       .path
//   read_event_records(path) -> [bytes]         the records of a TFRecord file
//                                               (crc-checked, core/record_io.h)
//   tensor_proto_from_numpy(value, dtype) -> bytes   ndarray <-> TensorProto
//   tensor_proto_to_numpy(bytes) -> ndarray          (framework/tensor_util.h)
//
// Errors are tf.errors.* (file system, corrupt records) or ValueError (bytes
// that are not the named proto).
#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "recflow/core/env.h"
#include "recflow/core/record_io.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/proto/event.pb.h"
#include "recflow/proto/serving_classification.pb.h"
#include "recflow/proto/serving_get_model_metadata.pb.h"
#include "recflow/proto/serving_get_model_status.pb.h"
#include "recflow/proto/serving_predict.pb.h"
#include "recflow/proto/serving_regression.pb.h"
#include "recflow/python/py_status.h"
#include "recflow/python/py_tensor.h"
#include "recflow/train/summary_writer.h"

namespace py = pybind11;

namespace recflow {
namespace python {
namespace {

class PyEventFileWriter {
 public:
  PyEventFileWriter(const std::string& logdir, const std::string& suffix) {
    py::gil_scoped_release release;
    writer_ = ValueOrThrow(train::SummaryWriter::Create(Env::Default(), logdir, suffix));
    path_ = writer_->path();
  }

  void WriteEvent(const py::bytes& data) {
    tensorflow::Event event;
    if (!event.ParseFromString(std::string(data))) {
      throw py::value_error("write_event: the bytes are not a serialized tensorflow.Event");
    }
    ThrowIfError(Writer()->WriteEvent(std::move(event)));
  }
  // TF's FileWriter.add_summary without a trip through Python: wraps the
  // serialized Summary in an Event at `step` / `wall_time`, dropping the
  // metadata of values whose tag is in `seen_tags` (adding the others' tags).
  void WriteSummary(const py::bytes& data, int64_t step, double wall_time,
                    py::set seen_tags) {
    tensorflow::Event event;
    if (!event.mutable_summary()->ParseFromString(std::string(data))) {
      throw py::value_error("add_summary: the bytes are not a serialized tensorflow.Summary");
    }
    for (tensorflow::Summary::Value& v : *event.mutable_summary()->mutable_value()) {
      if (!v.has_metadata()) continue;
      py::str tag(v.tag());
      if (seen_tags.contains(tag)) {
        v.clear_metadata();
      } else {
        seen_tags.add(tag);
      }
    }
    event.set_step(step);
    event.set_wall_time(wall_time);
    ThrowIfError(Writer()->WriteEvent(std::move(event)));
  }
  void Flush() {
    train::SummaryWriter* w = Writer();
    py::gil_scoped_release release;
    ThrowIfError(w->Flush());
  }
  void Close() {
    if (writer_ == nullptr) return;
    py::gil_scoped_release release;
    absl::Status s = writer_->Close();
    writer_.reset();
    ThrowIfError(s);
  }
  const std::string& path() const { return path_; }

 private:
  train::SummaryWriter* Writer() {
    if (writer_ == nullptr) throw py::value_error("the event file writer is closed");
    return writer_.get();
  }
  std::unique_ptr<train::SummaryWriter> writer_;
  std::string path_;
};

std::vector<py::bytes> ReadEventRecords(const std::string& path) {
  std::vector<std::string> records;
  {
    py::gil_scoped_release release;
    std::unique_ptr<RandomAccessFile> file =
        ValueOrThrow(Env::Default()->NewRandomAccessFile(path));
    RecordReader reader(file.get(), path);
    std::string record;
    for (;;) {
      absl::Status s = reader.ReadRecord(&record);
      if (absl::IsOutOfRange(s)) break;
      ThrowIfError(s);
      records.push_back(std::move(record));
    }
  }
  std::vector<py::bytes> out;
  out.reserve(records.size());
  for (const std::string& r : records) out.emplace_back(r);
  return out;
}

}  // namespace

void RegisterSummaryBindings(py::module_& m) {
  // The messages Python builds and reads through the proto bridge
  // (framework/proto_bridge.py): make sure the generated pool has them.
  (void)tensorflow::Event::descriptor();
  (void)tensorflow::serving::PredictRequest::descriptor();
  (void)tensorflow::serving::ClassificationRequest::descriptor();
  (void)tensorflow::serving::RegressionRequest::descriptor();
  (void)tensorflow::serving::GetModelMetadataRequest::descriptor();
  (void)tensorflow::serving::GetModelStatusRequest::descriptor();
  py::class_<PyEventFileWriter>(m, "EventFileWriter")
      .def(py::init<const std::string&, const std::string&>(), py::arg("logdir"),
           py::arg("filename_suffix") = "")
      .def("write_event", &PyEventFileWriter::WriteEvent, py::arg("event"))
      .def("write_summary", &PyEventFileWriter::WriteSummary, py::arg("summary"),
           py::arg("step"), py::arg("wall_time"), py::arg("seen_tags"))
      .def("flush", &PyEventFileWriter::Flush)
      .def("close", &PyEventFileWriter::Close)
      .def_property_readonly("path", &PyEventFileWriter::path);
  m.def("read_event_records", &ReadEventRecords, py::arg("path"),
        "The records of a TFRecord-framed file (an event file), crc-checked.");
  m.def(
      "tensor_proto_from_numpy",
      [](py::handle value, int dtype) {
        if (dtype != 0 && !DataTypeIsValid(dtype)) {
          throw py::value_error("tensor_proto_from_numpy: not a DataType number");
        }
        Tensor t = TensorFromPython(value, static_cast<DataType>(dtype), "value");
        tensorflow::TensorProto proto;
        TensorToProto(t, &proto);
        return py::bytes(proto.SerializeAsString());
      },
      py::arg("value"), py::arg("dtype") = 0,
      "A serialized tensorflow.TensorProto of an array (tensor_content, or string_val).");
  m.def(
      "tensor_proto_to_numpy",
      [](const py::bytes& data) {
        tensorflow::TensorProto proto;
        if (!proto.ParseFromString(std::string(data))) {
          throw py::value_error("tensor_proto_to_numpy: not a serialized tensorflow.TensorProto");
        }
        return TensorToNumpy(ValueOrThrow(TensorFromProto(proto)), "TensorProto");
      },
      py::arg("data"), "The array a serialized tensorflow.TensorProto holds.");
}

}  // namespace python
}  // namespace recflow
