#include "app/bench_report.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace lab::app {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

BenchRow bench_row(const ResolvedStage& s, const std::string& kernel) {
  BenchRow row;
  row.stage = s.op->def.name;
  row.variant = s.variant_def().name;
  row.block = s.block.str();
  row.math = math_name(s.math);
  row.kernel = kernel;
  return row;
}

void print_rows(std::ostream& out, const std::vector<BenchRow>& rows, const BenchOptions& o,
                double copy_gbs, const std::string& header,
                const std::vector<FrameTiming>& frames) {
  if (o.json) {
    nlohmann::json j;
    j["header"] = header;
    j["copy_bandwidth_gbs"] = copy_gbs;
    for (const FrameTiming& f : frames) {
      j[f.key + "_median_us"] = f.median_us;
      j[f.key + "_p95_us"] = f.p95_us;
      j[f.key + "_what"] = f.what;
    }
    for (const auto& r : rows)
      j["launches"].push_back({{"stage", r.stage},
                               {"variant", r.variant},
                               {"block", r.block},
                               {"math", r.math},
                               {"kernel", r.kernel},
                               {"total", r.total},
                               {"library", r.library},
                               {"median_us", r.median_us},
                               {"p95_us", r.p95_us},
                               {"gbs", r.gbs},
                               {"pct_copy", r.pct_copy},
                               {"pct_copy_same_size", r.pct_copy_same},
                               {"regs", r.rec.attrs.regs},
                               {"static_smem", r.rec.attrs.static_smem},
                               {"local_bytes", r.rec.attrs.local_bytes},
                               {"blocks_per_sm", r.rec.blocks_per_sm},
                               {"occupancy", r.rec.est.occupancy},
                               {"limiter", limiter_name(r.rec.est.limiter)},
                               {"orin_occupancy", r.rec.orin.occupancy},
                               {"orin_limiter", limiter_name(r.rec.orin.limiter)},
                               {"orin_registers_from_sm87_build", r.rec.orin_from_sm87_build}});
    out << j.dump(2) << "\n";
    return;
  }
  if (o.csv) {
    out << "stage,variant,block,math,kernel,median_us,p95_us,gbs,pct_copy,pct_copy_same_size,regs,"
           "static_smem,"
           "local_bytes,blocks_per_sm,occupancy,limiter,orin_occupancy,orin_limiter\n";
    for (const auto& r : rows)
      out << r.stage << "," << r.variant << "," << r.block << "," << r.math << ",\"" << r.kernel
          << "\"," << r.median_us << "," << r.p95_us << "," << r.gbs << "," << r.pct_copy << ","
          << r.pct_copy_same << "," << r.rec.attrs.regs << "," << r.rec.attrs.static_smem << ","
          << r.rec.attrs.local_bytes << "," << r.rec.blocks_per_sm << "," << r.rec.est.occupancy
          << "," << limiter_name(r.rec.est.limiter) << "," << r.rec.orin.occupancy << ","
          << limiter_name(r.rec.orin.limiter) << "\n";
    return;
  }
  out << header;
  char line[512];
  std::snprintf(
      line, sizeof line,
      "%-10s %-17s %-6s %-7s %-32s %9s %9s %8s %6s %6s %4s %6s %5s %4s %5s %-9s %5s %-9s\n",
      "stage", "variant", "block", "math", "kernel", "med_us", "p95_us", "GB/s", "%copy", "%cp=sz",
      "regs", "smem", "local", "blk", "occ", "limiter", "orin", "orin_lim");
  out << line;
  for (const auto& r : rows) {
    if (r.library) {  // a library call: CUB's kernels, timed as one
      std::snprintf(line, sizeof line,
                    "%-10s %-17s %-6s %-7s %-32s %9.2f %9.2f %8s %6s %6s (library: CUB's own "
                    "launches)\n",
                    r.stage.c_str(), r.variant.c_str(), r.block.c_str(), r.math.c_str(),
                    r.kernel.c_str(), r.median_us, r.p95_us, "-", "-", "-");
    } else if (r.total) {
      std::snprintf(line, sizeof line,
                    "%-10s %-17s %-6s %-7s %-32s %9.2f %9.2f %8.1f %5.1f%% %5.1f%%\n",
                    r.stage.c_str(), r.variant.c_str(), r.block.c_str(), r.math.c_str(),
                    "(stage total)", r.median_us, r.p95_us, r.gbs, r.pct_copy, r.pct_copy_same);
    } else {
      const bool one = r.gbs > 0;
      std::snprintf(line, sizeof line,
                    "%-10s %-17s %-6s %-7s %-32s %9.2f %9.2f %8s %6s %6s %4d %6zu %5zu %4d %4.0f%% "
                    "%-9s %4.0f%% %-9s\n",
                    r.stage.c_str(), r.variant.c_str(), r.block.c_str(), r.math.c_str(),
                    r.kernel.c_str(), r.median_us, r.p95_us, one ? fmt("%.1f", r.gbs).c_str() : "-",
                    one ? fmt("%.1f%%", r.pct_copy).c_str() : "-",
                    one ? fmt("%.1f%%", r.pct_copy_same).c_str() : "-", r.rec.attrs.regs,
                    r.rec.attrs.static_smem, r.rec.attrs.local_bytes, r.rec.blocks_per_sm,
                    100 * r.rec.est.occupancy, limiter_name(r.rec.est.limiter),
                    100 * r.rec.orin.occupancy, limiter_name(r.rec.orin.limiter));
    }
    out << line;
  }
  for (const FrameTiming& f : frames)
    out << "pipeline (configured variants), " << f.what << ": median " << fmt("%.2f", f.median_us)
        << " us, p95 " << fmt("%.2f", f.p95_us) << " us\n";
}

}  // namespace lab::app
