# faprobe_tile_instantiations(): the instantiations of a tensor-core attention kernel (cuda.fa2, cuda.fa3), from one
# list in the kernel's folder. Each entry is "element head_dim block_q block_k masks...", masks being the ones for
# which the plain implementation runs this tile ("none", "causal", both, or "-" for a tile reachable by name only).
# For each entry it configures, into <binary dir>/generated:
#   - GPU_TEMPLATE into <kernel>_<dtype>_hdim<d>_<block_q>x<block_k>.cu (one __global__ kernel per file, so
#     builds parallelise), appended to the variable named by GPU_SOURCES;
#   - EMULATED_TEMPLATE into <same name>_emulated.cpp, appended to EMULATED_SOURCES;
# with @INSTANCE_DTYPE@, @INSTANCE_ELEMENT@ (isa tag: Half, BFloat16, E4M3), @INSTANCE_HEAD_DIM@,
# @INSTANCE_BLOCK_Q@, @INSTANCE_BLOCK_K@ and @INSTANCE_NAME@ set; and it writes
# generated/cuda/<kernel>/<kernel>_instantiations.inc, one line per entry:
#   FAPROBE_<KERNEL>_INSTANTIATION(element, dtype, head_dim, block_q, block_k, default without mask, default causal)
# which the host side includes to dispatch and to list the tiles. GENERATED_DIR receives the include directory.
function(faprobe_tile_instantiations)
  cmake_parse_arguments(ARG "" "KERNEL;GPU_TEMPLATE;EMULATED_TEMPLATE;GPU_SOURCES;EMULATED_SOURCES;GENERATED_DIR"
                        "ENTRIES" ${ARGN})
  set(generated "${CMAKE_CURRENT_BINARY_DIR}/generated")
  string(TOUPPER "${ARG_KERNEL}" kernel_upper)
  set(list_file "kernels/cuda/${ARG_KERNEL}/CMakeLists.txt")
  set(inc_lines "")
  set(gpu_sources "")
  set(emulated_sources "")
  foreach(entry IN LISTS ARG_ENTRIES)
    string(REGEX REPLACE " +" ";" fields "${entry}")
    list(LENGTH fields field_count)
    if(field_count LESS 5)
      message(FATAL_ERROR "${list_file}: '${entry}' needs element, head_dim, block_q, block_k and masks")
    endif()
    list(GET fields 0 INSTANCE_DTYPE)
    list(GET fields 1 INSTANCE_HEAD_DIM)
    list(GET fields 2 INSTANCE_BLOCK_Q)
    list(GET fields 3 INSTANCE_BLOCK_K)
    list(SUBLIST fields 4 -1 masks)
    if(INSTANCE_DTYPE STREQUAL "fp16")
      set(INSTANCE_ELEMENT Half)
    elseif(INSTANCE_DTYPE STREQUAL "bf16")
      set(INSTANCE_ELEMENT BFloat16)
    elseif(INSTANCE_DTYPE STREQUAL "fp8_e4m3")
      set(INSTANCE_ELEMENT E4M3)
    else()
      message(FATAL_ERROR "${list_file}: unknown element '${INSTANCE_DTYPE}' (fp16, bf16, fp8_e4m3)")
    endif()
    set(default_none 0)
    set(default_causal 0)
    foreach(mask IN LISTS masks)
      if(mask STREQUAL "none")
        set(default_none 1)
      elseif(mask STREQUAL "causal")
        set(default_causal 1)
      elseif(NOT mask STREQUAL "-")
        message(FATAL_ERROR "${list_file}: '${entry}': mask '${mask}' is none, causal or -")
      endif()
    endforeach()
    set(INSTANCE_NAME "${ARG_KERNEL}_${INSTANCE_DTYPE}_hdim${INSTANCE_HEAD_DIM}_${INSTANCE_BLOCK_Q}x${INSTANCE_BLOCK_K}")
    string(APPEND inc_lines "FAPROBE_${kernel_upper}_INSTANTIATION(${INSTANCE_ELEMENT}, ${INSTANCE_DTYPE}, "
           "${INSTANCE_HEAD_DIM}, ${INSTANCE_BLOCK_Q}, ${INSTANCE_BLOCK_K}, ${default_none}, ${default_causal})\n")
    configure_file("${ARG_GPU_TEMPLATE}" "${generated}/${INSTANCE_NAME}.cu" @ONLY)
    list(APPEND gpu_sources "${generated}/${INSTANCE_NAME}.cu")
    configure_file("${ARG_EMULATED_TEMPLATE}" "${generated}/${INSTANCE_NAME}_emulated.cpp" @ONLY)
    list(APPEND emulated_sources "${generated}/${INSTANCE_NAME}_emulated.cpp")
  endforeach()
  # Written only when it changes, so that a reconfigure does not rebuild every file that includes it.
  file(CONFIGURE OUTPUT "${generated}/cuda/${ARG_KERNEL}/${ARG_KERNEL}_instantiations.inc" CONTENT
"// Generated from ${list_file}; do not edit.
// FAPROBE_${kernel_upper}_INSTANTIATION(element tag, dtype, head_dim, block_q, block_k, default without mask, default causal)
${inc_lines}")
  set(${ARG_GPU_SOURCES} "${gpu_sources}" PARENT_SCOPE)
  set(${ARG_EMULATED_SOURCES} "${emulated_sources}" PARENT_SCOPE)
  set(${ARG_GENERATED_DIR} "${generated}" PARENT_SCOPE)
endfunction()
