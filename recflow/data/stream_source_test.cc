// StreamTextLines (and StreamTfRecords, last): follows a growing file (a half-written line waits for
// its '\n'), moves on when a newer file appears or a done marker is
// written, returns a short element when the stream idles, resumes from a
// saved position without repeating or skipping a line (also when its file
// was deleted), ends only when told to stop, and refuses bad options and
// over-long lines as its policy says.
#include "recflow/data/stream_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <iterator>
#include <fstream>
#include <thread>

#include "absl/strings/str_replace.h"
#include "recflow/core/env.h"
#include "recflow/core/record_io.h"

namespace recflow::data {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/stream_source_test_" + name;
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  EXPECT_TRUE(Env::Default()->RecursivelyCreateDir(dir).ok());
  return dir;
}

// A writer appending to its log.
void Append(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::app | std::ios::binary);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

struct Stream {
  std::atomic<bool> stop{false};
  StreamOptions options;

  explicit Stream(const std::string& dir, int64_t k = 2) {
    options.pattern = dir + "/log-*.tsv";
    options.lines_per_element = k;
    options.emit_origin = true;
    options.poll_seconds = 0.002;
    options.max_wait_secs = 0.05;
    options.stop = [this] { return stop.load(); };
  }
  Iterator Make(IteratorContext ctx = {}) {
    auto it = StreamTextLines(options).MakeIterator(std::move(ctx));
    EXPECT_TRUE(it.ok()) << it.status();
    return std::move(*it);
  }
};

// The lines (and origins) of the next element; {} at the end.
std::pair<std::vector<std::string>, std::vector<std::string>> Next(Iterator& it) {
  Element e;
  bool end = false;
  absl::Status s = it.GetNext(&e, &end);
  EXPECT_TRUE(s.ok()) << s;
  std::pair<std::vector<std::string>, std::vector<std::string>> out;
  if (end || !s.ok()) return out;
  for (const std::string& l : e[0].flat<std::string>()) out.first.push_back(l);
  for (const std::string& o : e[1].flat<std::string>()) out.second.push_back(o);
  return out;
}

TEST(StreamSourceTest, FollowsGrowingFilesInNameOrder) {
  const std::string dir = FreshDir("follow");
  const std::string f1 = dir + "/log-001.tsv", f2 = dir + "/log-002.tsv";
  Append(f1, "a\nb\r\nc");  // "c" is half written
  Stream s(dir);
  Iterator it = s.Make();
  auto e = Next(it);
  EXPECT_THAT(e.first, ElementsAre("a", "b"));
  EXPECT_THAT(e.second, ElementsAre(f1 + ":1", f1 + ":2"));
  // The rest of "c" comes while the iterator waits.
  std::thread writer([&] {
    Env::Default()->SleepForMicros(30000);
    Append(f1, "c\nd\n");
  });
  e = Next(it);
  writer.join();
  EXPECT_THAT(e.first, ElementsAre("cc", "d"));
  // Idle: a short element after max_wait_secs.
  Append(f1, "e\n");
  EXPECT_THAT(Next(it).first, ElementsAre("e"));
  // A newer file completes f1 (its last line needs no '\n').
  Append(f1, "f");
  Append(f2, "g\nh\n");
  e = Next(it);
  EXPECT_THAT(e.first, ElementsAre("f", "g"));
  EXPECT_THAT(e.second, ElementsAre(f1 + ":6", f2 + ":1"));

  // Saved here, restored into a new iterator: "h" next, nothing repeated.
  auto saved = it.SaveToString();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_THAT(Next(it).first, ElementsAre("h"));
  Iterator again = s.Make();
  ASSERT_TRUE(again.RestoreFromString(*saved).ok());
  EXPECT_THAT(Next(again).first, ElementsAre("h"));

  // Told to stop: the end of the sequence, at once.
  s.stop = true;
  Element end_element;
  bool end = false;
  ASSERT_TRUE(again.GetNext(&end_element, &end).ok());
  EXPECT_TRUE(end);
  EXPECT_EQ(again.stats().records_read(), 1);
}

