# embed.cmake - turn a file into a C array, so a program carries the file's
# bytes (gpuboxd serves docs/openapi.yaml, and its JSON form, from them).
#   cmake -DINPUT=docs/openapi.yaml -DOUTPUT=openapi_yaml.c -DNAME=gpubox_openapi_yaml -P embed.cmake
# defines `const unsigned char NAME[]` (NUL-terminated) and `const size_t NAME_len`.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from ${INPUT} by cmake/embed.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "const unsigned char ${NAME}[] = {\n${bytes}0x00};\n"
  "const size_t ${NAME}_len = ${size};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
