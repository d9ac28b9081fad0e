// An allocator that leaves new elements uninitialised on resize: for buffers a read overwrites
// completely (a batch, a checkpoint array), where zero-filling first costs a quarter of the time
// reading from the page cache takes. Otherwise std::allocator.
#pragma once

#include <memory>
#include <new>
#include <utility>

namespace mnddp {

template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

}  // namespace mnddp
