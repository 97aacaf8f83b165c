# Dependency probes shared by ./x and its set-up test (.ci/setup-test). Sourced, not run.
#
# bindgen (through clang-sys) loads libclang's C API: libclang.so, libclang.so.N or
# libclang-N.so[.M]. libclang-cpp.so.N is the C++ library, which bindgen cannot use, so a name
# only counts when what follows "libclang-" is a version digit.

# The directories clang-sys searches on Debian/Ubuntu, overridable for the set-up test.
libclang_dirs() {
  if [ -n "${SESSIONLOG_LIBCLANG_DIRS:-}" ]; then
    printf '%s\n' $SESSIONLOG_LIBCLANG_DIRS
    return
  fi
  [ -n "${LIBCLANG_PATH:-}" ] && printf '%s\n' "$LIBCLANG_PATH"
  printf '%s\n' /usr/lib/llvm-*/lib /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib /usr/local/lib
}

# Succeeds when a libclang that bindgen can load is present in one of libclang_dirs.
libclang_present() {
  local dir file
  while IFS= read -r dir; do
    [ -d "$dir" ] || continue
    for file in "$dir"/libclang.so "$dir"/libclang.so.* "$dir"/libclang-[0-9]*.so "$dir"/libclang-[0-9]*.so.*; do
      [ -e "$file" ] && return 0
    done
  done < <(libclang_dirs)
  return 1
}
