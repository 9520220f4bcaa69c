#include "device_state.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>

#include "device.h"
#include "text.h"

namespace lab {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string join(const std::string& root, const std::string& rel) {
  if (root.empty()) return "/" + rel;
  return root.back() == '/' ? root + rel : root + "/" + rel;
}

// A file's text, or why it could not be read (errno in words, as a user can act on it).
struct FileText {
  bool ok = false;
  std::string text, why;
};

std::string errno_why(const std::string& path, int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return path + ": not found";
    case EACCES:
    case EPERM:
      return path + ": not readable without root";
    case EISDIR:
      return path + ": a folder, not a file";
    default:
      return path + ": " + std::strerror(err);
  }
}

FileText read_text(const std::string& path) {
  FileText f;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    f.why = errno_why(path, errno);
    return f;
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      f.why = errno_why(path, errno);  // a folder opens, then reads EISDIR
      ::close(fd);
      return f;
    }
    if (n == 0 || f.text.size() > (1 << 20)) break;  // nvpmodel.conf is ~30 KB; sysfs < 4 KB
    f.text.append(buf, size_t(n));
  }
  ::close(fd);
  f.ok = true;
  return f;
}

// A whole number or decimal in a file, or why not ("malformed").
Reading<double> read_number(const std::string& path) {
  const FileText f = read_text(path);
  if (!f.ok) return Reading<double>::missing(f.why);
  const std::string t = trim(f.text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE || !std::isfinite(v))
    return Reading<double>::missing(path + ": malformed ('" + t.substr(0, 40) + "')");
  return Reading<double>::of(v, path);
}

Reading<double> scaled(Reading<double> r, double by) {
  if (r.ok()) r.value = *r * by;
  return r;
}

Reading<std::string> read_word(const std::string& path) {
  const FileText f = read_text(path);
  if (!f.ok) return Reading<std::string>::missing(f.why);
  const std::string t = trim(f.text);
  if (t.empty()) return Reading<std::string>::missing(path + ": empty");
  return Reading<std::string>::of(t, path);
}

// The entries of a folder, sorted (numbers by value: cpu2 before cpu10); why not on failure.
bool list_dir(const std::string& path, std::vector<std::string>& out, std::string& why) {
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    why = errno_why(path, errno);
    return false;
  }
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    const size_t da = a.find_first_of("0123456789"), db = b.find_first_of("0123456789");
    if (da != std::string::npos && db != std::string::npos && a.compare(0, da, b, 0, db) == 0)
      return std::atol(a.c_str() + da) < std::atol(b.c_str() + db);
    return a < b;
  });
  return true;
}

// The GPU's devfreq node, found by its device: JetPack 6 names the device-tree node "gpu"
// (17000000.gpu), JetPack 5 "ga10b" (Orin) or "gv11b" (Xavier); the node's own name is the
// fallback where of_node is absent.
struct GpuNode {
  std::string freq, device, why;
};
GpuNode find_gpu_devfreq(const std::string& root) {
  GpuNode g;
  const std::string base = join(root, "sys/class/devfreq");
  std::vector<std::string> names;
  std::string why;
  if (!list_dir(base, names, why)) {
    g.why = "no GPU devfreq node (" + why + "): not a Jetson, or sysfs not mounted";
    return g;
  }
  const char* gpu_names[] = {"gpu", "ga10b", "gv11b", "gp10b"};
  auto is_gpu = [&](const std::string& n) {
    return std::any_of(std::begin(gpu_names), std::end(gpu_names),
                       [&](const char* k) { return n == k; });
  };
  for (const std::string& n : names) {
    const std::string path = base + "/" + n;
    const FileText of = read_text(path + "/device/of_node/name");
    const bool match = of.ok ? is_gpu(trim(of.text))
                             : ends_with(n, ".gpu") || n.find("ga10b") != std::string::npos ||
                                   n.find("gv11b") != std::string::npos ||
                                   n.find("gp10b") != std::string::npos;
    if (match) {
      g.freq = path;
      g.device = path + "/device";
      return g;
    }
  }
  g.why = "no GPU among the devfreq nodes in " + base;
  return g;
}

