// recflow ckpt inspect | merge | diff: tools for tensor-bundle checkpoints
// (ours and TensorFlow's V2 checkpoints; docs/formats/checkpoint.md).
//
//   inspect PREFIX_OR_DIR [--tensor NAME] [--verify] [--max_values N]
//   merge --out PREFIX IN1 [IN2 ...] [--allow_overwrite] [--max_shard_bytes N]
//   diff A B [--atol X]
//
// A directory argument resolves to the checkpoint training would resume
// from (checkpoint::FindLatestCheckpoint: its `checkpoint` state file, or
// the newest intact checkpoint when that file is damaged, with a warning);
// "P.index" is accepted for the prefix P.
//
// Exit codes: inspect and merge: 0 ok, 1 the work failed (unreadable or
// corrupt bundle, output exists), 2 bad command line. diff: 0 equal,
// 1 different, 2 trouble (bad command line, unreadable bundle), as diff(1).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/checkpoint/tensor_cursor.h"
#include "recflow/cli/commands.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"

namespace recflow::cli {
namespace {

using checkpoint::BundleReader;
using checkpoint::BundleWriter;
using checkpoint::TensorInfo;

constexpr char kUsage[] =
    "usage: recflow ckpt inspect PREFIX_OR_DIR [--tensor NAME] [--verify] [--max_values N]\n"
    "       recflow ckpt merge --out PREFIX IN1 [IN2 ...] [--allow_overwrite]\n"
    "       recflow ckpt diff A B [--atol X]\n"
    "\n"
    "Tensor-bundle checkpoints (recflow's and TensorFlow's V2). A directory resolves\n"
    "to the checkpoint training would resume from: the one its 'checkpoint' state file\n"
    "names, or the newest intact one when that file is damaged (with a warning).\n\n";

// Below this many data bytes, inspect checks every crc without --verify.
constexpr uint64_t kCheapVerifyBytes = 64ull << 20;

std::string HumanBytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream os;
  if (u == 0) {
    os << b << " B";
  } else {
    os << std::fixed << std::setprecision(1) << v << " " << units[u];
  }
  return os.str();
}

// A checkpoint argument: a directory (its latest checkpoint), "P.index" or P.
absl::StatusOr<std::string> ResolvePrefix(Env* env, std::string arg) {
  if (env->IsDirectory(arg).ok()) {
    // The checkpoint train, eval and export would use (checkpoint_state.h).
    ASSIGN_OR_RETURN(checkpoint::LatestCheckpointInfo found,
                     checkpoint::FindLatestCheckpoint(env, arg));
    if (!found.recovery.empty()) std::cerr << "warning: " << found.recovery << "\n";
    return found.prefix;
  }
  if (absl::EndsWith(arg, ".index") && env->FileExists(arg)) {
    arg.resize(arg.size() - strlen(".index"));
  }
  if (!env->FileExists(checkpoint::MetaFilename(arg))) {
    return errors::NotFound("no checkpoint at '", arg, "' (", checkpoint::MetaFilename(arg),
                            " does not exist)");
  }
  return arg;
}

absl::StatusOr<std::unique_ptr<BundleReader>> OpenBundle(Env* env, const std::string& arg,
                                                         std::string* prefix) {
  ASSIGN_OR_RETURN(*prefix, ResolvePrefix(env, arg));
  return BundleReader::Open(env, *prefix);
}

// Reads every byte of one tensor and checks its crc, in bounded memory.
absl::Status VerifyTensor(const BundleReader& reader, const TensorInfo& info) {
  if (info.dtype == DT_STRING) return reader.Lookup(info.name).status();
  return reader.ReadChunks(info.name, [](absl::string_view) { return absl::OkStatus(); });
}

std::string ShapeString(const TensorShape& s) { return s.DebugString(); }

// --- inspect -----------------------------------------------------------------

int Inspect(const Args& args) {
  std::string tensor, max_values_str = "20";
  bool verify = false;
  Args pos;
  if (!ParseFlags(args,
                  {{"tensor", &tensor, nullptr, "print this tensor's values"},
                   {"verify", nullptr, &verify,
                    "read every tensor and check its crc32c (done by default when the "
                    "bundle holds at most 64 MiB)"},
                   {"max_values", &max_values_str, nullptr,
                    "with --tensor: values to print (default 20; the rest are counted)"}},
                  &pos, kUsage)) {
    return 2;
  }
  int64_t max_values = 0;
  if (!absl::SimpleAtoi(max_values_str, &max_values) || max_values < 0) {
    std::cerr << "error: --max_values must be a non-negative integer, got '" << max_values_str
              << "'\n";
    return 2;
  }
  if (pos.size() != 1) {
    std::cerr << "error: ckpt inspect takes one checkpoint (prefix or directory)\n" << kUsage;
    return 2;
  }
  Env* env = Env::Default();
  std::string prefix;
  auto reader_or = OpenBundle(env, pos[0], &prefix);
  if (!reader_or.ok()) {
    std::cerr << "error: " << reader_or.status().message() << "\n";
    return 1;
  }
  const BundleReader& reader = **reader_or;

  if (!tensor.empty()) {
    auto info = reader.GetInfo(tensor);
    if (!info.ok()) {
      std::cerr << "error: " << info.status().message() << "\n";
      return 1;
    }
    auto t = reader.Lookup(tensor);
    if (!t.ok()) {
      std::cerr << "error: " << t.status().message() << "\n";
      return 1;
    }
    std::cout << tensor << ": " << DataTypeString(info->dtype) << " " << ShapeString(info->shape)
              << ", " << info->size << " bytes, shard " << info->shard_id << ", crc ok\n";
    const int64_t n = t->NumElements();
    const int64_t shown = std::min<int64_t>(n, max_values);
    std::cout << "values: " << (shown > 0 ? t->SummarizeValue(static_cast<int>(shown)) : "[]");
    if (n > shown) std::cout << " (" << n - shown << " more not shown)";
    std::cout << "\n";
    return 0;
  }

  auto infos = reader.ListTensors();
  if (!infos.ok()) {
    std::cerr << "error: " << infos.status().message() << "\n";
    return 1;
  }
  const int shards = reader.num_shards();
  uint64_t total = 0;
  std::vector<uint64_t> shard_end(std::max(shards, 0), 0);
  for (const TensorInfo& i : *infos) {
    total += i.size;
    if (i.shard_id >= 0 && i.shard_id < shards) {
      shard_end[i.shard_id] = std::max(shard_end[i.shard_id], i.offset + i.size);
    }
  }
  const bool check_crc = verify || total <= kCheapVerifyBytes;
  const auto& h = reader.header();
  std::cout << "checkpoint " << prefix << "\n"
            << infos->size() << " tensors, " << shards << " data shard(s), format version "
            << h.version().producer() << ", "
            << (h.endianness() == 0 ? "little" : "big") << " endian\n";
  bool bad = false;
  // Data files: present and long enough for their entries (cheap).
  std::vector<bool> shard_ok(std::max(shards, 0), true);
  for (int s = 0; s < shards; ++s) {
    const std::string path = checkpoint::DataFilename(prefix, s, shards);
    auto size = env->GetFileSize(path);
    if (!size.ok()) {
      std::cout << "  shard " << s << ": " << path << " MISSING\n";
      shard_ok[s] = false;
      bad = true;
    } else if (*size < shard_end[s]) {
      std::cout << "  shard " << s << ": " << path << " TRUNCATED (" << *size
                << " bytes, entries need " << shard_end[s] << ")\n";
      shard_ok[s] = false;
      bad = true;
    }
  }
  size_t width = 4;
  for (const TensorInfo& i : *infos) width = std::max(width, i.name.size());
  width = std::min<size_t>(width, 60);
  std::cout << std::left << std::setw(width) << "name" << "  " << std::setw(8) << "dtype"
            << "  " << std::setw(18) << "shape" << "  " << std::right << std::setw(12) << "bytes"
            << "  shard  crc\n";
  int checked = 0, failed = 0;
  for (const TensorInfo& i : *infos) {
    std::string crc = "not checked";
    std::string error;
    if (i.shard_id >= 0 && i.shard_id < shards && !shard_ok[i.shard_id]) {
      crc = "shard unusable";
    } else if (check_crc) {
      const absl::Status s = VerifyTensor(reader, i);
      ++checked;
      if (s.ok()) {
        crc = "ok";
      } else {
        crc = "BAD";
        error = std::string(s.message());
        ++failed;
        bad = true;
      }
    }
    // A tensor TensorFlow saved in parts has no data of its own: its bytes
    // are its parts' and it lives in no one shard.
    const bool sliced = !i.slices.empty();
    const uint64_t bytes = sliced && DataTypeIsPod(i.dtype)
                               ? static_cast<uint64_t>(i.shape.num_elements()) *
                                     DataTypeSize(i.dtype)
                               : i.size;
    std::cout << std::left << std::setw(width) << i.name << "  " << std::setw(8)
              << DataTypeString(i.dtype) << "  " << std::setw(18) << ShapeString(i.shape) << "  "
              << std::right << std::setw(12) << bytes << "  " << std::setw(5)
              << (sliced ? std::string("-") : std::to_string(i.shard_id)) << "  " << crc
              << (sliced ? absl::StrCat(" (", i.slices.size(), " slices)") : std::string())
              << "\n";
    if (!error.empty()) std::cout << "    error: " << error << "\n";
  }
  std::cout << "total: " << infos->size() << " tensors, " << total << " bytes (" << HumanBytes(total)
            << ") in " << shards << " shard(s); ";
  if (check_crc) {
    std::cout << "crc32c checked for " << checked << " tensors"
              << (verify ? "" : " (small bundle: checked by default)") << ", " << failed
              << " bad\n";
  } else {
    std::cout << "crc32c not checked (" << HumanBytes(total)
              << " of data; pass --verify to read and check every tensor)\n";
  }
  if (bad) {
    std::cerr << "error: checkpoint " << prefix << " is damaged (see above)\n";
    return 1;
  }
  return 0;
}

// --- merge -------------------------------------------------------------------

struct Progress {
  Env* env;
  uint64_t total_bytes = 0;
  uint64_t done_bytes = 0;
  size_t total_tensors = 0;
  size_t done_tensors = 0;
  uint64_t start_us = 0;
  uint64_t last_us = 0;

