# shardpack_libcurl_soname(OUT): the soname ("libcurl.so.4") of the libcurl that
# pkg_check_modules(CURL ...) found, for src/remote/curl_library.cpp, which opens it with dlopen
# when remote storage is first used instead of linking it (every command's start-up would load
# libcurl and the 27 libraries it needs: issue #22). Read from the library file's dynamic
# section with objdump -p (or readelf -d); a configure error when neither can tell.
function(shardpack_libcurl_soname out)
  set(_library "")
  foreach(_candidate IN LISTS CURL_LINK_LIBRARIES)
    get_filename_component(_name "${_candidate}" NAME)
    if(_name MATCHES "^libcurl.*\\.so")
      set(_library "${_candidate}")
      break()
    endif()
  endforeach()
  if(NOT _library)
    message(FATAL_ERROR "libcurl: no shared library among what pkg-config found (${CURL_LINK_LIBRARIES}); "
                        "shardpack loads libcurl at run time (dlopen) and needs its shared library "
                        "(Debian: libcurl4-openssl-dev)")
  endif()
  get_filename_component(_resolved "${_library}" REALPATH)
  set(_soname "")
  set(_tried "")
  find_program(SHARDPACK_READELF NAMES readelf llvm-readelf)
  foreach(_tool IN ITEMS "${CMAKE_OBJDUMP}" "${SHARDPACK_READELF}")
    if(NOT _tool OR _soname)
      continue()
    endif()
    get_filename_component(_tool_name "${_tool}" NAME)
    if(_tool_name MATCHES "readelf")
      set(_args -d "${_resolved}")
    else()
      set(_args -p "${_resolved}")
    endif()
    execute_process(COMMAND "${_tool}" ${_args} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_QUIET)
    list(APPEND _tried "${_tool_name}")
    # objdump -p: "  SONAME               libcurl.so.4"; readelf -d: "(SONAME)  Library soname: [libcurl.so.4]"
    if(_rc EQUAL 0 AND _out MATCHES "SONAME[ \t]+(lib[^ \t\r\n]+)")
      set(_soname "${CMAKE_MATCH_1}")
    elseif(_rc EQUAL 0 AND _out MATCHES "Library soname: \\[(lib[^]]+)\\]")
      set(_soname "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  if(NOT _soname)
    message(FATAL_ERROR "libcurl: cannot read the soname of ${_resolved} (tried: ${_tried}; "
                        "objdump or readelf from binutils is needed)")
  endif()
  message(STATUS "libcurl: loaded at run time as ${_soname} (${_resolved})")
  set(${out} "${_soname}" PARENT_SCOPE)
endfunction()

# shardpack_load_libcurl_at_run_time(TARGET): TARGET compiles src/remote/curl_library.cpp, which
# opens libcurl when remote storage is first used: libcurl's header (types and constants) and its
# soname, never its library; dlopen's.
function(shardpack_load_libcurl_at_run_time target)
  shardpack_libcurl_soname(_soname)
  target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:PkgConfig::CURL,INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_definitions(${target} PRIVATE SHARDPACK_LIBCURL_SONAME="${_soname}")
  target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
endfunction()
