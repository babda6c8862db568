#include "recflow/train/input_hooks.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"

namespace recflow::train {

FeedList BatchFeeds(const data::Element& batch, const std::string& name) {
  FeedList feeds;
  feeds.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) feeds.emplace_back(absl::StrCat(name, ":", i), batch[i]);
  return feeds;
}

absl::StatusOr<std::shared_ptr<data::IteratorResource>> FindInputIterator(
    Session* session, const std::string& name) {
  ResourceMgr* rm = session->device()->resource_manager();
  return rm->Lookup<data::IteratorResource>(rm->default_container(), name);
}

// --- FeedInputHook -------------------------------------------------------------

absl::Status FeedInputHook::AfterCreateSession(Session* session, int64_t) {
  ASSIGN_OR_RETURN(iterator_, FindInputIterator(session, iterator_name_));
  return absl::OkStatus();
}

absl::Status FeedInputHook::BeforeRun(SessionRunContext*, RunArgs* args) {
  data::Element batch;
  bool end = false;
  RETURN_IF_ERROR(iterator_->GetNext(&batch, &end));
  if (end) return errors::OutOfRange("End of sequence");
  args->feeds = BatchFeeds(batch, feed_name_);
  return absl::OkStatus();
}

// --- InputPositionHook ---------------------------------------------------------

absl::Status InputPositionHook::AfterCreateSession(Session* session, int64_t) {
  ASSIGN_OR_RETURN(iterator_, FindInputIterator(session, options_.iterator));
  Env* env = Env::Default();
  const std::string& path = options_.path;
  if (env->FileExists(path)) {
    std::string saved;
    RETURN_IF_ERROR(ReadFileToString(env, path, &saved));
    if (saved.compare(0, options_.key.size(), options_.key) == 0) {
      RETURN_IF_ERROR(
          errors::Annotate(iterator_->RestoreFromString(saved.substr(options_.key.size())),
                           "restoring the input position from " + path));
      if (options_.log != nullptr) {
        std::fprintf(options_.log, "%s: resuming its data where it stopped (%s)\n",
                     options_.name.c_str(), path.c_str());
      }
    } else if (options_.log != nullptr) {
      std::fprintf(options_.log,
                   "%s: ignoring %s (written for other data or another cluster shape)\n",
                   options_.name.c_str(), path.c_str());
    }
  }
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    RETURN_IF_ERROR(env->RecursivelyCreateDir(path.substr(0, slash)));
  }
  last_save_ = std::chrono::steady_clock::now();
  return absl::OkStatus();
}

absl::Status InputPositionHook::Save() {
  ASSIGN_OR_RETURN(std::string bytes, iterator_->SaveToString());
  RETURN_IF_ERROR(
      WriteStringToFileAtomically(Env::Default(), options_.path, options_.key + bytes));
  last_save_ = std::chrono::steady_clock::now();
  return absl::OkStatus();
}

absl::Status InputPositionHook::AfterRun(SessionRunContext*, const RunValues&) {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_save_).count();
  if (secs >= options_.every_secs) return Save();
  return absl::OkStatus();
}

absl::Status InputPositionHook::End(Session*, int64_t) { return Save(); }

}  // namespace recflow::train
