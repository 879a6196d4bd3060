# cli-docs.cmake - write gpubox's man page and bash completion with the
# built CLI (`gpubox help --man`, `gpubox completion bash`). Both come from
# its command table (src/cli/commands.c), as its --help does, so what is
# installed always matches the program installed with it.
#
# Usage (a build step of CMakeLists.txt):
#   cmake -DPROGRAM=path/to/gpubox -DOUTPUT_DIR=dir -P cli-docs.cmake
# writes dir/gpubox.1 and dir/gpubox.bash.

# A sanitizer build's gpubox runs here too; a leak check is the tests' job
# (and some sandboxes refuse LeakSanitizer the access it needs).
set(ENV{ASAN_OPTIONS} detect_leaks=0)
file(MAKE_DIRECTORY ${OUTPUT_DIR})
foreach(doc "gpubox.1;help;--man" "gpubox.bash;completion;bash")
  list(POP_FRONT doc file)
  execute_process(COMMAND ${PROGRAM} ${doc} OUTPUT_FILE ${OUTPUT_DIR}/${file}.tmp
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} ${doc} failed (${rc}): ${err}")
  endif()
  file(RENAME ${OUTPUT_DIR}/${file}.tmp ${OUTPUT_DIR}/${file})
endforeach()
