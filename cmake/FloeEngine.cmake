# floe_add_engine(NAME [ARCHS arch...]
#                 [DIRECTIONS dir... TILES tile... [FWD_TILES tile...] [BWD_TILES tile...]
#                  CI_TILES tile... [SERVING | SERVING_DIRECTIONS dir...]])
#
# Adds the engine in src/engines/NAME (its *.cc and *.cu, globbed) to the floe library, its CUDA
# code compiled for its own architectures: ARCHS as far as FLOE_CUDA_ARCHS allows (an engine of
# wgmma kernels builds for 90a only, whatever else the library builds for), or FLOE_CUDA_ARCHS
# without ARCHS. With TILES, one translation unit per (direction, tile) is generated from
# src/engines/tile_kernels.cu.in into the build tree (@ENGINE@, @DIR@, @DIR_NAME@ = Fwd/Bwd,
# @TILE@, @KIND@, @BUILT@): the instantiations of a tile compile in parallel with the others.
# FWD_TILES or BWD_TILES replace TILES for a direction whose tiles differ. FLOE_KERNELS=ci builds
# CI_TILES only; the other tiles get a host-only stub that finds no kernel. SERVING: a second
# translation unit per (direction, tile), <direction>_serving_<tile> (@KIND@ = _serving: the
# engine's serving instantiations, ragged sides and paged K/V), built and stubbed like the first.
# SERVING_DIRECTIONS: the same for the named directions only (an engine whose other direction
# declines ragged and paged problems, e.g. sm90's forward). BIAS_DIRECTIONS: likewise a
# <direction>_bias_<tile> unit per tile (@KIND@ = _bias: sm90's backward with a bias), so that
# those instantiations compile beside the others rather than after them.
# FLOE_ENGINE_ARCHS_<NAME> (a cache entry, e.g. -DFLOE_ENGINE_ARCHS_sm80=80) replaces an engine's
# ARCHS: CI compiles sm80's kernels for sm_80 alone (.ci/run), the GPU machine for every arch.
function(floe_add_engine name)
  cmake_parse_arguments(E "SERVING" ""
                        "ARCHS;DIRECTIONS;TILES;FWD_TILES;BWD_TILES;CI_TILES;SERVING_DIRECTIONS;BIAS_DIRECTIONS"
                        ${ARGN})
  set(template "${PROJECT_SOURCE_DIR}/src/engines/tile_kernels.cu.in")
  set(ENGINE ${name})
  set(dir "${PROJECT_SOURCE_DIR}/src/engines/${name}")
  file(GLOB sources CONFIGURE_DEPENDS "${dir}/*.cc" "${dir}/*.cu")

  if(DEFINED FLOE_ENGINE_ARCHS_${name})
    set(E_ARCHS ${FLOE_ENGINE_ARCHS_${name}})
  endif()
  set(archs ${FLOE_CUDA_ARCHS})
  if(E_ARCHS)
    set(archs "")
    foreach(arch IN LISTS E_ARCHS)
      if(arch IN_LIST FLOE_CUDA_ARCHS)
        list(APPEND archs ${arch})
      endif()
    endforeach()
    if(NOT archs)
      message(FATAL_ERROR "engine ${name} builds for ${E_ARCHS}; FLOE_CUDA_ARCHS "
                          "(${FLOE_CUDA_ARCHS}) holds none of them")
    endif()
  endif()

  foreach(direction IN LISTS E_DIRECTIONS)
    string(SUBSTRING "${direction}" 0 1 first)
    string(SUBSTRING "${direction}" 1 -1 rest)
    string(TOUPPER "${first}" first)
    string(TOUPPER "${direction}" dir_upper)
    set(kinds dense)
    if(E_SERVING OR direction IN_LIST E_SERVING_DIRECTIONS)
      list(APPEND kinds serving)
    endif()
    if(direction IN_LIST E_BIAS_DIRECTIONS)
      list(APPEND kinds bias)
    endif()
    set(tiles ${E_TILES})
    if(E_${dir_upper}_TILES)
      set(tiles ${E_${dir_upper}_TILES})
    endif()
    foreach(tile IN LISTS tiles)
      if(FLOE_KERNELS STREQUAL "ci" AND NOT tile IN_LIST E_CI_TILES)
        set(BUILT 0)
        set(ext cc)
      else()
        set(BUILT 1)
        set(ext cu)
      endif()
      set(DIR ${direction})
      set(TILE ${tile})
      set(DIR_NAME "${first}${rest}")
      foreach(kind IN LISTS kinds)
        set(KIND "")
        if(NOT kind STREQUAL "dense")
          set(KIND _${kind})
        endif()
        set(out "${PROJECT_BINARY_DIR}/generated/engines/${name}/${direction}${KIND}_${tile}.${ext}")
        configure_file("${template}" "${out}" @ONLY)
        list(APPEND sources "${out}")
      endforeach()
    endforeach()
  endforeach()

  # A fuzz build links the regular build's CUDA objects (FLOE_CUDA_OBJECTS, root CMakeLists).
  if(FLOE_FUZZ AND FLOE_CUDA_OBJECTS)
    list(FILTER sources EXCLUDE REGEX "\\.cu$")
  endif()
  floe_cuda_archs(ARCHS ${archs} SOURCES ${sources})
  target_sources(floe PRIVATE ${sources})
  message(STATUS "floe engine ${name}: CUDA archs ${archs}")
endfunction()

# floe_cuda_archs(ARCHS arch... SOURCES file...): the CUDA files among SOURCES compile for ARCHS.
# Written as -gencode because the arch-specific 'a' targets (sm_90a: wgmma, setmaxnreg) need it
# (device/HOPPER.md). With several archs, nvcc runs their passes side by side (--threads): the
# same machine code (cuobjdump -sass of sm80's fwd_d128 identical), and a file's wall time about
# halved (sm80 fwd_d128.cu for 80;90a: 160 s against 303 s of passes in sequence, 2 cores, peak
# 2.9 GB a process): on many cores the longest file bounds the build (gpu-check.sh's
# build-slowest.txt says which). FLOE_NVCC_THREADS=OFF: one pass after the other.
option(FLOE_NVCC_THREADS "nvcc compiles a file's CUDA architectures in parallel" ON)
function(floe_cuda_archs)
  cmake_parse_arguments(A "" "" "ARCHS;SOURCES" ${ARGN})
  set(flags "")
  foreach(arch IN LISTS A_ARCHS)
    list(APPEND flags "-gencode=arch=compute_${arch},code=sm_${arch}")
  endforeach()
  list(LENGTH A_ARCHS n_archs)
  if(FLOE_NVCC_THREADS AND n_archs GREATER 1)
    list(APPEND flags "--threads=${n_archs}")
  endif()
  foreach(src IN LISTS A_SOURCES)
    if(src MATCHES "\\.cu$")
      set_source_files_properties("${src}" PROPERTIES COMPILE_OPTIONS "${flags}")
    endif()
  endforeach()
endfunction()
