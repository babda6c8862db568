// UTF-8 validation (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF), for untrusted text: tf.Example strings with validate_utf8,
// YAML run configs (YAML streams are Unicode).
#ifndef RECFLOW_CORE_UTF8_H_
#define RECFLOW_CORE_UTF8_H_

#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace recflow {

// The length of the longest prefix of `s` that is valid UTF-8 and ends at
// a character boundary: s.size() when all of `s` is valid, else the offset
// of the first byte of the first bad sequence.
inline size_t ValidUtf8Prefix(absl::string_view s) {
  const auto* begin = reinterpret_cast<const unsigned char*>(s.data());
  const auto* p = begin;
  const auto* end = p + s.size();
  while (p < end) {
    // ASCII fast path, 8 bytes at a time.
    while (end - p >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      if (w & 0x8080808080808080ull) break;
      p += 8;
    }
    if (p == end) break;
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    uint32_t min, cp;
    if ((c & 0xe0) == 0xc0) {
      n = 1, min = 0x80, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, min = 0x800, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return static_cast<size_t>(p - begin);
    }
    if (end - p <= n) return static_cast<size_t>(p - begin);
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return static_cast<size_t>(p - begin);
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return static_cast<size_t>(p - begin);
    }
    p += n + 1;
  }
  return s.size();
}

inline bool IsValidUtf8(absl::string_view s) { return ValidUtf8Prefix(s) == s.size(); }

}  // namespace recflow

#endif  // RECFLOW_CORE_UTF8_H_
