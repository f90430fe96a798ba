# Compiles each public header (include/carapace/*.h, as staged for the
# installed package) on its own with COMPILER: every one must parse by
# itself, with nothing but the package's include tree and the system's,
# and without a warning (a program built with -Werror includes them).
# cmake -DCOMPILER=clang++-14 -DINCLUDE_DIR=<build>/include -DWORK_DIR=<dir> -P public_headers.cmake
file(GLOB headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/carapace/*.h")
if(NOT headers)
  message(FATAL_ERROR "no public headers under ${INCLUDE_DIR}/carapace")
endif()
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failed "")
foreach(h IN LISTS headers)
  string(MAKE_C_IDENTIFIER "${h}" name)
  set(tu "${WORK_DIR}/${name}.cc")
  file(WRITE "${tu}" "#include <${h}>\n#include <${h}>  // twice: include guards\nint main() { return 0; }\n")
  execute_process(COMMAND "${COMPILER}" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I "${INCLUDE_DIR}" "${tu}"
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(NOT rc EQUAL 0)
    message("${COMPILER}: ${h} does not compile on its own:\n${err}")
    list(APPEND failed "${h}")
  endif()
endforeach()
list(LENGTH headers n)
if(failed)
  message(FATAL_ERROR "${COMPILER}: ${failed} failed (of ${n} public headers)")
endif()
message("${COMPILER}: all ${n} public headers compile on their own")
