// TextScanner: a cursor over a short text for hand-written parsers of
// literals (framework/tensor_literal.h, data/example_literal.h): skipping
// whitespace, testing and consuming punctuation, cutting out a token, and
// errors that name the position. A value type over a borrowed string_view
// (the text must outlive it); not thread-safe.
#ifndef RECFLOW_CORE_TEXT_SCANNER_H_
#define RECFLOW_CORE_TEXT_SCANNER_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "recflow/core/status.h"

namespace recflow {

class TextScanner {
 public:
  explicit TextScanner(absl::string_view text) : text_(text) {}

  // InvalidArgument "<what> at position <pos> of '<text>'".
  absl::Status Error(absl::string_view what) const {
    return errors::InvalidArgument(what, " at position ", pos_, " of '", text_,
                                   "'");
  }

  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
  }
  // After whitespace: true at the end of the text.
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  // After whitespace: true when the next character is c.
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  // Peek, and consumes c when it is there.
  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  // Consume, or the error "expected 'c'".
  absl::Status Expect(char c) {
    if (Consume(c)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", std::string(1, c), "'"));
  }

  // The characters from here up to whitespace, one of `stops` or the end
  // (not consumed; Skip past them).
  absl::string_view Token(absl::string_view stops) const {
    size_t end = pos_;
    while (end < text_.size() &&
           stops.find(text_[end]) == absl::string_view::npos &&
           !absl::ascii_isspace(text_[end])) {
      ++end;
    }
    return text_.substr(pos_, end - pos_);
  }
  // Moves n characters on. REQUIRES: n <= what is left.
  void Skip(size_t n) { pos_ += n; }

  // The unread text (no whitespace skipped).
  absl::string_view Rest() const { return text_.substr(pos_); }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_TEXT_SCANNER_H_
