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
# Both are taken for one configure run only (not kept in the cache): a later pip install . in
# the same build-python/ folder without them gets the defaults again, not an earlier run's
# choice or a build folder that may be gone.
get_filename_component(_shardpack_source "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)  # this file's source tree
set(_cli_mode AUTO)
if(DEFINED SHARDPACK_WHEEL_CLI)
  string(TOUPPER "${SHARDPACK_WHEEL_CLI}" _cli_mode)
endif()
if(NOT _cli_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "SHARDPACK_WHEEL_CLI=${SHARDPACK_WHEEL_CLI}: AUTO, ON or OFF")
endif()
set(_cli_build_dir "${SHARDPACK_WHEEL_CLI_BUILD_DIR}")
unset(SHARDPACK_WHEEL_CLI CACHE)
unset(SHARDPACK_WHEEL_CLI_BUILD_DIR CACHE)

set(_cli_missing "")
set(_cli_dir "")
if(_cli_mode STREQUAL "OFF")
  set(_cli_missing "the wheel was built with SHARDPACK_WHEEL_CLI=OFF")
elseif(_cli_build_dir)
  get_filename_component(_cli_dir "${_cli_build_dir}" ABSOLUTE BASE_DIR "${_shardpack_source}")
  if(NOT EXISTS "${_cli_dir}/CMakeCache.txt")
    message(FATAL_ERROR "SHARDPACK_WHEEL_CLI_BUILD_DIR=${_cli_dir}: not a configured build folder (no CMakeCache.txt)")
  endif()
  load_cache("${_cli_dir}" READ_WITH_PREFIX _cli_cache_ CMAKE_HOME_DIRECTORY SHARDPACK_BUILD_TOOLS)
  get_filename_component(_cli_source "${_cli_cache_CMAKE_HOME_DIRECTORY}" REALPATH)
  get_filename_component(_this_source "${_shardpack_source}" REALPATH)
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
    COMMAND "${CMAKE_COMMAND}" -S "${_shardpack_source}" -B "${_cli_dir}" -G "${CMAKE_GENERATOR}"
            -DCMAKE_BUILD_TYPE=Release -DSHARDPACK_BUILD_TESTS=OFF -DSHARDPACK_BUILD_TOOLS=ON
            "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" "-DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}"
            "-DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}"
    RESULT_VARIABLE _cli_rc OUTPUT_VARIABLE _cli_out ERROR_VARIABLE _cli_err)
  if(NOT _cli_rc EQUAL 0)
    # The first error's text (CMake wraps it over indented lines), and pkg_check_modules' "No
    # package 'libpng16' found", which goes to stdout.
    set(_cli_why "")
    string(REGEX MATCHALL "No package '[^']*' found" _cli_pkgs "${_cli_out}")
    if(_cli_pkgs)
      list(JOIN _cli_pkgs "; " _cli_why)
      string(APPEND _cli_why ": ")
    endif()
    if(_cli_err MATCHES "CMake Error[^\n]*\n((  [^\n]*\n)+)")
      string(APPEND _cli_why "${CMAKE_MATCH_1}")
    else()
      string(APPEND _cli_why "${_cli_err}")
    endif()
    string(REGEX REPLACE "[ \t\n]+" " " _cli_why "${_cli_why}")
    string(STRIP "${_cli_why}" _cli_why)
    set(_cli_missing "the packer's dependencies were not found when the wheel was built: ${_cli_why}")
    set(_cli_dir "")
    if(_cli_mode STREQUAL "ON")
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
                  "or build the CLI with CMake (src/cli/README.md, Installing the CLI).")
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/cli-missing.txt" "${_cli_missing}\n")
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/cli-missing.txt" DESTINATION shardpack)
endif()
