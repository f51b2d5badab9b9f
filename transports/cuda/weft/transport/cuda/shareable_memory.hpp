// weft/transport/cuda/shareable_memory.hpp — device memory one process allocates and the other
// processes of its host map: what ranks that are processes sharing GPU memory are built on.
//
//   weft::cuda::shareable_allocation mine(device, bytes);          // VMM where the GPU exports
//   int fd = mine.export_descriptor();                              //   it as a descriptor,
//   // ... hand fd to a peer process (SCM_RIGHTS) with mine.size() ...
//   weft::cuda::imported_allocation theirs(device, fd, bytes);      // in the peer: mapped there
//
// Two ways, chosen per device (weft::cuda::sharing_for) and said by way():
//   vmm     the driver's virtual memory management: cuMemCreate with POSIX file descriptors
//           as the shareable handle type, mapped with cuMemMap and made readable and writable
//           by the device with cuMemSetAccess; cuMemExportToShareableHandle gives a descriptor
//           the peer imports (cuMemImportFromShareableHandle) and maps the same way. The size
//           is rounded up to the device's recommended granularity (2 MiB on current GPUs).
//   legacy  where the device or driver cannot export VMM memory (or WEFT_CUDA_IPC=legacy):
//           cudaMalloc, and a cudaIpcMemHandle_t (64 bytes) that the peer opens with
//           cudaIpcOpenMemHandle.
// Either way the peer maps the exporter's physical memory: what one writes, the other reads,
// in stream order on each side. The mapping lives while either process holds it, so a peer's
// end never frees memory a survivor still maps.
//
// The driver's functions are found at run time (weft/transport/cuda/driver.hpp): nothing here
// links against the driver library.
#pragma once

#include "weft/detail/env.hpp"
#include "weft/error.hpp"
#include "weft/transport/cuda/driver.hpp"
#include "weft/transport/cuda/runtime.hpp"

#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace weft::cuda {

// How device memory is shared between processes.
enum class sharing { vmm, legacy };

inline std::string_view to_string(sharing way) { return way == sharing::vmm ? "vmm" : "legacy"; }

namespace detail {

// The driver's virtual memory management functions, resolved once per process.
struct vmm_driver {
  decltype(&::cuDeviceGet) device_get;
  decltype(&::cuDeviceGetAttribute) device_attribute;
  decltype(&::cuMemGetAllocationGranularity) granularity;
  decltype(&::cuMemCreate) create;
  decltype(&::cuMemRelease) release;
  decltype(&::cuMemAddressReserve) reserve;
  decltype(&::cuMemAddressFree) address_free;
  decltype(&::cuMemMap) map;
  decltype(&::cuMemUnmap) unmap;
  decltype(&::cuMemSetAccess) set_access;
  decltype(&::cuMemExportToShareableHandle) export_handle;
  decltype(&::cuMemImportFromShareableHandle) import_handle;

  // Throws weft::error(transport) where the driver lacks any of them.
  static const vmm_driver& get() {
    static const vmm_driver resolved;
    return resolved;
  }

 private:
  vmm_driver() {
    constexpr unsigned version = 12000;
    constexpr const char* purpose = "virtual memory management, CUDA 10.2 or later";
    device_get = driver_function<decltype(device_get)>("cuDeviceGet", version, purpose);
    device_attribute =
        driver_function<decltype(device_attribute)>("cuDeviceGetAttribute", version, purpose);
    granularity =
        driver_function<decltype(granularity)>("cuMemGetAllocationGranularity", version, purpose);
    create = driver_function<decltype(create)>("cuMemCreate", version, purpose);
    release = driver_function<decltype(release)>("cuMemRelease", version, purpose);
    reserve = driver_function<decltype(reserve)>("cuMemAddressReserve", version, purpose);
    address_free = driver_function<decltype(address_free)>("cuMemAddressFree", version, purpose);
    map = driver_function<decltype(map)>("cuMemMap", version, purpose);
    unmap = driver_function<decltype(unmap)>("cuMemUnmap", version, purpose);
    set_access = driver_function<decltype(set_access)>("cuMemSetAccess", version, purpose);
    export_handle =
        driver_function<decltype(export_handle)>("cuMemExportToShareableHandle", version, purpose);
    import_handle = driver_function<decltype(import_handle)>("cuMemImportFromShareableHandle",
                                                             version, purpose);
  }
};

// Device `device`'s primary context, made current for the scope (the VMM calls act on it).
class context_scope {
 public:
  explicit context_scope(int device) : on_(device) {
    check(cudaFree(nullptr), "cudaFree(nullptr) to start device " + std::to_string(device));
  }

