// Built into the core only with EAGLE_GLIBC_COMPAT=ON (see csrc/glibc_compat.h): hidden
// definitions of the two symbols newer than manylinux_2_28 that GCC 11+'s headers make
// the core reference, so those references bind here and nothing newer is imported.
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
