# Included by llama.cpp's top-level project (CMAKE_PROJECT_llama.cpp_INCLUDE). Once every target is defined:
# each is left out of the default build but llama-server, so only the server and what it links are compiled;
# and the server's glue (tools/, common/, vendor/: HTTP, JSON, arguments, templates) is compiled at -O1,
# the model's compute (ggml, libllama) at the build's -O3.
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _server_only "${CMAKE_SOURCE_DIR}")
function(_server_only directory)
  get_property(targets DIRECTORY "${directory}" PROPERTY BUILDSYSTEM_TARGETS)
  file(RELATIVE_PATH where "${CMAKE_SOURCE_DIR}" "${directory}")
  foreach(target IN LISTS targets)
    if(NOT target STREQUAL "llama-server")
      set_property(TARGET "${target}" PROPERTY EXCLUDE_FROM_ALL TRUE)
    endif()
    get_property(type TARGET "${target}" PROPERTY TYPE)
    if(where MATCHES "^(tools|common|vendor)(/|$)" AND NOT type STREQUAL "INTERFACE_LIBRARY"
       AND NOT type STREQUAL "UTILITY")
      set_property(TARGET "${target}" APPEND PROPERTY COMPILE_OPTIONS -O1)
    endif()
  endforeach()
  get_property(children DIRECTORY "${directory}" PROPERTY SUBDIRECTORIES)
  foreach(child IN LISTS children)
    _server_only("${child}")
  endforeach()
endfunction()
