// Memory two processes share: the kernel host's Shared transport. A memfd (anonymous, sealed
// against resizing) mapped in the lab and in its child, its descriptor handed over the socket
// they already talk on (SCM_RIGHTS), and page-locked with cudaHostRegister in each, so that an
// integrated GPU (Orin) reads and writes it in place; a discrete one reaches it over the bus.
// Nothing has a name in the file system: when both processes are gone, so is the memory.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace lab {

class SharedRegion {
 public:
  SharedRegion() = default;
  // A new region of at least `bytes` (whole pages), zeroed, mapped here. Error(Unavailable) when
  // the system refuses.
  explicit SharedRegion(size_t bytes);
  // Maps a region another process made: its descriptor (owned from now on), size and id.
  // Error(Data) when the descriptor is not a region of that size.
  static SharedRegion adopt(int fd, size_t bytes, uint64_t id);
  ~SharedRegion();
  SharedRegion(SharedRegion&& o) noexcept;
  SharedRegion& operator=(SharedRegion&& o) noexcept;
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  uint64_t id() const { return m_id; }  // unique per process that made it
  int fd() const { return m_fd; }
  size_t size() const { return m_bytes; }
  void* data() const { return m_data; }
  // Page-locks it (cudaHostRegister, mapped and portable) once and returns its device address;
  // unregistered when the region goes. Throws CudaError.
  void* device_pointer();

 private:
  uint64_t m_id = 0;
  int m_fd = -1;
  size_t m_bytes = 0;
  void* m_data = nullptr;
  void* m_device = nullptr;
  bool m_registered = false;
};

// A descriptor over a unix-domain socket (SCM_RIGHTS, with one byte of data). send_fd: false
// when it could not be sent. recv_fd: the new descriptor, or -1 (the other end closed, sent no
// descriptor, or the deadline passed).
bool send_fd(int sock, int fd);
int recv_fd(int sock, std::chrono::steady_clock::time_point deadline);

}  // namespace lab
