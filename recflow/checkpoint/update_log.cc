#include "recflow/checkpoint/update_log.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/core/status.h"

namespace recflow::checkpoint {
namespace {

constexpr char kMetaHeader[] = "recflow model update v1";
constexpr char kBaseHeader[] = "recflow model update base v1";
constexpr int kSequenceDigits = 20;

// "key: value" lines after `header`, in order.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseFields(
    absl::string_view text, const char* header, const char* what, const std::string& where) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty() || absl::StripAsciiWhitespace(lines[0]) != header) {
    return errors::DataLoss(what, " of ", where, " does not start with '", header, "'");
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) {
      return errors::DataLoss(what, " of ", where, ": line ", i + 1, " ('", lines[i],
                              "') is not 'key: value'");
    }
    out.emplace_back(std::string(absl::StripAsciiWhitespace(lines[i].substr(0, colon))),
                     std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1))));
  }
  return out;
}

absl::StatusOr<int64_t> ParseInt(const std::string& key, const std::string& value,
                                 const char* what, const std::string& where) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return errors::DataLoss(what, " of ", where, ": ", key, " '", value, "' is not an integer");
  }
  return v;
}

}  // namespace

std::string FormatUpdateMeta(const UpdateMeta& meta) {
  std::string out = absl::StrCat(kMetaHeader, "\nsequence: ", meta.sequence,
                                 "\nstep: ", meta.step, "\n");
  if (meta.full) {
    absl::StrAppend(&out, "full: true\n");
  } else {
    absl::StrAppend(&out, "since_step: ", meta.since_step, "\n");
  }
  absl::StrAppend(&out, "time_micros: ", meta.time_micros, "\n");
  for (const std::string& t : meta.tables) absl::StrAppend(&out, "table: ", t, "\n");
  for (const std::string& v : meta.variables) absl::StrAppend(&out, "variable: ", v, "\n");
  return out;
}

absl::StatusOr<UpdateMeta> ParseUpdateMeta(absl::string_view text, const std::string& where) {
  constexpr char kWhat[] = "model update metadata";
  ASSIGN_OR_RETURN(auto fields, ParseFields(text, kMetaHeader, kWhat, where));
  UpdateMeta meta;
  bool have_sequence = false, have_step = false, have_since = false, have_time = false;
  for (const auto& [key, value] : fields) {
    if (key == "sequence") {
      ASSIGN_OR_RETURN(meta.sequence, ParseInt(key, value, kWhat, where));
      have_sequence = true;
    } else if (key == "step") {
      ASSIGN_OR_RETURN(meta.step, ParseInt(key, value, kWhat, where));
      have_step = true;
    } else if (key == "since_step") {
      ASSIGN_OR_RETURN(meta.since_step, ParseInt(key, value, kWhat, where));
      have_since = true;
    } else if (key == "time_micros") {
      ASSIGN_OR_RETURN(meta.time_micros, ParseInt(key, value, kWhat, where));
      have_time = true;
    } else if (key == "full") {
      if (value != "true") {
        return errors::DataLoss(kWhat, " of ", where, ": full '", value, "' is not 'true'");
      }
      meta.full = true;
    } else if (key == "table") {
      meta.tables.push_back(value);
    } else if (key == "variable") {
      meta.variables.push_back(value);
    } else {
      return errors::DataLoss(kWhat, " of ", where, ": unknown field '", key, "'");
    }
  }
  if (!have_sequence || !have_step || !have_time || meta.full == have_since) {
    return errors::DataLoss(kWhat, " of ", where,
                            " needs sequence, step, time_micros and either since_step or "
                            "'full: true'");
  }
  if (meta.sequence < 1 || meta.step < 0 || (!meta.full && meta.since_step < 0)) {
    return errors::DataLoss(kWhat, " of ", where, ": sequence ", meta.sequence, ", step ",
                            meta.step, ", since_step ", meta.since_step,
                            " (the sequence starts at 1, steps are >= 0)");
  }
  return meta;
}

absl::StatusOr<UpdateMeta> ReadUpdateMeta(const BundleReader& reader) {
  if (!reader.Contains(kUpdateMetaKey)) {
    return errors::DataLoss(reader.prefix(), " is not a model update: it has no ",
                            kUpdateMetaKey);
  }
  ASSIGN_OR_RETURN(Tensor t, reader.Lookup(kUpdateMetaKey));
  if (t.dtype() != DT_STRING || t.NumElements() != 1) {
    return errors::DataLoss(kUpdateMetaKey, " of ", reader.prefix(), " is ",
                            DataTypeString(t.dtype()), " ", t.shape().DebugString(),
                            ", not a string scalar");
  }
  return ParseUpdateMeta(t.flat<std::string>()[0], reader.prefix());
}

