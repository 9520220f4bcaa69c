// The device-state reader without the hardware: Jetson sysfs trees built here in a temporary
// folder (AGX Orin and Orin Nano, JetPack 5 and 6 layouts; missing, unreadable, malformed and
// -256 files), NVML through a fake function table, and the state columns bench and the ladder
// write.
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench_report.h"
#include "device_state.h"
#include "support.h"

using namespace lab;
namespace fs = std::filesystem;

namespace {

// A fake root ("/" on the device), removed with the object.
struct FakeRoot {
  fs::path root;
  FakeRoot() {
    char tmpl[] = "/tmp/lab_sysfs_XXXXXX";
    root = ::mkdtemp(tmpl);
  }
  ~FakeRoot() {
    std::error_code ec;
    fs::permissions(root, fs::perms::owner_all, ec);
    fs::remove_all(root, ec);
  }
  std::string str() const { return root.string(); }
  void file(const std::string& rel, const std::string& text) const {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void link(const std::string& rel, const std::string& target) const {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    fs::create_directory_symlink(target, p);
  }
  void remove(const std::string& rel) const { fs::remove_all(root / rel); }
  // Something that cannot be read as a file, even by root: a folder where the file should be.
  void folder_instead(const std::string& rel) const {
    remove(rel);
    fs::create_directories(root / rel);
  }
};

enum class Board { AgxOrin, OrinNano };
enum class JetPack { Five, Six };

// The layout of a board: the GPU's devfreq node under its device (JetPack 6: of_node "gpu",
// 17000000.gpu; JetPack 5: "ga10b", 17000000.ga10b), another devfreq node that is not the GPU,
// CPUs, thermal zones (a gated CV zone at -256000), INA3221 rails, nvpmodel files, debugfs EMC.
void build_board(const FakeRoot& f, Board b, JetPack jp, bool pinned) {
  const std::string node = jp == JetPack::Six ? "17000000.gpu" : "17000000.ga10b";
  const std::string of_name = jp == JetPack::Six ? "gpu" : "ga10b";
  const std::string dev = "sys/devices/platform/bus@0/" + node;
  // Another devfreq node first (sorted before the GPU): the reader must not take it.
  f.file("sys/devices/platform/15340000.vic/of_node/name", std::string("vic") + '\0');
  f.file("sys/devices/platform/15340000.vic/devfreq/15340000.vic/cur_freq", "115200000\n");
  f.link("sys/class/devfreq/15340000.vic/device", "../../../devices/platform/15340000.vic");
  f.file(dev + "/of_node/name", of_name + '\0');  // device-tree strings end in a NUL
  f.file(dev + "/load", "437\n");
  const std::string max = b == Board::AgxOrin ? "1300500000" : "624750000";
  f.file("sys/class/devfreq/" + node + "/cur_freq", pinned ? max + "\n" : "306000000\n");
  f.file("sys/class/devfreq/" + node + "/min_freq", pinned ? max + "\n" : "306000000\n");
  f.file("sys/class/devfreq/" + node + "/max_freq", max + "\n");
  f.file("sys/class/devfreq/" + node + "/governor", "nvhost_podgov\n");
  f.link("sys/class/devfreq/" + node + "/device", "../../../" + dev.substr(4));  // sys/...
  for (int c = 0; c < (b == Board::AgxOrin ? 12 : 6); ++c)
    f.file("sys/devices/system/cpu/cpu" + std::to_string(c) + "/cpufreq/scaling_cur_freq",
           std::to_string(1000000 + 100 * c) + "\n");
  f.file("sys/devices/system/cpu/online", "0-5\n");  // not a cpuN folder
  const char* zones[][2] = {{"cpu-thermal", "47218"},
                            {"gpu-thermal", "45500"},
                            {"cv0-thermal", "-256000"},
                            {"soc0-thermal", "46343"},
                            {"tj-thermal", "-256"}};
  for (int z = 0; z < 5; ++z) {
    f.file("sys/class/thermal/thermal_zone" + std::to_string(z) + "/type",
           std::string(zones[z][0]) + "\n");
    f.file("sys/class/thermal/thermal_zone" + std::to_string(z) + "/temp",
           std::string(zones[z][1]) + "\n");
  }
  // hwmon0 is another sensor; the INA3221 is hwmon1 (two on AGX Orin: hwmon1 and hwmon2).
  f.file("sys/class/hwmon/hwmon0/name", "pwmfan\n");
  f.file("sys/class/hwmon/hwmon0/in1_label", "FAN\n");
  auto rail = [&](const std::string& hw, int n, const std::string& label, int mv, int ma) {
    const std::string d = "sys/class/hwmon/" + hw + "/";
    f.file(d + "name", "ina3221\n");
    f.file(d + "in" + std::to_string(n) + "_label", label + "\n");
    f.file(d + "in" + std::to_string(n) + "_input", std::to_string(mv) + "\n");
    f.file(d + "curr" + std::to_string(n) + "_input", std::to_string(ma) + "\n");
  };
  if (b == Board::AgxOrin) {
    rail("hwmon1", 1, "VDD_GPU_SOC", 5016, 1200);
    rail("hwmon1", 2, "VDD_CPU_CV", 5024, 400);
    rail("hwmon1", 3, "VIN_SYS_5V0", 4992, 800);
    rail("hwmon2", 2, "VDDQ_VDD2_1V8AO", 4980, 120);
    rail("hwmon2", 1, "NC", 0, 0);
    rail("hwmon2", 7, "sum of shunt voltages", 9000, 0);
  } else {
    rail("hwmon1", 1, "VDD_IN", 5048, 1300);
    rail("hwmon1", 2, "VDD_CPU_GPU_CV", 5040, 500);
    rail("hwmon1", 3, "VDD_SOC", 5032, 380);
    rail("hwmon1", 7, "sum of shunt voltages", 15000, 0);
  }
  f.file("var/lib/nvpmodel/status",
         b == Board::AgxOrin ? "pmode:0002 fmode:quiet\n" : "pmode:0000 fmode:quiet\n");
  f.file("etc/nvpmodel.conf",
         b == Board::AgxOrin
             ? "< PARAM TYPE=FILE NAME=CPU_ONLINE >\n< POWER_MODEL ID=0 NAME=MAXN >\nCPU_ONLINE "
               "CORE_0 1\n< POWER_MODEL ID=1 NAME=MODE_15W >\n< POWER_MODEL ID=2 NAME=MODE_30W "
               ">\n< POWER_MODEL ID=3 NAME=MODE_50W >\n< PM_CONFIG DEFAULT=2 >\n"
             : "< POWER_MODEL ID=0 NAME=15W >\n< POWER_MODEL ID=1 NAME=7W >\n");
  if (jp == JetPack::Six)
    f.file("sys/kernel/debug/bpmp/debug/clk/emc/rate", "3199000000\n"),
        f.file("sys/kernel/debug/bpmp/debug/clk/emc/max_rate", "3199000000\n");
  else
    f.file("sys/kernel/debug/clk/emc/clk_rate", "2133000000\n");
}

const PowerRail* rail_of(const DeviceState& s, const std::string& label) {
  for (const PowerRail& r : s.rails)
    if (r.label == label) return &r;
  return nullptr;
}
const ThermalZone* zone_of(const DeviceState& s, const std::string& type) {
  for (const ThermalZone& z : s.zones)
    if (z.type == type) return &z;
  return nullptr;
}
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---- a fake NVML -----------------------------------------------------------------------------
struct FakeNvml {
  static inline nvmlReturn_t init_result = NVML_SUCCESS;
  static inline nvmlReturn_t power_result = NVML_SUCCESS;
  static inline unsigned long long reasons = 0;
  static inline std::string bus_asked;
  static inline int inits = 0, shutdowns = 0;
  static inline nvmlDevice_t dev = reinterpret_cast<nvmlDevice_t>(0x1234);
};

NvmlApi fake_nvml() {
  NvmlApi a;
  a.init = [] {
    ++FakeNvml::inits;
    return FakeNvml::init_result;
  };
  a.shutdown = [] {
    ++FakeNvml::shutdowns;
    return NVML_SUCCESS;
  };
  a.error_string = [](nvmlReturn_t e) {
    return e == 9 ? "Driver Not Loaded" : e == 3 ? "Not Supported" : "Unknown Error";
  };
  a.handle_by_pci = [](const char* bus, nvmlDevice_t* d) {
    FakeNvml::bus_asked = bus;
    *d = FakeNvml::dev;
    return std::string(bus) == "0000:8A:00.0" ? NVML_SUCCESS : nvmlReturn_t(6);  // not found
  };
  a.handle_by_index = [](unsigned i, nvmlDevice_t* d) {
    *d = FakeNvml::dev;
    return i == 0 ? NVML_SUCCESS : nvmlReturn_t(2);
  };
  a.clock = [](nvmlDevice_t d, int type, unsigned* v) {
    if (d != FakeNvml::dev) return nvmlReturn_t(2);
    *v = type == NVML_CLOCK_SM ? 1755u : type == NVML_CLOCK_MEM ? 3201u : 0u;
    return NVML_SUCCESS;
  };
  a.max_clock = [](nvmlDevice_t, int type, unsigned* v) {
    *v = type == NVML_CLOCK_SM ? 1980u : 3201u;
    return NVML_SUCCESS;
  };
  a.power = [](nvmlDevice_t, unsigned* mw) {
    *mw = 412345;
    return FakeNvml::power_result;
  };
  a.power_limit = [](nvmlDevice_t, unsigned* mw) {
    *mw = 700000;
    return NVML_SUCCESS;
  };
  a.temperature = [](nvmlDevice_t, int sensor, unsigned* c) {
    *c = sensor == NVML_TEMPERATURE_GPU ? 51u : 0u;
    return NVML_SUCCESS;
  };
  a.pstate = [](nvmlDevice_t, int* p) {
    *p = 0;
    return NVML_SUCCESS;
  };
  a.reasons = [](nvmlDevice_t, unsigned long long* m) {
    *m = FakeNvml::reasons;
    return NVML_SUCCESS;
  };
  return a;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("device state: Jetson sysfs, AGX Orin and Orin Nano, JetPack 5 and 6") {
    struct Case {
      Board board;
      JetPack jp;
      const char* name;
    };
    for (const Case c : {Case{Board::AgxOrin, JetPack::Six, "AGX Orin, JetPack 6"},
                         Case{Board::AgxOrin, JetPack::Five, "AGX Orin, JetPack 5"},
                         Case{Board::OrinNano, JetPack::Six, "Orin Nano, JetPack 6"},
                         Case{Board::OrinNano, JetPack::Five, "Orin Nano, JetPack 5"}}) {
      SUBCASE(c.name) {
        const bool agx = c.board == Board::AgxOrin;
        FakeRoot f;
        build_board(f, c.board, c.jp, /*pinned=*/agx);
        const DeviceState s = read_jetson_state(f.str());
        CHECK(s.jetson());
        REQUIRE(s.gpu_mhz.ok());
        CHECK(*s.gpu_mhz == doctest::Approx(agx ? 1300.5 : 306.0));
        CHECK(*s.gpu_max_mhz == doctest::Approx(agx ? 1300.5 : 624.75));
        CHECK(*s.gpu_min_mhz == doctest::Approx(agx ? 1300.5 : 306.0));
        // The GPU's node, not the VIC's (found by its device, whichever JetPack names it).
        CHECK(contains(s.gpu_mhz.from, c.jp == JetPack::Six ? "17000000.gpu" : "17000000.ga10b"));
        CHECK(*s.governor == "nvhost_podgov");
        CHECK(*s.load_pct == doctest::Approx(43.7));
        REQUIRE(s.pinned.ok());
        CHECK(*s.pinned == agx);
        CHECK(s.mem_mhz.ok());
        CHECK(*s.mem_mhz == doctest::Approx(c.jp == JetPack::Six ? 3199 : 2133));
        CHECK(*s.power_mode_id == (agx ? 2 : 0));
        CHECK(*s.power_mode == (agx ? "MODE_30W" : "15W"));
        CHECK(s.cpus.size() == (agx ? 12u : 6u));
        CHECK(s.cpus[0].cpu == 0);
        CHECK(*s.cpus[0].mhz == doctest::Approx(1000.0));
        CHECK(s.cpus.back().cpu == int(s.cpus.size()) - 1);  // cpu10 after cpu9
        // Thermal zones: millidegrees; -256000 and -256 are offline, with the reason.
        CHECK(*s.gpu_celsius == doctest::Approx(45.5));
        REQUIRE(zone_of(s, "cpu-thermal"));
        CHECK(*zone_of(s, "cpu-thermal")->celsius == doctest::Approx(47.218));
        CHECK_FALSE(zone_of(s, "cv0-thermal")->celsius.ok());
        CHECK(contains(zone_of(s, "cv0-thermal")->celsius.why, "offline"));
        CHECK_FALSE(zone_of(s, "tj-thermal")->celsius.ok());
        // Rails as rails: NC and the sum channel left out, the fan's hwmon ignored.
        const std::vector<std::string> labels =
            agx ? std::vector<std::string>{"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0",
                                           "VDDQ_VDD2_1V8AO"}
                : std::vector<std::string>{"VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"};
        CHECK(s.rails.size() == labels.size());
        for (const std::string& l : labels) CHECK_MESSAGE(rail_of(s, l), l);
        CHECK_FALSE(rail_of(s, "NC"));
        CHECK_FALSE(rail_of(s, "FAN"));
        const PowerRail* first = rail_of(s, labels[0]);
        REQUIRE(first);
        CHECK(first->mw() == doctest::Approx(agx ? 5016 * 1200 / 1e3 : 5048 * 1300 / 1e3));
        // The text a user sees.
        const std::string sum = s.summary();
        CHECK(contains(sum, agx ? "(pinned)" : "(floating)"));
        CHECK(contains(sum, agx ? "mode MODE_30W (2)" : "mode 15W (0)"));
        const auto w = state_warnings(s, s);
        CHECK(w.size() == (agx ? 0u : 1u));
        if (!agx) CHECK(contains(w[0], "`sudo jetson_clocks` pins them"));
        // NVML's fields say why they are missing.
        CHECK_FALSE(s.reasons.ok());
        CHECK(contains(s.reasons.why, "sysfs"));
      }
    }
  }

  TEST_CASE("device state: Jetson failure cases, each field says why") {
    FakeRoot f;
    build_board(f, Board::AgxOrin, JetPack::Six, true);
    SUBCASE("no debugfs: the EMC clock says so") {
      f.remove("sys/kernel/debug");
      const DeviceState s = read_jetson_state(f.str());
      CHECK_FALSE(s.mem_mhz.ok());
      CHECK(contains(s.mem_mhz.why, "EMC clock"));
      CHECK(contains(s.mem_mhz.why, "not found"));
      CHECK(s.gpu_mhz.ok());  // the rest is still read
    }
    SUBCASE("debugfs not readable: EMC clock needs root") {
      if (::geteuid() == 0) {
        MESSAGE(
            "skipped: running as root, where chmod 000 does not stop a read (the folder "
            "case below covers an unreadable file)");
      } else {
        fs::permissions(f.root / "sys/kernel/debug", fs::perms::none);
        const DeviceState s = read_jetson_state(f.str());
        fs::permissions(f.root / "sys/kernel/debug", fs::perms::owner_all);
        CHECK_FALSE(s.mem_mhz.ok());
        CHECK(contains(s.mem_mhz.why, "EMC clock: not readable without root"));
      }
    }
    SUBCASE("unreadable files (a folder where a file is expected)") {
      f.folder_instead("sys/class/devfreq/17000000.gpu/cur_freq");
      f.folder_instead("sys/kernel/debug/bpmp/debug/clk/emc/rate");
      f.folder_instead("sys/class/thermal/thermal_zone1/temp");
      f.folder_instead("sys/class/hwmon/hwmon1/curr1_input");
      const DeviceState s = read_jetson_state(f.str());
      CHECK_FALSE(s.gpu_mhz.ok());
      CHECK(contains(s.gpu_mhz.why, "cur_freq: a folder, not a file"));
      CHECK(s.gpu_max_mhz.ok());
      CHECK_FALSE(s.mem_mhz.ok());
      CHECK(contains(s.mem_mhz.why, "EMC clock"));
      CHECK_FALSE(s.gpu_celsius.ok());
      CHECK(contains(s.gpu_celsius.why, "temp: a folder"));
      const PowerRail* r = rail_of(s, "VDD_GPU_SOC");
      REQUIRE(r);
      CHECK(r->mv.ok());
      CHECK_FALSE(r->ma.ok());
      CHECK(std::isnan(r->mw()));
    }
    SUBCASE("malformed files") {
      f.file("sys/class/devfreq/17000000.gpu/cur_freq", "fast\n");
      f.file("sys/class/devfreq/17000000.gpu/min_freq", "12x\n");
      f.file("sys/devices/platform/bus@0/17000000.gpu/load", "1500\n");
      f.file("var/lib/nvpmodel/status", "garbage\n");
      f.file("sys/class/thermal/thermal_zone0/temp", "\n");
      const DeviceState s = read_jetson_state(f.str());
      CHECK(contains(s.gpu_mhz.why, "malformed ('fast')"));
      CHECK_FALSE(s.pinned.ok());
      CHECK(contains(s.pinned.why, "malformed ('12x')"));
      CHECK_FALSE(s.load_pct.ok());
      CHECK(contains(s.load_pct.why, "outside 0..1000"));
      CHECK_FALSE(s.power_mode_id.ok());
      CHECK(contains(s.power_mode.why, "malformed"));
      CHECK_FALSE(zone_of(s, "cpu-thermal")->celsius.ok());
      CHECK(s.gpu_celsius.ok());
    }
    SUBCASE("missing files and folders") {
      f.remove("etc/nvpmodel.conf");
      f.remove("sys/class/hwmon");
      f.remove("sys/devices/system/cpu");
      f.remove("sys/class/devfreq/17000000.gpu/governor");
      const DeviceState s = read_jetson_state(f.str());
      CHECK(*s.power_mode_id == 2);  // the number without its name
      CHECK_FALSE(s.power_mode.ok());
      CHECK(contains(s.power_mode.why, "nvpmodel.conf: not found"));
      CHECK(s.rails.empty());
      CHECK(contains(s.rails_why, "hwmon: not found"));
      CHECK(s.cpus.empty());
      CHECK(contains(s.cpus_why, "not found"));
      CHECK_FALSE(s.governor.ok());
      CHECK(contains(s.summary(), "mode 2"));
    }
    SUBCASE("a power mode the configuration does not list") {
      f.file("var/lib/nvpmodel/status", "pmode:0009 fmode:quiet\n");
      const DeviceState s = read_jetson_state(f.str());
      CHECK(*s.power_mode_id == 9);
      CHECK(contains(s.power_mode.why, "no POWER_MODEL with ID=9"));
    }
    SUBCASE("no GPU devfreq node") {
      f.remove("sys/class/devfreq/17000000.gpu");
      const DeviceState s = read_jetson_state(f.str());
      CHECK_FALSE(s.gpu_mhz.ok());
      CHECK(contains(s.gpu_mhz.why, "no GPU among the devfreq nodes"));
      CHECK_FALSE(s.pinned.ok());
    }
    SUBCASE("a container without sysfs: every field says why") {
      FakeRoot empty;
      const DeviceState s = read_jetson_state(empty.str());
      CHECK(contains(s.gpu_mhz.why, "not a Jetson, or sysfs not mounted"));
      CHECK(contains(s.mem_mhz.why, "EMC clock"));
      CHECK(contains(s.power_mode.why, "not found"));
      CHECK_FALSE(s.cpus_why.empty());
      CHECK_FALSE(s.zones_why.empty());
      CHECK_FALSE(s.rails_why.empty());
      CHECK_FALSE(s.gpu_celsius.ok());
      CHECK(state_warnings(s, s).empty());  // nothing known is no warning
    }
  }

  TEST_CASE("device state: clocks that moved, a power mode that changed") {
    FakeRoot f;
    build_board(f, Board::AgxOrin, JetPack::Six, true);
    const DeviceState a = read_jetson_state(f.str());
    f.file("sys/class/devfreq/17000000.gpu/cur_freq", "918000000\n");
    f.file("sys/kernel/debug/bpmp/debug/clk/emc/rate", "2133000000\n");
    f.file("var/lib/nvpmodel/status", "pmode:0001\n");
    const DeviceState b = read_jetson_state(f.str());
    const auto w = state_warnings(a, b);
    REQUIRE(w.size() == 3);
    CHECK(contains(w[0], "GPU clock moved from 1300 to 918 MHz"));
    CHECK(contains(w[1], "EMC clock moved from 3199 to 2133 MHz"));
    CHECK(contains(w[2], "power mode changed from 2 to 1"));
  }

  TEST_CASE("device state: NVML through a fake function table") {
    FakeNvml::init_result = NVML_SUCCESS, FakeNvml::power_result = NVML_SUCCESS;
    FakeNvml::reasons = NVML_REASON_SW_POWER_CAP | NVML_REASON_HW_THERMAL_SLOWDOWN;
    FakeNvml::inits = FakeNvml::shutdowns = 0;
    {
      NvmlReader r(fake_nvml(), "0000:8A:00.0");
      CHECK(r.why().empty());
      CHECK(FakeNvml::bus_asked == "0000:8A:00.0");
      const DeviceState s = r.read();
      CHECK(s.nvml());
      CHECK(*s.gpu_mhz == 1755);
      CHECK(*s.gpu_max_mhz == 1980);
      CHECK(*s.mem_mhz == 3201);
      CHECK(*s.gpu_celsius == 51);
      CHECK(*s.power_w == doctest::Approx(412.345));
      CHECK(*s.power_limit_w == doctest::Approx(700));
      CHECK(*s.pstate == 0);
      CHECK(s.throttled());
      CHECK(s.reasons_text() == "SwPowerCap, HwThermalSlowdown");
      CHECK(contains(s.summary(),
                     "SM 1755 of 1980 MHz, memory 3201 MHz, GPU 51.0 C, 412 of "
                     "700 W, P0, reasons: SwPowerCap, HwThermalSlowdown"));
      const auto w = state_warnings(s, s);
      REQUIRE(w.size() == 1);
      CHECK(contains(w[0], "throttled (SwPowerCap, HwThermalSlowdown)"));
      CHECK_FALSE(s.pinned.ok());  // a Jetson field, saying why
      CHECK(contains(s.pinned.why, "NVML"));
      // Idle is no throttling.
      FakeNvml::reasons = NVML_REASON_GPU_IDLE;
      CHECK_FALSE(r.read().throttled());
      CHECK(r.read().reasons_text() == "GpuIdle");
      // A call that fails: that field says why, the others are read.
      FakeNvml::power_result = NVML_ERROR_NOT_SUPPORTED;
      const DeviceState p = r.read();
      CHECK_FALSE(p.power_w.ok());
      CHECK(p.power_w.why == "NVML: nvmlDeviceGetPowerUsage: Not Supported");
      CHECK(p.gpu_mhz.ok());
    }
    CHECK(FakeNvml::inits == 1);
    CHECK(FakeNvml::shutdowns == 1);  // with the reader

    SUBCASE("every bit named") {
      CHECK(nvml_reason_names(0) == "none");
      CHECK(nvml_reason_names(0x1FF) ==
            "GpuIdle, ApplicationsClocksSetting, SwPowerCap, HwSlowdown, SyncBoost, "
            "SwThermalSlowdown, HwThermalSlowdown, HwPowerBrakeSlowdown, DisplayClockSetting");
      CHECK(nvml_reason_names(0x8 | 0x1000) == "HwSlowdown, other bits 0x1000");
    }
    SUBCASE("nvmlInit failing") {
      FakeNvml::init_result = 9;
      FakeNvml::shutdowns = 0;
      {
        NvmlReader r(fake_nvml(), "0000:8A:00.0");
        CHECK(r.why() == "NVML: nvmlInit_v2: Driver Not Loaded");
        const DeviceState s = r.read();
        CHECK(s.source == DeviceState::Source::None);
        CHECK(s.gpu_mhz.why == r.why());
        CHECK(s.reasons.why == r.why());
      }
      CHECK(FakeNvml::shutdowns == 0);  // never initialised, never shut down
      FakeNvml::init_result = NVML_SUCCESS;
    }
    SUBCASE("a device NVML does not know") {
      NvmlReader r(fake_nvml(), "0000:01:00.0");
      CHECK(contains(r.why(), "nvmlDeviceGetHandleByPciBusId_v2"));
    }
    SUBCASE("the library absent") {
      const NvmlApi api = load_nvml("libnvidia-ml-absent.so.1");
      CHECK(contains(api.why, "no NVML: libnvidia-ml-absent.so.1 not found"));
      NvmlReader r(api, "");
      CHECK(r.why() == api.why);
      CHECK(r.read().power_w.why == api.why);
    }
  }

  TEST_CASE("device state: no reader applies (CPU only)") {
    const DeviceState s = unavailable_state("CPU only: no CUDA device found");
    CHECK(s.source == DeviceState::Source::None);
    for (const Reading<double>* r : {&s.gpu_mhz, &s.mem_mhz, &s.gpu_celsius, &s.power_w})
      CHECK(r->why == "CPU only: no CUDA device found");
    CHECK(s.pinned.why == s.source_why);
    CHECK(s.summary() == "device state unknown: CPU only: no CUDA device found");
    // Here (no GPU), the lab's own reader says why too, unless LAB_SYSFS_ROOT points at a tree.
    if (!std::getenv("LAB_SYSFS_ROOT") && !device_info().present) {
      const DeviceState here = read_device_state();
      CHECK(here.source == DeviceState::Source::None);
      CHECK(contains(here.gpu_mhz.why, "CPU only"));
    }
  }

  TEST_CASE("device state: the Orin estimate uses the EMC clock where read") {
    const OrinBandwidth maxn = orin_bandwidth(3199, 256);
    CHECK(maxn.gbs == doctest::Approx(kOrinCopyGBs));
    const OrinBandwidth low = orin_bandwidth(2133, 256);
    CHECK(low.gbs == doctest::Approx(183.0 * 2133 / 3199));
    CHECK(contains(low.how, "2133 MHz"));
    CHECK(orin_bandwidth(3199, 128).gbs == doctest::Approx(183.0 / 2));  // Orin Nano's bus
    const OrinBandwidth none = orin_bandwidth(NAN, 256);
    CHECK(none.gbs == kOrinCopyGBs);
    CHECK(contains(none.how, "not read"));
    CHECK(orin_estimate_us(183e3, low.gbs) > orin_estimate_us(183e3));
  }

  TEST_CASE("device state: bench CSV and JSON carry the state at start and end") {
    FakeNvml::init_result = NVML_SUCCESS, FakeNvml::power_result = NVML_SUCCESS;
    FakeNvml::reasons = 0;
    NvmlReader nv(fake_nvml(), "");
    const DeviceState a = nv.read();
    FakeNvml::reasons = NVML_REASON_SW_THERMAL_SLOWDOWN;
    const DeviceState b = nv.read();

    PipelineConfig p = default_pipeline();
    const auto stages = resolve(p, nullptr);
    app::BenchRow row = app::bench_row(stages[1], "blur_kernel");
    row.median_us = 10, row.p95_us = 11;
    row.state_start = a, row.state_end = b;
    app::BenchRow plain = app::bench_row(stages[1], "other_kernel");  // no state recorded
    plain.median_us = 5;
    const std::vector<app::BenchRow> rows = {row, plain};
    app::BenchOptions o;
    o.csv = true;
    std::ostringstream csv;
    app::print_rows(csv, rows, o, 4000, "", {});
    std::istringstream lines(csv.str());
    std::string header, first;
    std::getline(lines, header);
    std::getline(lines, first);
    // The existing columns keep their order; the state comes after in_frame.
    const std::string old_end = "stall3,stall3_per_issue,in_frame,";
    REQUIRE(contains(header, old_end));
    CHECK(
        header.substr(header.find(old_end) + old_end.size()) ==
        "state_source,gpu_mhz_start,gpu_mhz_end,gpu_max_mhz,mem_mhz_start,mem_mhz_end,"
        "gpu_celsius_start,gpu_celsius_end,power_w_start,power_w_end,power_limit_w,"
        "pstate_start,pstate_end,power_mode,clocks,throttle_start,throttle_end,state_warning,runs");
    CHECK(contains(first,
                   ",\"nvml\",1755,1755,1980,3201,3201,51,51,412.345,412.345,700,\"P0\","
                   "\"P0\",\"\",\"\",\"none\",\"SwThermalSlowdown\",\"the GPU was "
                   "throttled (SwThermalSlowdown)"));

    o.csv = false, o.json = true;
    std::ostringstream js;
    app::print_rows(js, rows, o, 4000, "h", {});
    const auto j = nlohmann::json::parse(js.str());
    const auto& st = j["launches"][0]["state"];
    CHECK(st["gpu_mhz_start"] == 1755);
    CHECK(st["gpu_celsius_end"] == 51);
    CHECK(st["power_limit_w"] == 700);
    CHECK(st["throttle_start"] == "none");
    CHECK(st["throttle_end"] == "SwThermalSlowdown");
    CHECK(st["clocks"].is_null());
    CHECK(contains(st["state_warning"].get<std::string>(), "throttled"));
    CHECK(contains(st["end"].get<std::string>(), "reasons: SwThermalSlowdown"));
    CHECK(j["launches"][1]["state"]["gpu_mhz_start"].is_null());

    o.json = false;
    std::ostringstream table;
    app::print_rows(table, rows, o, 4000, "", {});
    const std::string t = table.str();
    CHECK(contains(t, "device state at the first measurement's start: SM 1755 of 1980 MHz"));
    CHECK(contains(t, "! the GPU was throttled (SwThermalSlowdown)"));
    // The marked row ends in "!", the other does not.
    std::istringstream tl(t);
    std::string l;
    int marked = 0;
    while (std::getline(tl, l)) {
      if (contains(l, "blur_kernel")) {
        CHECK(l.substr(l.size() - 2) == " !");
        ++marked;
      } else if (contains(l, "other_kernel")) {
        CHECK(l.back() != '!');
      }
    }
    CHECK(marked == 1);
  }
}