  void Maybe(bool force) {
    const uint64_t now = env->NowMicros();
    if (!force && now - last_us < 2000000) return;
    last_us = now;
    const double secs = (now - start_us) / 1e6;
    std::cerr << "merge: " << done_tensors << "/" << total_tensors << " tensors, "
              << HumanBytes(done_bytes) << "/" << HumanBytes(total_bytes) << ", "
              << std::fixed << std::setprecision(0)
              << (secs > 0 ? done_bytes / 1e6 / secs : 0.0) << " MB/s\n";
  }
};

absl::Status Merge(const std::string& out, const Args& inputs, bool allow_overwrite,
                   uint64_t max_shard_bytes) {
  Env* env = Env::Default();
  if (env->FileExists(checkpoint::MetaFilename(out))) {
    return errors::AlreadyExists("output checkpoint '", out, "' already exists (",
                                 checkpoint::MetaFilename(out),
                                 "); choose another --out or delete it first");
  }
  std::vector<std::unique_ptr<BundleReader>> readers;
  std::vector<std::string> prefixes;
  for (const std::string& in : inputs) {
    std::string prefix;
    auto r = OpenBundle(env, in, &prefix);
    if (!r.ok()) return r.status();
    readers.push_back(*std::move(r));
    prefixes.push_back(prefix);
  }
  // Which input each tensor comes from (the later one with allow_overwrite).
  std::map<std::string, std::pair<size_t, TensorInfo>> plan;
  for (size_t k = 0; k < readers.size(); ++k) {
    ASSIGN_OR_RETURN(std::vector<TensorInfo> infos, readers[k]->ListTensors());
    for (TensorInfo& info : infos) {
      auto it = plan.find(info.name);
      if (it != plan.end()) {
        if (!allow_overwrite) {
          return errors::InvalidArgument(
              "tensor '", info.name, "' is in both '", prefixes[it->second.first], "' and '",
              prefixes[k], "'; pass --allow_overwrite to let the later input win");
        }
        it->second = {k, info};
      } else {
        const std::string name = info.name;
        plan.emplace(name, std::make_pair(k, std::move(info)));
      }
    }
  }
  Progress progress{env};
  progress.total_tensors = plan.size();
  for (const auto& [name, p] : plan) progress.total_bytes += p.second.size;
  progress.start_us = progress.last_us = env->NowMicros();

  checkpoint::BundleWriterOptions wopts;
  wopts.max_shard_bytes = max_shard_bytes;
  ASSIGN_OR_RETURN(auto writer, BundleWriter::Create(env, out, wopts));
  for (const auto& [name, p] : plan) {
    const BundleReader& reader = *readers[p.first];
    const TensorInfo& info = p.second;
    absl::Status s;
    if (info.dtype == DT_STRING) {
      auto t = reader.Lookup(name);
      s = t.ok() ? writer->Add(name, *t) : t.status();
    } else {
      s = writer->AddChunks(name, info.dtype, info.shape,
                            [&](const BundleWriter::ChunkSink& sink) -> absl::Status {
                              return reader.ReadChunks(name, [&](absl::string_view piece) {
                                progress.done_bytes += piece.size();
                                progress.Maybe(false);
                                return sink(piece);
                              });
                            });
    }
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("copying '", name, "' from ", prefixes[p.first],
                                                 ": ", s.message()));
    }
    if (info.dtype == DT_STRING) progress.done_bytes += info.size;
    ++progress.done_tensors;
  }
  RETURN_IF_ERROR(writer->Finish());
  if (progress.total_bytes >= (64u << 20)) progress.Maybe(true);
  std::cout << "wrote " << out << ": " << plan.size() << " tensors, "
            << HumanBytes(writer->data_bytes()) << " from " << inputs.size() << " input(s)\n";
  return absl::OkStatus();
}

