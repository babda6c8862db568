// TFRecord files from Python (tf.io.TFRecordWriter, tf.io.tf_record_iterator
// in recflow/python/recflow/lib/io/tf_record.py), over recflow's record
// writer and reader (core/record_io.h): TensorFlow's framing with masked
// crc32c, byte for byte.
//
//   RecordWriter(path, append=False)  .write(bytes) .flush() .close()
//   RecordReader(path)                .read() -> bytes or None at the end
//
// Errors are recflow Statuses (so tf.errors.NotFoundError for a missing
// directory, DataLossError for a corrupt or truncated record, naming the
// path and the offset); using a closed writer is a ValueError. File I/O
// runs with the GIL released. Not thread-safe: one Python thread per object
// (as TensorFlow's).
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>

#include "recflow/core/env.h"
#include "recflow/core/record_io.h"
#include "recflow/python/py_status.h"

namespace py = pybind11;

namespace recflow {
namespace python {
namespace {

class PyRecordWriter {
 public:
  PyRecordWriter(const std::string& path, bool append) : path_(path) {
    absl::StatusOr<std::unique_ptr<WritableFile>> file;
    {
      py::gil_scoped_release release;
      file = append ? Env::Default()->NewAppendableFile(path)
                    : Env::Default()->NewWritableFile(path);
    }
    file_ = ValueOrThrow(std::move(file));
    writer_ = std::make_unique<RecordWriter>(file_.get());
  }

  ~PyRecordWriter() {
    if (file_ != nullptr) (void)file_->Close();
  }

  void Write(const py::bytes& record) {
    CheckOpen("write");
    // Views the bytes object's buffer; the object outlives the call.
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(record.ptr(), &data, &size) != 0) {
      throw py::error_already_set();
    }
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = writer_->WriteRecord(absl::string_view(data, size));
    }
    ThrowIfError(s);
  }

  void Flush() {
    CheckOpen("flush");
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = writer_->Flush();
    }
    ThrowIfError(s);
  }

  void Close() {
    if (file_ == nullptr) return;  // closing twice is fine, as in TF
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = writer_->Flush();
      absl::Status c = file_->Close();
      if (s.ok()) s = c;
    }
    writer_.reset();
    file_.reset();
    ThrowIfError(s);
  }

  bool closed() const { return file_ == nullptr; }
  int64_t bytes_written() const {
    return writer_ != nullptr ? writer_->bytes_written() : 0;
  }

 private:
  void CheckOpen(const char* what) const {
    if (file_ == nullptr) {
      throw py::value_error(std::string("TFRecordWriter for '") + path_ +
                            "': " + what + " after close()");
    }
  }

  std::string path_;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<RecordWriter> writer_;  // Writes to file_.
};

class PyRecordReader {
 public:
  explicit PyRecordReader(const std::string& path) {
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> file;
    {
      py::gil_scoped_release release;
      file = Env::Default()->NewRandomAccessFile(path);
    }
    file_ = ValueOrThrow(std::move(file));
    reader_ = std::make_unique<RecordReader>(file_.get(), path);
  }

  // The next record, or None at the clean end of the file.
  py::object Read() {
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = reader_->ReadRecord(&record_);
    }
    if (absl::IsOutOfRange(s)) return py::none();
    ThrowIfError(s);
    return py::bytes(record_);
  }

  uint64_t offset() const { return reader_->offset(); }

 private:
  std::unique_ptr<RandomAccessFile> file_;
  std::unique_ptr<RecordReader> reader_;  // Reads file_.
  std::string record_;
};

}  // namespace

void RegisterRecordIoBindings(py::module_& m) {
  py::class_<PyRecordWriter>(m, "RecordWriter",
                             "Writes TFRecord files (core/record_io.h).")
      .def(py::init<const std::string&, bool>(), py::arg("path"),
           py::arg("append") = false)
      .def("write", &PyRecordWriter::Write, py::arg("record"))
      .def("flush", &PyRecordWriter::Flush)
      .def("close", &PyRecordWriter::Close)
      .def_property_readonly("closed", &PyRecordWriter::closed)
      .def_property_readonly("bytes_written", &PyRecordWriter::bytes_written);
  py::class_<PyRecordReader>(m, "RecordReader",
                             "Reads TFRecord files, checking every crc.")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def("read", &PyRecordReader::Read)
      .def_property_readonly("offset", &PyRecordReader::offset);
}

}  // namespace python
}  // namespace recflow
