// What recflow reads from disk: TFRecord framing, snappy blocks, SSTables,
// tensor bundles (index and data), the `checkpoint` state file, update-log
// metadata and .npy files. Files live in a MemEnv made for each input.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <snappy.h>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/checkpoint_state.h"
#include "recflow/checkpoint/snappy.h"
#include "recflow/checkpoint/table.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/env.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/npy.h"
#include "recflow/core/record_io.h"
#include "recflow/core/tensor.h"
#include "tests/fuzz/fuzz_target.h"

namespace recflow::fuzz {
namespace {

void Write(Env* env, const std::string& path, absl::string_view bytes) {
  absl::Status s = env->RecursivelyCreateDir(Dirname(path));
  FUZZ_CHECK(s.ok(), s.ToString());
  s = WriteStringToFile(env, path, bytes);
  FUZZ_CHECK(s.ok(), s.ToString());
}

std::string Read(Env* env, const std::string& path) {
  std::string bytes;
  absl::Status s = ReadFileToString(env, path, &bytes);
  FUZZ_CHECK(s.ok(), s.ToString());
  return bytes;
}

}  // namespace

// ---------------------------------------------------------------------------
// TFRecord framing (core/record_io.h). Input: 1 byte picks the reader's
// buffer size (so records straddle refills), the rest is the file. The
// reader is driven as a skipping pipeline drives it: on DataLoss it goes on
// while the framing holds. Checks: it ends (every record costs 16 bytes of
// framing, so there are at most size / 16 of them), and the records it
// accepted, written again, read back the same.
RECFLOW_FUZZ_TARGET(tfrecord) {
  FuzzInput in(data, size);
  RecordReaderOptions options;
  options.buffer_bytes = static_cast<size_t>(in.ConsumeIntInRange(1, 64, 1));
  options.max_record_bytes = 1 << 16;
  const absl::string_view file = in.ConsumeRest();
  MemEnv env;
  Write(&env, "/f.tfrecord", file);
  auto f = env.NewRandomAccessFile("/f.tfrecord");
  FUZZ_CHECK(f.ok(), f.status().ToString());
  RecordReader reader(f->get(), "/f.tfrecord", options);
  std::vector<std::string> records;
  int64_t errors = 0;
  std::string record;
  for (int64_t calls = 0;; ++calls) {
    FUZZ_CHECK(calls <= static_cast<int64_t>(file.size() / 16) + 1,
               absl::StrCat("no end after ", calls, " reads of ", file.size(), " bytes"));
    absl::Status s = reader.ReadRecord(&record);
    if (s.ok()) {
      records.push_back(record);
      continue;
    }
    if (absl::IsOutOfRange(s)) break;
    FUZZ_CHECK(absl::IsDataLoss(s), s.ToString());
    ++errors;
  }
  Note(absl::StrCat("tfrecord: ", records.size(), " records, ", errors, " errors"));
  if (records.empty()) return 0;
  absl::Status s = WriteRecordsToFile(&env, "/again.tfrecord", records);
  FUZZ_CHECK(s.ok(), s.ToString());
  auto again = env.NewRandomAccessFile("/again.tfrecord");
  FUZZ_CHECK(again.ok(), again.status().ToString());
  RecordReader reread(again->get(), "/again.tfrecord");
  for (const std::string& want : records) {
    s = reread.ReadRecord(&record);
    FUZZ_CHECK(s.ok() && record == want, "a rewritten record reads back differently");
  }
  s = reread.ReadRecord(&record);
  FUZZ_CHECK(absl::IsOutOfRange(s), "a rewritten file has more records");
  return 0;
}

RECFLOW_FUZZ_SEEDS(tfrecord) {
  MemEnv env;
  std::vector<std::string> records = {"", "a", std::string(100, 'x'), "\x00\xff\x10"};
  absl::Status s = WriteRecordsToFile(&env, "/seed", records);
  FUZZ_CHECK(s.ok(), s.ToString());
  const std::string file = Read(&env, "/seed");
  std::string corrupt = file;
  corrupt[20] ^= 0x40;  // the second record's length crc
  return {{"four_records", std::string("\x07", 1) + file},
          {"truncated", std::string("\x03", 1) + file.substr(0, file.size() - 5)},
          {"bad_crc", std::string("\x00", 1) + corrupt}};
}

// ---------------------------------------------------------------------------
// Snappy (checkpoint/snappy.h). Input: the compressed stream. Checks: a
// stream that decompresses gives exactly the length it declares.
RECFLOW_FUZZ_TARGET(snappy) {
  const absl::string_view compressed(reinterpret_cast<const char*>(data), size);
  uint64_t declared = 0;
  absl::Status length = recflow::snappy::GetUncompressedLength(compressed, &declared);
  std::string out;
  absl::Status s = recflow::snappy::Uncompress(compressed, &out, 1 << 20);
  Note(absl::StrCat("snappy: ", s.ToString(), ", ", out.size(), " bytes"));
  if (!s.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(s), s.ToString());
    return 0;
  }
  FUZZ_CHECK(length.ok() && declared == out.size(),
             absl::StrCat("declared ", declared, ", got ", out.size()));
  return 0;
}