void read_power_mode(const std::string& root, DeviceState& s) {
  const std::string status = join(root, "var/lib/nvpmodel/status");
  const FileText st = read_text(status);
  if (!st.ok) {
    s.power_mode_id = Reading<int>::missing("power mode: " + st.why);
    s.power_mode = Reading<std::string>::missing("power mode: " + st.why);
    return;
  }
  std::smatch m;
  const std::string t = trim(st.text);
  if (!std::regex_search(t, m, std::regex("pmode:\\s*([0-9]+)"))) {
    s.power_mode_id = Reading<int>::missing(status + ": malformed ('" + t.substr(0, 40) + "')");
    s.power_mode = Reading<std::string>::missing(s.power_mode_id.why);
    return;
  }
  const int id = std::atoi(m[1].str().c_str());
  s.power_mode_id = Reading<int>::of(id, status);
  const std::string conf = join(root, "etc/nvpmodel.conf");
  const FileText c = read_text(conf);
  if (!c.ok) {
    s.power_mode = Reading<std::string>::missing("power mode name: " + c.why);
    return;
  }
  // "< POWER_MODEL ID=0 NAME=MAXN >"
  const std::regex line("POWER_MODEL\\s+ID=([0-9]+)\\s+NAME=([^\\s>]+)");
  for (std::sregex_iterator it(c.text.begin(), c.text.end(), line), end; it != end; ++it)
    if (std::atoi((*it)[1].str().c_str()) == id) {
      s.power_mode = Reading<std::string>::of((*it)[2].str(), conf);
      return;
    }
  s.power_mode =
      Reading<std::string>::missing(conf + ": no POWER_MODEL with ID=" + std::to_string(id));
}

void read_cpus(const std::string& root, DeviceState& s) {
  const std::string base = join(root, "sys/devices/system/cpu");
  std::vector<std::string> names;
  std::string why;
  if (!list_dir(base, names, why)) {
    s.cpus_why = "CPU clocks: " + why;
    return;
  }
  for (const std::string& n : names) {
    if (!starts_with(n, "cpu") || n.size() < 4 ||
        n.find_first_not_of("0123456789", 3) != std::string::npos)
      continue;
    CpuClock c;
    c.cpu = std::atoi(n.c_str() + 3);
    c.mhz = scaled(read_number(base + "/" + n + "/cpufreq/scaling_cur_freq"), 1e-3);  // kHz
    s.cpus.push_back(std::move(c));
  }
  if (s.cpus.empty()) s.cpus_why = "CPU clocks: no cpuN folders in " + base;
}

void read_zones(const std::string& root, DeviceState& s) {
  const std::string base = join(root, "sys/class/thermal");
  std::vector<std::string> names;
  std::string why;
  if (!list_dir(base, names, why)) {
    s.zones_why = "temperatures: " + why;
    return;
  }
  for (const std::string& n : names) {
    if (!starts_with(n, "thermal_zone")) continue;
    ThermalZone z;
    const Reading<std::string> type = read_word(base + "/" + n + "/type");
    z.type = type.ok() ? *type : n;
    z.celsius = read_number(base + "/" + n + "/temp");
    // A power-gated zone (the CV engines at low power modes) reads -256 C (as -256000 m°C).
    if (z.celsius.ok() && (*z.celsius == -256000 || *z.celsius == -256))
      z.celsius = Reading<double>::missing(z.type + ": offline (" + z.celsius.from + " reads " +
                                           std::to_string(int(*z.celsius)) + ")");
    else
      z.celsius = scaled(z.celsius, 1e-3);
    s.zones.push_back(std::move(z));
  }
  if (s.zones.empty()) s.zones_why = "temperatures: no thermal zones in " + base;
}