// Stopping ends the sequence, but not for good: a pipeline saved after it
// goes on from the stream's position once restored.
TEST(StreamSourceTest, AStoppedPipelineGoesOnAfterARestore) {
  const std::string dir = FreshDir("pipeline");
  const std::string f1 = dir + "/log-1.tsv";
  Append(f1, "a\nb\n");
  Stream s(dir, 1);
  auto identity = [](Element e) -> absl::StatusOr<Element> { return e; };
  Dataset ds = StreamTextLines(s.options)
                   .Map(identity, 1, {DT_STRING, DT_STRING}, {PartialShape({}), PartialShape({})});
  auto it = ds.MakeIterator();
  ASSERT_TRUE(it.ok()) << it.status();
  for (const char* want : {"a", "b"}) {
    Element e;
    bool end = false;
    ASSERT_TRUE(it->GetNext(&e, &end).ok());
    ASSERT_FALSE(end);
    EXPECT_EQ(e[0].flat<std::string>()[0], want);
  }
  s.stop = true;
  Element e;
  bool end = false;
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_TRUE(end);
  auto saved = it->SaveToString();
  ASSERT_TRUE(saved.ok()) << saved.status();

  s.stop = false;
  Append(f1, "c\n");
  auto again = ds.MakeIterator();
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->RestoreFromString(*saved).ok());
  ASSERT_TRUE(again->GetNext(&e, &end).ok());
  ASSERT_FALSE(end);
  EXPECT_EQ(e[0].flat<std::string>()[0], "c");
}

TEST(StreamSourceTest, DoneMarkersSayWhenAFileIsComplete) {
  const std::string dir = FreshDir("done");
  const std::string f1 = dir + "/log-1.tsv", f2 = dir + "/log-2.tsv";
  Append(f1, "a\n");
  Append(f2, "b\n");
  Stream s(dir, 4);
  s.options.done_suffix = ".done";
  Iterator it = s.Make();
  // f2 exists, but f1 is not marked done: only "a" (short, after the wait).
  EXPECT_THAT(Next(it).first, ElementsAre("a"));
  Append(f1, "a2\n");
  Append(f1 + ".done", "");
  auto e = Next(it);
  EXPECT_THAT(e.first, ElementsAre("a2", "b"));
}

TEST(StreamSourceTest, RestoreIntoADeletedFileGoesOnWithTheNext) {
  const std::string dir = FreshDir("deleted");
  const std::string f1 = dir + "/log-1.tsv", f2 = dir + "/log-2.tsv";
  Append(f1, "a\nb\nc\n");
  Stream s(dir, 1);
  Iterator it = s.Make();
  EXPECT_THAT(Next(it).first, ElementsAre("a"));
  auto saved = it.SaveToString();
  ASSERT_TRUE(saved.ok());
  ASSERT_TRUE(Env::Default()->DeleteFile(f1).ok());
  Append(f2, "z\n");
  Iterator again = s.Make();
  ASSERT_TRUE(again.RestoreFromString(*saved).ok());
  EXPECT_THAT(Next(again).first, ElementsAre("z"));
}

TEST(StreamSourceTest, LongLinesFollowThePolicy) {
  const std::string dir = FreshDir("long");
  const std::string f1 = dir + "/log-1.tsv";
  Append(f1, std::string(100, 'x') + "\nok\n");
  Stream s(dir, 1);
  s.options.max_line_bytes = 10;
  s.options.read_buffer_bytes = 16;
  Iterator skip = s.Make();
  EXPECT_THAT(Next(skip).first, ElementsAre("ok"));
  EXPECT_EQ(skip.stats().records_skipped(), 1);

  IteratorContext fail;
  fail.error_policy.mode = ErrorMode::kFail;
  Iterator strict = s.Make(fail);
  Element e;
  bool end = false;
  absl::Status status = strict.GetNext(&e, &end);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(f1 + ":1: line longer than 10 bytes"));
}

