# Cross build for AArch64 Linux (Debian's g++-aarch64-linux-gnu), its binaries run under
# qemu-user (qemu-aarch64, whose default CPU has the dot-product extension), so the NEON
# kernels are built and tested on an x86 machine. Used by the arm64 preset.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Debian's multiarch arm64 libraries (libgtest-dev:arm64, libfmt-dev:arm64) live here.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)
# Linked statically: qemu-aarch64 7.2 hangs in pthread_create of a dynamically linked
# program (the target's glibc 2.36 under -L), and runs a static one. Debian ships fmt for
# arm64 as a shared library only, so fmt is used header-only here.
set(CMAKE_EXE_LINKER_FLAGS_INIT -static)
set(COHORT_FMT_HEADER_ONLY ON CACHE BOOL "Use fmt header-only (no libfmt to link)")