void read_rails(const std::string& root, DeviceState& s) {
  const std::string base = join(root, "sys/class/hwmon");
  std::vector<std::string> names;
  std::string why;
  if (!list_dir(base, names, why)) {
    s.rails_why = "power rails: " + why;
    return;
  }
  for (const std::string& n : names) {
    const std::string dir = base + "/" + n;
    const Reading<std::string> name = read_word(dir + "/name");
    if (!name.ok() || name->find("ina3221") == std::string::npos) continue;
    std::vector<std::string> files;
    std::string w;
    list_dir(dir, files, w);
    for (const std::string& f : files) {
      if (!starts_with(f, "in") || !ends_with(f, "_label")) continue;
      const std::string num = f.substr(2, f.size() - 2 - 6);
      if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
      const Reading<std::string> label = read_word(dir + "/" + f);
      // Unconnected channels are labelled NC; channel 7 is the chip's "sum of shunt voltages".
      if (!label.ok() || *label == "NC" || label->find("sum of shunt") != std::string::npos)
        continue;
      PowerRail r;
      r.label = *label;
      r.from = dir;
      r.mv = read_number(dir + "/in" + num + "_input");
      r.ma = read_number(dir + "/curr" + num + "_input");
      s.rails.push_back(std::move(r));
    }
  }
  if (s.rails.empty()) s.rails_why = "power rails: no INA3221 monitor in " + base;
}

void read_emc(const std::string& root, DeviceState& s) {
  // debugfs is root's: /sys/kernel/debug is mode 700, so a normal user gets EACCES here.
  const std::string paths[] = {join(root, "sys/kernel/debug/bpmp/debug/clk/emc/rate"),
                               join(root, "sys/kernel/debug/clk/emc/clk_rate")};
  bool denied = false;
  std::string whys;
  for (const std::string& p : paths) {
    const Reading<double> r = read_number(p);
    if (r.ok()) {
      s.mem_mhz = scaled(r, 1e-6);
      const std::string max =
          p.substr(0, p.rfind('/')) + (ends_with(p, "/rate") ? "/max_rate" : "/clk_max_rate");
      s.mem_max_mhz = scaled(read_number(max), 1e-6);
      return;
    }
    denied = denied || r.why.find("without root") != std::string::npos;
    whys += (whys.empty() ? "" : "; ") + r.why;
  }
  const std::string why =
      denied ? "EMC clock: not readable without root (" + whys + ")" : "EMC clock: " + whys;
  s.mem_mhz = Reading<double>::missing(why);
  s.mem_max_mhz = Reading<double>::missing(why);
}

std::string f0(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", v);
  return b;
}
std::string f1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

bool moved(const Reading<double>& a, const Reading<double>& b) {
  return a.ok() && b.ok() && *a > 0 && std::fabs(*b - *a) > 0.02 * *a;
}

}  // namespace

// ---- NVML ------------------------------------------------------------------------------------