RECFLOW_FUZZ_SEEDS(snappy) {
  auto compress = [](const std::string& raw) {
    std::string out;
    ::snappy::Compress(raw.data(), raw.size(), &out);
    return out;
  };
  std::string text;
  for (int i = 0; i < 200; ++i) absl::StrAppend(&text, "feature_", i % 17, " ");
  return {{"empty", compress("")},
          {"text", compress(text)},
          {"binary", compress(std::string("\x00\x01\x02\x00\x01\x02\xff\xfe", 8) +
                              std::string(3000, '\x07'))}};
}

// ---------------------------------------------------------------------------
// SSTables (checkpoint/table.h), the tensor-bundle index format. Input: the
// file. Checks: iteration yields strictly increasing keys, each of which
// Get finds with the same value, and Seek to a seen key lands on it.
RECFLOW_FUZZ_TARGET(sstable) {
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  MemEnv env;
  Write(&env, "/t.index", file);
  auto f = env.NewRandomAccessFile("/t.index");
  FUZZ_CHECK(f.ok(), f.status().ToString());
  table::TableReadOptions options;
  options.max_block_bytes = 1 << 20;
  options.block_cache_bytes = 4096;
  auto t = table::Table::Open(f->get(), file.size(), "/t.index", options);
  if (!t.ok()) {
    Note("sstable: " + t.status().ToString());
    return 0;
  }
  std::unique_ptr<table::Table::Iterator> it = (*t)->NewIterator();
  std::vector<std::pair<std::string, std::string>> entries;
  for (it->SeekToFirst(); it->Valid() && entries.size() < 10000; it->Next()) {
    const std::string key(it->key());
    if (!entries.empty()) {
      FUZZ_CHECK(entries.back().first < key, "keys out of order: '" + entries.back().first +
                                                 "' then '" + key + "'");
    }
    entries.emplace_back(key, std::string(it->value()));
  }
  Note(absl::StrCat("sstable: ", entries.size(), " entries, ", it->status().ToString()));
  if (!it->status().ok()) return 0;  // a corrupt data block: later keys unseen
  for (size_t i = 0; i < entries.size() && i < 64; ++i) {
    absl::StatusOr<std::string> got = (*t)->Get(entries[i].first);
    FUZZ_CHECK(got.ok() && *got == entries[i].second,
               "Get('" + entries[i].first + "') " +
                   (got.ok() ? "gives another value" : got.status().ToString()));
    it->Seek(entries[i].first);
    FUZZ_CHECK(it->Valid() && it->key() == entries[i].first,
               "Seek('" + entries[i].first + "') misses it");
  }
  return 0;
}

RECFLOW_FUZZ_SEEDS(sstable) {
  auto build = [](int n, size_t block_size, int restart_interval) {
    MemEnv env;
    auto file = env.NewWritableFile("/seed");
    FUZZ_CHECK(file.ok(), file.status().ToString());
    table::TableBuilderOptions options;
    options.block_size = block_size;
    options.block_restart_interval = restart_interval;
    table::TableBuilder builder(options, file->get());
    for (int i = 0; i < n; ++i) {
      absl::Status s = builder.Add(absl::StrCat("key", 1000 + i * 7), absl::StrCat("value", i));
      FUZZ_CHECK(s.ok(), s.ToString());
    }
    absl::Status s = builder.Finish();
    FUZZ_CHECK(s.ok() && (*file)->Close().ok(), s.ToString());
    return Read(&env, "/seed");
  };
  return {{"empty", build(0, 4096, 16)},
          {"one_block", build(10, 4096, 4)},
          {"many_blocks", build(60, 64, 2)}};
}

