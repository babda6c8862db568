// Gradients of checkpoint_name_ops.cc: strings, nothing differentiable.
#include "recflow/framework/gradients.h"

namespace recflow {

REGISTER_NO_GRADIENT_OP("StringJoin");
REGISTER_NO_GRADIENT_OP("ShardedFilename");
REGISTER_NO_GRADIENT_OP("ShardedFilespec");

}  // namespace recflow
