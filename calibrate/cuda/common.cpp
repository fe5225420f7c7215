// Error reporting, dtype tables and the RAII memory/stream owners declared in common.hpp.
#include "common.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

namespace moesim::calib {

void fail_call(const char* expr, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "moesim-calibrate: error: %s:%d: %s: %s\n", file, line, expr, message.c_str());
  std::exit(kExitCudaError);
}

void fail(int status, const std::string& message) {
  std::fprintf(stderr, "moesim-calibrate: error: %s\n", message.c_str());
  std::exit(status);
}

void progress(const std::string& line) {
  std::fprintf(stderr, "moesim-calibrate: %s\n", line.c_str());
  std::fflush(stderr);
}

std::string_view dtype_name(Dtype t) {
  switch (t) {
    case Dtype::fp32: return "fp32";
    case Dtype::fp16: return "fp16";
    case Dtype::bf16: return "bf16";
    case Dtype::fp8: return "fp8";
  }
  return "?";
}

bool parse_dtype(std::string_view name, Dtype& out) {
  for (Dtype t : {Dtype::fp32, Dtype::fp16, Dtype::bf16, Dtype::fp8}) {
    if (name == dtype_name(t)) {
      out = t;
      return true;
    }
  }
  return false;
}

std::size_t dtype_bytes(Dtype t) {
  switch (t) {
    case Dtype::fp32: return 4;
    case Dtype::fp16:
    case Dtype::bf16: return 2;
    case Dtype::fp8: return 1;
  }
  return 1;
}

cudaDataType_t dtype_cuda(Dtype t) {
  switch (t) {
    case Dtype::fp32: return CUDA_R_32F;
    case Dtype::fp16: return CUDA_R_16F;
    case Dtype::bf16: return CUDA_R_16BF;
    case Dtype::fp8: return CUDA_R_8F_E4M3;
  }
  return CUDA_R_32F;
}

Dtype output_dtype(Dtype t) { return t == Dtype::fp8 ? Dtype::bf16 : t; }

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : device_(device), size_(bytes) {
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaMalloc(&ptr_, std::max<std::size_t>(bytes, 1)));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) {
    // A failing free at exit cannot be acted on; the check still reports it rather than hiding it.
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaFree(ptr_));
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_), ptr_(std::exchange(other.ptr_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    std::swap(device_, other.device_);
    std::swap(ptr_, other.ptr_);
    std::swap(size_, other.size_);
  }
  return *this;
}

HostBuffer::HostBuffer(std::size_t bytes, bool pinned) : size_(bytes), pinned_(pinned) {
  const std::size_t n = std::max<std::size_t>(bytes, 1);
  if (pinned) {
    CUDA_CHECK(cudaMallocHost(&ptr_, n));
  } else {
    ptr_ = std::malloc(n);
    if (ptr_ == nullptr) fail(kExitCudaError, "out of host memory allocating " + std::to_string(n) + " bytes");
  }
  std::memset(ptr_, 0, n);
}

HostBuffer::~HostBuffer() {
  if (pinned_) {
    CUDA_CHECK(cudaFreeHost(ptr_));
  } else {
    std::free(ptr_);
  }
}

Stream::Stream(int device) : device_(device) {
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaStreamDestroy(stream_));
}

namespace {

/// Random bits of one element of type `t` with a bounded exponent: |x| in [2^-6, 1).
std::uint32_t random_element(Dtype t, std::mt19937_64& rng) {
  const std::uint64_t r = rng();
  const std::uint32_t sign = static_cast<std::uint32_t>(r & 1U);
  const std::uint32_t exp_pick = static_cast<std::uint32_t>((r >> 1) % 5U);  // 5 binades
  const std::uint32_t mant = static_cast<std::uint32_t>(r >> 8);
  switch (t) {
    case Dtype::fp32: {
      const float v = (static_cast<float>(r >> 40) / static_cast<float>(1ULL << 24)) * 2.0F - 1.0F;
      std::uint32_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      return bits;
    }
    case Dtype::fp16:  // bias 15, 10 mantissa bits
      return (sign << 15) | ((9U + exp_pick) << 10) | (mant & 0x3FFU);
    case Dtype::bf16:  // bias 127, 7 mantissa bits
      return (sign << 15) | ((121U + exp_pick) << 7) | (mant & 0x7FU);
    case Dtype::fp8:  // E4M3: bias 7, 3 mantissa bits; exponent <= 6 never forms NaN
      return (sign << 7) | ((2U + exp_pick) << 3) | (mant & 0x7U);
  }
  return 0;
}

}  // namespace

void fill_random(const DeviceBuffer& buffer, Dtype t, std::uint64_t seed) {
  // One 8 MiB host pattern copied repeatedly: generating gigabytes on the host would dominate
  // the run time, and repeated tiles do not change how fast a GEMM runs.
  const std::size_t elem = dtype_bytes(t);
  const std::size_t chunk = std::min<std::size_t>(buffer.size(), std::size_t{8} << 20) / elem * elem;
  if (chunk == 0) return;
  std::vector<std::byte> pattern(chunk);
  std::mt19937_64 rng(seed);
  for (std::size_t off = 0; off < chunk; off += elem) {
    const std::uint32_t bits = random_element(t, rng);
    std::memcpy(pattern.data() + off, &bits, elem);  // little-endian: low bytes are the element
  }
  CUDA_CHECK(cudaSetDevice(buffer.device()));
  for (std::size_t off = 0; off < buffer.size(); off += chunk) {
    const std::size_t n = std::min(chunk, buffer.size() - off);
    CUDA_CHECK(cudaMemcpy(buffer.bytes() + off, pattern.data(), n, cudaMemcpyHostToDevice));
  }
}

void device_memory(int device, std::size_t& free_bytes, std::size_t& total_bytes) {
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
}

int compute_capability(int device) {
  int major = 0;
  int minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

}  // namespace moesim::calib
