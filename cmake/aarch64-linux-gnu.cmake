# Cross toolchain for aarch64 Linux (Debian's gcc-aarch64-linux-gnu), with the
# arm64 multiarch -dev packages for pcre2 and jansson, and qemu-aarch64 as the
# emulator CTest runs every test through (scripts/bootstrap.sh installs all of
# it; `make test-aarch64` uses this file).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)

# Libraries and headers from the target's sysroot and the arm64 multiarch
# directories only; programs (pkg-config, bash) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# -cpu max: an emulated CPU with every extension qemu knows (dotprod, i8mm,
# fp16), so both NEON tables run. -L: the target's loader and libc.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-cpu;max)