 private:
  device_scope on_;
};

inline CUdevice driver_device(const vmm_driver& driver, int device) {
  CUdevice handle = 0;
  check_driver(driver.device_get(&handle, device), "cuDeviceGet(" + std::to_string(device) + ")");
  return handle;
}

inline CUmemAllocationProp exportable_properties(CUdevice device) {
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = device;
  properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return properties;
}

// Maps `handle` (size bytes) at a fresh address range readable and writable by `device`.
inline CUdeviceptr map_on(const vmm_driver& driver, CUmemGenericAllocationHandle handle,
                          std::size_t size, std::size_t alignment, CUdevice device,
                          const std::string& what) {
  CUdeviceptr address = 0;
  check_driver(driver.reserve(&address, size, alignment, 0, 0), "cuMemAddressReserve for " + what);
  if (const CUresult status = driver.map(address, size, 0, handle, 0); status != CUDA_SUCCESS) {
    static_cast<void>(driver.address_free(address, size));
    check_driver(status, "cuMemMap of " + what);
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (const CUresult status = driver.set_access(address, size, &access, 1);
      status != CUDA_SUCCESS) {
    static_cast<void>(driver.unmap(address, size));
    static_cast<void>(driver.address_free(address, size));
    check_driver(status, "cuMemSetAccess of " + what);
  }
  return address;
}

}  // namespace detail

// How `device`'s memory is shared here: vmm where the driver has virtual memory management and
// the device exports it as POSIX file descriptors, else legacy. WEFT_CUDA_IPC=legacy asks for
// legacy, =vmm refuses to run without it (errc::invalid_argument naming what is missing).
inline sharing sharing_for(int device) {
  const auto asked = weft::detail::env::text("WEFT_CUDA_IPC");
  if (asked && *asked != "vmm" && *asked != "legacy" && *asked != "auto") {
    throw error(errc::invalid_argument,
                "WEFT_CUDA_IPC is '" + std::string(*asked) + "': it is vmm, legacy or auto");
  }
  if (const std::string why = why_no_device(); !why.empty())
    throw error(errc::transport, "no CUDA device: " + why);
  if (asked && *asked == "legacy") return sharing::legacy;
  std::string missing;
  try {
    const auto& driver = detail::vmm_driver::get();
    const CUdevice handle = detail::driver_device(driver, device);
    int vmm = 0;
    int descriptors = 0;
    detail::check_driver(driver.device_attribute(
                             &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, handle),
                         "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)");
    detail::check_driver(
        driver.device_attribute(
            &descriptors, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, handle),
        "cuDeviceGetAttribute(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)");
    if (vmm == 0)
      missing = "device " + std::to_string(device) + " has no virtual memory management";
    else if (descriptors == 0)
      missing = "device " + std::to_string(device) + " cannot export memory as file descriptors";
  } catch (const error& failure) {
    if (failure.code() != errc::transport) throw;
    missing = failure.what();
  }
  if (missing.empty()) return sharing::vmm;
  if (asked && *asked == "vmm")
    throw error(errc::invalid_argument, "WEFT_CUDA_IPC=vmm, but " + missing);
  return sharing::legacy;
}

namespace detail {

// What both sides hold: a mapping of device memory, released as it was made (unmapped and
// released for vmm; cudaFree by the exporter and cudaIpcCloseMemHandle by an importer for
// legacy). Movable, not copyable.
class device_mapping {
 public:
  device_mapping(const device_mapping&) = delete;
  device_mapping& operator=(const device_mapping&) = delete;

  int device() const { return device_; }
  sharing way() const { return way_; }
  std::byte* data() const { return address_; }
  std::size_t size() const { return size_; }  // bytes mapped

 protected:
  device_mapping(int device, sharing way, bool imported)
      : device_(device), way_(way), imported_(imported) {}
  ~device_mapping() { free(); }
  device_mapping(device_mapping&& other) noexcept { take(other); }
  device_mapping& operator=(device_mapping&& other) noexcept {
    if (this != &other) {
      free();
      take(other);
    }
    return *this;
  }

  void free() noexcept {
    if (address_ == nullptr) return;
    if (way_ == sharing::legacy) {
      static_cast<void>(imported_ ? cudaIpcCloseMemHandle(address_) : cudaFree(address_));
    } else {
      const auto& driver = vmm_driver::get();
      const auto address = reinterpret_cast<CUdeviceptr>(address_);
      static_cast<void>(driver.unmap(address, size_));
      static_cast<void>(driver.address_free(address, size_));
      static_cast<void>(driver.release(handle_));
    }
    address_ = nullptr;
  }

  int device_ = 0;
  sharing way_ = sharing::vmm;
  bool imported_ = false;
  std::size_t size_ = 0;
  CUmemGenericAllocationHandle handle_ = 0;
  std::byte* address_ = nullptr;