int MergeMain(const Args& args) {
  std::string out, max_shard = "0";
  bool allow_overwrite = false;
  Args pos;
  if (!ParseFlags(args,
                  {{"out", &out, nullptr, "prefix of the merged checkpoint (must not exist)"},
                   {"allow_overwrite", nullptr, &allow_overwrite,
                    "a tensor in several inputs: the later input wins (default: error)"},
                   {"max_shard_bytes", &max_shard, nullptr,
                    "start a new data shard past this many bytes (0: one shard)"}},
                  &pos, kUsage)) {
    return 2;
  }
  uint64_t max_shard_bytes = 0;
  if (!absl::SimpleAtoi(max_shard, &max_shard_bytes)) {
    std::cerr << "error: --max_shard_bytes must be a non-negative integer, got '" << max_shard
              << "'\n";
    return 2;
  }
  if (out.empty()) {
    std::cerr << "error: --out is required\n" << kUsage;
    return 2;
  }
  if (pos.empty()) {
    std::cerr << "error: ckpt merge needs at least one input checkpoint\n" << kUsage;
    return 2;
  }
  const absl::Status s = Merge(out, pos, allow_overwrite, max_shard_bytes);
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

// --- diff --------------------------------------------------------------------

struct ValueDiff {
  int64_t differing = 0;
  double max_abs = 0;  // numeric types only
  bool numeric = false;
};

// Compares n elements of dtype at a and b, accumulating into *d.
template <typename T>
void DiffNumeric(const char* a, const char* b, int64_t n, double atol, ValueDiff* d) {
  d->numeric = true;
  for (int64_t i = 0; i < n; ++i) {
    T ta, tb;
    std::memcpy(&ta, a + i * sizeof(T), sizeof(T));
    std::memcpy(&tb, b + i * sizeof(T), sizeof(T));
    const double x = static_cast<double>(ta), y = static_cast<double>(tb);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) {
        ++d->differing;
        d->max_abs = INFINITY;
      }
      continue;
    }
    if (x == y) continue;  // equal infinities too
    double diff = std::fabs(x - y);
    if (std::isnan(diff)) diff = INFINITY;
    d->max_abs = std::max(d->max_abs, diff);
    if (!(diff <= atol)) ++d->differing;
  }
}

