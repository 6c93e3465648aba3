# macOS: the libraries come from Homebrew (scripts/install-deps installs the Brewfile).
# Apple's compiler does not search Homebrew's prefix (/opt/homebrew on Apple Silicon,
# /usr/local on Intel) for headers such as asio.hpp and xxhash.h, and icu4c is keg-only
# (macOS has an ICU of its own without headers), so both prefixes are named here: for
# find_package, for pkg-config (pkg_check_modules searches <prefix>/lib/pkgconfig of every
# CMAKE_PREFIX_PATH entry), for the compiler and for the linker. Nothing on other systems.
if(NOT APPLE)
  return()
endif()
find_program(HERD_BREW brew)
if(NOT HERD_BREW)
  message(STATUS "Homebrew not found: libraries must be on the default search paths")
  return()
endif()
execute_process(COMMAND "${HERD_BREW}" --prefix OUTPUT_VARIABLE HERD_BREW_PREFIX
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND "${HERD_BREW}" --prefix icu4c OUTPUT_VARIABLE HERD_ICU_PREFIX
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
message(STATUS "Homebrew: ${HERD_BREW_PREFIX} (icu4c in ${HERD_ICU_PREFIX})")
list(APPEND CMAKE_PREFIX_PATH "${HERD_BREW_PREFIX}" "${HERD_ICU_PREFIX}")
include_directories(SYSTEM "${HERD_BREW_PREFIX}/include")
link_directories("${HERD_BREW_PREFIX}/lib")
