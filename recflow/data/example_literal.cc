#include "recflow/data/example_literal.h"

#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/core/text_scanner.h"

namespace recflow::data {
namespace {

class ExampleLiteralParser {
 public:
  explicit ExampleLiteralParser(absl::string_view text) : in_(text) {}

  absl::StatusOr<std::vector<tensorflow::Example>> Parse() {
    std::vector<tensorflow::Example> examples;
    RETURN_IF_ERROR(in_.Expect('['));
    if (!in_.Peek(']')) {
      do {
        RETURN_IF_ERROR(ParseExample(&examples.emplace_back()));
      } while (in_.Consume(','));
    }
    RETURN_IF_ERROR(in_.Expect(']'));
    if (!in_.AtEnd()) return in_.Error("unexpected text after the list");
    return examples;
  }

 private:
  // A quoted string; a backslash takes the next character literally.
  absl::StatusOr<std::string> String() {
    RETURN_IF_ERROR(in_.Expect('"'));
    const absl::string_view rest = in_.Rest();
    std::string out;
    size_t i = 0;
    while (i < rest.size() && rest[i] != '"') {
      if (rest[i] == '\\' && i + 1 < rest.size()) ++i;
      out.push_back(rest[i++]);
    }
    in_.Skip(i);
    if (i >= rest.size()) return in_.Error("unterminated string");
    in_.Skip(1);
    return out;
  }
  absl::Status Value(tensorflow::Feature* f, const std::string& key) {
    enum Kind { kNone, kBytes, kFloat, kInt } kind = kNone;
    if (f->has_bytes_list()) kind = kBytes;
    if (f->has_float_list()) kind = kFloat;
    if (f->has_int64_list()) kind = kInt;
    auto mixed = [&]() {
      return in_.Error(
          absl::StrCat("feature '", key, "' mixes kinds of values"));
    };
    if (in_.Peek('"')) {
      if (kind != kNone && kind != kBytes) return mixed();
      ASSIGN_OR_RETURN(std::string v, String());
      f->mutable_bytes_list()->add_value(std::move(v));
      return absl::OkStatus();
    }
    const std::string token(in_.Token(",]}"));
    const bool is_float = token.find_first_of(".eEnN") != std::string::npos;
    if (is_float) {
      float v = 0;
      if (!absl::SimpleAtof(token, &v)) {
        return in_.Error(absl::StrCat("'", token, "' is not a number"));
      }
      if (kind != kNone && kind != kFloat) return mixed();
      f->mutable_float_list()->add_value(v);
    } else {
      int64_t v = 0;
      if (!absl::SimpleAtoi(token, &v)) {
        return in_.Error(absl::StrCat("'", token, "' is not a number"));
      }
      if (kind != kNone && kind != kInt) return mixed();
      f->mutable_int64_list()->add_value(v);
    }
    in_.Skip(token.size());
    return absl::OkStatus();
  }
  absl::Status ParseExample(tensorflow::Example* ex) {
    RETURN_IF_ERROR(in_.Expect('{'));
    auto* features = ex->mutable_features()->mutable_feature();
    if (!in_.Peek('}')) {
      do {
        ASSIGN_OR_RETURN(std::string key, String());
        RETURN_IF_ERROR(in_.Expect(':'));
        if (features->contains(key)) {
          return in_.Error(absl::StrCat("feature '", key, "' given twice"));
        }
        tensorflow::Feature& f = (*features)[key];
        if (in_.Consume('[')) {
          if (!in_.Peek(']')) {
            do {
              RETURN_IF_ERROR(Value(&f, key));
            } while (in_.Consume(','));
          }
          RETURN_IF_ERROR(in_.Expect(']'));
        } else {
          RETURN_IF_ERROR(Value(&f, key));
        }
      } while (in_.Consume(','));
    }
    return in_.Expect('}');
  }

  TextScanner in_;
};

}  // namespace

absl::StatusOr<std::vector<tensorflow::Example>> ParseExampleLiterals(
    absl::string_view text) {
  return ExampleLiteralParser(text).Parse();
}

}  // namespace recflow::data
