// Implementation details of recflow/data/example_parser.h: a minimal
// protobuf wire-format walker for tf.train.Example (Example -> Features ->
// map<string, Feature> -> BytesList / FloatList / Int64List). Functions
// return false on malformed input and never read outside the given bytes.
// Inline so the hot loops of the parser get them inlined.

#ifndef RECFLOW_DATA_EXAMPLE_WIRE_H_
#define RECFLOW_DATA_EXAMPLE_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/string_view.h"
#include "recflow/core/utf8.h"

namespace recflow::data::wire {

inline constexpr uint32_t kVarint = 0;
inline constexpr uint32_t kFixed64 = 1;
inline constexpr uint32_t kLengthDelimited = 2;
inline constexpr uint32_t kFixed32 = 5;

// Field numbers of Feature's oneof kind.
enum class ListKind : uint8_t { kNone = 0, kBytes = 1, kFloat = 2, kInt64 = 3 };

class Reader {
 public:
  explicit Reader(absl::string_view bytes)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool done() const { return p_ == end_; }

  bool ReadVarint(uint64_t* v) {
    if (p_ < end_ && static_cast<uint8_t>(*p_) < 0x80) {
      *v = static_cast<uint8_t>(*p_++);
      return true;
    }
    uint64_t result = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(*p_++);
      result |= uint64_t{b & 0x7fu} << shift;
      if (b < 0x80) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  bool ReadTag(uint32_t* field, uint32_t* wire_type) {
    uint64_t tag;
    if (!ReadVarint(&tag) || tag > 0xffffffffu) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    return *field != 0;
  }
  bool ReadBytes(absl::string_view* out) {
    uint64_t n;
    if (!ReadVarint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    *out = absl::string_view(p_, n);
    p_ += n;
    return true;
  }
  bool ReadFixed32(uint32_t* v) {
    if (end_ - p_ < 4) return false;
    std::memcpy(v, p_, 4);  // little endian host (checked below)
    p_ += 4;
    return true;
  }
  // Skips a field's value; groups (wire types 3, 4) are not supported.
  bool Skip(uint32_t wire_type) {
    uint64_t v;
    absl::string_view s;
    switch (wire_type) {
      case kVarint:
        return ReadVarint(&v);
      case kFixed64:
        if (end_ - p_ < 8) return false;
        p_ += 8;
        return true;
      case kLengthDelimited:
        return ReadBytes(&s);
      case kFixed32:
        if (end_ - p_ < 4) return false;
        p_ += 4;
        return true;
      default:
        return false;
    }
  }

 private:
  const char* p_;
  const char* end_;
};

#ifndef ABSL_IS_LITTLE_ENDIAN
#error "example_wire.h decodes packed floats with memcpy: little-endian only"
#endif

// A map<string, Feature> entry: key = 1, value = 2. A missing value is an
// empty Feature.
inline bool ParseMapEntry(absl::string_view entry, absl::string_view* key,
                          absl::string_view* value) {
  *key = absl::string_view();
  *value = absl::string_view();
  Reader r(entry);
  while (!r.done()) {
    uint32_t field, wire_type;
    if (!r.ReadTag(&field, &wire_type)) return false;
    if (wire_type == kLengthDelimited && (field == 1 || field == 2)) {
      if (!r.ReadBytes(field == 1 ? key : value)) return false;
    } else if (!r.Skip(wire_type)) {
      return false;
    }
  }
  return true;
}

// The list of a Feature message (the last one set wins, as for a oneof).
inline bool FindList(absl::string_view feature, ListKind* kind,
                     absl::string_view* list) {
  *kind = ListKind::kNone;
  Reader r(feature);
  while (!r.done()) {
    uint32_t field, wire_type;
    if (!r.ReadTag(&field, &wire_type)) return false;
    if (wire_type == kLengthDelimited && field >= 1 && field <= 3) {
      if (!r.ReadBytes(list)) return false;
      *kind = static_cast<ListKind>(field);
    } else if (!r.Skip(wire_type)) {
      return false;
    }
  }
  return true;
}

// Int64List: field 1, packed (length-delimited varints) or not.
template <typename Fn>
inline bool ForEachInt64(absl::string_view list, Fn fn) {
  Reader r(list);
  while (!r.done()) {
    uint32_t field, wire_type;
    if (!r.ReadTag(&field, &wire_type)) return false;
    if (field != 1) {
      if (!r.Skip(wire_type)) return false;
      continue;
    }
    uint64_t v;
    if (wire_type == kVarint) {
      if (!r.ReadVarint(&v)) return false;
      fn(static_cast<int64_t>(v));
    } else if (wire_type == kLengthDelimited) {
      absl::string_view packed;
      if (!r.ReadBytes(&packed)) return false;
      Reader p(packed);
      while (!p.done()) {
        if (!p.ReadVarint(&v)) return false;
        fn(static_cast<int64_t>(v));
      }
    } else {
      return false;
    }
  }
  return true;
}

inline bool AppendInt64s(absl::string_view list, std::vector<int64_t>* out) {
  return ForEachInt64(list, [out](int64_t v) { out->push_back(v); });
}

inline bool AppendInt64sAsFloats(absl::string_view list,
                                 std::vector<float>* out) {
  return ForEachInt64(
      list, [out](int64_t v) { out->push_back(static_cast<float>(v)); });
}

// FloatList: field 1, packed (length-delimited fixed32s) or not.
inline bool AppendFloats(absl::string_view list, std::vector<float>* out) {
  Reader r(list);
  while (!r.done()) {
    uint32_t field, wire_type;
    if (!r.ReadTag(&field, &wire_type)) return false;
    if (field != 1) {
      if (!r.Skip(wire_type)) return false;
      continue;
    }
    if (wire_type == kFixed32) {
      uint32_t bits;
      if (!r.ReadFixed32(&bits)) return false;
      float f;
      std::memcpy(&f, &bits, 4);
      out->push_back(f);
    } else if (wire_type == kLengthDelimited) {
      absl::string_view packed;
      if (!r.ReadBytes(&packed) || packed.size() % 4 != 0) return false;
      const size_t old = out->size();
      out->resize(old + packed.size() / 4);
      if (!packed.empty())
        std::memcpy(out->data() + old, packed.data(), packed.size());
    } else {
      return false;
    }
  }
  return true;
}

// BytesList: field 1, length-delimited. fn(value) returns false to stop
// (then ForEachBytes returns false).
template <typename Fn>
inline bool ForEachBytes(absl::string_view list, Fn fn) {
  Reader r(list);
  while (!r.done()) {
    uint32_t field, wire_type;
    if (!r.ReadTag(&field, &wire_type)) return false;
    if (field != 1 || wire_type != kLengthDelimited) {
      if (field == 1 || !r.Skip(wire_type)) return false;
      continue;
    }
    absl::string_view v;
    if (!r.ReadBytes(&v) || !fn(v)) return false;
  }
  return true;
}

inline bool AppendBytes(absl::string_view list,
                        std::vector<absl::string_view>* out) {
  return ForEachBytes(list, [out](absl::string_view v) {
    out->push_back(v);
    return true;
  });
}

// Maps feature keys to slot numbers: open addressing over a cheap hash of
// the key's length and first and last 8 bytes, verified by comparing the
// key (so a collision costs time, never correctness). Faster than a general
// string hash for the short keys of Examples. Immutable after Build.
class KeyTable {
 public:
  // REQUIRES: keys are distinct; at most 2^30 of them.
  void Build(const std::vector<std::string>& keys) {
    size_t cap = 16;
    while (cap < 2 * keys.size()) cap *= 2;
    mask_ = cap - 1;
    entries_.assign(cap, Entry{});
    for (size_t k = 0; k < keys.size(); ++k) {
      const uint64_t h = Hash(keys[k]);
      size_t i = h & mask_;
      while (entries_[i].slot >= 0) i = (i + 1) & mask_;
      entries_[i] = Entry{h, keys[k], static_cast<int>(k)};
    }
  }
  // The slot of `key`, or -1.
  int Find(absl::string_view key) const {
    const uint64_t h = Hash(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.slot < 0) return -1;
      if (e.hash == h && Equal(e.key, key)) return e.slot;
    }
  }
  // Inline for short keys (a libc memcmp call costs more than the compare).
  static bool Equal(absl::string_view a, absl::string_view b) {
    const size_t n = a.size();
    if (n != b.size()) return false;
    if (n > 16) return std::memcmp(a.data(), b.data(), n) == 0;
    if (n >= 8) {
      uint64_t x0, x1, y0, y1;
      std::memcpy(&x0, a.data(), 8);
      std::memcpy(&y0, b.data(), 8);
      std::memcpy(&x1, a.data() + n - 8, 8);
      std::memcpy(&y1, b.data() + n - 8, 8);
      return x0 == y0 && x1 == y1;
    }
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  static uint64_t Hash(absl::string_view k) {
    const size_t n = k.size();
    const char* p = k.data();
    uint64_t a = 0, b = 0;
    if (n >= 8) {
      std::memcpy(&a, p, 8);
      std::memcpy(&b, p + n - 8, 8);
    } else if (n >= 4) {
      uint32_t x, y;
      std::memcpy(&x, p, 4);
      std::memcpy(&y, p + n - 4, 4);
      a = x;
      b = y;
    } else if (n > 0) {
      a = static_cast<uint8_t>(p[0]) |
          static_cast<uint64_t>(static_cast<uint8_t>(p[n / 2])) << 8 |
          static_cast<uint64_t>(static_cast<uint8_t>(p[n - 1])) << 16;
    }
    uint64_t h = (a ^ (n * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;
    h ^= (b + (h >> 31)) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
  }

 private:
  struct Entry {
    uint64_t hash = 0;
    std::string key;
    int slot = -1;
  };
  std::vector<Entry> entries_;
  size_t mask_ = 0;
};

// RFC 3629 UTF-8 (core/utf8.h).
using ::recflow::IsValidUtf8;

}  // namespace recflow::data::wire

#endif  // RECFLOW_DATA_EXAMPLE_WIRE_H_
