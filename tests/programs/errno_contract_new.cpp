// errno_contract's C++ part: the operator new forms, which the interposer
// defines too. A failed one ends in the C++ runtime (nullptr, or
// std::bad_alloc); errno is what malloc left.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>

extern "C" void errno_contract_show(const char *what, const void *p, int err);

namespace {

volatile size_t v64 = 64, vhuge = SIZE_MAX / 2;
void *volatile sink;

template <class F> void try_new(const char *label, F allocate) {
  errno = EDOM;
  void *p = nullptr;
  bool threw = false;
  try {
    p = allocate();
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  int e = errno;
  errno_contract_show(label, threw ? reinterpret_cast<void *>(0) : p, e);
  if (threw)
    errno_contract_show("  (threw std::bad_alloc)", nullptr, e);
  sink = p;
}

} // namespace

extern "C" void errno_contract_new(void) {
  const std::align_val_t a64{64};
  const std::nothrow_t &nt = std::nothrow;
  try_new("new(64)", [] { return operator new(v64); });
  operator delete(sink);
  try_new("new(huge)", [] { return operator new(vhuge); });
  try_new("new[](huge)", [] { return operator new[](vhuge); });
  try_new("new(huge, nothrow)", [&] { return operator new(vhuge, nt); });
  try_new("new[](huge, nothrow)", [&] { return operator new[](vhuge, nt); });
  try_new("new(64, align 64)", [&] { return operator new(v64, a64); });
  operator delete(sink, a64);
  try_new("new(huge, align 64)", [&] { return operator new(vhuge, a64); });
  try_new("new[](huge, align 64)", [&] { return operator new[](vhuge, a64); });
  try_new("new(huge, align 64, nothrow)", [&] { return operator new(vhuge, a64, nt); });
  try_new("new[](huge, align 64, nothrow)", [&] { return operator new[](vhuge, a64, nt); });
  void *p = operator new(v64);
  errno = EDOM;
  operator delete(p);
  errno_contract_show("delete", nullptr, errno);
}
