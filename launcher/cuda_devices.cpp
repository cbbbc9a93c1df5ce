#include "launcher/cuda_devices.hpp"

#include <dlfcn.h>

namespace gt {

CudaDevices visible_cuda_devices() {
  // The driver API's entry points, by their documented C signatures: CUresult is an int enum
  // whose success is 0. Declared here rather than taken from cuda.h, which this program must
  // build without.
  using Init = int (*)(unsigned int);
  using DeviceGetCount = int (*)(int*);
  CudaDevices d;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    d.why_none = "no NVIDIA driver: libcuda.so.1 not found";
    return d;
  }
  auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<DeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  if (!init || !count) {
    d.why_none = "libcuda.so.1 lacks cuInit or cuDeviceGetCount";
  } else if (const int rc = init(0); rc != 0) {
    // 100 is CUDA_ERROR_NO_DEVICE; others mean a driver that cannot start (a mismatched module).
    d.why_none = rc == 100 ? "the NVIDIA driver sees no GPU" : "the NVIDIA driver failed to start (cuInit error " + std::to_string(rc) + ")";
  } else if (count(&d.count) != 0 || d.count <= 0) {
    d.count = 0;
    d.why_none = "the NVIDIA driver sees no GPU";
  }
  // The library stays loaded: unloading a driver library is asking for trouble at exit.
  return d;
}

}  // namespace gt
