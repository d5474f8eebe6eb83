// Replacing the global allocation functions (C++17 [replacement.functions]): one definition
// of each in the program. Linked into every test through floe_test_support, because every
// object file that uses `new` pulls this one out of the archive.
#include "support/gpu_host_heap.h"

#include <cstdlib>
#include <new>

namespace floe::test::heap {
namespace {

// Plain data: constant-initialised thread_local storage needs no guard, so it is safe to
// touch from inside operator new, even during thread start-up and teardown.
struct State {
  bool on;
  Counts counts;
};
thread_local State tls_state = {false, {}};

void* allocate(size_t n, size_t align, bool nothrow) {
  if (n == 0) n = 1;
  if (tls_state.on) {
    ++tls_state.counts.allocations;
    tls_state.counts.bytes += n;
  }
  void* p = nullptr;
  for (;;) {
    if (align <= alignof(std::max_align_t)) {
      p = std::malloc(n);
    } else if (posix_memalign(&p, align, n) != 0) {
      p = nullptr;
    }
    if (p != nullptr) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) {
      if (nothrow) return nullptr;
      throw std::bad_alloc();
    }
    handler();
  }
}

void release(void* p) {
  if (p == nullptr) return;
  if (tls_state.on) ++tls_state.counts.deallocations;
  std::free(p);
}

}  // namespace

void begin() {
  tls_state.counts = Counts{};
  tls_state.on = true;
}

Counts end() {
  tls_state.on = false;
  return tls_state.counts;
}

}  // namespace floe::test::heap

using floe::test::heap::allocate;
using floe::test::heap::release;

void* operator new(size_t n) {
  return allocate(n, 0, false);
}
void* operator new[](size_t n) {
  return allocate(n, 0, false);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, 0, true);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, 0, true);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(size_t n, std::align_val_t a) {
  return allocate(n, static_cast<size_t>(a), false);
}
void* operator new[](size_t n, std::align_val_t a) {
  return allocate(n, static_cast<size_t>(a), false);
}
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, static_cast<size_t>(a), true);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, static_cast<size_t>(a), true);
  } catch (...) {
    return nullptr;
  }
}

void operator delete(void* p) noexcept {
  release(p);
}
void operator delete[](void* p) noexcept {
  release(p);
}
void operator delete(void* p, size_t) noexcept {
  release(p);
}
void operator delete[](void* p, size_t) noexcept {
  release(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  release(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  release(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  release(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  release(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  release(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  release(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  release(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  release(p);
}
