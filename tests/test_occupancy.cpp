// Occupancy calculator: hand-worked cases, then a sweep against NVIDIA's cuda_occupancy.h.
#include <doctest/doctest.h>

#include <cuda_occupancy.h>  // host-only header shipped with the toolkit; no runtime needed

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "occupancy.h"

namespace {

constexpr size_t KiB = 1024;

const lab::ArchLimits& arch(int major, int minor) {
  const lab::ArchLimits* a = lab::arch_limits(major, minor);
  REQUIRE(a != nullptr);
  return *a;
}

lab::OccupancyEstimate est(int major, int minor, int threads, int regs, size_t static_smem = 0,
                           size_t dynamic_smem = 0) {
  return lab::estimate_occupancy(arch(major, minor), {threads, regs, static_smem, dynamic_smem});
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("occupancy: table lookup") {
    CHECK(lab::known_archs().size() >= 6);
    const lab::ArchLimits* orin = lab::arch_limits(8, 7);
    REQUIRE(orin != nullptr);
    CHECK(std::string(orin->name) == "sm_87 (Jetson Orin)");
    CHECK(orin->max_warps_per_sm == 48);
    CHECK(orin->max_blocks_per_sm == 16);
    CHECK(orin->max_smem_per_sm == 164 * 1024);
    CHECK(orin->max_smem_per_block_optin == 163 * 1024);
    const lab::ArchLimits* hopper = lab::arch_limits(9, 0);
    REQUIRE(hopper != nullptr);
    CHECK(hopper->max_warps_per_sm == 64);
    CHECK(hopper->max_blocks_per_sm == 32);
    CHECK(hopper->max_smem_per_sm == 228 * 1024);
    CHECK(hopper->max_smem_per_block_optin == 227 * 1024);
    CHECK(lab::arch_limits(6, 1) == nullptr);
    CHECK(lab::arch_limits(8, 8) == nullptr);
    for (const lab::ArchLimits& a : lab::known_archs())
      CHECK(lab::arch_limits(a.major, a.minor) == &a);
    CHECK(std::string(lab::limiter_name(lab::Limiter::Warps)) == "warps");
    CHECK(std::string(lab::limiter_name(lab::Limiter::Blocks)) == "blocks");
    CHECK(std::string(lab::limiter_name(lab::Limiter::Registers)) == "registers");
    CHECK(std::string(lab::limiter_name(lab::Limiter::SharedMemory)) == "shared memory");
    CHECK(std::string(lab::limiter_name(lab::Limiter::None)) == "none");
  }

  TEST_CASE("occupancy: sm_90, 256 threads, 32 regs -> 8 blocks, 100%, warps") {
    // 8 warps per block: 64 / 8 = 8 blocks by warps.
    // 32 regs x 32 lanes = 1024 regs per warp (a multiple of 256); 16384 per sub-partition / 1024
    // = 16 warps x 4 = 64 warps: 64 / 8 = 8 blocks by registers (tie: warps wins).
    // smem 0 + 1 KiB reserve = 1024: 233472 / 1024 = 228 blocks.
    const auto e = est(9, 0, 256, 32);
    CHECK(e.refusal.empty());
    CHECK(e.by_warps == 8);
    CHECK(e.by_regs == 8);
    CHECK(e.by_smem == 228);
    CHECK(e.by_blocks == 32);
    CHECK(e.blocks_per_sm == 8);
    CHECK(e.active_warps == 64);
    CHECK(e.max_warps == 64);
    CHECK(e.occupancy == doctest::Approx(1.0));
    CHECK(e.limiter == lab::Limiter::Warps);
  }

  TEST_CASE("occupancy: sm_87, 256 threads, 64 regs -> 4 blocks, 32/48 warps, registers") {
    // 64 x 32 = 2048 regs per warp; 16384 / 2048 = 8 warps per sub-partition x 4 = 32 warps;
    // 32 / 8 warps per block = 4 blocks. Warps alone: 48 / 8 = 6. smem: 167936 / 1024 = 164.
    const auto e = est(8, 7, 256, 64);
    CHECK(e.refusal.empty());
    CHECK(e.by_warps == 6);
    CHECK(e.by_regs == 4);
    CHECK(e.by_smem == 164);
    CHECK(e.by_blocks == 16);
    CHECK(e.blocks_per_sm == 4);
    CHECK(e.active_warps == 32);
    CHECK(e.max_warps == 48);
    CHECK(e.occupancy == doctest::Approx(32.0 / 48.0));
    CHECK(e.limiter == lab::Limiter::Registers);
  }

  TEST_CASE("occupancy: registers round up per warp and split over sub-partitions") {
    // 33 regs x 32 = 1056 -> rounded to 1280; 16384 / 1280 = 12 warps per sub-partition -> 48
    // warps -> 6 blocks of 8 warps (unrounded it would be 7).
    auto e = est(9, 0, 256, 33);
    CHECK(e.by_regs == 6);
    CHECK(e.blocks_per_sm == 6);
    CHECK(e.occupancy == doctest::Approx(0.75));
    CHECK(e.limiter == lab::Limiter::Registers);
    // 80 regs x 32 = 2560 per warp; 16384 / 2560 = 6 warps per sub-partition -> 24 warps -> 4
    // blocks of 5 warps (160 threads). The whole file would give 65536 / 2560 = 25 warps -> 5.
    e = est(9, 0, 160, 80);
    CHECK(e.by_regs == 4);
    CHECK(e.blocks_per_sm == 4);
    CHECK(e.active_warps == 20);
    CHECK(e.limiter == lab::Limiter::Registers);
    // Odd block: 800 threads = 25 warps; 72 x 32 = 2304 per warp; 16384 / 2304 = 7 -> 28 warps
    // -> 1 block; warps alone 64 / 25 = 2.
    e = est(9, 0, 800, 72);
    CHECK(e.by_warps == 2);
    CHECK(e.by_regs == 1);
    CHECK(e.blocks_per_sm == 1);
    CHECK(e.active_warps == 25);
    CHECK(e.occupancy == doctest::Approx(25.0 / 64.0));
    CHECK(e.limiter == lab::Limiter::Registers);
  }

  TEST_CASE("occupancy: shared-memory-limited") {
    // 48 KiB dynamic + 1 KiB reserve = 50176 (392 x 128): 233472 / 50176 = 4.65 -> 4 blocks of 4
    // warps = 16 / 64 warps. Warps alone 16, registers (1024 per warp) 64 / 4 = 16.
    auto e = est(9, 0, 128, 32, 0, 48 * KiB);
    CHECK(e.refusal.empty());
    CHECK(e.by_smem == 4);
    CHECK(e.by_warps == 16);
    CHECK(e.by_regs == 16);
    CHECK(e.blocks_per_sm == 4);
    CHECK(e.active_warps == 16);
    CHECK(e.occupancy == doctest::Approx(0.25));
    CHECK(e.limiter == lab::Limiter::SharedMemory);
    // The reserve matters: 57 KiB + 1 KiB = 59392: 233472 / 59392 = 3.93 -> 3 (4 without it).
    e = est(9, 0, 128, 32, 0, 57 * KiB);
    CHECK(e.blocks_per_sm == 3);
    CHECK(e.limiter == lab::Limiter::SharedMemory);
    // Static and dynamic add: 1000 + 1000 + 1024 = 3024 -> 3072 (24 x 128); 167936 / 3072 = 54.
    e = est(8, 7, 64, 32, 1000, 1000);
    CHECK(e.by_smem == 54);
    // Exactly the opt-in maximum fits once: 163 KiB + 1 KiB = 164 KiB = the whole carveout.
    e = est(8, 7, 256, 32, 0, 163 * KiB);
    CHECK(e.refusal.empty());
    CHECK(e.by_smem == 1);
    CHECK(e.blocks_per_sm == 1);
    CHECK(e.limiter == lab::Limiter::SharedMemory);
  }

  TEST_CASE("occupancy: blocks-limited with tiny blocks") {
    // 32 threads = 1 warp: warps alone 64, registers (16 x 32 = 512 per warp; 32 per
    // sub-partition -> 128 warps) 128, smem 228, but only 32 blocks per SM: 32 / 64 warps.
    auto e = est(9, 0, 32, 16);
    CHECK(e.by_warps == 64);
    CHECK(e.by_regs == 128);
    CHECK(e.by_smem == 228);
    CHECK(e.blocks_per_sm == 32);
    CHECK(e.active_warps == 32);
    CHECK(e.occupancy == doctest::Approx(0.5));
    CHECK(e.limiter == lab::Limiter::Blocks);
    // Orin: 64 threads = 2 warps; 48 / 2 = 24 by warps but 16 blocks: 32 / 48 warps.
    e = est(8, 7, 64, 32);
    CHECK(e.by_warps == 24);
    CHECK(e.blocks_per_sm == 16);
    CHECK(e.occupancy == doctest::Approx(32.0 / 48.0));
    CHECK(e.limiter == lab::Limiter::Blocks);
  }

  TEST_CASE("occupancy: ties, and resources that impose no limit") {
    // sm_75, 64 threads: warps 32 / 2 = 16 = blocks 16: tie goes to warps. No reserve and no
    // smem on sm_75: shared memory imposes no limit (INT_MAX); 0 registers likewise.
    const auto e = est(7, 5, 64, 0);
    CHECK(e.by_warps == 16);
    CHECK(e.by_blocks == 16);
    CHECK(e.by_regs == INT_MAX);
    CHECK(e.by_smem == INT_MAX);
    CHECK(e.blocks_per_sm == 16);
    CHECK(e.occupancy == doctest::Approx(1.0));
    CHECK(e.limiter == lab::Limiter::Warps);
    // sm_75 allocates shared memory in 256-byte units: 1100 -> 1280; 65536 / 1280 = 51 (128-byte
    // units would give 1152 -> 56).
    CHECK(est(7, 5, 64, 32, 1100).by_smem == 51);
  }

  TEST_CASE("occupancy: refusals") {
    auto refused = [](const lab::OccupancyEstimate& e) {
      CHECK(e.blocks_per_sm == 0);
      CHECK(e.active_warps == 0);
      CHECK(e.occupancy == 0.0);
      CHECK(e.limiter == lab::Limiter::None);
      CHECK_FALSE(e.refusal.empty());
    };
    // Over 1024 threads per block.
    auto e = est(9, 0, 2048, 32);
    refused(e);
    CHECK(e.by_warps == 0);
    CHECK(contains(e.refusal, "2048 threads"));
    // Over 255 registers per thread (cuda_occupancy.h itself would still accept 256).
    e = est(9, 0, 128, 256);
    refused(e);
    CHECK(contains(e.refusal, "256 registers per thread"));
    // The block's registers exceed 64 K: 255 x 32 = 8160 -> 8192 per warp x 32 warps = 262144.
    e = est(9, 0, 1024, 255);
    refused(e);
    CHECK(contains(e.refusal, "262144 registers"));
    // 64 regs x 1024 threads is exactly 65536: fits once.
    CHECK(est(9, 0, 1024, 64).blocks_per_sm == 1);
    // Sub-partition rounding: 25 warps x 2560 = 64000 fits 64 K, but the launch check rounds
    // the warps up to 28: 28 x 2560 = 71680 does not.
    e = est(9, 0, 800, 80);
    refused(e);
    CHECK(contains(e.refusal, "71680 registers"));
    // Shared memory over the per-block opt-in maximum (163 KiB on Orin, 227 KiB on Hopper).
    e = est(8, 7, 128, 32, 0, 163 * KiB + 1);
    refused(e);
    CHECK(contains(e.refusal, "opt-in maximum of 166912"));
    e = est(9, 0, 128, 32, 1 * KiB, 227 * KiB);
    refused(e);
    CHECK(contains(e.refusal, "shared memory"));
    // Sizes too large to add without overflow still refuse cleanly.
    e = est(9, 0, 128, 32, SIZE_MAX, SIZE_MAX);
    refused(e);
    // Several reasons at once are all given.
    e = est(9, 0, 2048, 300, 0, 1 << 20);
    refused(e);
    CHECK(contains(e.refusal, "threads"));
    CHECK(contains(e.refusal, "registers"));
    CHECK(contains(e.refusal, "shared memory"));
    // Nonsense input.
    refused(est(9, 0, 0, 32));
    refused(est(9, 0, 128, -1));
  }

  TEST_CASE("occupancy: sweep agrees with cuda_occupancy.h") {
    std::vector<int> threads_list;
    for (int t = 32; t <= 1024; t += 32) threads_list.push_back(t);
    for (int t : {1, 33, 100, 250, 500, 999, 1056, 2048}) threads_list.push_back(t);
    const int regs_list[] = {0, 16, 24, 32, 33, 40, 64, 72, 80, 128, 255};
    const size_t smem_list[] = {0,        300,      1000,      1100,      12 * KiB,  48 * KiB,
                                64 * KiB, 99 * KiB, 100 * KiB, 163 * KiB, 164 * KiB, 227 * KiB};

    // The header's default state (carveout DEFAULT, cache PREFER_NONE) already takes
    // sharedMemPerMultiprocessor as the carveout; MAX_SHARED asks for 100% of it. Both are the
    // "maximum carveout" our table models, so both must agree with us.
    cudaOccDeviceState states[2];
    states[1].carveoutConfig = SHAREDMEM_CARVEOUT_MAX_SHARED;

    int checked = 0, refusals = 0;
    int by_limiter[5] = {};
    for (const lab::ArchLimits& a : lab::known_archs()) {
      CAPTURE(a.name);
      cudaOccDeviceProp prop;
      prop.computeMajor = a.major;
      prop.computeMinor = a.minor;
      prop.maxThreadsPerBlock = a.max_threads_per_block;
      prop.maxThreadsPerMultiprocessor = a.max_warps_per_sm * 32;
      prop.regsPerBlock = a.regs_per_sm;  // 64 K per block on every listed arch
      prop.regsPerMultiprocessor = a.regs_per_sm;
      prop.warpSize = 32;
      prop.sharedMemPerBlock = a.smem_per_block_default;
      prop.sharedMemPerMultiprocessor = a.max_smem_per_sm;
      prop.numSms = 1;
      prop.sharedMemPerBlockOptin = a.max_smem_per_block_optin;
      prop.reservedSharedMemPerBlock = a.reserved_smem_per_block;

      int mismatches = 0;
      std::string first;
      for (int threads : threads_list)
        for (int regs : regs_list)
          for (size_t smem : smem_list)
            for (int split = 0; split < 2; ++split) {
              // All dynamic, or a quarter static and the rest dynamic.
              const size_t stat = split ? smem / 4 : 0, dyn = smem - stat;
              const lab::OccupancyEstimate e =
                  lab::estimate_occupancy(a, {threads, regs, stat, dyn});
              // Opted in to exactly the dynamic size launched, as cudaFuncSetAttribute would.
              cudaOccFuncAttributes attr;
              attr.maxThreadsPerBlock = a.max_threads_per_block;
              attr.numRegs = regs;
              attr.sharedSizeBytes = stat;
              attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
              attr.maxDynamicSharedSizeBytes = dyn;
              attr.numBlockBarriers = 1;  // what the cudaFuncAttributes conversion sets
              for (const cudaOccDeviceState& state : states) {
                cudaOccResult r{};
                const cudaOccError err =
                    cudaOccMaxActiveBlocksPerMultiprocessor(&r, &prop, &attr, &state, threads, dyn);
                std::string bad;
                if (!e.refusal.empty()) {
                  if (err == CUDA_OCC_SUCCESS && r.activeBlocksPerMultiprocessor != 0)
                    bad = "we refuse (" + e.refusal + "), header gives " +
                          std::to_string(r.activeBlocksPerMultiprocessor);
                } else if (err != CUDA_OCC_SUCCESS) {
                  bad = "header error " + std::to_string(err);
                } else {
                  const int theirs = r.activeBlocksPerMultiprocessor;
                  unsigned bit = 0;
                  switch (e.limiter) {
                    case lab::Limiter::Warps:
                      bit = OCC_LIMIT_WARPS;
                      break;
                    case lab::Limiter::Registers:
                      bit = OCC_LIMIT_REGISTERS;
                      break;
                    case lab::Limiter::SharedMemory:
                      bit = OCC_LIMIT_SHARED_MEMORY;
                      break;
                    case lab::Limiter::Blocks:
                      bit = OCC_LIMIT_BLOCKS;
                      break;
                    case lab::Limiter::None:
                      break;
                  }
                  if (e.blocks_per_sm != theirs || e.by_warps != r.blockLimitWarps ||
                      e.by_regs != r.blockLimitRegs || e.by_smem != r.blockLimitSharedMem ||
                      e.by_blocks != r.blockLimitBlocks || !(r.limitingFactors & bit))
                    bad = "blocks " + std::to_string(e.blocks_per_sm) + " vs " +
                          std::to_string(theirs) + " (warps " + std::to_string(e.by_warps) + "/" +
                          std::to_string(r.blockLimitWarps) + ", regs " +
                          std::to_string(e.by_regs) + "/" + std::to_string(r.blockLimitRegs) +
                          ", smem " + std::to_string(e.by_smem) + "/" +
                          std::to_string(r.blockLimitSharedMem) + ", limiter " +
                          lab::limiter_name(e.limiter) + " vs factors " +
                          std::to_string(r.limitingFactors) + ")";
                }
                if (!bad.empty() && mismatches++ == 0)
                  first = std::to_string(threads) + " threads, " + std::to_string(regs) +
                          " regs, " + std::to_string(stat) + " + " + std::to_string(dyn) +
                          " smem: " + bad;
              }
              ++checked;
              if (e.refusal.empty())
                ++by_limiter[static_cast<int>(e.limiter)];
              else
                ++refusals;
            }
      CHECK_MESSAGE(mismatches == 0, first);
    }
    MESSAGE("occupancy sweep: " << checked << " configurations, " << refusals << " refused");
    // The sweep reaches every limiter and every kind of refusal, so agreement means something.
    CHECK(by_limiter[static_cast<int>(lab::Limiter::Warps)] > 0);
    CHECK(by_limiter[static_cast<int>(lab::Limiter::Blocks)] > 0);
    CHECK(by_limiter[static_cast<int>(lab::Limiter::Registers)] > 0);
    CHECK(by_limiter[static_cast<int>(lab::Limiter::SharedMemory)] > 0);
    CHECK(refusals > 0);
  }
}

#include <cstring>
#include <string>

#include "sm87_resources.h"

TEST_SUITE("cpu") {
  TEST_CASE("sm_87 resource table: every kernel of both math passes, plausible counts") {
#if !defined(LAB_SM87_TABLE_BUILT)
    // A build with LAB_SM87_TABLE=OFF (the sanitizer build, a quick GPU bundle) has no table:
    // the Orin estimate then uses the running GPU's counts.
    CHECK(lab::kSm87ResourceCount == 0);
    return;
#endif
    REQUIRE(lab::kSm87ResourceCount > 0);
    size_t precise = 0, fast = 0;
    for (size_t i = 0; i < lab::kSm87ResourceCount; ++i) {
      const lab::Sm87Resource& r = lab::kSm87Resources[i];
      INFO(r.kernel);
      const std::string name = r.kernel;
      precise += name.find("7precise") != std::string::npos;
      fast += name.find("4fast") != std::string::npos;
      CHECK(r.regs >= 8);
      CHECK(r.regs <= 255);
      CHECK(r.smem >= 0);
      CHECK(r.smem <= 163 * 1024);
      CHECK(lab::find_sm87_resources(r.kernel) == &r);
    }
    CHECK(precise == fast);  // the same kernels in both passes
    CHECK(precise + fast == lab::kSm87ResourceCount);
    CHECK(lab::find_sm87_resources("no_such_kernel") == nullptr);
    CHECK(lab::find_sm87_resources(nullptr) == nullptr);
  }
}
