# cohort_layer(NAME DEPS...): one CMake library per src/ folder, made of the folder's .cc files.
# A folder with no .cc yet (a layer still to come) becomes an interface library.
function(cohort_layer name)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  if(sources)
    add_library(${name} ${sources})
    target_link_libraries(${name} PUBLIC ${ARGN})
  else()
    add_library(${name} INTERFACE)
    target_link_libraries(${name} INTERFACE ${ARGN})
  endif()
endfunction()
