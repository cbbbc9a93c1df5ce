// The fake device is libtorch's own mechanism for an out-of-tree backend (PrivateUse1: an
// allocator, a device guard and a boxed fallback for every operator), as PyTorch's OpenReg test
// backend uses it. Written here because nothing packaged gives a CPU-only machine a device that
// is not the CPU but computes like it: the meta device has no values, so a step that reads its
// loss cannot run on it.
//
// Every operator that reaches the fallback runs the CPU kernel on CPU tensors over the same bytes
// (no copy), and its results come back as fakegpu tensors over the bytes the CPU kernel wrote. A
// result that shares an input's bytes (a view, an in-place or out= result) shares that input's
// storage, so autograd's views and version counters behave as on any device.
#include "tests/fake_device.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace gt::testing {

namespace {

constexpr c10::DeviceType kFake = c10::DeviceType::PrivateUse1;
const c10::Device kFakeDevice(kFake, 0);

std::atomic<int64_t> ops_seen{0};
std::atomic<int64_t> host_reads{0};
std::atomic<int64_t> plant_countdown{0};  // 0: nothing planted
std::atomic<int64_t> plant_after_read{0};  // a countdown that starts at the next host read

// Host memory, labelled as the fake device's.
struct FakeAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? c10::alloc_cpu(n) : nullptr;
    return {p, p, &c10::free_cpu, kFakeDevice};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &c10::free_cpu; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count > 0) std::memcpy(dest, src, count);
  }
};
FakeAllocator fake_allocator;

// One device with one in-order stream and nothing ever in flight: every event is complete.
struct FakeGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kFake; }
  c10::Device exchangeDevice(c10::Device) const override { return kFakeDevice; }
  c10::Device getDevice() const override { return kFakeDevice; }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
};

// What libtorch asks of an accelerator beyond its memory: it is there, and its random numbers
// are the CPU's (the CPU kernels run with the CPU's generators).
struct FakeHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return 1; }
  void setCurrentDevice(c10::DeviceIndex) const override {}
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex) const override { return 0; }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override { return at::detail::createCPUGenerator(); }
  at::Device getDeviceFromPtr(void*) const override { return kFakeDevice; }
  at::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t bytes) const override {
    c10::DataPtr grown = fake_allocator.allocate(bytes);
    fake_allocator.copy_data(grown.get(), storage.data(), std::min(bytes, storage.nbytes()));
    storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(grown));
    storage.unsafeGetStorageImpl()->set_nbytes(bytes);
  }
};

void release_storage(void* keep) { delete static_cast<c10::Storage*>(keep); }

// A DataPtr over `s`'s bytes, labelled `device`, that keeps `s` alive.
c10::DataPtr borrowed_bytes(const c10::Storage& s, const c10::Device& device) {
  return c10::DataPtr(s.mutable_data(), new c10::Storage(s), &release_storage, device);
}

bool on_fake(const at::Tensor& t) { return t.defined() && t.device().type() == kFake; }

at::Tensor with_storage(c10::Storage s, c10::DispatchKey key, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(s), c10::DispatchKeySet(key), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  return at::Tensor(std::move(impl));
}

// One fakegpu input, seen by the CPU kernel through `host`: a CPU tensor over the same bytes
// whose storage can grow (out= results are resized), after which the input follows it.
struct Borrowed {
  at::Tensor fake, host;
};

at::Tensor host_view(const at::Tensor& fake) {
  const c10::Storage& s = fake.storage();
  c10::Storage host(c10::Storage::use_byte_size_t(), s.nbytes(), borrowed_bytes(s, c10::Device(c10::kCPU)),
                    c10::GetCPUAllocator(), /*resizable=*/true);
  return with_storage(std::move(host), c10::DispatchKey::CPU, fake);
}

// After the kernel: where it resized or restrided an input through its host view, the input
// takes the new bytes and shape.
void follow_host_view(const Borrowed& b) {
  c10::StorageImpl* fake = b.fake.storage().unsafeGetStorageImpl();
  const c10::Storage& host = b.host.storage();
  if (host.data() != fake->data()) {
    fake->set_data_ptr_noswap(borrowed_bytes(host, kFakeDevice));
    fake->set_nbytes(host.nbytes());
  }
  c10::TensorImpl* impl = b.fake.unsafeGetTensorImpl();
  if (impl->sizes() != b.host.sizes() || impl->strides() != b.host.strides() ||
      impl->storage_offset() != b.host.storage_offset())
    impl->set_sizes_and_strides(b.host.sizes(), b.host.strides(), b.host.storage_offset());
}

// A CPU kernel's result as the fake device's: an input itself where it is one (in-place, out=),
// a view of an input's storage where it shares one, else a fakegpu tensor over the new bytes.
at::Tensor as_fake(const at::Tensor& r, const std::vector<Borrowed>& borrowed) {
  if (!r.defined() || r.device().type() != c10::kCPU) return r;
  for (const Borrowed& b : borrowed)
    if (r.unsafeGetTensorImpl() == b.host.unsafeGetTensorImpl()) return b.fake;
  for (const Borrowed& b : borrowed)
    if (r.storage().unsafeGetStorageImpl() == b.host.storage().unsafeGetStorageImpl())
      return with_storage(b.fake.storage(), c10::DispatchKey::PrivateUse1, r);
  c10::Storage bytes(c10::Storage::use_byte_size_t(), r.storage().nbytes(), borrowed_bytes(r.storage(), kFakeDevice),
                     &fake_allocator, /*resizable=*/true);
  return with_storage(std::move(bytes), c10::DispatchKey::PrivateUse1, r);
}