// ---------------------------------------------------------------------------
// Tensor bundles (checkpoint/bundle_reader.h): what a restore reads. Input:
// the .index file (3-byte length) and the one data shard. Every tensor
// listed is looked up whole, streamed in chunks, and cut by a slice taken
// from the index. Checks: a tensor read has the dtype and shape its entry
// declares, and the chunks stream exactly its bytes.
RECFLOW_FUZZ_TARGET(tensor_bundle) {
  FuzzInput in(data, size);
  const absl::string_view index = in.ConsumeLengthPrefixed(3);
  const absl::string_view shard = in.ConsumeRest();
  MemEnv env;
  Write(&env, "/ckpt/model.ckpt-1.index", index);
  Write(&env, "/ckpt/model.ckpt-1.data-00000-of-00001", shard);
  checkpoint::BundleReaderOptions options;
  options.read_chunk_bytes = 64;
  options.direct_io = false;
  auto reader = checkpoint::BundleReader::Open(&env, "/ckpt/model.ckpt-1", options);
  if (!reader.ok()) {
    Note("tensor_bundle: " + reader.status().ToString());
    return 0;
  }
  auto infos = (*reader)->ListTensors();
  if (!infos.ok()) {
    Note("tensor_bundle: " + infos.status().ToString());
    return 0;
  }
  int read = 0;
  for (const checkpoint::TensorInfo& info : *infos) {
    absl::StatusOr<Tensor> t = (*reader)->Lookup(info.name);
    if (!t.ok()) continue;
    ++read;
    FUZZ_CHECK(t->dtype() == info.dtype && t->shape() == info.shape,
               info.name + ": the tensor read differs from its entry");
    if (info.slices.empty() && info.dtype != DT_STRING) {
      std::string streamed;
      absl::Status s = (*reader)->ReadChunks(info.name, [&](absl::string_view piece) {
        streamed.append(piece.data(), piece.size());
        return absl::OkStatus();
      });
      FUZZ_CHECK(!s.ok() || streamed == std::string(t->raw_data(), t->TotalBytes()),
                 info.name + ": ReadChunks streams other bytes than Lookup reads");
    }
    if (info.shape.dims() > 0) {
      std::vector<checkpoint::SliceExtentInfo> slice(info.shape.dims());
      slice[0].start = in.ConsumeIntInRange(0, info.shape.dim_size(0), 1);
      slice[0].length = info.shape.dim_size(0) - slice[0].start;
      absl::StatusOr<Tensor> part = (*reader)->LookupSlice(info.name, slice);
      if (part.ok()) {
        FUZZ_CHECK(part->dim_size(0) == slice[0].length, info.name + ": a slice of another size");
      }
    }
  }
  Note(absl::StrCat("tensor_bundle: ", infos->size(), " tensors, ", read, " read"));
  return 0;
}

RECFLOW_FUZZ_SEEDS(tensor_bundle) {
  auto bundle = [](bool sliced) {
    MemEnv env;
    auto writer = checkpoint::BundleWriter::Create(&env, "/s/b");
    FUZZ_CHECK(writer.ok(), writer.status().ToString());
    auto add = [&](absl::string_view name, const Tensor& t) {
      absl::Status s = (*writer)->Add(name, t);
      FUZZ_CHECK(s.ok(), s.ToString());
    };
    add("dense/kernel", Tensor::FromVector<float>({1.5f, -2, 3, 4, 5, 6}, TensorShape({3, 2})));
    add("global_step", Tensor::Scalar<int64_t>(42));
    Tensor names(DT_STRING, TensorShape({2}));
    names.flat<std::string>()[0] = "alpha";
    names.flat<std::string>()[1] = std::string(70, 'b');
    add("names", names);
    if (sliced) {
      for (int64_t start : {0, 2}) {
        std::vector<checkpoint::SliceExtentInfo> slice = {{start, 2}, {0, -1}};
        absl::Status s = (*writer)->AddSlice(
            "part", TensorShape({4, 3}), slice,
            Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3})));
        FUZZ_CHECK(s.ok(), s.ToString());
      }
    }
    absl::Status s = (*writer)->Finish();
    FUZZ_CHECK(s.ok(), s.ToString());
    return LengthPrefixed(Read(&env, "/s/b.index"), 3) +
           Read(&env, "/s/b.data-00000-of-00001") + std::string("\x01\x00\x02", 3);
  };
  return {{"three_tensors", bundle(false)}, {"sliced", bundle(true)}};
}

// ---------------------------------------------------------------------------
// The `checkpoint` state file (protobuf text) and the newest-checkpoint
// lookup that restores start from. Input: the file. Checks: a state that
// reads and that WriteCheckpointState accepts reads back the same.
RECFLOW_FUZZ_TARGET(checkpoint_state) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  MemEnv env;
  Write(&env, "/d/checkpoint", text);
  Write(&env, "/d/model.ckpt-5.index", "");
  auto state = checkpoint::ReadCheckpointState(&env, "/d");
  Note("checkpoint_state: " + state.status().ToString());
  auto latest = checkpoint::LatestCheckpoint(&env, "/d");
  if (!state.ok()) return 0;
  if (!checkpoint::WriteCheckpointState(&env, "/e", *state).ok()) return 0;
  auto again = checkpoint::ReadCheckpointState(&env, "/e");
  FUZZ_CHECK(again.ok() && again->SerializeAsString() == state->SerializeAsString(),
             "a written state reads back differently");
  return 0;
}

