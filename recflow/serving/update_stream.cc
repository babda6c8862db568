#include "recflow/serving/update_stream.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/serving/update_stream.grpc.pb.h"

namespace recflow::serving {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;
// What the replica names a file while it arrives: RemoveUpdateTemporaries
// removes such leftovers.
constexpr char kArriving[] = ".tempstate-stream";

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The files of update `prefix` in the order they are sent: data files, then
// the index (its commit point).
absl::StatusOr<std::vector<std::string>> UpdateFiles(Env* env, const std::string& dir,
                                                     const std::string& prefix) {
  ASSIGN_OR_RETURN(std::vector<std::string> children, env->GetChildren(dir));
  const std::string base = Basename(prefix);
  std::vector<std::string> files;
  for (const std::string& c : children) {
    if (absl::StartsWith(c, base + ".data-") && !absl::StrContains(c, ".tempstate")) {
      files.push_back(c);
    }
  }
  std::sort(files.begin(), files.end());
  files.push_back(base + ".index");
  return files;
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace

class UpdateStreamServer::Service final : public ModelUpdateStream::Service {
 public:
  Service(std::string dir, const Options& options) : dir_(std::move(dir)), options_(options) {}

  void Stop() { stopping_ = true; }

  grpc::Status Subscribe(grpc::ServerContext* ctx, const SubscribeRequest* request,
                         grpc::ServerWriter<UpdateChunk>* writer) override {
    if (request->after_sequence() < 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("after_sequence must be >= 0, got ",
                                       request->after_sequence()));
    }
    Env* env = options_.env;
    int64_t after = request->after_sequence();
    bool first = true, told_caught_up = false;
    while (!ctx->IsCancelled() && !stopping_) {
      auto listed = checkpoint::ListUpdates(env, dir_);
      if (!listed.ok()) return ToGrpc(errors::Annotate(listed.status(), "listing " + dir_));
      size_t start = 0;
      while (start < listed->size() && (*listed)[start].first <= after) ++start;
      if (first) {
        // Start from the newest full update past `after`, if any.
        for (size_t i = listed->size(); i-- > start;) {
          auto reader = checkpoint::BundleReader::Open(env, (*listed)[i].second);
          if (!reader.ok()) continue;
          auto meta = checkpoint::ReadUpdateMeta(**reader);
          if (meta.ok() && meta->full) {
            start = i;
            break;
          }
        }
        first = false;
      }
      for (size_t i = start; i < listed->size() && !stopping_; ++i) {
        const auto& [sequence, prefix] = (*listed)[i];
        absl::Status s = SendUpdate(sequence, prefix, writer);
        if (absl::IsCancelled(s)) return grpc::Status::CANCELLED;
        // Deleted while being sent (compacted): the subscriber gets the
        // ones after it and its follower reports the gap.
        if (absl::IsNotFound(s)) continue;
        if (!s.ok()) return ToGrpc(s);
        after = sequence;
      }
      if (!told_caught_up) {
        UpdateChunk done;
        done.set_caught_up(true);
        if (!writer->Write(done)) return grpc::Status::CANCELLED;
        told_caught_up = true;
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_seconds));
    }
    return grpc::Status::OK;
  }

  grpc::Status RequestFullUpdate(grpc::ServerContext*, const FullUpdateRequest* request,
                                 FullUpdateResponse*) override {
    constexpr size_t kMaxReason = 4096;
    std::string reason = request->reason().substr(0, kMaxReason);
    for (char& c : reason) {
      if (c == '\n' || c == '\0') c = ' ';  // one line in the request file and the log
    }
    return ToGrpc(errors::Annotate(checkpoint::RequestFullUpdate(options_.env, dir_, reason),
                                   "asking for a full model update in " + dir_));
  }

