# find_package(dafuse) for an installed dafuse: the imported target dafuse::dafuse (the headers,
# C++20, Eigen, OpenMP and Thrust). Relocatable: the prefix is found from this file's place,
# <prefix>/share/cmake/dafuse.
include("${CMAKE_CURRENT_LIST_DIR}/dafuseDependencies.cmake")
get_filename_component(_dafuse_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT EXISTS "${_dafuse_prefix}/include/dafuse/dafuse.hpp")
  message(FATAL_ERROR "dafuse: ${CMAKE_CURRENT_LIST_FILE}: expected the headers in "
    "${_dafuse_prefix}/include/dafuse (this file's folder is <prefix>/share/cmake/dafuse)")
endif()
if(NOT TARGET dafuse::dafuse)
  add_library(dafuse::dafuse INTERFACE IMPORTED)
  set_target_properties(dafuse::dafuse PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_dafuse_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_20
    INTERFACE_LINK_LIBRARIES "${dafuse_dependency_targets}")
endif()
unset(_dafuse_prefix)
