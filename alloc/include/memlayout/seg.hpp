// C++ front ends of <memlayout/seg.h>: put a type's objects in their own pool
// without touching the code that allocates them.
//
//   // A standard allocator whose objects, and the nodes of any container
//   // using it, go to the pool named by Tag:
//   struct index_nodes { static constexpr const char *name = "index-nodes"; };
//   std::map<long, long, std::less<long>,
//            memlayout::seg::allocator<std::pair<const long, long>, index_nodes>> index;
//
//   // A std::pmr::memory_resource over a pool:
//   memlayout::seg::memory_resource rows("rows");
//   std::pmr::vector<row> table(&rows);
//
//   // Class-level operator new/delete (every form) from a pool:
//   struct node {
//     MEMLAYOUT_SEG_CLASS("nodes");   // in a public section
//     long key;
//     node *left, *right;
//   };
//
// Pools are process-wide and found by name: the same name anywhere is the
// same pool. A Tag may also carry `static constexpr seg_pool_options
// options{...}` (used when it creates the pool); without `name` the pool is
// named after the Tag type. Pools used by these front ends are created on
// first use and must not be destroyed while they are in use.
#ifndef MEMLAYOUT_SEG_HPP
#define MEMLAYOUT_SEG_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "<memlayout/seg.hpp> needs C++17 or later (-std=c++17); C code includes <memlayout/seg.h>"
#endif

#include <memlayout/seg.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <memory_resource>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

// Built without exceptions (-fno-exceptions), what would throw ends the
// program instead, as the standard library's own containers do there.
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define MEMLAYOUT_SEG_THROW(exception) throw exception
#else
#define MEMLAYOUT_SEG_THROW(exception) std::abort()
#endif

namespace memlayout::seg {

// A non-owning handle to a pool: copying it copies the handle, and the pool
// lives until destroy() (or seg_pool_destroy) whatever handles remain.
class pool {
public:
  pool() noexcept = default;
  explicit pool(seg_pool *p) noexcept : p_(p) {}
  // Creates the pool, or returns the one of that name. Throws
  // std::system_error (EINVAL: bad name or options; ENOMEM: no address
  // space or too many pools).
  explicit pool(const char *name, const seg_pool_options *opts = nullptr)
      : p_(seg_pool_create(name, opts)) {
    if (!p_) {
      [[maybe_unused]] int err = errno;
      MEMLAYOUT_SEG_THROW(std::system_error(err, std::generic_category(),
                                            std::string("seg_pool_create(\"") + name + "\")"));
    }
  }
  // The pool ptr belongs to (empty when none).
  static pool of(const void *ptr) noexcept { return pool(seg_pool_of(ptr)); }

  seg_pool *get() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  friend bool operator==(const pool &a, const pool &b) noexcept { return a.p_ == b.p_; }

  // Throws std::bad_alloc when the pool is exhausted.
  void *allocate(std::size_t bytes, std::size_t align = 0) const {
    void *p = align ? seg_aligned_alloc(p_, align, bytes) : seg_malloc(p_, bytes);
    if (!p)
      MEMLAYOUT_SEG_THROW(std::bad_alloc());
    return p;
  }
  static void deallocate(void *p) noexcept { seg_free(p); }

