// What does a frame cost when a second process runs one kernel into the first one's buffer?
// The kernel host's floor on this machine, without the lab: a parent and a forked child, a 1M-int
// buffer shared by CUDA IPC, host synchronisation on each side and one pipe message each way.
//   nvcc -O2 -o /tmp/ipc-round-trip benchmarks/probes/ipc-round-trip.cu && /tmp/ipc-round-trip
// Lines: the pipe alone; one process launching and syncing the kernel (no second context); the
// child's kernel with the parent idle; the same after the parent's own kernel (its stream synced
// first, as the lab does before a hosted stage). Medians and p95 of 300 frames, microseconds.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void bump(int* p, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

constexpr int kN = 1 << 20, kFrames = 300;
using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

void report(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("%-58s median %8.1f us  p95 %8.1f us\n", what, v[v.size() / 2],
              v[size_t(0.95 * double(v.size() - 1))]);
}

void put(int fd, const void* p, size_t n) {
  if (write(fd, p, n) != ssize_t(n)) std::exit(2);
}
void get(int fd, void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, static_cast<char*>(p) + got, n - got);
    if (r <= 0) std::exit(3);
    got += size_t(r);
  }
}

int main() {
  int down[2], up[2];  // parent -> child, child -> parent
  if (pipe(down) || pipe(up)) return 4;
  const pid_t pid = fork();  // before either process touches CUDA
  if (pid == 0) {
    cudaIpcMemHandle_t h;
    get(down[0], &h, sizeof h);
    int* p = nullptr;
    CHECK(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&p), h, cudaIpcMemLazyEnablePeerAccess));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (;;) {
      char c;
      get(down[0], &c, 1);
      if (c == 'q') break;
      if (c == 'k') {
        bump<<<kN / 256, 256, 0, s>>>(p, kN);
        CHECK(cudaStreamSynchronize(s));
      }
      put(up[1], &c, 1);
    }
    CHECK(cudaIpcCloseMemHandle(p));
    return 0;
  }
  int* p = nullptr;
  CHECK(cudaMalloc(&p, kN * sizeof(int)));
  CHECK(cudaMemset(p, 0, kN * sizeof(int)));
  cudaIpcMemHandle_t h;
  CHECK(cudaIpcGetMemHandle(&h, p));
  put(down[1], &h, sizeof h);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s\n", prop.name);

  auto frames = [&](const char* what, char msg, bool parent_kernel) {
    std::vector<double> t;
    for (int f = 0; f < kFrames + 20; ++f) {
      if (parent_kernel) {
        bump<<<kN / 256, 256, 0, s>>>(p, kN);
        CHECK(cudaStreamSynchronize(s));
      }
      const auto t0 = Clock::now();
      put(down[1], &msg, 1);
      char c;
      get(up[0], &c, 1);
      if (f >= 20) t.push_back(us_since(t0));
    }
    report(what, t);
  };
  frames("the pipe round trip alone", 'p', false);
  {
    std::vector<double> t;
    for (int f = 0; f < kFrames + 20; ++f) {
      const auto t0 = Clock::now();
      bump<<<kN / 256, 256, 0, s>>>(p, kN);
      CHECK(cudaStreamSynchronize(s));
      if (f >= 20) t.push_back(us_since(t0));
    }
    report("one process: launch and sync the kernel", t);
  }
  frames("child's kernel, the parent idle", 'k', false);
  frames("child's kernel after the parent's (synced first)", 'k', true);
  put(down[1], "q", 1);
  int status = 0;
  waitpid(pid, &status, 0);
  int v = 0;
  CHECK(cudaMemcpy(&v, p, sizeof v, cudaMemcpyDeviceToHost));
  // Every kernel, the parent's and the child's, bumped the same buffer.
  const int expected = 3 * (kFrames + 20) + (kFrames + 20);
  std::printf("buffer %d (expected %d): %s\n", v, expected, v == expected ? "ok" : "WRONG");
  return v == expected && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