 private:
  void take(device_mapping& other) noexcept {
    device_ = other.device_;
    way_ = other.way_;
    imported_ = other.imported_;
    size_ = other.size_;
    handle_ = other.handle_;
    address_ = std::exchange(other.address_, nullptr);
  }
};

}  // namespace detail

// Device memory of this process that other processes of the host can map.
class shareable_allocation : public detail::device_mapping {
 public:
  // At least `bytes` of `device`'s memory, shared the way sharing_for(device) says (or `way`).
  shareable_allocation(int device, std::size_t bytes)
      : shareable_allocation(device, bytes, sharing_for(device)) {}
  shareable_allocation(int device, std::size_t bytes, sharing way)
      : device_mapping(device, way, false) {
    const std::string what = std::to_string(bytes) + " bytes of device " + std::to_string(device);
    const detail::context_scope on(device);
    if (way_ == sharing::legacy) {
      size_ = bytes == 0 ? 1 : bytes;
      void* pointer = nullptr;
      check(cudaMalloc(&pointer, size_), "cudaMalloc of " + what);
      address_ = static_cast<std::byte*>(pointer);
      return;
    }
    const auto& driver = detail::vmm_driver::get();
    const CUdevice handle = detail::driver_device(driver, device);
    const CUmemAllocationProp properties = detail::exportable_properties(handle);
    std::size_t granularity = 0;
    detail::check_driver(
        driver.granularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        "cuMemGetAllocationGranularity on device " + std::to_string(device));
    size_ = std::max<std::size_t>(1, (bytes + granularity - 1) / granularity) * granularity;
    detail::check_driver(driver.create(&handle_, size_, &properties, 0), "cuMemCreate of " + what);
    try {
      address_ = reinterpret_cast<std::byte*>(
          detail::map_on(driver, handle_, size_, granularity, handle, what));
    } catch (...) {
      static_cast<void>(driver.release(handle_));
      throw;
    }
  }
  shareable_allocation(shareable_allocation&&) noexcept = default;
  shareable_allocation& operator=(shareable_allocation&&) noexcept = default;

  // vmm: a new file descriptor for the memory, the caller's to pass on and close.
  int export_descriptor() const {
    if (way_ != sharing::vmm)
      throw error(errc::invalid_argument,
                  "a legacy allocation has no descriptor: use ipc_handle()");
    int descriptor = -1;
    detail::check_driver(detail::vmm_driver::get().export_handle(
                             &descriptor, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                         "cuMemExportToShareableHandle on device " + std::to_string(device_));
    return descriptor;
  }
  // legacy: the handle a peer opens.
  cudaIpcMemHandle_t ipc_handle() const {
    if (way_ != sharing::legacy)
      throw error(errc::invalid_argument, "a vmm allocation is shared by export_descriptor()");
    const device_scope on(device_);
    cudaIpcMemHandle_t handle{};
    check(cudaIpcGetMemHandle(&handle, address_),
          "cudaIpcGetMemHandle on device " + std::to_string(device_));
    return handle;
  }
};

// Another process's shareable_allocation, mapped for `device` of this process.
class imported_allocation : public detail::device_mapping {
 public:
  // vmm: from the descriptor the exporter handed over (this object closes it) and the size it
  // said (shareable_allocation::size()).
  imported_allocation(int device, int descriptor, std::size_t bytes)
      : device_mapping(device, sharing::vmm, true) {
    size_ = bytes;
    const std::string what =
        "a peer's " + std::to_string(bytes) + " bytes on device " + std::to_string(device);
    std::optional<detail::context_scope> on;
    const detail::vmm_driver* found = nullptr;
    try {
      on.emplace(device);
      found = &detail::vmm_driver::get();
    } catch (...) {
      ::close(descriptor);  // ours to close, whatever happens
      throw;
    }
    const detail::vmm_driver& driver = *found;
    const CUresult imported = driver.import_handle(
        &handle_, reinterpret_cast<void*>(static_cast<std::intptr_t>(descriptor)),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    ::close(descriptor);  // the imported handle holds the memory now
    detail::check_driver(imported, "cuMemImportFromShareableHandle of " + what);
    try {
      const CUdevice handle = detail::driver_device(driver, device);
      const CUmemAllocationProp properties = detail::exportable_properties(handle);
      std::size_t granularity = 0;
      detail::check_driver(
          driver.granularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "cuMemGetAllocationGranularity on device " + std::to_string(device));
      address_ = reinterpret_cast<std::byte*>(
          detail::map_on(driver, handle_, size_, granularity, handle, what));
    } catch (...) {
      static_cast<void>(driver.release(handle_));
      throw;
    }
  }
  // legacy: from the exporter's handle.
  imported_allocation(int device, const cudaIpcMemHandle_t& handle, std::size_t bytes)
      : device_mapping(device, sharing::legacy, true) {
    size_ = bytes;
    const detail::context_scope on(device);
    void* pointer = nullptr;
    check(cudaIpcOpenMemHandle(&pointer, handle, cudaIpcMemLazyEnablePeerAccess),
          "cudaIpcOpenMemHandle of a peer's " + std::to_string(bytes) + " bytes on device " +
              std::to_string(device));
    address_ = static_cast<std::byte*>(pointer);
  }
  imported_allocation(imported_allocation&&) noexcept = default;
  imported_allocation& operator=(imported_allocation&&) noexcept = default;
};

}  // namespace weft::cuda