 private:
  absl::Status SendUpdate(int64_t sequence, const std::string& prefix,
                          grpc::ServerWriter<UpdateChunk>* writer) {
    Env* env = options_.env;
    ASSIGN_OR_RETURN(std::vector<std::string> files, UpdateFiles(env, dir_, prefix));
    std::string scratch(kChunkBytes, '\0');
    for (size_t f = 0; f < files.size(); ++f) {
      ASSIGN_OR_RETURN(auto file, env->NewRandomAccessFile(JoinPath(dir_, files[f])));
      uint64_t offset = 0;
      for (;;) {
        ASSIGN_OR_RETURN(absl::string_view piece, file->Read(offset, kChunkBytes, scratch.data()));
        UpdateChunk chunk;
        chunk.set_sequence(sequence);
        chunk.set_file(files[f]);
        chunk.set_offset(static_cast<int64_t>(offset));
        chunk.set_data(piece.data(), piece.size());
        offset += piece.size();
        const bool done = piece.size() < kChunkBytes;
        chunk.set_file_done(done);
        chunk.set_update_done(done && f + 1 == files.size());
        if (!writer->Write(chunk)) return errors::Cancelled("the subscriber went away");
        if (done) break;
      }
    }
    return absl::OkStatus();
  }

  const std::string dir_;
  const Options options_;
  std::atomic<bool> stopping_{false};
};

absl::StatusOr<std::unique_ptr<UpdateStreamServer>> UpdateStreamServer::Start(
    const std::string& dir, const std::string& address, const Options& options) {
  std::unique_ptr<UpdateStreamServer> s(new UpdateStreamServer());
  s->service_ = std::make_unique<Service>(dir, options);
  grpc::ServerBuilder builder;
  // One trainer per port: a second one must fail, not share it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return errors::Unavailable("cannot serve model updates on ", address,
                               " (address in use, or not an address of this host?)");
  }
  return s;
}

UpdateStreamServer::~UpdateStreamServer() {
  if (service_ != nullptr) service_->Stop();
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() +
                                            std::chrono::seconds(2));
}

absl::StatusOr<std::unique_ptr<UpdateStreamReplica>> UpdateStreamReplica::Start(
    const std::string& address, const std::string& dir, const Options& options) {
  if (address.empty()) return errors::InvalidArgument("the model update stream has no address");
  Env* env = options.env;
  RETURN_IF_ERROR(env->RecursivelyCreateDir(dir));
  checkpoint::RemoveUpdateTemporaries(env, dir);
  ASSIGN_OR_RETURN(auto listed, checkpoint::ListUpdates(env, dir));
  std::unique_ptr<UpdateStreamReplica> r(new UpdateStreamReplica());
  r->options_ = options;
  r->address_ = address;
  r->dir_ = dir;
  r->newest_ = listed.empty() ? 0 : listed.back().first;
  r->thread_ = std::thread([p = r.get()] { p->Loop(); });
  r->requests_thread_ = std::thread([p = r.get()] { p->ForwardRequests(); });
  return r;
}

UpdateStreamReplica::~UpdateStreamReplica() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    if (active_ != nullptr) active_->TryCancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (requests_thread_.joinable()) requests_thread_.join();
}

void UpdateStreamReplica::ForwardRequests() {
  std::string reported;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      wake_.wait_for(l, std::chrono::duration<double>(options_.request_poll_seconds),
                     [this] { return stopping_; });
      if (stopping_) return;
    }
    const std::optional<std::string> reason =
        checkpoint::PendingFullUpdateRequest(options_.env, dir_);
    if (!reason.has_value()) continue;
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    auto stub = ModelUpdateStream::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    FullUpdateRequest request;
    request.set_reason(*reason);
    FullUpdateResponse response;
    const grpc::Status st = stub->RequestFullUpdate(&ctx, request, &response);
    if (st.ok()) {
      checkpoint::ClearFullUpdateRequest(options_.env, dir_);
      LOG(INFO) << "model update stream " << address_ << ": asked the trainer for a full update ("
                << *reason << ")";
      reported.clear();
      continue;
    }
    const std::string message = st.error_message();
    if (message != reported) {
      LOG(WARNING) << "model update stream " << address_
                   << ": cannot ask the trainer for a full update (retrying): " << message;
      reported = message;
    }
  }
}

bool UpdateStreamReplica::WaitCaughtUp(double timeout_seconds) {
  std::unique_lock<std::mutex> l(mu_);
  return wake_.wait_for(l, std::chrono::duration<double>(timeout_seconds),
                        [this] { return caught_up_ || stopping_; }) &&
         caught_up_;
}

