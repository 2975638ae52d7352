# pip install . (scikit-build-core): the shardpack CLI in the wheel, where the packer's
# dependencies (TBB, spdlog, CLI11, libpng, libjpeg) are found. The binary goes into the package
# (shardpack/bin/shardpack) and the console script `shardpack` (src/python/shardpack/_cli.py)
# execs it; without the dependencies the wheel is reader-only, and that script says why.
#
# SHARDPACK_WHEEL_CLI: AUTO (default: the CLI when its dependencies are found), ON (an error
# without them) or OFF (reader-only).
# SHARDPACK_WHEEL_CLI_BUILD_DIR: a build folder of this source that already has (or can build)
# the CLI, such as build/ after scripts/build.sh: the wheel takes its `shardpack` from there
# (cmake --build DIR --target shardpack, nothing to do when it is up to date) instead of
# configuring and compiling the packer a second time. scripts/python-env.sh passes it.
set(SHARDPACK_WHEEL_CLI AUTO CACHE STRING "pip install .: the shardpack CLI in the wheel (AUTO, ON, OFF)")
set_property(CACHE SHARDPACK_WHEEL_CLI PROPERTY STRINGS AUTO ON OFF)
set(SHARDPACK_WHEEL_CLI_BUILD_DIR "" CACHE PATH "pip install .: take the CLI from this build folder of the same source")

set(_cli_missing "")
set(_cli_dir "")
if(SHARDPACK_WHEEL_CLI STREQUAL "OFF")
  set(_cli_missing "the wheel was built with SHARDPACK_WHEEL_CLI=OFF")
elseif(SHARDPACK_WHEEL_CLI_BUILD_DIR)
  get_filename_component(_cli_dir "${SHARDPACK_WHEEL_CLI_BUILD_DIR}" ABSOLUTE BASE_DIR "${PROJECT_SOURCE_DIR}")
  if(NOT EXISTS "${_cli_dir}/CMakeCache.txt")
    message(FATAL_ERROR "SHARDPACK_WHEEL_CLI_BUILD_DIR=${_cli_dir}: not a configured build folder (no CMakeCache.txt)")
  endif()
  load_cache("${_cli_dir}" READ_WITH_PREFIX _cli_cache_ CMAKE_HOME_DIRECTORY SHARDPACK_BUILD_TOOLS)
  get_filename_component(_cli_source "${_cli_cache_CMAKE_HOME_DIRECTORY}" REALPATH)
  get_filename_component(_this_source "${PROJECT_SOURCE_DIR}" REALPATH)
  if(NOT _cli_source STREQUAL _this_source OR NOT _cli_cache_SHARDPACK_BUILD_TOOLS)
    message(FATAL_ERROR "SHARDPACK_WHEEL_CLI_BUILD_DIR=${_cli_dir}: a build folder of ${_cli_source} with "
                        "SHARDPACK_BUILD_TOOLS=${_cli_cache_SHARDPACK_BUILD_TOOLS}; the wheel needs one of "
                        "${_this_source} that builds the CLI")
  endif()
else()
  # The packer's own configure run is the test for its dependencies: what it reports missing is
  # what the message and the reader-only wheel name.
  set(_cli_dir "${CMAKE_CURRENT_BINARY_DIR}/cli")
  message(STATUS "shardpack CLI for the wheel: configuring the packer in ${_cli_dir}")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${PROJECT_SOURCE_DIR}" -B "${_cli_dir}" -G "${CMAKE_GENERATOR}"
            -DCMAKE_BUILD_TYPE=Release -DSHARDPACK_BUILD_TESTS=OFF -DSHARDPACK_BUILD_TOOLS=ON
            "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" "-DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}"
            "-DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}"
    RESULT_VARIABLE _cli_rc OUTPUT_VARIABLE _cli_out ERROR_VARIABLE _cli_err)
  if(NOT _cli_rc EQUAL 0)
    string(REGEX MATCHALL "[^\n]*(Could not find|could not be found|not found|No package)[^\n]*" _cli_why "${_cli_err}")
    list(JOIN _cli_why "; " _cli_why)
    if(NOT _cli_why)
      set(_cli_why "${_cli_err}")
    endif()
    string(STRIP "${_cli_why}" _cli_why)
    set(_cli_missing "the packer's dependencies were not found when the wheel was built: ${_cli_why}")
    set(_cli_dir "")
    if(SHARDPACK_WHEEL_CLI STREQUAL "ON")
      message(FATAL_ERROR "SHARDPACK_WHEEL_CLI=ON: ${_cli_missing}")
    endif()
  endif()
endif()

if(_cli_dir)
  message(STATUS "shardpack CLI for the wheel: ${_cli_dir}/shardpack")
  # A copy without debug information goes into the wheel (50 MB with it from a RelWithDebInfo build).
  set(_cli_copy "${CMAKE_CURRENT_BINARY_DIR}/wheel-cli/shardpack")
  file(MAKE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/wheel-cli")
  set(_cli_strip_command)
  if(CMAKE_STRIP)
    set(_cli_strip_command COMMAND "${CMAKE_STRIP}" --strip-debug "${_cli_copy}")
  endif()
  add_custom_target(shardpack_wheel_cli ALL
    COMMAND "${CMAKE_COMMAND}" --build "${_cli_dir}" --target shardpack
    COMMAND "${CMAKE_COMMAND}" -E copy "${_cli_dir}/shardpack" "${_cli_copy}"
    ${_cli_strip_command}
    COMMENT "Building the shardpack CLI in ${_cli_dir}" VERBATIM USES_TERMINAL)
  install(PROGRAMS "${_cli_copy}" DESTINATION shardpack/bin)
else()
  message(WARNING "the wheel is reader-only, without the shardpack CLI: ${_cli_missing}. "
                  "Install the packer's dependencies (scripts/install-deps.sh) and pip install . again, "
                  "or build the CLI with CMake (README, Installing the CLI).")
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/cli-missing.txt" "${_cli_missing}\n")
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/cli-missing.txt" DESTINATION shardpack)
endif()
