#include "occupancy.h"

#include <algorithm>
#include <climits>

namespace lab {

namespace {

constexpr int kWarpSize = 32;
// sm_70+ split the register file evenly over 4 sub-partitions (one per warp scheduler); a warp
// takes all its registers from one, so registers limit warps per sub-partition, not per SM.
constexpr int kSubPartitions = 4;
constexpr int kUnlimited = INT_MAX;
constexpr int KiB = 1024;

long long round_up(long long x, long long unit) {
  return (x + unit - 1) / unit * unit;
}

int clamp_int(long long x) {
  return x > INT_MAX ? INT_MAX : static_cast<int>(x);
}

// Common to every listed arch: 1024 threads per block, 64 K registers per SM and per block,
// 255 registers per thread, registers allocated per warp in units of 256, 48 KiB of shared
// memory per block without opt-in.
ArchLimits arch(int major, int minor, const char* name, int warps, int blocks, int smem_sm_kib,
                int smem_optin_kib, int smem_unit, int reserved) {
  ArchLimits a{};
  a.major = major;
  a.minor = minor;
  a.name = name;
  a.max_threads_per_block = 1024;
  a.max_warps_per_sm = warps;
  a.max_blocks_per_sm = blocks;
  a.regs_per_sm = 65536;
  a.max_regs_per_thread = 255;
  a.reg_alloc_unit = 256;
  a.max_smem_per_sm = smem_sm_kib * KiB;
  a.max_smem_per_block_optin = smem_optin_kib * KiB;
  a.smem_per_block_default = 48 * KiB;
  a.smem_alloc_unit = smem_unit;
  a.reserved_smem_per_block = reserved;
  return a;
}

// Sources: CUDA Programming Guide "Compute Capabilities" Table 30 (warps, blocks per SM) and
// Table 31 (registers; shared memory per SM and per block), the same numbers as the legacy
// guide's "Technical Specifications per Compute Capability". Shared memory per SM is the
// largest carveout (Table 32), as cudaDeviceProp::sharedMemPerMultiprocessor reports it.
// Allocation unit from cuda_occupancy.h (cudaOccSMemAllocationGranularity: 256 bytes on 7.x,
// 128 on 8.x and later); the 1 KiB per-block reserve is the guide's "reserved for system use"
// (sm_80+).
const std::vector<ArchLimits> kArchs = {
    // cc, name, warps/SM, blocks/SM, smem KiB per SM, per block (opt-in), smem unit, reserve
    arch(7, 5, "sm_75 (Turing)", 32, 16, 64, 64, 256, 0),
    arch(8, 0, "sm_80 (A100)", 64, 32, 164, 163, 128, 1024),
    arch(8, 6, "sm_86 (Ampere GA10x)", 48, 16, 100, 99, 128, 1024),
    arch(8, 7, "sm_87 (Jetson Orin)", 48, 16, 164, 163, 128, 1024),
    arch(8, 9, "sm_89 (Ada)", 48, 24, 100, 99, 128, 1024),
    arch(9, 0, "sm_90 (Hopper)", 64, 32, 228, 227, 128, 1024),
    arch(10, 0, "sm_100 (Blackwell B200)", 64, 32, 228, 227, 128, 1024),
    arch(12, 0, "sm_120 (Blackwell RTX 50)", 48, 24, 100, 99, 128, 1024),
};

}  // namespace

const std::vector<ArchLimits>& known_archs() {
  return kArchs;
}

const ArchLimits* arch_limits(int major, int minor) {
  for (const ArchLimits& a : kArchs)
    if (a.major == major && a.minor == minor) return &a;
  return nullptr;
}

const char* limiter_name(Limiter l) {
  switch (l) {
    case Limiter::Warps:
      return "warps";
    case Limiter::Blocks:
      return "blocks";
    case Limiter::Registers:
      return "registers";
    case Limiter::SharedMemory:
      return "shared memory";
    case Limiter::None:
      break;
  }
  return "none";
}

OccupancyEstimate estimate_occupancy(const ArchLimits& arch, const KernelResources& k) {
  OccupancyEstimate e;
  e.max_warps = arch.max_warps_per_sm;
  e.by_blocks = arch.max_blocks_per_sm;
  if (k.threads_per_block <= 0) {
    e.refusal = "threads_per_block must be positive";
    return e;
  }
  if (k.regs_per_thread < 0) {
    e.refusal = "regs_per_thread must not be negative";
    return e;
  }
  std::vector<std::string> why;
  const long long warps = round_up(k.threads_per_block, kWarpSize) / kWarpSize;

  // Warp slots; a partial warp takes a whole slot.
  if (k.threads_per_block > arch.max_threads_per_block) {
    e.by_warps = 0;
    why.push_back(std::to_string(k.threads_per_block) +
                  " threads per block exceeds the maximum of " +
                  std::to_string(arch.max_threads_per_block));
  } else {
    e.by_warps = clamp_int(arch.max_warps_per_sm / warps);
  }

  // Registers: allocated per warp, rounded up to the allocation unit.
  if (k.regs_per_thread > arch.max_regs_per_thread) {
    e.by_regs = 0;
    why.push_back(std::to_string(k.regs_per_thread) +
                  " registers per thread exceeds the maximum of " +
                  std::to_string(arch.max_regs_per_thread));
  } else if (k.regs_per_thread == 0) {
    e.by_regs = kUnlimited;
  } else {
    const long long per_warp = round_up(1LL * k.regs_per_thread * kWarpSize, arch.reg_alloc_unit);
    // The launch check assumes a block allocates on all sub-partitions at once, so its warp
    // count is rounded up to a multiple of them (cuda_occupancy.h "hardware check"). The per-block
    // register limit equals regs_per_sm (64 K) on every listed arch.
    const long long per_block = per_warp * round_up(warps, kSubPartitions);
    if (per_block > arch.regs_per_sm) {
      e.by_regs = 0;
      why.push_back("a block needs " + std::to_string(per_block) + " registers (" +
                    std::to_string(per_warp) + " per warp, warps rounded up to a multiple of " +
                    std::to_string(kSubPartitions) + ") but may use at most " +
                    std::to_string(arch.regs_per_sm));
    } else {
      const long long warps_per_sub = (arch.regs_per_sm / kSubPartitions) / per_warp;
      e.by_regs = clamp_int(warps_per_sub * kSubPartitions / warps);
    }
  }

  // Shared memory: static + dynamic + the driver's per-block reserve, rounded up to the
  // allocation unit, against the largest carveout. Assumes the kernel opted in
  // (cudaFuncAttributeMaxDynamicSharedMemorySize) when it needs more than the 48 KiB default.
  const long long optin = arch.max_smem_per_block_optin;
  const bool huge = k.static_smem > static_cast<size_t>(optin) ||
                    k.dynamic_smem > static_cast<size_t>(optin);  // keeps the sum from overflowing
  const long long used = huge ? optin + 1 : static_cast<long long>(k.static_smem + k.dynamic_smem);
  const long long alloc = round_up(used + arch.reserved_smem_per_block, arch.smem_alloc_unit);
  if (alloc > optin + arch.reserved_smem_per_block) {
    e.by_smem = 0;
    why.push_back(
        std::to_string(k.static_smem) + " + " + std::to_string(k.dynamic_smem) +
        " bytes of static + dynamic shared memory per block exceeds the opt-in maximum of " +
        std::to_string(optin));
  } else {
    // optin + reserve never exceeds max_smem_per_sm, so the largest carveout always holds one
    // block and cuda_occupancy.h uses it unchanged.
    e.by_smem = alloc == 0 ? kUnlimited : clamp_int(arch.max_smem_per_sm / alloc);
  }

  const int blocks = std::min({e.by_warps, e.by_regs, e.by_smem, e.by_blocks});
  if (why.empty() && blocks == 0) why.push_back("one block does not fit on an SM");  // table guard
  if (!why.empty()) {
    for (size_t i = 0; i < why.size(); ++i) e.refusal += (i ? "; " : "") + why[i];
    return e;
  }

  // Tie order: warps, registers, shared memory, blocks.
  if (blocks == e.by_warps)
    e.limiter = Limiter::Warps;
  else if (blocks == e.by_regs)
    e.limiter = Limiter::Registers;
  else if (blocks == e.by_smem)
    e.limiter = Limiter::SharedMemory;
  else
    e.limiter = Limiter::Blocks;
  e.blocks_per_sm = blocks;
  e.active_warps = clamp_int(blocks * warps);
  e.occupancy = static_cast<double>(e.active_warps) / e.max_warps;
  return e;
}

}  // namespace lab
