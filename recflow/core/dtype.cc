#include "recflow/core/dtype.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow {
namespace {

struct TypeInfo {
  DataType dtype;
  const char* name;
  size_t size;
};

constexpr TypeInfo kTypes[] = {
    {DT_FLOAT, "float", 4},       {DT_DOUBLE, "double", 8},
    {DT_INT32, "int32", 4},       {DT_UINT8, "uint8", 1},
    {DT_INT16, "int16", 2},       {DT_INT8, "int8", 1},
    {DT_STRING, "string", 0},     {DT_COMPLEX64, "complex64", 8},
    {DT_INT64, "int64", 8},       {DT_BOOL, "bool", 1},
    {DT_QINT8, "qint8", 1},       {DT_QUINT8, "quint8", 1},
    {DT_QINT32, "qint32", 4},     {DT_BFLOAT16, "bfloat16", 2},
    {DT_QINT16, "qint16", 2},     {DT_QUINT16, "quint16", 2},
    {DT_UINT16, "uint16", 2},     {DT_COMPLEX128, "complex128", 16},
    {DT_HALF, "half", 2},         {DT_RESOURCE, "resource", 0},
    {DT_VARIANT, "variant", 0},   {DT_UINT32, "uint32", 4},
    {DT_UINT64, "uint64", 8},
};

const TypeInfo* Find(DataType dt) {
  for (const TypeInfo& t : kTypes) {
    if (t.dtype == dt) return &t;
  }
  return nullptr;
}

}  // namespace

std::string DataTypeString(DataType dt) {
  const TypeInfo* info = Find(BaseType(dt));
  if (info == nullptr) return absl::StrCat("unknown dtype ", static_cast<int>(dt));
  return IsRefType(dt) ? absl::StrCat(info->name, "_ref") : info->name;
}

absl::StatusOr<DataType> DataTypeFromString(absl::string_view name) {
  std::string key(name);
  bool ref = false;
  if (absl::StartsWith(key, "DT_")) key = absl::AsciiStrToLower(key.substr(3));
  if (absl::EndsWith(key, "_ref")) {
    ref = true;
    key.resize(key.size() - 4);
  }
  for (const TypeInfo& t : kTypes) {
    if (key == t.name) return ref ? MakeRefType(t.dtype) : t.dtype;
  }
  return errors::InvalidArgument("unknown dtype '", name, "'");
}

bool DataTypeIsValid(int value) {
  if (value > kDataTypeRefOffset) value -= kDataTypeRefOffset;
  return Find(static_cast<DataType>(value)) != nullptr;
}

size_t DataTypeSize(DataType dt) {
  const TypeInfo* info = Find(dt);
  return info == nullptr ? 0 : info->size;
}

bool DataTypeIsPod(DataType dt) {
  return dt != DT_STRING && dt != DT_RESOURCE && dt != DT_VARIANT &&
         DataTypeSize(dt) > 0;
}

bool DataTypeIsFloating(DataType dt) {
  return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_HALF ||
         dt == DT_BFLOAT16;
}

bool DataTypeIsInteger(DataType dt) {
  switch (dt) {
    case DT_INT8: case DT_INT16: case DT_INT32: case DT_INT64:
    case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64:
      return true;
    default:
      return false;
  }
}

}  // namespace recflow
