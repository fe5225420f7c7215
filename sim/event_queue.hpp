#pragma once
// The future event list: a 4-ary heap with a total order on (tick, priority, insertion sequence),
// so equal-time events run in a reproducible order (as SST and ns-3 do).
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>  // callers pass std::function as well as lambdas
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/tick.hpp"

namespace moesim {

/// Priority classes for events at the same tick; lower runs first.
enum class EventPriority : std::uint8_t {
  kCompletion = 0,  ///< a task or flow finishing frees its resource
  kDefault = 1,     ///< ordinary work
  kStart = 2,       ///< starting new work after every completion at this tick is known
  kReallocate = 3,  ///< network rate recomputation, once per tick after all changes
  kStats = 4,
};

/// An event's action: a move-only void() callable. Callables of up to 32 bytes (the engine's
/// lambdas, a std::function) live inline; trivially copyable ones move as plain bytes and need no
/// destructor call, so scheduling and running an event costs one indirect call (std::function
/// costs a manager call per destruction besides). Larger ones go to the heap.
class EventCallback {
 public:
  static constexpr std::size_t kInlineBytes = 32;

  EventCallback() noexcept = default;
  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, EventCallback> && std::is_invocable_v<D&>>>
  EventCallback(F&& f) {  // NOLINT(google-explicit-constructor): lambdas convert implicitly
    if constexpr (sizeof(D) <= kInlineBytes && alignof(D) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible_v<D>) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      invoke_ = [](void* p) { (*static_cast<D*>(p))(); };
      if constexpr (!std::is_trivially_copyable_v<D>) manage_ = &manage_inline<D>;
    } else {
      ::new (static_cast<void*>(buf_)) D*(new D(std::forward<F>(f)));
      invoke_ = [](void* p) { (**static_cast<D**>(p))(); };
      manage_ = &manage_heap<D>;
    }
  }
  EventCallback(EventCallback&& o) noexcept { take(o); }
  EventCallback& operator=(EventCallback&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  EventCallback(const EventCallback&) = delete;
  EventCallback& operator=(const EventCallback&) = delete;
  ~EventCallback() { reset(); }

  explicit operator bool() const noexcept { return invoke_ != nullptr; }
  void operator()() { invoke_(buf_); }
  void reset() noexcept {
    if (manage_) manage_(Op::kDestroy, buf_, nullptr);
    invoke_ = nullptr;
    manage_ = nullptr;
  }

 private:
  enum class Op { kMove, kDestroy };
  using Manage = void (*)(Op, void* self, void* from);

  template <class D>
  static void manage_inline(Op op, void* self, void* from) {
    if (op == Op::kMove) {
      ::new (self) D(std::move(*static_cast<D*>(from)));
      static_cast<D*>(from)->~D();
    } else {
      static_cast<D*>(self)->~D();
    }
  }
  template <class D>
  static void manage_heap(Op op, void* self, void* from) {
    if (op == Op::kMove)
      *static_cast<D**>(self) = *static_cast<D**>(from);
    else
      delete *static_cast<D**>(self);
  }
  // Leaves `o` empty.
  void take(EventCallback& o) noexcept {
    if (!o.invoke_) return;
    if (o.manage_)
      o.manage_(Op::kMove, buf_, o.buf_);
    else
      __builtin_memcpy(buf_, o.buf_, kInlineBytes);
    invoke_ = o.invoke_;
    manage_ = o.manage_;
    o.invoke_ = nullptr;
    o.manage_ = nullptr;
  }

  alignas(std::max_align_t) unsigned char buf_[kInlineBytes];
  void (*invoke_)(void*) = nullptr;
  Manage manage_ = nullptr;
};

/// Min-heap of events. Actions live in a slot array so the heap moves 24-byte keys only; the
/// heap is 4-ary (half the levels of a binary heap, and a node's children share a cache line).
class EventQueue {
 public:
  using Callback = EventCallback;

  /// Schedules `cb` at `tick`. Returns the event's sequence number.
  template <class F>
  std::uint64_t push(Tick tick, EventPriority priority, F&& cb) {
    std::uint32_t slot;
    if (free_slots_.empty()) {
      slot = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back(std::forward<F>(cb));
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
      slots_[slot] = Callback(std::forward<F>(cb));
    }
    return push_key(tick, priority, slot);
  }
  bool empty() const { return heap_.size() == static_cast<std::size_t>(top_taken_); }
  std::size_t size() const { return heap_.size() - static_cast<std::size_t>(top_taken_); }
  /// Tick of the next event; the queue must not be empty (nor its top taken).
  Tick next_tick() const {
    assert(!top_taken_);
    return heap_.front().tick;
  }
  /// Removes the next event, stores its tick in `tick`, and returns its callback.
  Callback pop(Tick& tick) {
    Callback cb = take_top(tick);
    finish_top();
    return cb;
  }
  /// The main loop's pop in two halves: take_top returns the next event's callback (its tick in
  /// `tick`) but leaves its key at the top of the heap, so that the first event the callback
  /// schedules takes its place with one sift down instead of a sift down and a sift up (an event
  /// usually schedules the next); finish_top, after the callback, removes the key if none did.
  Callback take_top(Tick& tick) {
    assert(!heap_.empty() && !top_taken_);
    const Key& top = heap_.front();
    tick = top.tick;
    top_taken_ = true;
    free_slots_.push_back(top.slot);
    return std::move(slots_[top.slot]);
  }
  void finish_top() {
    if (top_taken_) remove_top();
  }
  void reserve(std::size_t n);

 private:
  struct Key {
    Tick tick;
    std::uint64_t order;  ///< priority in the top 8 bits, insertion sequence below
    std::uint32_t slot;
  };
  // Branch-free, so that picking the least of a node's children compiles to conditional moves.
  static bool less(const Key& a, const Key& b) {
    __extension__ using I128 = __int128;
    return ((static_cast<I128>(a.tick) << 64) | a.order) < ((static_cast<I128>(b.tick) << 64) | b.order);
  }
  std::uint64_t push_key(Tick tick, EventPriority priority, std::uint32_t slot);
  void remove_top();
  void sift_down_from_top(const Key& k);
  /// The least of the children c.. of a node among the first `n` keys (c < n).
  std::size_t least_child(std::size_t c, std::size_t n) const;
  static constexpr std::size_t kArity = 4;

  std::vector<Key> heap_;
  std::vector<Callback> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::uint64_t sequence_ = 0;
  bool top_taken_ = false;  ///< heap_.front() is an event already taken (take_top)
};

}  // namespace moesim