  struct seg_pool_stats stats() const {
    struct seg_pool_stats s {};
    if (::seg_pool_stats(p_, &s) != 0)
      MEMLAYOUT_SEG_THROW(std::system_error(errno, std::generic_category(), "seg_pool_stats"));
    return s;
  }
  const char *name() const { return stats().name; }
  // Frees every object of the pool and the pool itself.
  void destroy() noexcept {
    seg_pool_destroy(p_);
    p_ = nullptr;
  }

private:
  seg_pool *p_ = nullptr;
};

namespace detail {

// A pool made on first use, retried until it can be made. Constant-
// initialised, so a function-local static of it costs no guard.
class lazy_pool {
public:
  constexpr explicit lazy_pool(const char *name, const seg_pool_options *opts = nullptr) noexcept
      : name_(name), opts_(opts) {}
  seg_pool *get() noexcept {
    seg_pool *p = p_.load(std::memory_order_acquire);
    return p ? p : create();
  }
  seg_pool *get_or_throw() {
    seg_pool *p = get();
    if (!p)
      MEMLAYOUT_SEG_THROW(std::bad_alloc());
    return p;
  }

private:
  seg_pool *create() noexcept {
    seg_pool *p = seg_pool_create(name_, opts_); // the same name gives the same pool
    if (p)
      p_.store(p, std::memory_order_release);
    return p;
  }
  const char *name_;
  const seg_pool_options *opts_;
  std::atomic<seg_pool *> p_{nullptr};
};

// The spelling of T's type, from the compiler's function signature.
template <class T> constexpr std::string_view type_name() {
  std::string_view f = __PRETTY_FUNCTION__; // "... [with T = ns::tag; ...]" or "[T = ns::tag]"
  std::size_t start = f.find("T = ") + 4;
  return f.substr(start, f.find_first_of(";]", start) - start);
}

inline constexpr std::size_t max_pool_name = 127; // seg_pool_create's limit

// A type's spelling as a pool name. Templates and nested namespaces spell
// past the limit: then its start, '#' and a hash of the whole spelling,
// so that two long tags still get two pools.
template <class T> struct type_name_storage {
  static constexpr std::string_view full = type_name<T>();
  static constexpr std::size_t size = full.size() <= max_pool_name ? full.size() : max_pool_name;
  static constexpr auto value = [] {
    std::array<char, size + 1> out{};
    if (full.size() <= max_pool_name) {
      for (std::size_t i = 0; i < full.size(); ++i)
        out[i] = full[i];
      return out;
    }
    unsigned long long h = 14695981039346656037ull; // FNV-1a
    for (char c : full) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
    constexpr std::size_t keep = max_pool_name - 17;
    for (std::size_t i = 0; i < keep; ++i)
      out[i] = full[i];
    out[keep] = '#';
    for (std::size_t i = 0; i < 16; ++i)
      out[keep + 1 + i] = "0123456789abcdef"[(h >> (60 - 4 * i)) & 15];
    return out;
  }();
};

template <class Tag, class = void> struct tag_name {
  static constexpr const char *value = type_name_storage<Tag>::value.data();
};
template <class Tag> struct tag_name<Tag, std::void_t<decltype(Tag::name)>> {
  static constexpr const char *value = Tag::name;
  static_assert(std::char_traits<char>::length(Tag::name) <= max_pool_name,
                "a pool name is at most 127 bytes: shorten Tag::name");
};

template <class Tag, class = void> struct tag_options {
  static constexpr const seg_pool_options *value = nullptr;
};
template <class Tag> struct tag_options<Tag, std::void_t<decltype(Tag::options)>> {
  static constexpr seg_pool_options storage = Tag::options;
  static constexpr const seg_pool_options *value = &storage;
};

template <class Tag> lazy_pool &tag_pool() noexcept {
  static lazy_pool p(tag_name<Tag>::value, tag_options<Tag>::value);
  return p;
}

// seg_malloc's classes above 8 bytes are multiples of 16 on 16-aligned
// pages: 16-aligned. The 8-byte class is only 8-aligned, which
// std::pmr::memory_resource::allocate(8) (alignment 16 by default) may not
// return.
inline void *allocate_in(seg_pool *p, std::size_t bytes, std::size_t align) noexcept {
  return align > 16 || (align > 8 && bytes <= 8) ? seg_aligned_alloc(p, align, bytes)
                                                 : seg_malloc(p, bytes);
}

inline void *class_new(lazy_pool &lp, std::size_t bytes, std::size_t align) {
  void *p = allocate_in(lp.get_or_throw(), bytes, align);
  if (!p)
    MEMLAYOUT_SEG_THROW(std::bad_alloc());
  return p;
}

inline void *class_new_nothrow(lazy_pool &lp, std::size_t bytes, std::size_t align) noexcept {
  seg_pool *pool = lp.get();
  return pool ? allocate_in(pool, bytes, align) : nullptr;
}

} // namespace detail

// A standard allocator drawing from the pool named by Tag. Rebinding keeps
// the Tag, so a node-based container's nodes land in that pool; two
// allocators are equal when their Tags are.
template <class T, class Tag> class allocator {
public:
  using value_type = T;
  using tag_type = Tag;
  using is_always_equal = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  template <class U> struct rebind { using other = allocator<U, Tag>; };

  allocator() noexcept = default;
  template <class U> allocator(const allocator<U, Tag> &) noexcept {}

  [[nodiscard]] T *allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T))
      MEMLAYOUT_SEG_THROW(std::bad_array_new_length());
    void *p = detail::allocate_in(pool(), n * sizeof(T), alignof(T));
    if (!p)
      MEMLAYOUT_SEG_THROW(std::bad_alloc());
    return static_cast<T *>(p);
  }
  void deallocate(T *p, std::size_t) noexcept { seg_free(p); }

  // The pool (created on first use; throws std::bad_alloc if it cannot be).
  static seg_pool *pool() { return detail::tag_pool<Tag>().get_or_throw(); }
};

template <class T, class TagA, class U, class TagB>
constexpr bool operator==(const allocator<T, TagA> &, const allocator<U, TagB> &) noexcept {
  return std::is_same_v<TagA, TagB>;
}
template <class T, class TagA, class U, class TagB>
constexpr bool operator!=(const allocator<T, TagA> &a, const allocator<U, TagB> &b) noexcept {
  return !(a == b);
}

