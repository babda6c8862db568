#include "recflow/framework/tensor_util.h"

#include <cstring>

#include "recflow/core/status.h"
#include "recflow/framework/partial_shape.h"

namespace recflow {
namespace {

// Fills `dst` (n elements) from a repeated field: an empty field gives zeros,
// a shorter one repeats its last element.
template <typename T, typename Field, typename Convert>
absl::Status FillFromField(const Field& field, int64_t n, T* dst, Convert convert,
                           const char* field_name, const TensorShape& shape) {
  const int64_t count = field.size();
  if (count > n) {
    return errors::InvalidArgument("TensorProto for shape ", shape.DebugString(),
                                   " has ", count, " values in ", field_name,
                                   "; at most ", n, " fit");
  }
  if (count == 0) {
    for (int64_t i = 0; i < n; ++i) dst[i] = T{};
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < count; ++i) dst[i] = convert(field.Get(i));
  const T last = dst[count - 1];
  for (int64_t i = count; i < n; ++i) dst[i] = last;
  return absl::OkStatus();
}

template <typename T>
T Same(T v) { return v; }

}  // namespace

absl::StatusOr<Tensor> TensorFromProto(const tensorflow::TensorProto& proto) {
  const DataType dtype = static_cast<DataType>(proto.dtype());
  if (!DataTypeIsValid(proto.dtype()) || IsRefType(dtype) || dtype == DT_INVALID) {
    return errors::InvalidArgument("TensorProto has invalid dtype ", proto.dtype());
  }
  if (dtype == DT_VARIANT) {
    return errors::Unimplemented("TensorProto of dtype variant is not supported");
  }
  ASSIGN_OR_RETURN(PartialShape partial, PartialShape::FromProto(proto.tensor_shape()));
  if (!partial.IsFullyDefined()) {
    return errors::InvalidArgument("TensorProto has shape ", partial.DebugString(),
                                   "; a tensor's shape must be fully defined");
  }
  ASSIGN_OR_RETURN(TensorShape shape, TensorShape::Build(partial.dims()));
  const int64_t n = shape.num_elements();

  if (!proto.tensor_content().empty()) {
    if (!DataTypeIsPod(dtype)) {
      return errors::InvalidArgument("TensorProto of dtype ", DataTypeString(dtype),
                                     " cannot use tensor_content");
    }
    const uint64_t expected = static_cast<uint64_t>(n) * DataTypeSize(dtype);
    if (proto.tensor_content().size() != expected) {
      return errors::InvalidArgument(
          "TensorProto of ", DataTypeString(dtype), " ", shape.DebugString(),
          " has ", proto.tensor_content().size(), " bytes of tensor_content, expected ",
          expected);
    }
    ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, shape));
    if (expected > 0) std::memcpy(t.raw_data(), proto.tensor_content().data(), expected);
    return t;
  }

  ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, shape));
  absl::Status s;
  auto to_half = [](int32_t bits) { half h; h.bits = static_cast<uint16_t>(bits); return h; };
  auto to_bf16 = [](int32_t bits) { bfloat16 h; h.bits = static_cast<uint16_t>(bits); return h; };
  switch (dtype) {
    case DT_FLOAT:
      s = FillFromField(proto.float_val(), n, t.data<float>(), Same<float>, "float_val", shape);
      break;
    case DT_DOUBLE:
      s = FillFromField(proto.double_val(), n, t.data<double>(), Same<double>, "double_val", shape);
      break;
    case DT_INT32:
      s = FillFromField(proto.int_val(), n, t.data<int32_t>(), Same<int32_t>, "int_val", shape);
      break;
    case DT_INT16:
      s = FillFromField(proto.int_val(), n, t.data<int16_t>(),
                        [](int32_t v) { return static_cast<int16_t>(v); }, "int_val", shape);
      break;
    case DT_INT8:
    case DT_QINT8:
      s = FillFromField(proto.int_val(), n, reinterpret_cast<int8_t*>(t.raw_data()),
                        [](int32_t v) { return static_cast<int8_t>(v); }, "int_val", shape);
      break;
    case DT_UINT8:
    case DT_QUINT8:
      s = FillFromField(proto.int_val(), n, reinterpret_cast<uint8_t*>(t.raw_data()),
                        [](int32_t v) { return static_cast<uint8_t>(v); }, "int_val", shape);
      break;
    case DT_UINT16:
    case DT_QUINT16:
    case DT_QINT16:
      s = FillFromField(proto.int_val(), n, reinterpret_cast<uint16_t*>(t.raw_data()),
                        [](int32_t v) { return static_cast<uint16_t>(v); }, "int_val", shape);
      break;
    case DT_QINT32:
      s = FillFromField(proto.int_val(), n, reinterpret_cast<int32_t*>(t.raw_data()),
                        Same<int32_t>, "int_val", shape);
      break;
    case DT_INT64:
      s = FillFromField(proto.int64_val(), n, t.data<int64_t>(), Same<int64_t>, "int64_val", shape);
      break;
    case DT_UINT32:
      s = FillFromField(proto.uint32_val(), n, t.data<uint32_t>(), Same<uint32_t>, "uint32_val", shape);
      break;
    case DT_UINT64:
      s = FillFromField(proto.uint64_val(), n, t.data<uint64_t>(), Same<uint64_t>, "uint64_val", shape);
      break;
    case DT_BOOL:
      s = FillFromField(proto.bool_val(), n, t.data<bool>(), Same<bool>, "bool_val", shape);
      break;
    case DT_HALF:
      s = FillFromField(proto.half_val(), n, t.data<half>(), to_half, "half_val", shape);
      break;
    case DT_BFLOAT16:
      s = FillFromField(proto.half_val(), n, t.data<bfloat16>(), to_bf16, "half_val", shape);
      break;
    case DT_STRING:
      s = FillFromField(proto.string_val(), n, t.data<std::string>(),
                        [](const std::string& v) { return v; }, "string_val", shape);
      break;
    case DT_COMPLEX64:
    case DT_COMPLEX128: {
      const bool is64 = dtype == DT_COMPLEX64;
      const int count = is64 ? proto.scomplex_val_size() : proto.dcomplex_val_size();
      if (count % 2 != 0 || count / 2 > n) {
        return errors::InvalidArgument("TensorProto of ", DataTypeString(dtype), " ",
                                       shape.DebugString(), " has ", count,
                                       " complex components; expected pairs, at most ", n);
      }
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = count == 0 ? -1 : std::min<int64_t>(i, count / 2 - 1);
        double re = 0, im = 0;
        if (k >= 0) {
          re = is64 ? proto.scomplex_val(2 * k) : proto.dcomplex_val(2 * k);
          im = is64 ? proto.scomplex_val(2 * k + 1) : proto.dcomplex_val(2 * k + 1);
        }
        if (is64) {
          t.data<std::complex<float>>()[i] = {static_cast<float>(re), static_cast<float>(im)};
        } else {
          t.data<std::complex<double>>()[i] = {re, im};
        }
      }
      break;
    }
    case DT_RESOURCE:
      s = FillFromField(proto.resource_handle_val(), n, t.data<ResourceHandle>(),
                        [](const tensorflow::ResourceHandleProto& h) {
                          return ResourceHandle(h.device(), h.container(), h.name(),
                                                h.maybe_type_name());
                        },
                        "resource_handle_val", shape);
      break;
    default:
      return errors::Unimplemented("TensorProto of dtype ", DataTypeString(dtype),
                                   " is not supported");
  }
  RETURN_IF_ERROR(s);
  return t;
}

