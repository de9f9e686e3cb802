# Compiler flags shared by every parley target: warnings, sanitizers, fuzzing.
add_library(parley_flags INTERFACE)
target_compile_options(parley_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
# GCC 12 at -O3 reports -Wrestrict on std::string concatenation in libstdc++ itself
# (GCC bug 105329, a false positive); that check is off for GCC 12.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(parley_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
if(PARLEY_WERROR)
  target_compile_options(parley_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                         $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
endif()
if(PARLEY_SANITIZE)
  string(REPLACE "," ";" _sans "${PARLEY_SANITIZE}")
  foreach(s IN LISTS _sans)
    if(NOT s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "PARLEY_SANITIZE: unknown sanitizer '${s}'")
    endif()
  endforeach()
  target_compile_options(parley_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${PARLEY_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all>)
  target_link_options(parley_flags INTERFACE -fsanitize=${PARLEY_SANITIZE})
endif()
if(PARLEY_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PARLEY_FUZZ needs clang (CXX=clang++)")
  endif()
  # Everything gets coverage instrumentation; only fuzz targets link libFuzzer's main.
  target_compile_options(parley_flags INTERFACE -fsanitize=fuzzer-no-link,address,undefined
                         -fno-omit-frame-pointer)
  target_link_options(parley_flags INTERFACE -fsanitize=address,undefined)
endif()
