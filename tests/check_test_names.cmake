# Test names ctest can run as written. Two ways a TEST_CASE name has gone wrong before:
# - ';' in a name: catch_discover_tests splits the name at it (a CMake list separator), the
#   halves match no Catch2 case, and ctest reported the case passed without running it (eight
#   cases did);
# - a name starting with '-': Catch2 reads it as an option. `--out the CSV's folder ...` became
#   `--out FILE`: every case ran and the report went to a stray file at the repository root.
# tests/CMakeLists.txt calls shardpack_check_test_names on every tests/test_*.cpp at configure
# time; `cmake -P check_test_names.cmake` (ctest test_names_self_test) plants each fault in a
# scratch file and fails unless each is refused and a good file is not.

# Sets OUT to "" when FILE's TEST_CASE names are good, else to the reason and the lines.
function(shardpack_check_test_names file out)
  set(problems "")
  file(STRINGS "${file}" semicolon_names REGEX "TEST_CASE(_METHOD)?\\([^\"]*\"[^\"]*;")
  if(semicolon_names)
    string(APPEND problems "a TEST_CASE name holds ';', which ctest cannot run: ${semicolon_names}. ")
  endif()
  file(STRINGS "${file}" dash_names REGEX "TEST_CASE(_METHOD)?\\([^\"]*\"[ \t]*-")
  if(dash_names)
    string(APPEND problems "a TEST_CASE name starts with '-', which Catch2 reads as an option: ${dash_names}. ")
  endif()
  set(${out} "${problems}" PARENT_SCOPE)
endfunction()

if(DEFINED CMAKE_SCRIPT_MODE_FILE AND CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  set(scratch "${CMAKE_CURRENT_BINARY_DIR}/check-test-names-self-test")
  file(MAKE_DIRECTORY "${scratch}")
  set(failed 0)
  string(ASCII 59 semi)
  foreach(kind good semicolon dash dash_spaced method_dash)
    if(kind STREQUAL "good")
      set(text "TEST_CASE(\"a build - with a dash\", \"[x]\") { int a${semi} (void)a${semi} }\nTEST_CASE(\"a --out name\", \"[x]\") {}\n")
    elseif(kind STREQUAL "semicolon")
      set(text "TEST_CASE(\"fine\", \"[x]\") {}\nTEST_CASE(\"two halves${semi}one name\", \"[x]\") {}\n")
    elseif(kind STREQUAL "dash")
      set(text "TEST_CASE(\"--out the CSV's folder is refused\", \"[x]\") {}\n")
    elseif(kind STREQUAL "dash_spaced")
      set(text "TEST_CASE( \" -x\", \"[x]\") {}\n")
    else()
      set(text "TEST_CASE_METHOD(fixture, \"-q is quiet\", \"[x]\") {}\n")
    endif()
    file(WRITE "${scratch}/${kind}.cpp" "${text}")
    shardpack_check_test_names("${scratch}/${kind}.cpp" why)
    if(kind STREQUAL "good" AND NOT why STREQUAL "")
      message(SEND_ERROR "a good file was refused: ${why}")
      set(failed 1)
    elseif(NOT kind STREQUAL "good" AND why STREQUAL "")
      message(SEND_ERROR "the planted fault '${kind}' was not caught")
      set(failed 1)
    else()
      message(STATUS "${kind}: ${why}")
    endif()
  endforeach()
  file(REMOVE_RECURSE "${scratch}")
  if(failed)
    message(FATAL_ERROR "check_test_names.cmake missed a planted fault")
  endif()
endif()
