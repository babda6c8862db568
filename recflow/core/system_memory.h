// How much memory this process can have: what up-front size checks (a model
// that cannot fit, docs/model_config.md "Model size") compare against.
//
// Thread-safe.
#ifndef RECFLOW_CORE_SYSTEM_MEMORY_H_
#define RECFLOW_CORE_SYSTEM_MEMORY_H_

#include <cstdint>
#include <string>

#include "recflow/core/env.h"

namespace recflow {

// The machine's physical memory (sysconf(_SC_PHYS_PAGES) pages), or the
// memory limit of the process's cgroup (v2 memory.max, v1
// memory.limit_in_bytes, read through `env`) when that is lower, in bytes.
// 0 when neither can be determined. Swap is not counted: a model that only
// fits with it trains at disk speed.
int64_t PhysicalMemoryBytes(Env* env = Env::Default());

// "23.5 GB", "512.0 MB", "1.2 TB": bytes for messages (decimal units).
std::string HumanBytes(double bytes);

}  // namespace recflow

#endif  // RECFLOW_CORE_SYSTEM_MEMORY_H_
