# dafuse's dependencies as CMake targets, shared by CMakeLists.txt (add_subdirectory, FetchContent)
# and the installed dafuseConfig.cmake (find_package). Defines dafuse::thrust (Thrust with the
# OpenMP system as its device system: what dafuse's host backend runs on) beside Eigen3::Eigen and
# OpenMP::OpenMP_CXX, and the list of them in dafuse_dependency_targets.
include(CMakeFindDependencyMacro)
find_dependency(Eigen3 3.4 CONFIG)
find_dependency(OpenMP COMPONENTS CXX)

# Thrust: the CUDA toolkit's CCCL ($CUDA_PATH, else /usr/local/cuda), else a system install
# (libthrust-dev). Thrust's own package makes the target; without one, its headers alone do.
if(NOT TARGET dafuse::thrust)
  set(_dafuse_cuda_root "$ENV{CUDA_PATH}")
  if(NOT _dafuse_cuda_root)
    set(_dafuse_cuda_root /usr/local/cuda)
  endif()
  find_package(Thrust CONFIG QUIET
    HINTS "${_dafuse_cuda_root}/lib64/cmake/thrust" "${_dafuse_cuda_root}/lib/cmake/thrust")
  if(Thrust_FOUND)
    thrust_create_target(dafuse::thrust HOST CPP DEVICE OMP GLOBAL)
    # As system headers, so that a user's -Werror does not stop at Thrust's warnings.
    get_target_property(_dafuse_thrust_include Thrust::Thrust INTERFACE_INCLUDE_DIRECTORIES)
    set_property(TARGET dafuse::thrust APPEND PROPERTY
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${_dafuse_thrust_include})
  else()
    find_path(DAFUSE_THRUST_INCLUDE_DIR thrust/version.h
      HINTS "${_dafuse_cuda_root}/include/cccl" "${_dafuse_cuda_root}/include")
    if(NOT DAFUSE_THRUST_INCLUDE_DIR)
      message(FATAL_ERROR "dafuse: Thrust not found: install the CUDA toolkit (and set CUDA_PATH "
        "if it is not in /usr/local/cuda) or run: apt-get install libthrust-dev")
    endif()
    add_library(dafuse::thrust INTERFACE IMPORTED GLOBAL)
    set_target_properties(dafuse::thrust PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${DAFUSE_THRUST_INCLUDE_DIR}"
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${DAFUSE_THRUST_INCLUDE_DIR}"
      INTERFACE_COMPILE_DEFINITIONS "THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP"
      INTERFACE_LINK_LIBRARIES OpenMP::OpenMP_CXX)
  endif()
endif()

set(dafuse_dependency_targets Eigen3::Eigen OpenMP::OpenMP_CXX dafuse::thrust)
