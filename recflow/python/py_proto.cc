// The protobuf bridge: Python reads and writes recflow's protobuf messages
// (recflow/proto/*.proto: tensorflow.MetaGraphDef, SavedModel, SaverDef,
// BundleEntryProto, ...) as JSON or text format, converted by the C++
// protobuf classes linked into recflow. Python never encodes or decodes the
// wire format by hand, and needs no Python protobuf package.
//
//   proto_from_json(type, json) -> bytes     proto_to_json(type, bytes) -> str
//   proto_from_text(type, text) -> bytes     proto_to_text(type, bytes) -> str
//
// Every failure (unknown type, malformed JSON/text/bytes) is a ValueError
// naming the type and the problem.
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <pybind11/pybind11.h>

#include "recflow/proto/example.pb.h"
#include "recflow/proto/meta_graph.pb.h"
#include "recflow/proto/saved_model.pb.h"
#include "recflow/proto/saver.pb.h"
#include "recflow/proto/tensor_bundle.pb.h"

namespace py = pybind11;
namespace pb = google::protobuf;

namespace recflow {
namespace python {
namespace {

// Makes sure the messages Python uses are registered in the generated pool
// (their .pb.cc files live in librecflow_proto, loaded with this module).
void TouchDescriptors() {
  (void)tensorflow::SavedModel::descriptor();
  (void)tensorflow::MetaGraphDef::descriptor();
  (void)tensorflow::SaverDef::descriptor();
  (void)tensorflow::BundleEntryProto::descriptor();
  (void)tensorflow::Example::descriptor();
}

// A fresh message of the named type (owned by the caller).
std::unique_ptr<pb::Message> NewMessage(const std::string& type_name) {
  const pb::Descriptor* d =
      pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type_name);
  if (d == nullptr) {
    throw py::value_error("unknown protobuf message type '" + type_name +
                          "' (use the full name, e.g. 'tensorflow.MetaGraphDef')");
  }
  const pb::Message* prototype =
      pb::MessageFactory::generated_factory()->GetPrototype(d);
  if (prototype == nullptr) {
    throw py::value_error("no generated class for protobuf message type '" +
                          type_name + "'");
  }
  return std::unique_ptr<pb::Message>(prototype->New());
}

std::unique_ptr<pb::Message> Parse(const std::string& type_name,
                                   const py::bytes& data) {
  auto msg = NewMessage(type_name);
  std::string raw = data;
  if (!msg->ParseFromString(raw)) {
    throw py::value_error("cannot parse " + std::to_string(raw.size()) +
                          " bytes as a '" + type_name +
                          "' (corrupt or truncated protobuf)");
  }
  return msg;
}

// Collects text-format parse errors ("line:col: message").
class ErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!errors_.empty()) errors_ += "; ";
    errors_ += std::to_string(line + 1) + ":" + std::to_string(column + 1) +
               ": " + message;
  }
  const std::string& errors() const { return errors_; }

 private:
  std::string errors_;
};

}  // namespace

void RegisterProtoBindings(py::module_& m) {
  TouchDescriptors();
  m.def(
      "proto_from_json",
      [](const std::string& type_name, const std::string& json,
         bool ignore_unknown_fields) {
        auto msg = NewMessage(type_name);
        pb::util::JsonParseOptions options;
        options.ignore_unknown_fields = ignore_unknown_fields;
        auto status = pb::util::JsonStringToMessage(json, msg.get(), options);
        if (!status.ok()) {
          throw py::value_error("cannot parse JSON as a '" + type_name +
                                "': " + status.ToString());
        }
        return py::bytes(msg->SerializeAsString());
      },
      py::arg("type_name"), py::arg("json"),
      py::arg("ignore_unknown_fields") = false,
      "Serialized bytes of a message given as protobuf JSON.");
  m.def(
      "proto_to_json",
      [](const std::string& type_name, const py::bytes& data,
         bool enums_as_ints, bool include_defaults) {
        auto msg = Parse(type_name, data);
        pb::util::JsonPrintOptions options;
        options.preserve_proto_field_names = true;
        options.always_print_enums_as_ints = enums_as_ints;
        options.always_print_primitive_fields = include_defaults;
        std::string out;
        auto status = pb::util::MessageToJsonString(*msg, &out, options);
        if (!status.ok()) {
          throw py::value_error("cannot print a '" + type_name +
                                "' as JSON: " + status.ToString());
        }
        return out;
      },
      py::arg("type_name"), py::arg("data"), py::arg("enums_as_ints") = false,
      py::arg("include_defaults") = false,
      "Protobuf JSON (field names as in the .proto) of serialized bytes.");
  m.def(
      "proto_from_text",
      [](const std::string& type_name, const std::string& text) {
        auto msg = NewMessage(type_name);
        pb::TextFormat::Parser parser;
        ErrorCollector errors;
        parser.RecordErrorsTo(&errors);
        if (!parser.ParseFromString(text, msg.get())) {
          throw py::value_error("cannot parse text format as a '" + type_name +
                                "': " + errors.errors());
        }
        return py::bytes(msg->SerializeAsString());
      },
      py::arg("type_name"), py::arg("text"),
      "Serialized bytes of a message given in protobuf text format.");
  m.def(
      "proto_to_text",
      [](const std::string& type_name, const py::bytes& data) {
        auto msg = Parse(type_name, data);
        std::string out;
        if (!pb::TextFormat::PrintToString(*msg, &out)) {
          throw py::value_error("cannot print a '" + type_name +
                                "' in text format");
        }
        return out;
      },
      py::arg("type_name"), py::arg("data"),
      "Protobuf text format of serialized bytes.");
}

}  // namespace python
}  // namespace recflow
