# Third-party libraries (Debian packages; scripts/setup.sh installs them). Optional
# ones degrade to a stated fallback so a GPU build works on machines without them.
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)

# CPU GEMM: oneDNN when present (AMX/AVX-512 bf16 and f32), else OpenBLAS sgemm.
find_package(dnnl CONFIG QUIET)
set(PARLEY_GEMM_PROVIDER "")
if(dnnl_FOUND)
  set(PARLEY_GEMM_PROVIDER onednn)
else()
  set(BLA_VENDOR OpenBLAS)
  find_package(BLAS QUIET)
  if(BLAS_FOUND)
    set(PARLEY_GEMM_PROVIDER openblas)
    find_path(PARLEY_CBLAS_INCLUDE NAMES cblas.h PATH_SUFFIXES openblas openblas-pthread)
  else()
    message(FATAL_ERROR "Neither oneDNN (libdnnl-dev) nor OpenBLAS (libopenblas-dev) found")
  endif()
endif()
message(STATUS "parley: CPU GEMM provider ${PARLEY_GEMM_PROVIDER}")

if(PARLEY_CUDA)
  # The kernels need sm_80 or newer (mma.sync m16n8k16, cp.async, ldmatrix): unless the user
  # names architectures (-DCMAKE_CUDA_ARCHITECTURES or $CUDAARCHS), build for sm_90 (H100 /
  # H200), not for nvcc's own default (sm_52 or sm_75, which these kernels cannot target).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX MATCH "^[0-9]+" arch_number "${arch}")
    if(arch_number AND arch_number LESS 80)
      message(FATAL_ERROR "parley's CUDA kernels need sm_80 or newer; "
                          "CMAKE_CUDA_ARCHITECTURES is '${CMAKE_CUDA_ARCHITECTURES}'")
    endif()
  endforeach()
  # CMake < 3.26 knows no C++20 flag for nvcc ("requires the language dialect CUDA20").
  if(CMAKE_VERSION VERSION_LESS 3.26)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  message(STATUS "parley: CUDA backend ON (arch ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "parley: CUDA backend OFF (stubs throw 'built without CUDA')")
endif()

find_package(nlohmann_json CONFIG REQUIRED)
if(PARLEY_CLI)
  find_package(CLI11 CONFIG REQUIRED)
  # The HTTP server behind `parley serve`: Boost.Beast + Asio (headers only; libboost-dev).
  find_package(Boost 1.74 CONFIG REQUIRED COMPONENTS headers)
endif()

# Audio: FFmpeg's libraries decode every container in-process; without them only WAV
# is read (the GPU machine may lack the -dev packages). KissFFT for the log-mel STFT.
find_package(PkgConfig REQUIRED)
pkg_check_modules(FFMPEG IMPORTED_TARGET libavformat libavcodec libswresample libavutil)
if(FFMPEG_FOUND)
  message(STATUS "parley: FFmpeg ${FFMPEG_libavformat_VERSION}: every container decodes in-process")
else()
  message(STATUS "parley: FFmpeg not found: audio input is WAV only")
endif()
# Microphone capture for `parley dictate` (optional: without it, --input FILE only).
pkg_check_modules(PORTAUDIO QUIET IMPORTED_TARGET portaudio-2.0)
if(PORTAUDIO_FOUND)
  message(STATUS "parley: PortAudio ${PORTAUDIO_VERSION}: `parley dictate` captures the microphone")
else()
  message(STATUS "parley: PortAudio not found: `parley dictate` reads --input FILE only")
endif()
find_package(kissfft CONFIG REQUIRED COMPONENTS SHARED float)  # Debian ships the shared one
# Tokenizers: PCRE2 (JIT) for the pre-tokenizer regexes.
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# Tokenizers: utf8proc for the normalizers (NFC, NFKC).
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
if(PARLEY_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