std::string UpdatePrefix(const std::string& dir, int64_t sequence) {
  return JoinPath(dir, absl::StrFormat("%s%0*d", kUpdateFilePrefix, kSequenceDigits, sequence));
}

absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListUpdates(
    Env* env, const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  auto children = env->GetChildren(dir);
  if (!children.ok()) {
    if (absl::IsNotFound(children.status())) return out;
    return children.status();
  }
  const absl::string_view head = kUpdateFilePrefix, tail = ".index";
  for (const std::string& child : *children) {
    if (!absl::StartsWith(child, head) || !absl::EndsWith(child, tail)) continue;
    const std::string digits = child.substr(head.size(), child.size() - head.size() - tail.size());
    int64_t sequence = 0;
    if (digits.size() != kSequenceDigits ||
        !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(digits, &sequence) || sequence < 1) {
      continue;
    }
    out.emplace_back(sequence, JoinPath(dir, child.substr(0, child.size() - tail.size())));
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status RequestFullUpdate(Env* env, const std::string& dir, absl::string_view why) {
  return WriteStringToFileAtomically(env, JoinPath(dir, kFullUpdateRequestFile),
                                     absl::StrCat(why, "\n"));
}

std::optional<std::string> PendingFullUpdateRequest(Env* env, const std::string& dir) {
  std::string text;
  if (!ReadFileToString(env, JoinPath(dir, kFullUpdateRequestFile), &text).ok()) {
    return std::nullopt;
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

void ClearFullUpdateRequest(Env* env, const std::string& dir) {
  env->DeleteFile(JoinPath(dir, kFullUpdateRequestFile)).IgnoreError();
}

int RemoveUpdateTemporaries(Env* env, const std::string& dir) {
  auto children = env->GetChildren(dir);
  if (!children.ok()) return 0;
  int removed = 0;
  for (const std::string& child : *children) {
    if (absl::StartsWith(child, kUpdateFilePrefix) && absl::StrContains(child, ".tempstate") &&
        env->DeleteFile(JoinPath(dir, child)).ok()) {
      ++removed;
    }
  }
  return removed;
}

int DeleteUpdatesThrough(Env* env, const std::string& dir, int64_t sequence) {
  auto listed = ListUpdates(env, dir);
  if (!listed.ok()) return 0;
  auto children = env->GetChildren(dir);
  if (!children.ok()) return 0;
  int deleted = 0;
  for (const auto& [seq, prefix] : *listed) {
    if (seq > sequence) break;
    // The index first: from then on the update is not listed.
    if (!env->DeleteFile(MetaFilename(prefix)).ok()) continue;
    ++deleted;
    const std::string base = prefix.substr(prefix.rfind('/') + 1) + ".data-";
    for (const std::string& child : *children) {
      if (absl::StartsWith(child, base)) env->DeleteFile(JoinPath(dir, child)).IgnoreError();
    }
  }
  return deleted;
}

std::string FormatUpdateBase(const UpdateBase& base) {
  return absl::StrCat(kBaseHeader, "\nsequence: ", base.sequence, "\nstep: ", base.step, "\n");
}

absl::StatusOr<UpdateBase> ParseUpdateBase(absl::string_view text, const std::string& where) {
  constexpr char kWhat[] = "model update base";
  ASSIGN_OR_RETURN(auto fields, ParseFields(text, kBaseHeader, kWhat, where));
  UpdateBase base;
  bool have_sequence = false, have_step = false;
  for (const auto& [key, value] : fields) {
    if (key == "sequence") {
      ASSIGN_OR_RETURN(base.sequence, ParseInt(key, value, kWhat, where));
      have_sequence = true;
    } else if (key == "step") {
      ASSIGN_OR_RETURN(base.step, ParseInt(key, value, kWhat, where));
      have_step = true;
    } else {
      return errors::DataLoss(kWhat, " of ", where, ": unknown field '", key, "'");
    }
  }
  if (!have_sequence || !have_step || base.sequence < 0) {
    return errors::DataLoss(kWhat, " of ", where, " needs sequence (>= 0) and step");
  }
  return base;
}

}  // namespace recflow::checkpoint
