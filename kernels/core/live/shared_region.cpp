#include "shared_region.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "check.h"
#include "subprocess.h"

namespace lab {

namespace {

size_t whole_pages(size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}

std::string sys_words(const char* call) {
  return std::string(call) + ": " + std::strerror(errno);
}

}  // namespace

SharedRegion::SharedRegion(size_t bytes) {
  static std::atomic<uint64_t> next{1};
  m_bytes = whole_pages(bytes);
  m_fd = memfd_create("kernel-lab-slots", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m_fd < 0) throw Error(ErrorKind::Unavailable, "shared slots: " + sys_words("memfd_create"));
  // Sealed at its size: the other process maps what it was told, and neither can shrink it
  // under the other's mapping (a SIGBUS).
  if (ftruncate(m_fd, off_t(m_bytes)) != 0 ||
      fcntl(m_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const std::string why = sys_words("ftruncate/seal");
    ::close(m_fd);
    throw Error(ErrorKind::Unavailable, "shared slots: " + why);
  }
  m_data = mmap(nullptr, m_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m_fd, 0);
  if (m_data == MAP_FAILED) {
    const std::string why = sys_words("mmap");
    ::close(m_fd);
    m_data = nullptr;
    throw Error(ErrorKind::Unavailable, "shared slots: " + why);
  }
  m_id = (uint64_t(getpid()) << 32) | next++;
}

SharedRegion SharedRegion::adopt(int fd, size_t bytes, uint64_t id) {
  SharedRegion r;
  r.m_fd = fd;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || size_t(st.st_size) != bytes || bytes == 0)
    throw Error(ErrorKind::Data, "shared slots: the descriptor is not a region of " +
                                     std::to_string(bytes) + " bytes");
  // Only a sealed region: one that the other side could shrink under this mapping is refused.
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK))
    throw Error(ErrorKind::Data, "shared slots: the region is not sealed against shrinking");
  r.m_data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (r.m_data == MAP_FAILED) {
    r.m_data = nullptr;
    throw Error(ErrorKind::Unavailable, "shared slots: " + sys_words("mmap"));
  }
  r.m_bytes = bytes;
  r.m_id = id;
  return r;
}

SharedRegion::~SharedRegion() {
  if (m_registered) cudaHostUnregister(m_data);
  if (m_data) munmap(m_data, m_bytes);
  if (m_fd >= 0) ::close(m_fd);
}

SharedRegion::SharedRegion(SharedRegion&& o) noexcept {
  *this = std::move(o);
}

SharedRegion& SharedRegion::operator=(SharedRegion&& o) noexcept {
  if (this == &o) return *this;
  this->~SharedRegion();
  m_id = o.m_id, m_fd = o.m_fd, m_bytes = o.m_bytes, m_data = o.m_data;
  m_device = o.m_device, m_registered = o.m_registered;
  o.m_fd = -1, o.m_data = nullptr, o.m_device = nullptr, o.m_registered = false, o.m_bytes = 0;
  return *this;
}

void* SharedRegion::device_pointer() {
  if (!m_registered) {
    LAB_CUDA_CHECK(
        cudaHostRegister(m_data, m_bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
    m_registered = true;
    LAB_CUDA_CHECK(cudaHostGetDevicePointer(&m_device, m_data, 0));
  }
  return m_device;
}

bool send_fd(int sock, int fd) {
  char byte = 'F';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov, m.msg_iovlen = 1;
  m.msg_control = control, m.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  for (int tries = 0; tries < 1000; ++tries) {
    const ssize_t k = sendmsg(sock, &m, MSG_NOSIGNAL);
    if (k == 1) return true;
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // a non-blocking socket, full
      pollfd p{sock, POLLOUT, 0};
      poll(&p, 1, 10);
      continue;
    }
    return false;
  }
  return false;
}

int recv_fd(int sock, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    pollfd p{sock, POLLIN, 0};
    const int r = poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &iov, m.msg_iovlen = 1;
    m.msg_control = control, m.msg_controllen = sizeof control;
    const ssize_t k = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k != 1) return -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
        return fd;
      }
    return -1;
  }
}

}  // namespace lab