std::string shape_of(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

[[noreturn]] void misplaced(const c10::OperatorHandle& op, const std::string& argument, const at::Tensor& t) {
  TORCH_CHECK(false, "placement: ", op.schema().name(), " got a cpu tensor ", shape_of(t), " (", t.scalar_type(),
              ") as '", argument, "' beside fakegpu tensors: on a GPU it would fail or be copied synchronously");
}

// Which tensors an operator's arguments hold, in order, lists included.
template <typename F>
void for_each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    f(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) f(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor()) f(e.toTensor());
  }
}

c10::IValue to_host(const c10::IValue& v, std::vector<Borrowed>& borrowed) {
  const auto host = [&borrowed](const at::Tensor& t) {
    if (!on_fake(t)) return t;
    borrowed.push_back({t, host_view(t)});
    return borrowed.back().host;
  };
  if (v.isTensor()) return host(v.toTensor());
  if (v.isDevice() && v.toDevice().type() == kFake) return c10::IValue(c10::Device(c10::kCPU));
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(host(t));
    return out;
  }
  if (v.isList() && v.toListRef().size() > 0) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& e : v.toListRef()) out.push_back(e.isTensor() ? c10::IValue(host(e.toTensor())) : e);
    return out;
  }
  return v;
}

c10::IValue to_fake(const c10::IValue& v, const std::vector<Borrowed>& borrowed) {
  if (v.isTensor()) return as_fake(v.toTensor(), borrowed);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(as_fake(t, borrowed));
    return out;
  }
  return v;
}

// A copy back to the host or `.item()`: where a step reads its numbers (its loss, its gradient
// norm), and where a plant counted from the next read starts counting.
void note_host_read() {
  host_reads.fetch_add(1);
  if (plant_after_read.load() > 0) plant_countdown.store(plant_after_read.exchange(0));
}

// _copy_from(self, dst): the one operator between devices, with no CPU kernel of its own.
void copy_between(torch::jit::Stack* stack, bool resize) {
  at::Tensor src = (*stack)[stack->size() - (resize ? 2 : 3)].toTensor();
  at::Tensor dst = (*stack)[stack->size() - (resize ? 1 : 2)].toTensor();
  std::vector<Borrowed> borrowed;
  if (on_fake(src) && dst.device().is_cpu()) note_host_read();
  at::Tensor from = to_host(src, borrowed).toTensor(), to = to_host(dst, borrowed).toTensor();
  if (resize) to.resize_(from.sizes());
  to.copy_(from);
  for (const Borrowed& b : borrowed) follow_host_view(b);
  torch::jit::drop(*stack, resize ? 2 : 3);
  stack->emplace_back(dst);
}

void fake_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  ops_seen.fetch_add(1, std::memory_order_relaxed);
  const std::string& name = op.schema().name();
  if (name == "aten::_copy_from") return copy_between(stack, false);
  if (name == "aten::_copy_from_and_resize") return copy_between(stack, true);
  if (name == "aten::_local_scalar_dense") note_host_read();

  const auto& arguments = op.schema().arguments();
  const size_t n = arguments.size();
  bool any_fake = false;
  for (size_t i = 0; i < n; ++i)
    for_each_tensor((*stack)[stack->size() - n + i], [&any_fake](const at::Tensor& t) { any_fake |= on_fake(t); });
  if (any_fake)
    for (size_t i = 0; i < n; ++i)
      for_each_tensor((*stack)[stack->size() - n + i], [&](const at::Tensor& t) {
        if (t.defined() && t.device().is_cpu() && t.dim() > 0) misplaced(op, arguments[i].name(), t);
      });

  std::vector<Borrowed> borrowed;
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = (*stack)[stack->size() - n + i];
    v = to_host(v, borrowed);
  }
  op.callBoxedForDispatchKey(c10::DispatchKey::CPU, *stack);
  for (const Borrowed& b : borrowed) follow_host_view(b);

  // A planted tensor is one the code makes itself: at::empty, which zeros, ones, full and arange
  // start from (a copy to the device starts from empty_strided).
  const bool planted = name == "aten::empty" && op.schema().overload_name() == "memory_format" &&
                       plant_countdown.load() > 0 && plant_countdown.fetch_sub(1) == 1;
  if (planted) {
    const c10::IValue& r = stack->back();
    std::fprintf(stderr, "fake device: planted a cpu tensor as %s's result %s\n", name.c_str(),
                 r.isTensor() ? shape_of(r.toTensor()).c_str() : "");
  }
  const size_t results = op.schema().returns().size();
  for (size_t i = 0; i < results; ++i) {
    c10::IValue& v = (*stack)[stack->size() - results + i];
    if (!planted) v = to_fake(v, borrowed);
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&fake_fallback>()); }

// set_data (a module moved between devices) asks whether the two tensors' kinds may swap their
// insides; c10's answer names the dense backends it knows, so the fake device answers as CUDA's.
bool dense(const at::Tensor& t) { return t.layout() == c10::kStrided && (t.device().is_cpu() || on_fake(t)); }
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type",
         [](const at::Tensor& self, const at::Tensor& from) { return dense(self) && dense(from); });
}

}  // namespace

c10::Device fake_device() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::register_privateuse1_backend("fakegpu");
    c10::SetAllocator(kFake, &fake_allocator);
    at::RegisterPrivateUse1HooksInterface(new FakeHooks());
    static c10::impl::DeviceGuardImplRegistrar guard(kFake, new FakeGuard());
  });
  return kFakeDevice;
}

void plant_cpu_tensor(int64_t after, bool after_host_read) {
  (after_host_read ? plant_after_read : plant_countdown).store(after);
}

int64_t fake_device_ops() { return ops_seen.load(); }

int64_t fake_device_host_reads() { return host_reads.load(); }

}  // namespace gt::testing
