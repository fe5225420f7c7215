#pragma once
// Shared plumbing of moesim-calibrate: error checks that stop the program with file:line and the
// library's own message, the data types we measure, and RAII owners of device/host memory,
// streams and events so that an early exit in one benchmark cannot leak into the next.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace moesim::calib {

/// Exit statuses: documented in --help so that scripts can tell a bad invocation from a machine
/// without a GPU from a failing CUDA call.
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoDevice = 3;
inline constexpr int kExitCudaError = 4;
inline constexpr int kExitIoError = 1;

/// Prints "moesim-calibrate: error: FILE:LINE: EXPR: MESSAGE" to stderr and exits kExitCudaError.
[[noreturn]] void fail_call(const char* expr, const char* file, int line, const std::string& message);

/// Prints "moesim-calibrate: error: MESSAGE" to stderr and exits with `status`.
[[noreturn]] void fail(int status, const std::string& message);

/// One progress line on stderr (stdout stays free for the final summary).
void progress(const std::string& line);

}  // namespace moesim::calib

// Every CUDA, cuBLAS and NCCL return code goes through one of these: a benchmark that carried on
// after a failed call would time nothing and write a plausible-looking wrong number.
#define CUDA_CHECK(expr)                                                                     \
  do {                                                                                       \
    const cudaError_t moesim_err_ = (expr);                                                  \
    if (moesim_err_ != cudaSuccess)                                                          \
      ::moesim::calib::fail_call(#expr, __FILE__, __LINE__, cudaGetErrorString(moesim_err_)); \
  } while (0)

#define CUBLAS_CHECK(expr)                                                                       \
  do {                                                                                           \
    const cublasStatus_t moesim_st_ = (expr);                                                    \
    if (moesim_st_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::moesim::calib::fail_call(#expr, __FILE__, __LINE__,                                      \
                                 std::string(cublasGetStatusName(moesim_st_)) + " (" +           \
                                     cublasGetStatusString(moesim_st_) + ")");                   \
  } while (0)

#define NCCL_CHECK(expr)                                                                      \
  do {                                                                                        \
    const ncclResult_t moesim_nr_ = (expr);                                                   \
    if (moesim_nr_ != ncclSuccess)                                                            \
      ::moesim::calib::fail_call(#expr, __FILE__, __LINE__, ncclGetErrorString(moesim_nr_));  \
  } while (0)

namespace moesim::calib {

/// The GEMM element types of measurements.hpp. fp8 means E4M3 inputs (the format inference
/// engines use for weights and activations) with a bf16 output.
enum class Dtype { fp32, fp16, bf16, fp8 };

std::string_view dtype_name(Dtype t);
bool parse_dtype(std::string_view name, Dtype& out);
std::size_t dtype_bytes(Dtype t);
cudaDataType_t dtype_cuda(Dtype t);
/// Element type of C: fp8 GEMMs write bf16, every other type writes its own type.
Dtype output_dtype(Dtype t);

/// Device memory on one device, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  std::byte* bytes() const { return static_cast<std::byte*>(ptr_); }
  std::size_t size() const { return size_; }
  int device() const { return device_; }

 private:
  int device_ = 0;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

/// Host memory, page-locked (cudaMallocHost) or ordinary pageable memory, freed on destruction.
/// Pageable memory is touched once so that first-touch page faults are not timed as copies.
class HostBuffer {
 public:
  HostBuffer(std::size_t bytes, bool pinned);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* get() const { return ptr_; }
  std::size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  bool pinned_ = false;
};

/// A non-blocking stream on one device (non-blocking: never serialised with the legacy stream).
class Stream {
 public:
  explicit Stream(int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
};

/// Fills `bytes` of device memory with finite values of type `t` in [-1, 1]: zeros would let the
/// GPU run cooler and clock higher than on real weights, and NaN/Inf could take slow paths.
void fill_random(const DeviceBuffer& buffer, Dtype t, std::uint64_t seed);

/// Free and total memory of `device`, in bytes.
void device_memory(int device, std::size_t& free_bytes, std::size_t& total_bytes);

/// Compute capability of `device` as major*10 + minor (e.g. 90 for H100).
int compute_capability(int device);

/// The device's name as the driver reports it.
std::string device_name(int device);

}  // namespace moesim::calib
