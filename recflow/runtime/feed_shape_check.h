// Whether Session::Run checks fed values against the fed tensors' static
// shapes.
//
// By default it does, as TensorFlow's Python client does ("cannot feed a
// value of shape [2,4] for 'x', which has shape [?,3]"). TensorFlow's C++
// session, and so TF Serving, checks nothing: a value is fed as it is and
// the kernels downstream accept or refuse it. The model server runs
// signatures that way (serving/saved_model_bundle.h,
// RunSignatureOptions::leave_shapes_to_graph):
//
//   {
//     ScopedUncheckedFeedShapes unchecked;
//     RETURN_IF_ERROR(session->Run(feeds, fetches, {}, &outputs));
//   }
//
// The dtype of a fed value is checked either way.
//
// Thread-safety: the scope is per thread; it affects only the Session::Run
// calls made on the thread that holds it, while it is alive. Scopes nest.
#ifndef RECFLOW_RUNTIME_FEED_SHAPE_CHECK_H_
#define RECFLOW_RUNTIME_FEED_SHAPE_CHECK_H_

namespace recflow {

class ScopedUncheckedFeedShapes {
 public:
  ScopedUncheckedFeedShapes();
  ~ScopedUncheckedFeedShapes();
  ScopedUncheckedFeedShapes(const ScopedUncheckedFeedShapes&) = delete;
  ScopedUncheckedFeedShapes& operator=(const ScopedUncheckedFeedShapes&) =
      delete;
};

// True when Session::Run on this thread checks feed shapes (no
// ScopedUncheckedFeedShapes is alive on it).
bool FeedShapesChecked();

}  // namespace recflow

#endif  // RECFLOW_RUNTIME_FEED_SHAPE_CHECK_H_