RECFLOW_FUZZ_SEEDS(checkpoint_state) {
  return {{"state", "model_checkpoint_path: \"model.ckpt-5\"\n"
                    "all_model_checkpoint_paths: \"model.ckpt-3\"\n"
                    "all_model_checkpoint_paths: \"model.ckpt-5\"\n"
                    "all_model_checkpoint_timestamps: 1.5e9\n"
                    "last_preserved_timestamp: 1.4e9\n"},
          {"absolute", "model_checkpoint_path: \"/elsewhere/model.ckpt-9\"\n"},
          {"escape", "model_checkpoint_path: \"../model.ckpt-1\"\n"}};
}

// ---------------------------------------------------------------------------
// Update-log metadata (checkpoint/update_log.h): the text a serving follower
// reads from each published update. Input: 1 byte (meta or base), the text.
// Checks: what parses formats and parses back to the same.
RECFLOW_FUZZ_TARGET(update_meta) {
  FuzzInput in(data, size);
  const bool base = in.ConsumeBool();
  const absl::string_view text = in.ConsumeRest();
  if (base) {
    auto parsed = checkpoint::ParseUpdateBase(text, "fuzz");
    Note("update_base: " + parsed.status().ToString());
    if (!parsed.ok()) return 0;
    const std::string formatted = checkpoint::FormatUpdateBase(*parsed);
    auto again = checkpoint::ParseUpdateBase(formatted, "fuzz");
    FUZZ_CHECK(again.ok() && checkpoint::FormatUpdateBase(*again) == formatted,
               "update base does not round-trip: " + formatted);
    return 0;
  }
  auto parsed = checkpoint::ParseUpdateMeta(text, "fuzz");
  Note("update_meta: " + parsed.status().ToString());
  if (!parsed.ok()) return 0;
  const std::string formatted = checkpoint::FormatUpdateMeta(*parsed);
  auto again = checkpoint::ParseUpdateMeta(formatted, "fuzz");
  FUZZ_CHECK(again.ok() && checkpoint::FormatUpdateMeta(*again) == formatted,
             "update meta does not round-trip: " + formatted);
  return 0;
}

RECFLOW_FUZZ_SEEDS(update_meta) {
  checkpoint::UpdateMeta meta;
  meta.sequence = 7;
  meta.step = 1200;
  meta.since_step = 1100;
  meta.time_micros = 1700000000000000;
  meta.tables = {"user_table", "item_table"};
  meta.variables = {"dense/kernel"};
  checkpoint::UpdateMeta full = meta;
  full.full = true;
  full.since_step = -1;
  checkpoint::UpdateBase base;
  base.sequence = 3;
  base.step = 100;
  return {{"delta", std::string(1, '\0') + checkpoint::FormatUpdateMeta(meta)},
          {"full", std::string(1, '\0') + checkpoint::FormatUpdateMeta(full)},
          {"base", "\x01" + checkpoint::FormatUpdateBase(base)}};
}

// ---------------------------------------------------------------------------
// .npy files (core/npy.h; `saved_model run --inputs`). Input: the file.
// Checks: what parses encodes and parses back to an equal tensor.
RECFLOW_FUZZ_TARGET(npy) {
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Tensor> t = ParseNpy(file, "fuzz.npy");
  Note("npy: " + (t.ok() ? t->DebugString() : t.status().ToString()));
  if (!t.ok()) return 0;
  absl::StatusOr<std::string> encoded = EncodeNpy(*t);
  if (!encoded.ok()) return 0;  // e.g. a dtype recflow reads but does not write
  absl::StatusOr<Tensor> again = ParseNpy(*encoded, "again.npy");
  FUZZ_CHECK(again.ok() && TensorsEqual(*t, *again), "npy does not round-trip");
  return 0;
}

RECFLOW_FUZZ_SEEDS(npy) {
  auto encode = [](const Tensor& t) {
    absl::StatusOr<std::string> bytes = EncodeNpy(t);
    FUZZ_CHECK(bytes.ok(), bytes.status().ToString());
    return *bytes;
  };
  return {{"float_matrix",
           encode(Tensor::FromVector<float>({1, 2, 3, 4.5f, -1, 0}, TensorShape({2, 3})))},
          {"int64_vector", encode(Tensor::FromVector<int64_t>({7, -8, 1LL << 40}))},
          {"scalar", encode(Tensor::Scalar<double>(0.25))}};
}

}  // namespace recflow::fuzz
