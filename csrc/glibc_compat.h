// Force-included (-include) into every translation unit when EAGLE_GLIBC_COMPAT is ON
// (scripts/build_wheel.sh's manylinux build): the compiled core then references no glibc
// symbol newer than 2.28 and no libstdc++ symbol newer than RHEL 8's (GLIBCXX_3.4.25,
// CXXABI_1.3.11), though it is compiled against this machine's newer glibc and GCC
// headers (measured: GLIBC_2.14, GLIBCXX_3.4.21, CXXABI_1.3.11: tag manylinux_2_27).
//
// * Functions whose default symbol version is newer than 2.28 are bound to the version
//   every x86-64 glibc has (.symver): log (2.29's faster libm entry point; the old one
//   computes the same correctly rounded result), pthread_once (moved into libc.so.6 with
//   version 2.34; the 2.2.5 entry point stays).
// * __libc_single_threaded (glibc 2.32), which GCC 11+'s <ext/atomicity.h> reads to skip
//   atomic reference counts, and std::__throw_bad_array_new_length (GLIBCXX_3.4.29), which
//   GCC 11+'s allocators call, are defined in glibc_compat.cpp with hidden
//   visibility: the core's own references bind to them.  The flag
//   is 0, "not known to be single-threaded": atomic counts always, as on older systems.
#pragma once
#if defined(__linux__) && defined(__x86_64__)  // (glibc: the option is for it)
__asm__(".symver log,log@GLIBC_2.2.5");
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
#endif
