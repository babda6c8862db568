// Element types of tensors. The numbers are TensorFlow's `DataType` enum
// values, so a DataType converts to and from the wire (`types.proto`) with a
// cast, and the names (DataTypeString) are the ones TensorFlow prints and its
// op specs use ("float", "int64", "float_ref").
#ifndef RECFLOW_CORE_DTYPE_H_
#define RECFLOW_CORE_DTYPE_H_

#include <complex>
#include <cstddef>
#include <cstdint>
#include <string>


#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "recflow/core/numeric_types.h"

namespace recflow {

enum DataType : int {
  DT_INVALID = 0,
  DT_FLOAT = 1,
  DT_DOUBLE = 2,
  DT_INT32 = 3,
  DT_UINT8 = 4,
  DT_INT16 = 5,
  DT_INT8 = 6,
  DT_STRING = 7,
  DT_COMPLEX64 = 8,
  DT_INT64 = 9,
  DT_BOOL = 10,
  DT_QINT8 = 11,
  DT_QUINT8 = 12,
  DT_QINT32 = 13,
  DT_BFLOAT16 = 14,
  DT_QINT16 = 15,
  DT_QUINT16 = 16,
  DT_UINT16 = 17,
  DT_COMPLEX128 = 18,
  DT_HALF = 19,
  DT_RESOURCE = 20,
  DT_VARIANT = 21,
  DT_UINT32 = 22,
  DT_UINT64 = 23,
};

// A reference type (TF1's `float_ref`) is the base type plus this offset.
inline constexpr int kDataTypeRefOffset = 100;

inline bool IsRefType(DataType dt) { return dt > kDataTypeRefOffset; }
inline DataType MakeRefType(DataType dt) {
  return IsRefType(dt) ? dt : static_cast<DataType>(dt + kDataTypeRefOffset);
}
inline DataType BaseType(DataType dt) {
  return IsRefType(dt) ? static_cast<DataType>(dt - kDataTypeRefOffset) : dt;
}

// "float", "int64", "float_ref", ...; "unknown dtype N" for other numbers.
std::string DataTypeString(DataType dt);
// Inverse of DataTypeString; also accepts TF's spelling "DT_FLOAT".
absl::StatusOr<DataType> DataTypeFromString(absl::string_view name);
// True for the numbers in the enum above (and their ref forms).
bool DataTypeIsValid(int value);

// Bytes per element for fixed-size types; 0 for string, resource, variant
// and invalid (their elements are C++ objects, see DataTypeIsPod).
size_t DataTypeSize(DataType dt);
// True when elements are plain bytes (everything except string, resource,
// variant).
bool DataTypeIsPod(DataType dt);
bool DataTypeIsFloating(DataType dt);  // half, bfloat16, float, double
bool DataTypeIsInteger(DataType dt);   // signed and unsigned ints

class ResourceHandle;

// DataTypeToEnum<T>::value maps a C++ element type to its DataType.
template <typename T>
struct DataTypeToEnum;
#define RECFLOW_MATCH_TYPE_AND_ENUM_(TYPE, ENUM)   \
  template <>                                      \
  struct DataTypeToEnum<TYPE> {                    \
    static constexpr DataType value = ENUM;        \
  }
RECFLOW_MATCH_TYPE_AND_ENUM_(float, DT_FLOAT);
RECFLOW_MATCH_TYPE_AND_ENUM_(double, DT_DOUBLE);
RECFLOW_MATCH_TYPE_AND_ENUM_(int32_t, DT_INT32);
RECFLOW_MATCH_TYPE_AND_ENUM_(uint32_t, DT_UINT32);
RECFLOW_MATCH_TYPE_AND_ENUM_(uint16_t, DT_UINT16);
RECFLOW_MATCH_TYPE_AND_ENUM_(uint8_t, DT_UINT8);
RECFLOW_MATCH_TYPE_AND_ENUM_(int16_t, DT_INT16);
RECFLOW_MATCH_TYPE_AND_ENUM_(int8_t, DT_INT8);
RECFLOW_MATCH_TYPE_AND_ENUM_(std::string, DT_STRING);
RECFLOW_MATCH_TYPE_AND_ENUM_(std::complex<float>, DT_COMPLEX64);
RECFLOW_MATCH_TYPE_AND_ENUM_(std::complex<double>, DT_COMPLEX128);
RECFLOW_MATCH_TYPE_AND_ENUM_(int64_t, DT_INT64);
RECFLOW_MATCH_TYPE_AND_ENUM_(uint64_t, DT_UINT64);
RECFLOW_MATCH_TYPE_AND_ENUM_(bool, DT_BOOL);
RECFLOW_MATCH_TYPE_AND_ENUM_(bfloat16, DT_BFLOAT16);
RECFLOW_MATCH_TYPE_AND_ENUM_(half, DT_HALF);
RECFLOW_MATCH_TYPE_AND_ENUM_(ResourceHandle, DT_RESOURCE);
#undef RECFLOW_MATCH_TYPE_AND_ENUM_

// Calls `fn.template operator()<T>()` with the C++ type of `dt` for the
// fixed-size numeric types and bool; returns false (without calling) for
// others. Used by code that works for "any POD dtype".
template <typename Fn>
bool DispatchPodType(DataType dt, Fn&& fn) {
  switch (dt) {
#define RECFLOW_CASE_(ENUM, TYPE) \
  case ENUM:                      \
    fn.template operator()<TYPE>(); \
    return true;
    RECFLOW_CASE_(DT_FLOAT, float)
    RECFLOW_CASE_(DT_DOUBLE, double)
    RECFLOW_CASE_(DT_INT32, int32_t)
    RECFLOW_CASE_(DT_INT64, int64_t)
    RECFLOW_CASE_(DT_UINT8, uint8_t)
    RECFLOW_CASE_(DT_INT8, int8_t)
    RECFLOW_CASE_(DT_INT16, int16_t)
    RECFLOW_CASE_(DT_UINT16, uint16_t)
    RECFLOW_CASE_(DT_UINT32, uint32_t)
    RECFLOW_CASE_(DT_UINT64, uint64_t)
    RECFLOW_CASE_(DT_BOOL, bool)
    RECFLOW_CASE_(DT_BFLOAT16, bfloat16)
    RECFLOW_CASE_(DT_HALF, half)
    RECFLOW_CASE_(DT_COMPLEX64, std::complex<float>)
    RECFLOW_CASE_(DT_COMPLEX128, std::complex<double>)
#undef RECFLOW_CASE_
    default:
      return false;
  }
}

}  // namespace recflow

#endif  // RECFLOW_CORE_DTYPE_H_