// std::pmr::memory_resource over a pool. Resources over the same pool are
// equal: either frees what the other allocated.
class memory_resource : public std::pmr::memory_resource {
public:
  explicit memory_resource(seg_pool *p) noexcept : pool_(p) {}
  explicit memory_resource(const char *name, const seg_pool_options *opts = nullptr)
      : pool_(seg::pool(name, opts).get()) {}
  seg_pool *get() const noexcept { return pool_; }

protected:
  void *do_allocate(std::size_t bytes, std::size_t align) override {
    void *p = detail::allocate_in(pool_, bytes, align);
    if (!p)
      MEMLAYOUT_SEG_THROW(std::bad_alloc());
    return p;
  }
  void do_deallocate(void *p, std::size_t, std::size_t) override { seg_free(p); }
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override {
#if defined(__cpp_rtti) || defined(__GXX_RTTI)
    auto *o = dynamic_cast<const memory_resource *>(&other);
    return o && o->pool_ == pool_;
#else
    // Without RTTI: the same vtable is the same class (the Itanium C++ ABI's
    // vtable pointer comes first); a class derived from this one compares
    // unequal, which is always allowed.
    if (this == &other)
      return true;
    void *const *mine = reinterpret_cast<void *const *>(this);
    void *const *theirs = reinterpret_cast<void *const *>(&other);
    return *mine == *theirs && static_cast<const memory_resource &>(other).pool_ == pool_;
#endif
  }

private:
  seg_pool *pool_;
};

} // namespace memlayout::seg

// Inside a class body, in a public section: every operator new and delete of
// the class (plain, array, aligned, nothrow, sized, placement) serves it from
// the pool of that name. Derived classes inherit them.
#define MEMLAYOUT_SEG_CLASS(pool_name)                                                             \
  static_assert(sizeof(pool_name) <= ::memlayout::seg::detail::max_pool_name + 1,                  \
                "a pool name is at most 127 bytes");                                               \
  static ::memlayout::seg::detail::lazy_pool &memlayout_seg_pool() noexcept {                      \
    static ::memlayout::seg::detail::lazy_pool pool(pool_name);                                    \
    return pool;                                                                                   \
  }                                                                                                \
  static void *operator new(std::size_t n) {                                                       \
    return ::memlayout::seg::detail::class_new(memlayout_seg_pool(), n, 0);                        \
  }                                                                                                \
  static void *operator new[](std::size_t n) {                                                     \
    return ::memlayout::seg::detail::class_new(memlayout_seg_pool(), n, 0);                        \
  }                                                                                                \
  static void *operator new(std::size_t n, std::align_val_t a) {                                   \
    return ::memlayout::seg::detail::class_new(memlayout_seg_pool(), n,                            \
                                               static_cast<std::size_t>(a));                       \
  }                                                                                                \
  static void *operator new[](std::size_t n, std::align_val_t a) {                                 \
    return ::memlayout::seg::detail::class_new(memlayout_seg_pool(), n,                            \
                                               static_cast<std::size_t>(a));                       \
  }                                                                                                \
  static void *operator new(std::size_t n, const std::nothrow_t &) noexcept {                      \
    return ::memlayout::seg::detail::class_new_nothrow(memlayout_seg_pool(), n, 0);                \
  }                                                                                                \
  static void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {                    \
    return ::memlayout::seg::detail::class_new_nothrow(memlayout_seg_pool(), n, 0);                \
  }                                                                                                \
  static void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {  \
    return ::memlayout::seg::detail::class_new_nothrow(memlayout_seg_pool(), n,                    \
                                                       static_cast<std::size_t>(a));               \
  }                                                                                                \
  static void *operator new[](std::size_t n, std::align_val_t a,                                   \
                              const std::nothrow_t &) noexcept {                                   \
    return ::memlayout::seg::detail::class_new_nothrow(memlayout_seg_pool(), n,                    \
                                                       static_cast<std::size_t>(a));               \
  }                                                                                                \
  static void *operator new(std::size_t, void *where) noexcept { return where; }                   \
  static void *operator new[](std::size_t, void *where) noexcept { return where; }                 \
  static void operator delete(void *p) noexcept { seg_free(p); }                                   \
  static void operator delete[](void *p) noexcept { seg_free(p); }                                 \
  static void operator delete(void *p, std::size_t) noexcept { seg_free(p); }                      \
  static void operator delete[](void *p, std::size_t) noexcept { seg_free(p); }                    \
  static void operator delete(void *p, std::align_val_t) noexcept { seg_free(p); }                 \
  static void operator delete[](void *p, std::align_val_t) noexcept { seg_free(p); }               \
  static void operator delete(void *p, std::size_t, std::align_val_t) noexcept { seg_free(p); }    \
  static void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { seg_free(p); }  \
  static void operator delete(void *p, const std::nothrow_t &) noexcept { seg_free(p); }           \
  static void operator delete[](void *p, const std::nothrow_t &) noexcept { seg_free(p); }         \
  static void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept {        \
    seg_free(p);                                                                                   \
  }                                                                                                \
  static void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {      \
    seg_free(p);                                                                                   \
  }                                                                                                \
  static void operator delete(void *, void *) noexcept {}                                          \
  static void operator delete[](void *, void *) noexcept {}                                        \
  static_assert(true, "MEMLAYOUT_SEG_CLASS ends with a semicolon")

#endif