// The TFRecord framing of `records`, as the bytes a writer appends.
std::string Framed(const std::vector<std::string>& records) {
  const std::string path = ::testing::TempDir() + "/stream_source_test_framed";
  EXPECT_TRUE(WriteRecordsToFile(Env::Default(), path, records).ok());
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

Iterator MakeRecords(Stream& s, IteratorContext ctx = {}) {
  s.options.pattern = absl::StrReplaceAll(s.options.pattern, {{".tsv", ".tfrecord"}});
  auto it = StreamTfRecords(s.options).MakeIterator(std::move(ctx));
  EXPECT_TRUE(it.ok()) << it.status();
  return std::move(*it);
}

TEST(StreamSourceTest, TfRecordsAreTakenWhole) {
  const std::string dir = FreshDir("records");
  const std::string f1 = dir + "/log-1.tfrecord", f2 = dir + "/log-2.tfrecord";
  const std::string c = Framed({"ccc"});
  Append(f1, Framed({"a", "bb"}) + c.substr(0, 14));  // "ccc" half written
  Stream s(dir);
  Iterator it = MakeRecords(s);
  auto e = Next(it);
  EXPECT_THAT(e.first, ElementsAre("a", "bb"));
  EXPECT_THAT(e.second, ElementsAre(f1 + ":1", f1 + ":2"));
  std::thread writer([&] {
    Env::Default()->SleepForMicros(30000);
    Append(f1, c.substr(14) + Framed({"d"}));
  });
  e = Next(it);
  writer.join();
  EXPECT_THAT(e.first, ElementsAre("ccc", "d"));
  auto saved = it.SaveToString();
  ASSERT_TRUE(saved.ok()) << saved.status();
  // A newer file completes f1.
  Append(f2, Framed({"e"}));
  e = Next(it);
  EXPECT_THAT(e.first, ElementsAre("e"));
  EXPECT_THAT(e.second, ElementsAre(f2 + ":1"));
  Iterator again = MakeRecords(s);
  ASSERT_TRUE(again.RestoreFromString(*saved).ok());
  EXPECT_THAT(Next(again).first, ElementsAre("e"));
  EXPECT_EQ(it.stats().records_read(), 5);
  EXPECT_EQ(it.stats().records_skipped(), 0);
}

TEST(StreamSourceTest, DamagedTfRecordsFollowThePolicy) {
  const std::string dir = FreshDir("damaged");
  const std::string f1 = dir + "/log-1.tfrecord", f2 = dir + "/log-2.tfrecord",
                    f3 = dir + "/log-3.tfrecord";
  // f1: a data crc broken in the second record; f2: a length crc broken in
  // the second (the rest of f2 is lost); f3: ends inside a record, once f4
  // makes it complete.
  std::string one = Framed({"a", "bad", "b"});
  one[12 + 1 + 4 + 12] ^= 0x20;  // a data byte of "bad"
  Append(f1, one);
  std::string two = Framed({"c", "lost", "lost too"});
  two[12 + 1 + 4] ^= 0x01;  // a length byte of "lost"
  Append(f2, two);
  Append(f3, Framed({"d"}) + Framed({"never whole"}).substr(0, 15));
  Append(dir + "/log-4.tfrecord", Framed({"e"}));
  Stream s(dir, 1);
  Iterator skip = MakeRecords(s);
  std::vector<std::string> got;
  for (int i = 0; i < 5; ++i) got.push_back(Next(skip).first.at(0));
  EXPECT_THAT(got, ElementsAre("a", "b", "c", "d", "e"));
  EXPECT_EQ(skip.stats().records_skipped(), 3);

  for (const std::string& path : {f1, f2, f3}) {
    IteratorContext fail;
    fail.error_policy.mode = ErrorMode::kFail;
    Stream strict(dir, 8);
    strict.options.pattern = path;
    strict.options.done_suffix = ".done";  // complete: the only file matched
    Append(path + ".done", "");
    Iterator it = MakeRecords(strict, fail);
    Element e;
    bool end = false;
    absl::Status status;
    for (int i = 0; i < 3 && status.ok(); ++i) status = it.GetNext(&e, &end);
    EXPECT_TRUE(absl::IsDataLoss(status)) << path << ": " << status;
    EXPECT_THAT(status.message(), AllOf(HasSubstr("StreamTfRecords"), HasSubstr(path)));
  }
}

TEST(StreamSourceTest, BadOptionsAreRefused) {
  StreamOptions o;
  auto it = StreamTextLines(o).MakeIterator();
  EXPECT_TRUE(absl::IsInvalidArgument(it.status()));
  EXPECT_THAT(it.status().message(), HasSubstr("pattern is empty"));
  o.pattern = "/a*/b.tsv";
  EXPECT_THAT(StreamTextLines(o).MakeIterator().status().message(),
              HasSubstr("outside its last component"));
  o.pattern = "/a/*.tsv";
  o.poll_seconds = 0;
  EXPECT_THAT(StreamTextLines(o).MakeIterator().status().message(), HasSubstr("must be > 0"));
  o.poll_seconds = 1;
  o.lines_per_element = 0;
  EXPECT_THAT(StreamTextLines(o).MakeIterator().status().message(),
              HasSubstr("lines_per_element must be >= 1"));
}

}  // namespace
}  // namespace recflow::data