void DiffPod(DataType dtype, const char* a, const char* b, int64_t n, double atol,
             ValueDiff* d) {
  switch (dtype) {
    case DT_FLOAT: return DiffNumeric<float>(a, b, n, atol, d);
    case DT_DOUBLE: return DiffNumeric<double>(a, b, n, atol, d);
    case DT_INT8: return DiffNumeric<int8_t>(a, b, n, atol, d);
    case DT_INT16: return DiffNumeric<int16_t>(a, b, n, atol, d);
    case DT_INT32: return DiffNumeric<int32_t>(a, b, n, atol, d);
    case DT_INT64: return DiffNumeric<int64_t>(a, b, n, atol, d);
    case DT_UINT8: return DiffNumeric<uint8_t>(a, b, n, atol, d);
    case DT_UINT16: return DiffNumeric<uint16_t>(a, b, n, atol, d);
    case DT_UINT32: return DiffNumeric<uint32_t>(a, b, n, atol, d);
    case DT_UINT64: return DiffNumeric<uint64_t>(a, b, n, atol, d);
    default: {  // bool, half, bfloat16, complex, quantized: exact bytes
      const size_t es = DataTypeSize(dtype);
      for (int64_t i = 0; i < n; ++i) d->differing += std::memcmp(a + i * es, b + i * es, es) != 0;
    }
  }
}

