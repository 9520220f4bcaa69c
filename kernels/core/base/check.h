// Errors the engine throws, and LAB_CUDA_CHECK.
//
// Every failure carries a category that maps one-to-one onto a sysexits code, so the CLI can
// exit with the right code and the GUI can show the message and keep running. Nothing in the
// engine calls exit().
#pragma once

#include <stdexcept>
#include <string>

namespace lab {

enum class ErrorKind {
  Usage,        // EX_USAGE 64: unknown option, stage, variant, parameter; invalid block
  Data,         // EX_DATAERR 65: corrupt, empty or oversized image
  NoInput,      // EX_NOINPUT 66: a file that does not exist
  Unavailable,  // EX_UNAVAILABLE 69: no CUDA device where one was asked for, no counters
  Internal,     // EX_SOFTWARE 70: a CUDA error, a broken invariant
  CantCreate,   // EX_CANTCREAT 73: an output file or folder that cannot be made
  Io,           // EX_IOERR 74: a read or write that failed part-way
  Refused,      // EX_UNAVAILABLE 69: the device cannot launch this configuration (threads this
                // build's registers allow, grid limits, shared memory); not the user's syntax
};

int exit_code(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), m_kind(kind) {}
  ErrorKind kind() const { return m_kind; }

 private:
  ErrorKind m_kind;
};

// A CUDA runtime error. `sticky` is true for errors that poison the context (illegal address,
// launch failure): GPU work must stop and the process restart. Out-of-memory is not sticky.
class CudaError : public Error {
 public:
  CudaError(int code, bool sticky, const std::string& what)
      : Error(ErrorKind::Internal, what), m_code(code), m_sticky(sticky) {}
  int code() const { return m_code; }
  bool sticky() const { return m_sticky; }

 private:
  int m_code;
  bool m_sticky;
};

// Throws CudaError naming the expression, file and line. `code` is a cudaError_t.
[[noreturn]] void throw_cuda_error(int code, const char* expr, const char* file, int line);

}  // namespace lab

#define LAB_CUDA_CHECK(expr)                                                                       \
  do {                                                                                             \
    const int lab_check_code_ = static_cast<int>(expr);                                            \
    if (lab_check_code_ != 0) ::lab::throw_cuda_error(lab_check_code_, #expr, __FILE__, __LINE__); \
  } while (0)