void UpdateStreamReplica::Loop() {
  double backoff = 0.1;
  std::string reported;
  for (;;) {
    const int64_t before = newest_.load();
    absl::Status s = Follow();
    std::unique_lock<std::mutex> l(mu_);
    if (stopping_) return;
    if (newest_.load() > before) backoff = 0.1;  // it got somewhere
    const std::string message =
        s.ok() ? "the trainer ended the stream" : std::string(s.message());
    if (message != reported) {
      LOG(WARNING) << "model update stream " << address_ << ": " << message
                   << " (reconnecting; mirrored up to update " << newest_.load() << ")";
      reported = message;
    }
    wake_.wait_for(l, std::chrono::duration<double>(backoff), [this] { return stopping_; });
    if (stopping_) return;
    backoff = std::min(2.0, backoff * 2);
  }
}

absl::Status UpdateStreamReplica::Follow() {
  Env* env = options_.env;
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto stub = ModelUpdateStream::NewStub(channel);
  grpc::ClientContext ctx;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_) return absl::OkStatus();
    active_ = &ctx;
  }
  struct Unregister {
    UpdateStreamReplica* r;
    ~Unregister() {
      std::lock_guard<std::mutex> l(r->mu_);
      r->active_ = nullptr;
    }
  } unregister{this};
  SubscribeRequest request;
  request.set_after_sequence(newest_.load());
  std::unique_ptr<grpc::ClientReader<UpdateChunk>> reader = stub->Subscribe(&ctx, request);
  connections_.fetch_add(1);

  std::unique_ptr<WritableFile> out;
  uint64_t expected = 0;
  std::vector<std::pair<std::string, std::string>> arrived;  // temp, final (index last)
  absl::Status error;
  UpdateChunk chunk;
  while (error.ok() && reader->Read(&chunk)) {
    if (chunk.caught_up() && chunk.file().empty()) {
      {
        std::lock_guard<std::mutex> l(mu_);
        caught_up_ = true;
      }
      wake_.notify_all();
      continue;
    }
    const std::string& name = chunk.file();
    if (!absl::StartsWith(name, checkpoint::kUpdateFilePrefix) ||
        absl::StrContains(name, "/") || absl::StrContains(name, "..")) {
      error = errors::DataLoss("the stream sent a file named '", name, "', not an update's");
      break;
    }
    const std::string temp = JoinPath(dir_, name + kArriving);
    if (out == nullptr) {
      auto opened = env->NewWritableFile(temp);
      if (!opened.ok()) {
        error = opened.status();
        break;
      }
      out = std::move(*opened);
      expected = 0;
    }
    if (chunk.offset() != static_cast<int64_t>(expected)) {
      error = errors::DataLoss("the stream sent ", name, " at offset ", chunk.offset(),
                               ", expected ", expected);
      break;
    }
    error = out->Append(chunk.data());
    expected += chunk.data().size();
    if (!error.ok() || !chunk.file_done()) continue;
    error = out->Close();
    out.reset();
    arrived.emplace_back(temp, JoinPath(dir_, name));
    if (!error.ok() || !chunk.update_done()) continue;
    // Data files first, the index (sent last) last: the commit point.
    for (const auto& [from, to] : arrived) {
      if (error.ok()) error = env->RenameFile(from, to);
    }
    arrived.clear();
    if (!error.ok()) break;
    // A full update replaces everything before it.
    const std::string prefix = checkpoint::UpdatePrefix(dir_, chunk.sequence());
    if (auto r = checkpoint::BundleReader::Open(env, prefix); r.ok()) {
      if (auto meta = checkpoint::ReadUpdateMeta(**r); meta.ok() && meta->full) {
        checkpoint::DeleteUpdatesThrough(env, dir_, chunk.sequence() - 1);
      }
    }
    newest_ = chunk.sequence();  // after the pruning: newest() says it is done
  }
  if (!error.ok()) ctx.TryCancel();
  grpc::Status st = reader->Finish();
  out.reset();
  checkpoint::RemoveUpdateTemporaries(env, dir_);
  RETURN_IF_ERROR(error);
  if (!st.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
  }
  return absl::OkStatus();
}

}  // namespace recflow::serving
