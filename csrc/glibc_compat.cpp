// Built into the core only with EAGLE_GLIBC_COMPAT=ON (see csrc/glibc_compat.h): hidden
// definitions of the two symbols newer than manylinux_2_28 that GCC 11+'s headers make
// the core reference, so those references bind here and nothing newer is imported.
#include <exception>
#include <new>

// glibc 2.32's flag (<sys/single_threaded.h>): 0, "not known to be single-threaded", so
// libstdc++'s reference counts stay atomic, as they are on every older system.
extern "C" {
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
}

namespace std {
// GLIBCXX_3.4.29's helper, which GCC 11+'s allocators call on an impossible array size.
__attribute__((visibility("hidden"), noreturn)) void __throw_bad_array_new_length() {
  throw std::bad_array_new_length();
}
}  // namespace std

// GCC 11+'s <bits/exception_ptr.h> defines exception_ptr's copy and destruction inline,
// calling these two members, which its libstdc++ exports as CXXABI_1.3.13 (RHEL 8's has
// up to 1.3.11).  Each is written here with the out-of-line constructor and destructor
// every libstdc++ has exported since CXXABI_1.3.3 (bound to that version by name, so the
// references go to the library, not to this module's own inline copies); local to the
// module (csrc/core.map exports PyInit__core only), so the library's calls never reach
// them.
extern "C" {
void eagle_exception_ptr_copy(void* self, const void* other) noexcept;
void eagle_exception_ptr_destroy(void* self) noexcept;
}
__asm__(".symver eagle_exception_ptr_copy,"
        "_ZNSt15__exception_ptr13exception_ptrC1ERKS0_@CXXABI_1.3.3");
__asm__(".symver eagle_exception_ptr_destroy,"
        "_ZNSt15__exception_ptr13exception_ptrD1Ev@CXXABI_1.3.3");

namespace std {
namespace __exception_ptr {
// one more reference: a second exception_ptr to the object, never destroyed
void exception_ptr::_M_addref() noexcept {
  void* copy = nullptr;
  eagle_exception_ptr_copy(&copy, this);
}
// one reference less: a second exception_ptr to the object, destroyed
void exception_ptr::_M_release() noexcept {
  void* copy = *reinterpret_cast<void**>(this);
  eagle_exception_ptr_destroy(&copy);
}
}  // namespace __exception_ptr
}  // namespace std
