#pragma once
// A vector for a plan that is appended at the back while its front is dropped (a plan run while it
// is built, PlanExecutor::run_fed): elements live in fixed-size pages, so they never move as it
// grows (references into it stay valid) and dropping the front frees whole pages, kept for reuse,
// without moving the rest. Indices stay those of push_back order.
#include <cstddef>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace moesim {

/// Pages of 2^page_bits elements (4096 by default; a graph of a few tasks, as a layer-queue
/// execution's, asks for small ones); indices [first(), size()) are held.
template <class T>
class PagedVector {
 public:
  static constexpr std::size_t kPageBits = 12;
  static constexpr std::size_t kPageSize = std::size_t{1} << kPageBits;

  explicit PagedVector(std::size_t page_bits = kPageBits)
      : page_bits_(page_bits), page_mask_((std::size_t{1} << page_bits) - 1) {}
  PagedVector(PagedVector&&) noexcept = default;
  PagedVector& operator=(PagedVector&&) noexcept = default;
  PagedVector(const PagedVector& o)
      : page_bits_(o.page_bits_),
        page_mask_(o.page_mask_),
        first_(o.first_),
        size_(o.first_),
        first_page_(o.first_ >> o.page_bits_) {
    if ((size_ & page_mask_) != 0) add_page();  // the first held element is mid-page
    for (std::size_t i = o.first_; i < o.size_; ++i) push_back(o[i]);
  }
  PagedVector& operator=(const PagedVector& o) {
    if (this != &o) *this = PagedVector(o);
    return *this;
  }

  /// Elements ever pushed.
  std::size_t size() const { return size_; }
  /// The first element still held.
  std::size_t first() const { return first_; }
  T& operator[](std::size_t i) { return pages_[(i >> page_bits_) - first_page_][i & page_mask_]; }
  const T& operator[](std::size_t i) const { return pages_[(i >> page_bits_) - first_page_][i & page_mask_]; }

  T& push_back(T value) {
    if ((size_ & page_mask_) == 0) add_page();
    T& slot = (*this)[size_++];
    slot = std::move(value);
    return slot;
  }
  /// Appends a slot and returns it as it is: a default-constructed element in a fresh page, or
  /// what an earlier element left in a recycled one (the caller resets it; an element that keeps
  /// storage, as a successor list does, is then not allocated again).
  T& grow_back() {
    if ((size_ & page_mask_) == 0) add_page();
    return (*this)[size_++];
  }
  /// Forgets elements before `index`; pages wholly before it are recycled (their elements are
  /// overwritten when reused).
  void drop_before(std::size_t index) {
    if (index <= first_) return;
    first_ = index;
    std::size_t whole = 0;
    while (whole < pages_.size() && ((first_page_ + whole + 1) << page_bits_) <= first_) ++whole;
    for (std::size_t k = 0; k < whole; ++k) spare_.push_back(std::move(pages_[k]));
    pages_.erase(pages_.begin(), pages_.begin() + static_cast<std::ptrdiff_t>(whole));
    first_page_ += whole;
  }

  /// Forgets every element; the pages are kept for the elements pushed next (a plan rebuilt every
  /// step reuses its memory rather than asking for fresh pages).
  void clear() {
    for (auto& page : pages_) spare_.push_back(std::move(page));
    pages_.clear();
    first_ = size_ = first_page_ = 0;
  }

  /// The held elements [first(), size()) as a range.
  class View {
   public:
    class iterator {
     public:
      using iterator_category = std::forward_iterator_tag;
      using value_type = T;
      using difference_type = std::ptrdiff_t;
      using pointer = const T*;
      using reference = const T&;
      iterator() = default;
      iterator(const PagedVector* v, std::size_t i) : v_(v), i_(i) {}
      reference operator*() const { return (*v_)[i_]; }
      pointer operator->() const { return &(*v_)[i_]; }
      iterator& operator++() {
        ++i_;
        return *this;
      }
      iterator operator++(int) {
        iterator old = *this;
        ++i_;
        return old;
      }
      bool operator==(const iterator& o) const { return i_ == o.i_; }

     private:
      const PagedVector* v_ = nullptr;
      std::size_t i_ = 0;
    };
    explicit View(const PagedVector& v) : v_(&v) {}
    iterator begin() const { return {v_, v_->first_}; }
    iterator end() const { return {v_, v_->size_}; }
    std::size_t size() const { return v_->size_ - v_->first_; }
    bool empty() const { return size() == 0; }
    /// The i-th held element.
    const T& operator[](std::size_t i) const { return (*v_)[v_->first_ + i]; }

   private:
    const PagedVector* v_;
  };
  View view() const { return View(*this); }

 private:
  void add_page() {
    if (spare_.empty()) {
      pages_.push_back(std::make_unique<T[]>(page_mask_ + 1));
    } else {
      pages_.push_back(std::move(spare_.back()));
      spare_.pop_back();
    }
  }

  std::size_t page_bits_;
  std::size_t page_mask_;
  std::vector<std::unique_ptr<T[]>> pages_;  ///< pages_[k] holds page first_page_ + k
  std::vector<std::unique_ptr<T[]>> spare_;
  std::size_t first_ = 0;
  std::size_t size_ = 0;
  std::size_t first_page_ = 0;
};

}  // namespace moesim