NvmlApi load_nvml(const char* library) {
  NvmlApi api;
  void* h = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    api.why = std::string("no NVML: ") + library + " not found (" + (e ? e : "dlopen failed") +
              "; it comes with the NVIDIA driver)";
    return api;
  }
  std::string missing;
  auto sym = [&](auto& fn, const char* name, const char* alt = nullptr) {
    void* p = ::dlsym(h, name);
    if (!p && alt) p = ::dlsym(h, alt);
    if (!p) missing += std::string(missing.empty() ? "" : ", ") + name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  sym(api.init, "nvmlInit_v2");
  sym(api.shutdown, "nvmlShutdown");
  sym(api.error_string, "nvmlErrorString");
  sym(api.handle_by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  sym(api.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  sym(api.clock, "nvmlDeviceGetClockInfo");
  sym(api.max_clock, "nvmlDeviceGetMaxClockInfo");
  sym(api.power, "nvmlDeviceGetPowerUsage");
  sym(api.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  sym(api.temperature, "nvmlDeviceGetTemperature");
  sym(api.pstate, "nvmlDeviceGetPerformanceState");
  sym(api.reasons, "nvmlDeviceGetCurrentClocksEventReasons",
      "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (!missing.empty()) api.why = std::string("no NVML: ") + library + " lacks " + missing;
  return api;
}

NvmlReader::NvmlReader(NvmlApi api, const std::string& pci_bus_id) : m_api(std::move(api)) {
  if (!m_api.why.empty()) {
    m_why = m_api.why;
    return;
  }
  nvmlReturn_t e = m_api.init();
  if (e != NVML_SUCCESS) {
    m_why = error("nvmlInit_v2", e);
    return;
  }
  m_inited = true;
  e = pci_bus_id.empty() ? m_api.handle_by_index(0, &m_dev)
                         : m_api.handle_by_pci(pci_bus_id.c_str(), &m_dev);
  if (e != NVML_SUCCESS)
    m_why = error(pci_bus_id.empty() ? "nvmlDeviceGetHandleByIndex_v2(0)"
                                     : "nvmlDeviceGetHandleByPciBusId_v2",
                  e);
}

NvmlReader::~NvmlReader() {
  if (m_inited) m_api.shutdown();
}

std::string NvmlReader::error(const char* call, nvmlReturn_t e) const {
  const char* s = m_api.error_string ? m_api.error_string(e) : nullptr;
  return std::string("NVML: ") + call + ": " + (s ? s : "error " + std::to_string(e));
}

DeviceState NvmlReader::read() const {
  if (!m_why.empty()) return unavailable_state(m_why);
  DeviceState s;
  s.source = DeviceState::Source::Nvml;
  s.t_s = now_s();
  auto get = [&](const char* call, auto fn, double scale, auto... args) {
    unsigned v = 0;
    const nvmlReturn_t e = fn(m_dev, args..., &v);
    return e == NVML_SUCCESS ? Reading<double>::of(v * scale, call)
                             : Reading<double>::missing(error(call, e));
  };
  s.gpu_mhz = get("nvmlDeviceGetClockInfo(SM)", m_api.clock, 1.0, NVML_CLOCK_SM);
  s.gpu_max_mhz = get("nvmlDeviceGetMaxClockInfo(SM)", m_api.max_clock, 1.0, NVML_CLOCK_SM);
  s.mem_mhz = get("nvmlDeviceGetClockInfo(MEM)", m_api.clock, 1.0, NVML_CLOCK_MEM);
  s.mem_max_mhz = get("nvmlDeviceGetMaxClockInfo(MEM)", m_api.max_clock, 1.0, NVML_CLOCK_MEM);
  s.gpu_celsius =
      get("nvmlDeviceGetTemperature(GPU)", m_api.temperature, 1.0, NVML_TEMPERATURE_GPU);
  s.power_w = get("nvmlDeviceGetPowerUsage", m_api.power, 1e-3);
  s.power_limit_w = get("nvmlDeviceGetEnforcedPowerLimit", m_api.power_limit, 1e-3);
  int p = NVML_PSTATE_UNKNOWN;
  nvmlReturn_t e = m_api.pstate(m_dev, &p);
  s.pstate = e != NVML_SUCCESS ? Reading<int>::missing(error("nvmlDeviceGetPerformanceState", e))
             : p == NVML_PSTATE_UNKNOWN ? Reading<int>::missing("NVML: performance state unknown")
                                        : Reading<int>::of(p, "nvmlDeviceGetPerformanceState");
  unsigned long long mask = 0;
  e = m_api.reasons(m_dev, &mask);
  s.reasons = e == NVML_SUCCESS
                  ? Reading<uint64_t>::of(mask, "nvmlDeviceGetCurrentClocksEventReasons")
                  : Reading<uint64_t>::missing(error("nvmlDeviceGetCurrentClocksEventReasons", e));
  const std::string jetson = "a discrete GPU: read through NVML, not Jetson sysfs";
  s.gpu_min_mhz = Reading<double>::missing("NVML: no minimum clock is read");
  s.load_pct = Reading<double>::missing(
      "NVML: utilisation is not read (it samples over 1/6 s "
      "to 1 s, longer than most measurements)");
  s.governor = Reading<std::string>::missing(jetson);
  s.pinned = Reading<bool>::missing(jetson);
  s.power_mode_id = Reading<int>::missing(jetson);
  s.power_mode = Reading<std::string>::missing(jetson);
  s.cpus_why = s.zones_why = s.rails_why = jetson;
  return s;
}

// ---- the snapshot ----------------------------------------------------------------------------

std::string nvml_reason_names(uint64_t mask) {
  static const std::pair<uint64_t, const char*> names[] = {
      {NVML_REASON_GPU_IDLE, "GpuIdle"},
      {NVML_REASON_APPLICATIONS_CLOCKS_SETTING, "ApplicationsClocksSetting"},
      {NVML_REASON_SW_POWER_CAP, "SwPowerCap"},
      {NVML_REASON_HW_SLOWDOWN, "HwSlowdown"},
      {NVML_REASON_SYNC_BOOST, "SyncBoost"},
      {NVML_REASON_SW_THERMAL_SLOWDOWN, "SwThermalSlowdown"},
      {NVML_REASON_HW_THERMAL_SLOWDOWN, "HwThermalSlowdown"},
      {NVML_REASON_HW_POWER_BRAKE_SLOWDOWN, "HwPowerBrakeSlowdown"},
      {NVML_REASON_DISPLAY_CLOCK_SETTING, "DisplayClockSetting"}};
  if (mask == 0) return "none";
  std::string s;
  uint64_t known = 0;
  for (const auto& [bit, name] : names) {
    known |= bit;
    if (mask & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  }
  if (mask & ~known) {
    char b[40];
    std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)(mask & ~known));
    s += (s.empty() ? "" : ", ") + std::string("other bits ") + b;
  }
  return s;
}

bool DeviceState::throttled() const {
  return reasons.ok() && (*reasons & ~NVML_REASON_GPU_IDLE) != 0;
}

std::string DeviceState::reasons_text() const {
  return reasons.ok() ? nvml_reason_names(*reasons) : reasons.why;
}

std::string DeviceState::summary() const {
  if (source == Source::None) return "device state unknown: " + source_why;
  std::string s;
  const bool j = jetson();
  s += j ? "GPU " : "SM ";
  s += gpu_mhz.ok() ? f0(*gpu_mhz) : "?";
  if (gpu_max_mhz.ok()) s += " of " + f0(*gpu_max_mhz);
  s += " MHz";
  if (j) s += pinned.ok() ? (*pinned ? " (pinned)" : " (floating)") : "";
  s += j ? ", EMC " : ", memory ";
  s += mem_mhz.ok() ? f0(*mem_mhz) + " MHz" : (j ? "not readable" : "?");
  if (j) {
    if (power_mode.ok())
      s += ", mode " + *power_mode +
           (power_mode_id.ok() ? " (" + std::to_string(*power_mode_id) + ")" : "");
    else if (power_mode_id.ok())
      s += ", mode " + std::to_string(*power_mode_id);
    if (load_pct.ok()) s += ", load " + f0(*load_pct) + "%";
  }
  if (gpu_celsius.ok()) s += ", GPU " + f1(*gpu_celsius) + " C";
  if (!j) {
    if (power_w.ok())
      s += ", " + f0(*power_w) + (power_limit_w.ok() ? " of " + f0(*power_limit_w) : "") + " W";
    if (pstate.ok()) s += ", P" + std::to_string(*pstate);
    s += ", reasons: " + (reasons.ok() ? nvml_reason_names(*reasons) : std::string("?"));
  }
  return s;
}

DeviceState unavailable_state(const std::string& why) {
  DeviceState s;
  s.source_why = why;
  s.t_s = now_s();
  for (Reading<double>* r : {&s.gpu_mhz, &s.gpu_min_mhz, &s.gpu_max_mhz, &s.mem_mhz, &s.mem_max_mhz,
                             &s.gpu_celsius, &s.load_pct, &s.power_w, &s.power_limit_w})
    *r = Reading<double>::missing(why);
  s.governor = s.power_mode = Reading<std::string>::missing(why);
  s.pinned = Reading<bool>::missing(why);
  s.power_mode_id = s.pstate = Reading<int>::missing(why);
  s.reasons = Reading<uint64_t>::missing(why);
  s.cpus_why = s.zones_why = s.rails_why = why;
  return s;
}

DeviceState read_jetson_state(const std::string& root) {
  DeviceState s;
  s.source = DeviceState::Source::Jetson;
  s.t_s = now_s();
  const GpuNode g = find_gpu_devfreq(root);
  if (g.freq.empty()) {
    for (Reading<double>* r : {&s.gpu_mhz, &s.gpu_min_mhz, &s.gpu_max_mhz, &s.load_pct})
      *r = Reading<double>::missing(g.why);
    s.governor = Reading<std::string>::missing(g.why);
    s.pinned = Reading<bool>::missing(g.why);
  } else {
    s.gpu_mhz = scaled(read_number(g.freq + "/cur_freq"), 1e-6);  // Hz
    s.gpu_min_mhz = scaled(read_number(g.freq + "/min_freq"), 1e-6);
    s.gpu_max_mhz = scaled(read_number(g.freq + "/max_freq"), 1e-6);
    s.governor = read_word(g.freq + "/governor");
    Reading<double> load = read_number(g.device + "/load");  // 0..1000
    if (load.ok() && (*load < 0 || *load > 1000))
      load = Reading<double>::missing(load.from + ": malformed (" + f0(*load) +
                                      " is outside 0..1000)");
    s.load_pct = scaled(load, 0.1);
    if (s.gpu_min_mhz.ok() && s.gpu_max_mhz.ok())
      s.pinned = Reading<bool>::of(*s.gpu_min_mhz == *s.gpu_max_mhz, g.freq + "/{min,max}_freq");
    else
      s.pinned = Reading<bool>::missing(
          "pinned or floating: " + (s.gpu_min_mhz.ok() ? s.gpu_max_mhz.why : s.gpu_min_mhz.why));
  }
  read_emc(root, s);
  read_power_mode(root, s);
  read_cpus(root, s);
  read_zones(root, s);
  read_rails(root, s);
  // The GPU's temperature: its thermal zone (gpu-thermal on Orin, GPU-therm on older Jetsons).
  s.gpu_celsius =
      Reading<double>::missing(s.zones_why.empty() ? "no gpu-thermal zone" : s.zones_why);
  for (const ThermalZone& z : s.zones) {
    std::string t = z.type;
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
    if (starts_with(t, "gpu")) {
      s.gpu_celsius = z.celsius;
      break;
    }
  }
  const std::string nvml = "Jetson: read from sysfs, not NVML";
  s.power_w = s.power_limit_w = Reading<double>::missing(nvml + " (see the rails)");
  s.pstate = Reading<int>::missing(nvml);
  s.reasons = Reading<uint64_t>::missing(nvml);
  return s;
}

std::string sysfs_root() {
  const char* e = std::getenv("LAB_SYSFS_ROOT");
  return e && *e ? e : "/";
}

DeviceState read_device_state() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  const DeviceInfo& d = device_info();
  const bool forced = std::getenv("LAB_SYSFS_ROOT") != nullptr;
  // LAB_SYSFS_ROOT reads that tree even without a device (a fake tree: tests, screenshots).
  if ((d.present && d.integrated) || (!d.present && forced)) return read_jetson_state(sysfs_root());
  if (!d.present) return unavailable_state("CPU only: " + d.why_absent);
  static const std::unique_ptr<NvmlReader> reader =
      std::make_unique<NvmlReader>(load_nvml(), d.pci_bus_id);
  return reader->read();
}

OrinBandwidth orin_bandwidth_for(const DeviceState& state) {
  const DeviceInfo& d = device_info();
  const bool orin = d.present && d.integrated && d.major == 8 && d.minor == 7;
  if (orin && state.jetson() && state.mem_mhz.ok())
    return orin_bandwidth(*state.mem_mhz, d.mem_bus_bits);
  OrinBandwidth b;
  if (orin)
    b.how = "AGX Orin's measured copy at MAXN (183 GB/s): " + state.mem_mhz.why;
  else
    b.how = "AGX Orin's measured copy at MAXN (183 GB/s): the lab does not run on an Orin";
  return b;
}

std::vector<std::string> state_warnings(const DeviceState& a, const DeviceState& b) {
  std::vector<std::string> w;
  const char* gpu = a.jetson() ? "GPU" : "SM";
  if (moved(a.gpu_mhz, b.gpu_mhz))
    w.push_back(std::string("the ") + gpu + " clock moved from " + f0(*a.gpu_mhz) + " to " +
                f0(*b.gpu_mhz) + " MHz during the measurement: the figures mix clocks");
  if (moved(a.mem_mhz, b.mem_mhz))
    w.push_back(std::string(a.jetson() ? "the EMC clock" : "the memory clock") + " moved from " +
                f0(*a.mem_mhz) + " to " + f0(*b.mem_mhz) + " MHz during the measurement");
  if (a.throttled() || b.throttled())
    w.push_back("the GPU was throttled (" + (b.throttled() ? b : a).reasons_text() +
                "): clocks below their maximum; check the power limit, cooling and other work "
                "on the GPU (nvidia-smi -q -d PERFORMANCE)");
  if ((a.pinned.ok() && !*a.pinned) || (b.pinned.ok() && !*b.pinned))
    w.push_back("clocks are floating: timings vary with load; `sudo jetson_clocks` pins them");
  if (a.power_mode_id.ok() && b.power_mode_id.ok() && *a.power_mode_id != *b.power_mode_id)
    w.push_back("the power mode changed from " + std::to_string(*a.power_mode_id) + " to " +
                std::to_string(*b.power_mode_id) + " during the measurement");
  return w;
}

std::vector<std::string> state_column_names() {
  std::vector<std::string> n;
  for (const StateColumn& c : state_columns(DeviceState{}, DeviceState{})) n.push_back(c.name);
  return n;
}

std::vector<StateColumn> state_columns(const DeviceState& a, const DeviceState& b) {
  auto num = [](const std::string& name, const Reading<double>& r) {
    return StateColumn{name, r.ok() ? *r : NAN, "", false};
  };
  auto text = [](const std::string& name, std::string t) {
    return StateColumn{name, NAN, std::move(t), true};
  };
  auto pstate = [](const DeviceState& s) {
    return s.pstate.ok() ? "P" + std::to_string(*s.pstate) : std::string();
  };
  auto mode = [](const DeviceState& s) {
    if (!s.power_mode_id.ok()) return std::string();
    return (s.power_mode.ok() ? *s.power_mode + " " : std::string()) + "(" +
           std::to_string(*s.power_mode_id) + ")";
  };
  auto clocks = [](const DeviceState& s) {
    return s.pinned.ok() ? std::string(*s.pinned ? "pinned" : "floating") : std::string();
  };
  auto reasons = [](const DeviceState& s) {
    return s.reasons.ok() ? nvml_reason_names(*s.reasons) : std::string();
  };
  const char* sources[] = {"none", "jetson", "nvml"};
  std::string warn;
  for (const std::string& w : state_warnings(a, b)) warn += (warn.empty() ? "" : "; ") + w;
  return {text("state_source", sources[int(a.source)]),
          num("gpu_mhz_start", a.gpu_mhz),
          num("gpu_mhz_end", b.gpu_mhz),
          num("gpu_max_mhz", b.gpu_max_mhz),
          num("mem_mhz_start", a.mem_mhz),
          num("mem_mhz_end", b.mem_mhz),
          num("gpu_celsius_start", a.gpu_celsius),
          num("gpu_celsius_end", b.gpu_celsius),
          num("power_w_start", a.power_w),
          num("power_w_end", b.power_w),
          num("power_limit_w", b.power_limit_w),
          text("pstate_start", pstate(a)),
          text("pstate_end", pstate(b)),
          text("power_mode", mode(b)),
          text("clocks", clocks(b)),
          text("throttle_start", reasons(a)),
          text("throttle_end", reasons(b)),
          text("state_warning", warn)};
}

// ---- sampling for the GUI --------------------------------------------------------------------

StateSampler::StateSampler(double period_s, size_t history) : m_period(period_s), m_max(history) {}

void StateSampler::push(const std::string& name, double v) {
  if (!std::isfinite(v)) return;
  auto it = std::find_if(m_series.begin(), m_series.end(),
                         [&](const Series& s) { return s.name == name; });
  if (it == m_series.end()) it = m_series.insert(m_series.end(), Series{name, {}});
  if (it->values.size() >= m_max) it->values.erase(it->values.begin());
  it->values.push_back(float(v));
}

DeviceState StateSampler::current() {
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_last && now_s() - m_last->t_s < m_period) return *m_last;
  m_last = read_device_state();
  const DeviceState& s = *m_last;
  auto val = [](const Reading<double>& r) { return r.ok() ? *r : NAN; };
  push(s.jetson() ? "GPU MHz" : "SM MHz", val(s.gpu_mhz));
  push(s.jetson() ? "EMC MHz" : "memory MHz", val(s.mem_mhz));
  push("GPU load %", val(s.load_pct));
  push("GPU C", val(s.gpu_celsius));
  push("power W", val(s.power_w));
  for (const ThermalZone& z : s.zones) push(z.type + " C", val(z.celsius));
  for (const PowerRail& r : s.rails) push(r.label + " mW", r.mw());
  return s;
}

std::vector<StateSampler::Series> StateSampler::history() {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_series;
}

}  // namespace lab
