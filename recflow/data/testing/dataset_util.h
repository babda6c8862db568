// Test helpers for the Dataset tests (recflow/data/*_test.cc). Test-only.

#ifndef RECFLOW_DATA_TESTING_DATASET_UTIL_H_
#define RECFLOW_DATA_TESTING_DATASET_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "recflow/core/env.h"
#include "recflow/core/tensor.h"
#include "recflow/data/dataset.h"

namespace recflow::data::testutil {

inline std::string ElementString(const Element& e) {
  std::vector<std::string> parts;
  for (const Tensor& t : e) parts.push_back(t.DebugString(20));
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

inline bool ElementsEqual(const Element& a, const Element& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!TensorsEqual(a[i], b[i])) return false;
  }
  return true;
}

// Reads until the end (or `max` elements); the first error fails the test
// and stops.
inline std::vector<Element> ReadAll(Iterator& it, int64_t max = 1 << 20) {
  std::vector<Element> out;
  while (static_cast<int64_t>(out.size()) < max) {
    Element e;
    bool end = false;
    absl::Status s = it.GetNext(&e, &end);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok() || end) break;
    out.push_back(std::move(e));
  }
  return out;
}

inline std::vector<Element> ReadAll(const Dataset& ds, int64_t max = 1 << 20) {
  absl::StatusOr<Iterator> it = ds.MakeIterator();
  EXPECT_TRUE(it.ok()) << it.status();
  if (!it.ok()) return {};
  return ReadAll(*it, max);
}

// Component `c` of scalar int64 elements.
inline std::vector<int64_t> Ints(const std::vector<Element>& elements,
                                 int c = 0) {
  std::vector<int64_t> out;
  for (const Element& e : elements) out.push_back(e[c].scalar<int64_t>());
  return out;
}

// Component `c` of elements, flattened, as strings.
inline std::vector<std::string> Strings(const std::vector<Element>& elements,
                                        int c = 0) {
  std::vector<std::string> out;
  for (const Element& e : elements) {
    for (const std::string& s : e[c].flat<std::string>()) out.push_back(s);
  }
  return out;
}

inline void ExpectSameSequence(const std::vector<Element>& want,
                               const std::vector<Element>& got,
                               const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(ElementsEqual(want[i], got[i]))
        << what << ": element " << i << ": want " << ElementString(want[i])
        << " got " << ElementString(got[i]);
  }
}

// For each k: reads k elements, saves, reads the rest (up to `max` in
// all); a fresh iterator restored from the bytes must read the same rest,
// equal to the uninterrupted sequence from k on.
inline void CheckSaveRestore(const Dataset& ds, const std::vector<int64_t>& ks,
                             int64_t max = 1 << 20,
                             const IteratorContext& ctx = {}) {
  absl::StatusOr<Iterator> full_it = ds.MakeIterator(ctx);
  ASSERT_TRUE(full_it.ok()) << full_it.status();
  const std::vector<Element> full = ReadAll(*full_it, max);
  for (int64_t k : ks) {
    SCOPED_TRACE(absl::StrCat(ds.DebugString(), " saved after ", k));
    absl::StatusOr<Iterator> it = ds.MakeIterator(ctx);
    ASSERT_TRUE(it.ok()) << it.status();
    std::vector<Element> head = ReadAll(*it, k);
    absl::StatusOr<std::string> bytes = it->SaveToString();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    std::vector<Element> rest =
        ReadAll(*it, max - static_cast<int64_t>(head.size()));
    absl::StatusOr<Iterator> fresh = ds.MakeIterator(ctx);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    absl::Status s = fresh->RestoreFromString(*bytes);
    ASSERT_TRUE(s.ok()) << s;
    std::vector<Element> restored =
        ReadAll(*fresh, max - static_cast<int64_t>(head.size()));
    ExpectSameSequence(rest, restored,
                       "rest after restore vs. rest after save");
    head.insert(head.end(), rest.begin(), rest.end());
    ExpectSameSequence(full, head, "saving must not disturb the sequence");
  }
}

inline void WriteOrDie(Env* env, const std::string& path,
                       absl::string_view contents) {
  absl::Status s = WriteStringToFile(env, path, contents);
  ASSERT_TRUE(s.ok()) << s;
}

}  // namespace recflow::data::testutil

#endif  // RECFLOW_DATA_TESTING_DATASET_UTIL_H_
