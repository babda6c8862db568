// PhysicalMemoryBytes: the machine's memory, lowered by a cgroup limit read
// through the Env (v2 and v1 layouts, "max" meaning none); HumanBytes.
#include "recflow/core/system_memory.h"

#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"

namespace recflow {
namespace {

// Writes `path` in `env`, creating its directory.
void Write(MemEnv* env, const std::string& path, const std::string& text) {
  ASSERT_TRUE(env->RecursivelyCreateDir(path.substr(0, path.rfind('/'))).ok()) << path;
  ASSERT_TRUE(WriteStringToFile(env, path, text).ok()) << path;
}

int64_t MachineBytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
}

TEST(SystemMemoryTest, IsTheMachinesWithoutACgroupLimit) {
  MemEnv env;  // no /proc, no /sys: only sysconf
  ASSERT_GT(MachineBytes(), 0);
  EXPECT_EQ(PhysicalMemoryBytes(&env), MachineBytes());
  Write(&env, "/sys/fs/cgroup/memory.max", "max\n");
  EXPECT_EQ(PhysicalMemoryBytes(&env), MachineBytes());
  // A limit above the machine's (cgroup v1's "unlimited") changes nothing.
  Write(&env, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(PhysicalMemoryBytes(&env), MachineBytes());
  EXPECT_GT(PhysicalMemoryBytes(), 0);  // the real machine
}

TEST(SystemMemoryTest, ALowerCgroupLimitWins) {
  MemEnv env;
  Write(&env, "/sys/fs/cgroup/memory.max", "1048576\n");
  EXPECT_EQ(PhysicalMemoryBytes(&env), 1048576);
  // The process's own group, as /proc/self/cgroup names it (v2, then v1).
  MemEnv v2;
  Write(&v2, "/proc/self/cgroup", "0::/jobs/a\n");
  Write(&v2, "/sys/fs/cgroup/jobs/a/memory.max", "2097152\n");
  EXPECT_EQ(PhysicalMemoryBytes(&v2), 2097152);
  MemEnv v1;
  Write(&v1, "/proc/self/cgroup", "5:devices:/\n4:memory:/jobs/b\n0::/\n");
  Write(&v1, "/sys/fs/cgroup/memory/jobs/b/memory.limit_in_bytes", "3145728\n");
  EXPECT_EQ(PhysicalMemoryBytes(&v1), 3145728);
  // Junk is no limit.
  MemEnv junk;
  Write(&junk, "/sys/fs/cgroup/memory.max", "lots\n");
  EXPECT_EQ(PhysicalMemoryBytes(&junk), MachineBytes());
}

TEST(SystemMemoryTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(0), "0 bytes");
  EXPECT_EQ(HumanBytes(999), "999 bytes");
  EXPECT_EQ(HumanBytes(1500), "1.5 KB");
  EXPECT_EQ(HumanBytes(16e9), "16.0 GB");
  EXPECT_EQ(HumanBytes(1.6e13), "16.0 TB");
  EXPECT_EQ(HumanBytes(1e25), "10000000.0 EB");
}

}  // namespace
}  // namespace recflow
