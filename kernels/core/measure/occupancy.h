// Theoretical occupancy from a per-architecture table, host-only.
//
// No CUDA runtime calls, so it runs without a GPU and can estimate a target other than the
// one at hand (e.g. Jetson Orin sm_87 from an H200 sm_90). The arithmetic follows NVIDIA's
// cuda_occupancy.h (cudaOccMaxActiveBlocksPerMultiprocessor) with the shared-memory carveout at
// its maximum and the kernel opted in to the per-block shared-memory maximum; the test suite
// checks the two agree block for block. Differences from the header, on purpose: more than 255
// registers per thread is refused (the guide's limit; the header allows 256). Not modelled:
// named barriers beyond one, thread block clusters.
//
// Table: CUDA Programming Guide, "Compute Capabilities" (Table 30 SM information, Table 31
// memory information; legacy guide Table 27 "Technical Specifications per Compute
// Capability"); allocation units from cuda_occupancy.h (CUDA 13.0).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lab {

struct ArchLimits {
  int major, minor;              // compute capability
  const char* name;              // "sm_87 (Jetson Orin)"
  int max_threads_per_block;     // 1024
  int max_warps_per_sm;          // resident
  int max_blocks_per_sm;         // resident
  int regs_per_sm;               // 65536; also the per-block limit on every listed arch
  int max_regs_per_thread;       // 255
  int reg_alloc_unit;            // registers, per-warp allocation granularity (256)
  int max_smem_per_sm;           // bytes usable by blocks on one SM (max carveout)
  int max_smem_per_block_optin;  // bytes one block may use after cudaFuncSetAttribute opt-in
  int smem_per_block_default;    // 48 KiB without opt-in
  int smem_alloc_unit;           // bytes; 128 on sm_80+, 256 on sm_75
  int reserved_smem_per_block;   // 1024 on sm_80+ (0 before), taken by the driver per block
};

// nullptr if unknown.
const ArchLimits* arch_limits(int major, int minor);
const std::vector<ArchLimits>& known_archs();

struct KernelResources {
  int threads_per_block;
  int regs_per_thread;
  size_t static_smem;   // bytes
  size_t dynamic_smem;  // bytes, the launch's third <<<>>> argument
};

// None only when the kernel cannot launch.
enum class Limiter { None, Warps, Blocks, Registers, SharedMemory };
const char* limiter_name(Limiter);  // "none", "warps", "blocks", "registers", "shared memory"

struct OccupancyEstimate {
  int blocks_per_sm = 0;
  int active_warps = 0;
  int max_warps = 0;
  double occupancy = 0;  // active_warps / max_warps
  // The resource giving the fewest blocks. Ties go to the first of warps, registers, shared
  // memory, blocks; a fixed order, since on a tie every tied resource must be relaxed to fit
  // one more block.
  Limiter limiter = Limiter::None;
  // Blocks per SM each resource alone allows; INT_MAX when it imposes no limit (no registers,
  // no shared memory at all).
  int by_warps = 0, by_blocks = 0, by_regs = 0, by_smem = 0;
  // Non-empty when the configuration cannot launch at all, saying why ("; "-separated).
  std::string refusal;
};

OccupancyEstimate estimate_occupancy(const ArchLimits& arch, const KernelResources& k);

}  // namespace lab