ValueDiff DiffValues(const Tensor& a, const Tensor& b, double atol) {
  ValueDiff d;
  if (a.dtype() == DT_STRING) {
    const std::string* pa = a.data<std::string>();
    const std::string* pb = b.data<std::string>();
    for (int64_t i = 0; i < a.NumElements(); ++i) d.differing += pa[i] != pb[i];
  } else {
    DiffPod(a.dtype(), a.raw_data(), b.raw_data(), a.NumElements(), atol, &d);
  }
  return d;
}

// Tensors above this size are compared piece by piece.
constexpr uint64_t kStreamDiffBytes = 32ull << 20;
constexpr size_t kDiffPieceBytes = 8 << 20;  // a multiple of every element size

absl::StatusOr<ValueDiff> DiffTensor(Env* env, const BundleReader& ra, const BundleReader& rb,
                                     const TensorInfo& ia, const TensorInfo& ib, double atol) {
  if (ia.dtype == DT_STRING || ia.size <= kStreamDiffBytes || ia.size != ib.size) {
    ASSIGN_OR_RETURN(Tensor ta, ra.Lookup(ia.name));
    ASSIGN_OR_RETURN(Tensor tb, rb.Lookup(ib.name));
    return DiffValues(ta, tb, atol);
  }
  // Both tensors side by side, in pieces (checkpoint::TensorCursor).
  ASSIGN_OR_RETURN(checkpoint::TensorCursor ca, checkpoint::TensorCursor::Open(env, ra, ia));
  ASSIGN_OR_RETURN(checkpoint::TensorCursor cb, checkpoint::TensorCursor::Open(env, rb, ib));
  const size_t es = DataTypeSize(ia.dtype);
  std::string a(static_cast<size_t>(std::min<uint64_t>(ia.size, kDiffPieceBytes)), '\0');
  std::string b(a.size(), '\0');
  ValueDiff d;
  while (ca.remaining() > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(ca.remaining(), a.size()));
    RETURN_IF_ERROR(ca.Read(n, a.data()));
    RETURN_IF_ERROR(cb.Read(n, b.data()));
    DiffPod(ia.dtype, a.data(), b.data(), static_cast<int64_t>(n / es), atol, &d);
  }
  RETURN_IF_ERROR(ca.Finish());
  RETURN_IF_ERROR(cb.Finish());
  return d;
}