void TensorToProto(const Tensor& tensor, tensorflow::TensorProto* proto) {
  proto->Clear();
  proto->set_dtype(static_cast<tensorflow::DataType>(tensor.dtype()));
  PartialShape(tensor.shape()).ToProto(proto->mutable_tensor_shape());
  if (!tensor.IsInitialized()) return;
  if (tensor.dtype() == DT_STRING) {
    for (const std::string& s : tensor.flat<std::string>()) proto->add_string_val(s);
  } else if (tensor.dtype() == DT_RESOURCE) {
    for (const ResourceHandle& h : tensor.flat<ResourceHandle>()) {
      auto* p = proto->add_resource_handle_val();
      p->set_device(h.device());
      p->set_container(h.container());
      p->set_name(h.name());
      p->set_maybe_type_name(h.type_name());
    }
  } else if (tensor.TotalBytes() > 0) {
    proto->set_tensor_content(tensor.raw_data(), tensor.TotalBytes());
  }
}

Tensor SliceRows(const Tensor& t, int64_t begin, int64_t end) {
  TensorShape shape = t.shape();
  const int64_t rows = shape.dim_size(0);
  const int64_t row_bytes =
      rows == 0 ? 0 : t.NumElements() / rows * static_cast<int64_t>(DataTypeSize(t.dtype()));
  shape.set_dim(0, end - begin);
  Tensor out(t.dtype(), shape);
  if (end > begin) std::memcpy(out.raw_data(), t.raw_data() + begin * row_bytes, (end - begin) * row_bytes);
  return out;
}

absl::StatusOr<Tensor> ConcatRows(const std::vector<Tensor>& parts, const std::string& what) {
  if (parts.empty()) return errors::InvalidArgument(what, ": no parts");
  TensorShape shape = parts[0].shape();
  if (shape.dims() < 1) return errors::InvalidArgument(what, ": a part is a scalar");
  int64_t rows = 0;
  for (const Tensor& p : parts) {
    TensorShape s = p.shape();
    if (s.dims() != shape.dims() || p.dtype() != parts[0].dtype()) {
      return errors::InvalidArgument(what, ": parts of shapes ", shape.DebugString(), " and ",
                                     s.DebugString());
    }
    for (int d = 1; d < s.dims(); ++d) {
      if (s.dim_size(d) != shape.dim_size(d)) {
        return errors::InvalidArgument(what, ": parts of shapes ", shape.DebugString(),
                                       " and ", s.DebugString());
      }
    }
    rows += s.dim_size(0);
  }
  shape.set_dim(0, rows);
  Tensor out(parts[0].dtype(), shape);
  char* dst = out.raw_data();
  for (const Tensor& p : parts) {
    const size_t bytes = static_cast<size_t>(p.NumElements()) * DataTypeSize(p.dtype());
    if (bytes > 0) std::memcpy(dst, p.raw_data(), bytes);
    dst += bytes;
  }
  return out;
}

}  // namespace recflow