int DiffMain(const Args& args) {
  std::string atol_str = "0";
  Args pos;
  if (!ParseFlags(args,
                  {{"atol", &atol_str, nullptr,
                    "numeric elements differ when |a - b| > atol (default 0: exact)"}},
                  &pos, kUsage)) {
    return 2;
  }
  double atol = 0;
  if (!absl::SimpleAtod(atol_str, &atol) || !(atol >= 0)) {
    std::cerr << "error: --atol must be a non-negative number, got '" << atol_str << "'\n";
    return 2;
  }
  if (pos.size() != 2) {
    std::cerr << "error: ckpt diff takes two checkpoints\n" << kUsage;
    return 2;
  }
  Env* env = Env::Default();
  std::string pa, pb;
  auto ra = OpenBundle(env, pos[0], &pa);
  if (!ra.ok()) {
    std::cerr << "error: " << ra.status().message() << "\n";
    return 2;
  }
  auto rb = OpenBundle(env, pos[1], &pb);
  if (!rb.ok()) {
    std::cerr << "error: " << rb.status().message() << "\n";
    return 2;
  }
  auto la = (*ra)->ListTensors();
  auto lb = (*rb)->ListTensors();
  if (!la.ok() || !lb.ok()) {
    std::cerr << "error: " << (la.ok() ? lb.status() : la.status()).message() << "\n";
    return 2;
  }
  std::map<std::string, TensorInfo> a, b;
  for (auto& i : *la) a.emplace(i.name, i);
  for (auto& i : *lb) b.emplace(i.name, i);
  std::cout << "A: " << pa << " (" << a.size() << " tensors)\nB: " << pb << " (" << b.size()
            << " tensors)\n";
  int only_a = 0, only_b = 0, meta = 0, values = 0, same = 0;
  for (const auto& [name, info] : a) {
    if (!b.count(name)) {
      std::cout << "only in A: " << name << " " << DataTypeString(info.dtype) << " "
                << ShapeString(info.shape) << "\n";
      ++only_a;
    }
  }
  for (const auto& [name, info] : b) {
    if (!a.count(name)) {
      std::cout << "only in B: " << name << " " << DataTypeString(info.dtype) << " "
                << ShapeString(info.shape) << "\n";
      ++only_b;
    }
  }
  for (const auto& [name, ia] : a) {
    auto it = b.find(name);
    if (it == b.end()) continue;
    const TensorInfo& ib = it->second;
    if (ia.dtype != ib.dtype || ia.shape != ib.shape) {
      std::cout << "differs: " << name << ": A is " << DataTypeString(ia.dtype) << " "
                << ShapeString(ia.shape) << ", B is " << DataTypeString(ib.dtype) << " "
                << ShapeString(ib.shape) << "\n";
      ++meta;
      continue;
    }
    // Reads both (crcs checked); big tensors piece by piece.
    auto dv = DiffTensor(env, **ra, **rb, ia, ib, atol);
    if (!dv.ok()) {
      std::cerr << "error: " << dv.status().message() << "\n";
      return 2;
    }
    const ValueDiff& d = *dv;
    if (d.differing == 0) {
      ++same;
      continue;
    }
    ++values;
    std::cout << "differs: " << name << ": " << d.differing << " of " << ia.shape.num_elements()
              << " elements";
    if (d.numeric) std::cout << ", max abs diff " << d.max_abs;
    std::cout << "\n";
  }
  const bool equal = only_a + only_b + meta + values == 0;
  std::cout << (equal ? "equal" : "different") << ": " << same << " tensors equal"
            << (atol > 0 ? absl::StrCat(" (atol ", atol_str, ")") : std::string()) << ", "
            << values << " with different values, " << meta << " with different dtype or shape, "
            << only_a << " only in A, " << only_b << " only in B\n";
  return equal ? 0 : 1;
}

}  // namespace

int CkptCommand(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cerr << kUsage;
    return args.empty() ? 2 : 0;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "inspect") return Inspect(rest);
  if (args[0] == "merge") return MergeMain(rest);
  if (args[0] == "diff") return DiffMain(rest);
  std::cerr << "error: unknown ckpt subcommand '" << args[0] << "'\n" << kUsage;
  return 2;
}

}  // namespace recflow::cli
