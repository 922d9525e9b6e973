// Hopper wgmma kernel at the NVVM level (one warpgroup, 64x64x64 f16, K-major non-swizzled, lbo 1024 sbo 128): the fixture of e2e_tests/test_wgmma_executor.py. Written by lit_tests/Inputs/gen_wgmma_probe.py as of commit 76c6beb (removed since).
module attributes {stream.affinity.default = #hal.device.affinity<@__device_0>} {
  util.global private @__device_0 = #hal.device.target<"cuda", [#hal.executable.target<"cuda", "cuda-nvptx-fb">]> : !hal.device
  hal.executable private @probe_dispatch_0 {
    hal.executable.variant public @cuda_nvptx_fb target(<"cuda", "cuda-nvptx-fb">) {
      hal.executable.export public @probe_dispatch_0_matmul_64x64x64_f16xf16xf32 ordinal(0) layout(#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>) count(%arg0: !hal.device) -> (index, index, index) {
        %x, %y, %z = iree_tensor_ext.dispatch.workgroup_count_from_slice()
        hal.return %x, %y, %z : index, index, index
      }
      builtin.module {
        func.func @probe_dispatch_0_matmul_64x64x64_f16xf16xf32() attributes {mmaflow.config = {intrinsic = "MMA_SYNC_F32_16x8x16_F16", lds_pad = 0 : i64, tile_k = 64 : i64, tile_m = 64 : i64, tile_n = 64 : i64, wave_size = 32 : i64, waves_m = 4 : i64, waves_n = 1 : i64}, mmaflow.dispatch, mmaflow.problem = {a = {binding = 0 : i64, offset = 0 : i64}, a_transposed = false, a_type = "f16", b = {binding = 1 : i64, offset = 0 : i64}, b_transposed = false, b_type = "f16", batch = 1 : i64, batched = false, c = {binding = 2 : i64, offset = 0 : i64}, c_type = "f32", dynamic = [], epilogue = [], epilogue_ops = [], k = 64 : i64, m = 64 : i64, n = 64 : i64, same_ab = false, unsigned_a = false, unsigned_b = false}, mmaflow.target = "sm_90a"} {
          %c0 = arith.constant 0 : index
          %c57_index = arith.constant 57 : index
          %c56_index = arith.constant 56 : index
          %c49_index = arith.constant 49 : index
          %c48_index = arith.constant 48 : index
          %c41_index = arith.constant 41 : index
          %c40_index = arith.constant 40 : index
          %c33_index = arith.constant 33 : index
          %c25_index = arith.constant 25 : index
          %c24_index = arith.constant 24 : index
          %c17_index = arith.constant 17 : index
          %c9_index = arith.constant 9 : index
          %c1_index = arith.constant 1 : index
          %c2_index = arith.constant 2 : index
          %c4_index = arith.constant 4 : index
          %c16_index = arith.constant 16 : index
          %c32_index = arith.constant 32 : index
          %c384_i64 = arith.constant 384 : i64
          %c256_i64 = arith.constant 256 : i64
          %c128_i64 = arith.constant 128 : i64
          %c0_i64 = arith.constant 0 : i64
          %c34363932672_i64 = arith.constant 34363932672 : i64
          %c4_i64 = arith.constant 4 : i64
          %c262143_i64 = arith.constant 262143 : i64
          %c3968_index = arith.constant 3968 : index
          %c3840_index = arith.constant 3840 : index
          %c3712_index = arith.constant 3712 : index
          %c3584_index = arith.constant 3584 : index
          %c3456_index = arith.constant 3456 : index
          %c3328_index = arith.constant 3328 : index
          %c3200_index = arith.constant 3200 : index
          %c3072_index = arith.constant 3072 : index
          %c2944_index = arith.constant 2944 : index
          %c2816_index = arith.constant 2816 : index
          %c2688_index = arith.constant 2688 : index
          %c2560_index = arith.constant 2560 : index
          %c2432_index = arith.constant 2432 : index
          %c2304_index = arith.constant 2304 : index
          %c2176_index = arith.constant 2176 : index
          %c2048_index = arith.constant 2048 : index
          %c1920_index = arith.constant 1920 : index
          %c1792_index = arith.constant 1792 : index
          %c1664_index = arith.constant 1664 : index
          %c1536_index = arith.constant 1536 : index
          %c1408_index = arith.constant 1408 : index
          %c1280_index = arith.constant 1280 : index
          %c1152_index = arith.constant 1152 : index
          %c1024_index = arith.constant 1024 : index
          %c896_index = arith.constant 896 : index
          %c768_index = arith.constant 768 : index
          %c640_index = arith.constant 640 : index
          %c384_index = arith.constant 384 : index
          %c256_index = arith.constant 256 : index
          %c128_index = arith.constant 128 : index
          %c64_index = arith.constant 64 : index
          %c512_index = arith.constant 512 : index
          %c8_index = arith.constant 8 : index
          %c0_index = arith.constant 0 : index
          %A = hal.interface.binding.subspan layout(<bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>) binding(0) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : memref<64x64xf16, #gpu.address_space<global>>
          %B = hal.interface.binding.subspan layout(<bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>) binding(1) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : memref<64x64xf16, #gpu.address_space<global>>
          %C = hal.interface.binding.subspan layout(<bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>) binding(2) alignment(64) offset(%c0) flags(Indirect) : memref<64x64xf32, #gpu.address_space<global>>
          %sa = memref.alloc() alignment = 1024 : memref<4096xf16, #gpu.address_space<workgroup>>
          %sb = memref.alloc() alignment = 1024 : memref<4096xf16, #gpu.address_space<workgroup>>
          %tid = gpu.thread_id x
          %v1 = arith.addi %tid, %c0_index : index
          %v2 = arith.divui %v1, %c8_index : index
          %v3 = arith.remui %v1, %c8_index : index
          %v4 = arith.muli %v3, %c8_index : index
          %v5 = vector.load %A[%v2, %v4] : memref<64x64xf16, #gpu.address_space<global>>, vector<8xf16>
          %v6 = arith.divui %v4, %c8_index : index
          %v7 = arith.remui %v4, %c8_index : index
          %v8 = arith.divui %v2, %c8_index : index
          %v9 = arith.remui %v2, %c8_index : index
          %v10 = arith.muli %v6, %c512_index : index
          %v11 = arith.muli %v8, %c64_index : index
          %v12 = arith.muli %v9, %c8_index : index
          %v13 = arith.addi %v10, %v11 : index
          %v14 = arith.addi %v13, %v12 : index
          %v15 = arith.addi %v14, %v7 : index
          vector.store %v5, %sa[%v15] : memref<4096xf16, #gpu.address_space<workgroup>>, vector<8xf16>
          %v16 = arith.addi %tid, %c128_index : index
          %v17 = arith.divui %v16, %c8_index : index
          %v18 = arith.remui %v16, %c8_index : index
          %v19 = arith.muli %v18, %c8_index : index
          %v20 = vector.load %A[%v17, %v19] : memref<64x64xf16, #gpu.address_space<global>>, vector<8xf16>
          %v21 = arith.divui %v19, %c8_index : index
          %v22 = arith.remui %v19, %c8_index : index
          %v23 = arith.divui %v17, %c8_index : index
          %v24 = arith.remui %v17, %c8_index : index
          %v25 = arith.muli %v21, %c512_index : index
          %v26 = arith.muli %v23, %c64_index : index
          %v27 = arith.muli %v24, %c8_index : index
          %v28 = arith.addi %v25, %v26 : index
          %v29 = arith.addi %v28, %v27 : index
          %v30 = arith.addi %v29, %v22 : index
          vector.store %v20, %sa[%v30] : memref<4096xf16, #gpu.address_space<workgroup>>, vector<8xf16>
          %v31 = arith.addi %tid, %c256_index : index
          %v32 = arith.divui %v31, %c8_index : index
          %v33 = arith.remui %v31, %c8_index : index
          %v34 = arith.muli %v33, %c8_index : index
          %v35 = vector.load %A[%v32, %v34] : memref<64x64xf16, #gpu.address_space<global>>, vector<8xf16>
          %v36 = arith.divui %v34, %c8_index : index
          %v37 = arith.remui %v34, %c8_index : index
          %v38 = arith.divui %v32, %c8_index : index
          %v39 = arith.remui %v32, %c8_index : index
          %v40 = arith.muli %v36, %c512_index : index
          %v41 = arith.muli %v38, %c64_index : index
          %v42 = arith.muli %v39, %c8_index : index
          %v43 = arith.addi %v40, %v41 : index
          %v44 = arith.addi %v43, %v42 : index
          %v45 = arith.addi %v44, %v37 : index
          vector.store %v35, %sa[%v45] : memref<4096xf16, #gpu.address_space<workgroup>>, vector<8xf16>
          %v46 = arith.addi %tid, %c384_index : index
          %v47 = arith.divui %v46, %c8_index : index
          %v48 = arith.remui %v46, %c8_index : index
          %v49 = arith.muli %v48, %c8_index : index
          %v50 = vector.load %A[%v47, %v49] : memref<64x64xf16, #gpu.address_space<global>>, vector<8xf16>
          %v51 = arith.divui %v49, %c8_index : index
          %v52 = arith.remui %v49, %c8_index : index
          %v53 = arith.divui %v47, %c8_index : index
          %v54 = arith.remui %v47, %c8_index : index
          %v55 = arith.muli %v51, %c512_index : index
          %v56 = arith.muli %v53, %c64_index : index
          %v57 = arith.muli %v54, %c8_index : index
          %v58 = arith.addi %v55, %v56 : index
          %v59 = arith.addi %v58, %v57 : index
          %v60 = arith.addi %v59, %v52 : index
          vector.store %v50, %sa[%v60] : memref<4096xf16, #gpu.address_space<workgroup>>, vector<8xf16>
          %v61 = arith.addi %tid, %c0_index : index
          %v62 = arith.divui %v61, %c64_index : index
          %v63 = arith.remui %v61, %c64_index : index
          %v64 = memref.load %B[%v62, %v63] : memref<64x64xf16, #gpu.address_space<global>>
          %v65 = arith.divui %v62, %c8_index : index
          %v66 = arith.remui %v62, %c8_index : index
          %v67 = arith.divui %v63, %c8_index : index
          %v68 = arith.remui %v63, %c8_index : index
          %v69 = arith.muli %v65, %c512_index : index
          %v70 = arith.muli %v67, %c64_index : index
          %v71 = arith.muli %v68, %c8_index : index
          %v72 = arith.addi %v69, %v70 : index
          %v73 = arith.addi %v72, %v71 : index
          %v74 = arith.addi %v73, %v66 : index
          memref.store %v64, %sb[%v74] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v75 = arith.addi %tid, %c128_index : index
          %v76 = arith.divui %v75, %c64_index : index
          %v77 = arith.remui %v75, %c64_index : index
          %v78 = memref.load %B[%v76, %v77] : memref<64x64xf16, #gpu.address_space<global>>
          %v79 = arith.divui %v76, %c8_index : index
          %v80 = arith.remui %v76, %c8_index : index
          %v81 = arith.divui %v77, %c8_index : index
          %v82 = arith.remui %v77, %c8_index : index
          %v83 = arith.muli %v79, %c512_index : index
          %v84 = arith.muli %v81, %c64_index : index
          %v85 = arith.muli %v82, %c8_index : index
          %v86 = arith.addi %v83, %v84 : index
          %v87 = arith.addi %v86, %v85 : index
          %v88 = arith.addi %v87, %v80 : index
          memref.store %v78, %sb[%v88] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v89 = arith.addi %tid, %c256_index : index
          %v90 = arith.divui %v89, %c64_index : index
          %v91 = arith.remui %v89, %c64_index : index
          %v92 = memref.load %B[%v90, %v91] : memref<64x64xf16, #gpu.address_space<global>>
          %v93 = arith.divui %v90, %c8_index : index
          %v94 = arith.remui %v90, %c8_index : index
          %v95 = arith.divui %v91, %c8_index : index
          %v96 = arith.remui %v91, %c8_index : index
          %v97 = arith.muli %v93, %c512_index : index
          %v98 = arith.muli %v95, %c64_index : index
          %v99 = arith.muli %v96, %c8_index : index
          %v100 = arith.addi %v97, %v98 : index
          %v101 = arith.addi %v100, %v99 : index
          %v102 = arith.addi %v101, %v94 : index
          memref.store %v92, %sb[%v102] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v103 = arith.addi %tid, %c384_index : index
          %v104 = arith.divui %v103, %c64_index : index
          %v105 = arith.remui %v103, %c64_index : index
          %v106 = memref.load %B[%v104, %v105] : memref<64x64xf16, #gpu.address_space<global>>
          %v107 = arith.divui %v104, %c8_index : index
          %v108 = arith.remui %v104, %c8_index : index
          %v109 = arith.divui %v105, %c8_index : index
          %v110 = arith.remui %v105, %c8_index : index
          %v111 = arith.muli %v107, %c512_index : index
          %v112 = arith.muli %v109, %c64_index : index
          %v113 = arith.muli %v110, %c8_index : index
          %v114 = arith.addi %v111, %v112 : index
          %v115 = arith.addi %v114, %v113 : index
          %v116 = arith.addi %v115, %v108 : index
          memref.store %v106, %sb[%v116] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v117 = arith.addi %tid, %c512_index : index
          %v118 = arith.divui %v117, %c64_index : index
          %v119 = arith.remui %v117, %c64_index : index
          %v120 = memref.load %B[%v118, %v119] : memref<64x64xf16, #gpu.address_space<global>>
          %v121 = arith.divui %v118, %c8_index : index
          %v122 = arith.remui %v118, %c8_index : index
          %v123 = arith.divui %v119, %c8_index : index
          %v124 = arith.remui %v119, %c8_index : index
          %v125 = arith.muli %v121, %c512_index : index
          %v126 = arith.muli %v123, %c64_index : index
          %v127 = arith.muli %v124, %c8_index : index
          %v128 = arith.addi %v125, %v126 : index
          %v129 = arith.addi %v128, %v127 : index
          %v130 = arith.addi %v129, %v122 : index
          memref.store %v120, %sb[%v130] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v131 = arith.addi %tid, %c640_index : index
          %v132 = arith.divui %v131, %c64_index : index
          %v133 = arith.remui %v131, %c64_index : index
          %v134 = memref.load %B[%v132, %v133] : memref<64x64xf16, #gpu.address_space<global>>
          %v135 = arith.divui %v132, %c8_index : index
          %v136 = arith.remui %v132, %c8_index : index
          %v137 = arith.divui %v133, %c8_index : index
          %v138 = arith.remui %v133, %c8_index : index
          %v139 = arith.muli %v135, %c512_index : index
          %v140 = arith.muli %v137, %c64_index : index
          %v141 = arith.muli %v138, %c8_index : index
          %v142 = arith.addi %v139, %v140 : index
          %v143 = arith.addi %v142, %v141 : index
          %v144 = arith.addi %v143, %v136 : index
          memref.store %v134, %sb[%v144] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v145 = arith.addi %tid, %c768_index : index
          %v146 = arith.divui %v145, %c64_index : index
          %v147 = arith.remui %v145, %c64_index : index
          %v148 = memref.load %B[%v146, %v147] : memref<64x64xf16, #gpu.address_space<global>>
          %v149 = arith.divui %v146, %c8_index : index
          %v150 = arith.remui %v146, %c8_index : index
          %v151 = arith.divui %v147, %c8_index : index
          %v152 = arith.remui %v147, %c8_index : index
          %v153 = arith.muli %v149, %c512_index : index
          %v154 = arith.muli %v151, %c64_index : index
          %v155 = arith.muli %v152, %c8_index : index
          %v156 = arith.addi %v153, %v154 : index
          %v157 = arith.addi %v156, %v155 : index
          %v158 = arith.addi %v157, %v150 : index
          memref.store %v148, %sb[%v158] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v159 = arith.addi %tid, %c896_index : index
          %v160 = arith.divui %v159, %c64_index : index
          %v161 = arith.remui %v159, %c64_index : index
          %v162 = memref.load %B[%v160, %v161] : memref<64x64xf16, #gpu.address_space<global>>
          %v163 = arith.divui %v160, %c8_index : index
          %v164 = arith.remui %v160, %c8_index : index
          %v165 = arith.divui %v161, %c8_index : index
          %v166 = arith.remui %v161, %c8_index : index
          %v167 = arith.muli %v163, %c512_index : index
          %v168 = arith.muli %v165, %c64_index : index
          %v169 = arith.muli %v166, %c8_index : index
          %v170 = arith.addi %v167, %v168 : index
          %v171 = arith.addi %v170, %v169 : index
          %v172 = arith.addi %v171, %v164 : index
          memref.store %v162, %sb[%v172] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v173 = arith.addi %tid, %c1024_index : index
          %v174 = arith.divui %v173, %c64_index : index
          %v175 = arith.remui %v173, %c64_index : index
          %v176 = memref.load %B[%v174, %v175] : memref<64x64xf16, #gpu.address_space<global>>
          %v177 = arith.divui %v174, %c8_index : index
          %v178 = arith.remui %v174, %c8_index : index
          %v179 = arith.divui %v175, %c8_index : index
          %v180 = arith.remui %v175, %c8_index : index
          %v181 = arith.muli %v177, %c512_index : index
          %v182 = arith.muli %v179, %c64_index : index
          %v183 = arith.muli %v180, %c8_index : index
          %v184 = arith.addi %v181, %v182 : index
          %v185 = arith.addi %v184, %v183 : index
          %v186 = arith.addi %v185, %v178 : index
          memref.store %v176, %sb[%v186] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v187 = arith.addi %tid, %c1152_index : index
          %v188 = arith.divui %v187, %c64_index : index
          %v189 = arith.remui %v187, %c64_index : index
          %v190 = memref.load %B[%v188, %v189] : memref<64x64xf16, #gpu.address_space<global>>
          %v191 = arith.divui %v188, %c8_index : index
          %v192 = arith.remui %v188, %c8_index : index
          %v193 = arith.divui %v189, %c8_index : index
          %v194 = arith.remui %v189, %c8_index : index
          %v195 = arith.muli %v191, %c512_index : index
          %v196 = arith.muli %v193, %c64_index : index
          %v197 = arith.muli %v194, %c8_index : index
          %v198 = arith.addi %v195, %v196 : index
          %v199 = arith.addi %v198, %v197 : index
          %v200 = arith.addi %v199, %v192 : index
          memref.store %v190, %sb[%v200] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v201 = arith.addi %tid, %c1280_index : index
          %v202 = arith.divui %v201, %c64_index : index
          %v203 = arith.remui %v201, %c64_index : index
          %v204 = memref.load %B[%v202, %v203] : memref<64x64xf16, #gpu.address_space<global>>
          %v205 = arith.divui %v202, %c8_index : index
          %v206 = arith.remui %v202, %c8_index : index
          %v207 = arith.divui %v203, %c8_index : index
          %v208 = arith.remui %v203, %c8_index : index
          %v209 = arith.muli %v205, %c512_index : index
          %v210 = arith.muli %v207, %c64_index : index
          %v211 = arith.muli %v208, %c8_index : index
          %v212 = arith.addi %v209, %v210 : index
          %v213 = arith.addi %v212, %v211 : index
          %v214 = arith.addi %v213, %v206 : index
          memref.store %v204, %sb[%v214] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v215 = arith.addi %tid, %c1408_index : index
          %v216 = arith.divui %v215, %c64_index : index
          %v217 = arith.remui %v215, %c64_index : index
          %v218 = memref.load %B[%v216, %v217] : memref<64x64xf16, #gpu.address_space<global>>
          %v219 = arith.divui %v216, %c8_index : index
          %v220 = arith.remui %v216, %c8_index : index
          %v221 = arith.divui %v217, %c8_index : index
          %v222 = arith.remui %v217, %c8_index : index
          %v223 = arith.muli %v219, %c512_index : index
          %v224 = arith.muli %v221, %c64_index : index
          %v225 = arith.muli %v222, %c8_index : index
          %v226 = arith.addi %v223, %v224 : index
          %v227 = arith.addi %v226, %v225 : index
          %v228 = arith.addi %v227, %v220 : index
          memref.store %v218, %sb[%v228] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v229 = arith.addi %tid, %c1536_index : index
          %v230 = arith.divui %v229, %c64_index : index
          %v231 = arith.remui %v229, %c64_index : index
          %v232 = memref.load %B[%v230, %v231] : memref<64x64xf16, #gpu.address_space<global>>
          %v233 = arith.divui %v230, %c8_index : index
          %v234 = arith.remui %v230, %c8_index : index
          %v235 = arith.divui %v231, %c8_index : index
          %v236 = arith.remui %v231, %c8_index : index
          %v237 = arith.muli %v233, %c512_index : index
          %v238 = arith.muli %v235, %c64_index : index
          %v239 = arith.muli %v236, %c8_index : index
          %v240 = arith.addi %v237, %v238 : index
          %v241 = arith.addi %v240, %v239 : index
          %v242 = arith.addi %v241, %v234 : index
          memref.store %v232, %sb[%v242] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v243 = arith.addi %tid, %c1664_index : index
          %v244 = arith.divui %v243, %c64_index : index
          %v245 = arith.remui %v243, %c64_index : index
          %v246 = memref.load %B[%v244, %v245] : memref<64x64xf16, #gpu.address_space<global>>
          %v247 = arith.divui %v244, %c8_index : index
          %v248 = arith.remui %v244, %c8_index : index
          %v249 = arith.divui %v245, %c8_index : index
          %v250 = arith.remui %v245, %c8_index : index
          %v251 = arith.muli %v247, %c512_index : index
          %v252 = arith.muli %v249, %c64_index : index
          %v253 = arith.muli %v250, %c8_index : index
          %v254 = arith.addi %v251, %v252 : index
          %v255 = arith.addi %v254, %v253 : index
          %v256 = arith.addi %v255, %v248 : index
          memref.store %v246, %sb[%v256] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v257 = arith.addi %tid, %c1792_index : index
          %v258 = arith.divui %v257, %c64_index : index
          %v259 = arith.remui %v257, %c64_index : index
          %v260 = memref.load %B[%v258, %v259] : memref<64x64xf16, #gpu.address_space<global>>
          %v261 = arith.divui %v258, %c8_index : index
          %v262 = arith.remui %v258, %c8_index : index
          %v263 = arith.divui %v259, %c8_index : index
          %v264 = arith.remui %v259, %c8_index : index
          %v265 = arith.muli %v261, %c512_index : index
          %v266 = arith.muli %v263, %c64_index : index
          %v267 = arith.muli %v264, %c8_index : index
          %v268 = arith.addi %v265, %v266 : index
          %v269 = arith.addi %v268, %v267 : index
          %v270 = arith.addi %v269, %v262 : index
          memref.store %v260, %sb[%v270] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v271 = arith.addi %tid, %c1920_index : index
          %v272 = arith.divui %v271, %c64_index : index
          %v273 = arith.remui %v271, %c64_index : index
          %v274 = memref.load %B[%v272, %v273] : memref<64x64xf16, #gpu.address_space<global>>
          %v275 = arith.divui %v272, %c8_index : index
          %v276 = arith.remui %v272, %c8_index : index
          %v277 = arith.divui %v273, %c8_index : index
          %v278 = arith.remui %v273, %c8_index : index
          %v279 = arith.muli %v275, %c512_index : index
          %v280 = arith.muli %v277, %c64_index : index
          %v281 = arith.muli %v278, %c8_index : index
          %v282 = arith.addi %v279, %v280 : index
          %v283 = arith.addi %v282, %v281 : index
          %v284 = arith.addi %v283, %v276 : index
          memref.store %v274, %sb[%v284] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v285 = arith.addi %tid, %c2048_index : index
          %v286 = arith.divui %v285, %c64_index : index
          %v287 = arith.remui %v285, %c64_index : index
          %v288 = memref.load %B[%v286, %v287] : memref<64x64xf16, #gpu.address_space<global>>
          %v289 = arith.divui %v286, %c8_index : index
          %v290 = arith.remui %v286, %c8_index : index
          %v291 = arith.divui %v287, %c8_index : index
          %v292 = arith.remui %v287, %c8_index : index
          %v293 = arith.muli %v289, %c512_index : index
          %v294 = arith.muli %v291, %c64_index : index
          %v295 = arith.muli %v292, %c8_index : index
          %v296 = arith.addi %v293, %v294 : index
          %v297 = arith.addi %v296, %v295 : index
          %v298 = arith.addi %v297, %v290 : index
          memref.store %v288, %sb[%v298] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v299 = arith.addi %tid, %c2176_index : index
          %v300 = arith.divui %v299, %c64_index : index
          %v301 = arith.remui %v299, %c64_index : index
          %v302 = memref.load %B[%v300, %v301] : memref<64x64xf16, #gpu.address_space<global>>
          %v303 = arith.divui %v300, %c8_index : index
          %v304 = arith.remui %v300, %c8_index : index
          %v305 = arith.divui %v301, %c8_index : index
          %v306 = arith.remui %v301, %c8_index : index
          %v307 = arith.muli %v303, %c512_index : index
          %v308 = arith.muli %v305, %c64_index : index
          %v309 = arith.muli %v306, %c8_index : index
          %v310 = arith.addi %v307, %v308 : index
          %v311 = arith.addi %v310, %v309 : index
          %v312 = arith.addi %v311, %v304 : index
          memref.store %v302, %sb[%v312] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v313 = arith.addi %tid, %c2304_index : index
          %v314 = arith.divui %v313, %c64_index : index
          %v315 = arith.remui %v313, %c64_index : index
          %v316 = memref.load %B[%v314, %v315] : memref<64x64xf16, #gpu.address_space<global>>
          %v317 = arith.divui %v314, %c8_index : index
          %v318 = arith.remui %v314, %c8_index : index
          %v319 = arith.divui %v315, %c8_index : index
          %v320 = arith.remui %v315, %c8_index : index
          %v321 = arith.muli %v317, %c512_index : index
          %v322 = arith.muli %v319, %c64_index : index
          %v323 = arith.muli %v320, %c8_index : index
          %v324 = arith.addi %v321, %v322 : index
          %v325 = arith.addi %v324, %v323 : index
          %v326 = arith.addi %v325, %v318 : index
          memref.store %v316, %sb[%v326] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v327 = arith.addi %tid, %c2432_index : index
          %v328 = arith.divui %v327, %c64_index : index
          %v329 = arith.remui %v327, %c64_index : index
          %v330 = memref.load %B[%v328, %v329] : memref<64x64xf16, #gpu.address_space<global>>
          %v331 = arith.divui %v328, %c8_index : index
          %v332 = arith.remui %v328, %c8_index : index
          %v333 = arith.divui %v329, %c8_index : index
          %v334 = arith.remui %v329, %c8_index : index
          %v335 = arith.muli %v331, %c512_index : index
          %v336 = arith.muli %v333, %c64_index : index
          %v337 = arith.muli %v334, %c8_index : index
          %v338 = arith.addi %v335, %v336 : index
          %v339 = arith.addi %v338, %v337 : index
          %v340 = arith.addi %v339, %v332 : index
          memref.store %v330, %sb[%v340] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v341 = arith.addi %tid, %c2560_index : index
          %v342 = arith.divui %v341, %c64_index : index
          %v343 = arith.remui %v341, %c64_index : index
          %v344 = memref.load %B[%v342, %v343] : memref<64x64xf16, #gpu.address_space<global>>
          %v345 = arith.divui %v342, %c8_index : index
          %v346 = arith.remui %v342, %c8_index : index
          %v347 = arith.divui %v343, %c8_index : index
          %v348 = arith.remui %v343, %c8_index : index
          %v349 = arith.muli %v345, %c512_index : index
          %v350 = arith.muli %v347, %c64_index : index
          %v351 = arith.muli %v348, %c8_index : index
          %v352 = arith.addi %v349, %v350 : index
          %v353 = arith.addi %v352, %v351 : index
          %v354 = arith.addi %v353, %v346 : index
          memref.store %v344, %sb[%v354] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v355 = arith.addi %tid, %c2688_index : index
          %v356 = arith.divui %v355, %c64_index : index
          %v357 = arith.remui %v355, %c64_index : index
          %v358 = memref.load %B[%v356, %v357] : memref<64x64xf16, #gpu.address_space<global>>
          %v359 = arith.divui %v356, %c8_index : index
          %v360 = arith.remui %v356, %c8_index : index
          %v361 = arith.divui %v357, %c8_index : index
          %v362 = arith.remui %v357, %c8_index : index
          %v363 = arith.muli %v359, %c512_index : index
          %v364 = arith.muli %v361, %c64_index : index
          %v365 = arith.muli %v362, %c8_index : index
          %v366 = arith.addi %v363, %v364 : index
          %v367 = arith.addi %v366, %v365 : index
          %v368 = arith.addi %v367, %v360 : index
          memref.store %v358, %sb[%v368] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v369 = arith.addi %tid, %c2816_index : index
          %v370 = arith.divui %v369, %c64_index : index
          %v371 = arith.remui %v369, %c64_index : index
          %v372 = memref.load %B[%v370, %v371] : memref<64x64xf16, #gpu.address_space<global>>
          %v373 = arith.divui %v370, %c8_index : index
          %v374 = arith.remui %v370, %c8_index : index
          %v375 = arith.divui %v371, %c8_index : index
          %v376 = arith.remui %v371, %c8_index : index
          %v377 = arith.muli %v373, %c512_index : index
          %v378 = arith.muli %v375, %c64_index : index
          %v379 = arith.muli %v376, %c8_index : index
          %v380 = arith.addi %v377, %v378 : index
          %v381 = arith.addi %v380, %v379 : index
          %v382 = arith.addi %v381, %v374 : index
          memref.store %v372, %sb[%v382] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v383 = arith.addi %tid, %c2944_index : index
          %v384 = arith.divui %v383, %c64_index : index
          %v385 = arith.remui %v383, %c64_index : index
          %v386 = memref.load %B[%v384, %v385] : memref<64x64xf16, #gpu.address_space<global>>
          %v387 = arith.divui %v384, %c8_index : index
          %v388 = arith.remui %v384, %c8_index : index
          %v389 = arith.divui %v385, %c8_index : index
          %v390 = arith.remui %v385, %c8_index : index
          %v391 = arith.muli %v387, %c512_index : index
          %v392 = arith.muli %v389, %c64_index : index
          %v393 = arith.muli %v390, %c8_index : index
          %v394 = arith.addi %v391, %v392 : index
          %v395 = arith.addi %v394, %v393 : index
          %v396 = arith.addi %v395, %v388 : index
          memref.store %v386, %sb[%v396] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v397 = arith.addi %tid, %c3072_index : index
          %v398 = arith.divui %v397, %c64_index : index
          %v399 = arith.remui %v397, %c64_index : index
          %v400 = memref.load %B[%v398, %v399] : memref<64x64xf16, #gpu.address_space<global>>
          %v401 = arith.divui %v398, %c8_index : index
          %v402 = arith.remui %v398, %c8_index : index
          %v403 = arith.divui %v399, %c8_index : index
          %v404 = arith.remui %v399, %c8_index : index
          %v405 = arith.muli %v401, %c512_index : index
          %v406 = arith.muli %v403, %c64_index : index
          %v407 = arith.muli %v404, %c8_index : index
          %v408 = arith.addi %v405, %v406 : index
          %v409 = arith.addi %v408, %v407 : index
          %v410 = arith.addi %v409, %v402 : index
          memref.store %v400, %sb[%v410] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v411 = arith.addi %tid, %c3200_index : index
          %v412 = arith.divui %v411, %c64_index : index
          %v413 = arith.remui %v411, %c64_index : index
          %v414 = memref.load %B[%v412, %v413] : memref<64x64xf16, #gpu.address_space<global>>
          %v415 = arith.divui %v412, %c8_index : index
          %v416 = arith.remui %v412, %c8_index : index
          %v417 = arith.divui %v413, %c8_index : index
          %v418 = arith.remui %v413, %c8_index : index
          %v419 = arith.muli %v415, %c512_index : index
          %v420 = arith.muli %v417, %c64_index : index
          %v421 = arith.muli %v418, %c8_index : index
          %v422 = arith.addi %v419, %v420 : index
          %v423 = arith.addi %v422, %v421 : index
          %v424 = arith.addi %v423, %v416 : index
          memref.store %v414, %sb[%v424] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v425 = arith.addi %tid, %c3328_index : index
          %v426 = arith.divui %v425, %c64_index : index
          %v427 = arith.remui %v425, %c64_index : index
          %v428 = memref.load %B[%v426, %v427] : memref<64x64xf16, #gpu.address_space<global>>
          %v429 = arith.divui %v426, %c8_index : index
          %v430 = arith.remui %v426, %c8_index : index
          %v431 = arith.divui %v427, %c8_index : index
          %v432 = arith.remui %v427, %c8_index : index
          %v433 = arith.muli %v429, %c512_index : index
          %v434 = arith.muli %v431, %c64_index : index
          %v435 = arith.muli %v432, %c8_index : index
          %v436 = arith.addi %v433, %v434 : index
          %v437 = arith.addi %v436, %v435 : index
          %v438 = arith.addi %v437, %v430 : index
          memref.store %v428, %sb[%v438] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v439 = arith.addi %tid, %c3456_index : index
          %v440 = arith.divui %v439, %c64_index : index
          %v441 = arith.remui %v439, %c64_index : index
          %v442 = memref.load %B[%v440, %v441] : memref<64x64xf16, #gpu.address_space<global>>
          %v443 = arith.divui %v440, %c8_index : index
          %v444 = arith.remui %v440, %c8_index : index
          %v445 = arith.divui %v441, %c8_index : index
          %v446 = arith.remui %v441, %c8_index : index
          %v447 = arith.muli %v443, %c512_index : index
          %v448 = arith.muli %v445, %c64_index : index
          %v449 = arith.muli %v446, %c8_index : index
          %v450 = arith.addi %v447, %v448 : index
          %v451 = arith.addi %v450, %v449 : index
          %v452 = arith.addi %v451, %v444 : index
          memref.store %v442, %sb[%v452] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v453 = arith.addi %tid, %c3584_index : index
          %v454 = arith.divui %v453, %c64_index : index
          %v455 = arith.remui %v453, %c64_index : index
          %v456 = memref.load %B[%v454, %v455] : memref<64x64xf16, #gpu.address_space<global>>
          %v457 = arith.divui %v454, %c8_index : index
          %v458 = arith.remui %v454, %c8_index : index
          %v459 = arith.divui %v455, %c8_index : index
          %v460 = arith.remui %v455, %c8_index : index
          %v461 = arith.muli %v457, %c512_index : index
          %v462 = arith.muli %v459, %c64_index : index
          %v463 = arith.muli %v460, %c8_index : index
          %v464 = arith.addi %v461, %v462 : index
          %v465 = arith.addi %v464, %v463 : index
          %v466 = arith.addi %v465, %v458 : index
          memref.store %v456, %sb[%v466] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v467 = arith.addi %tid, %c3712_index : index
          %v468 = arith.divui %v467, %c64_index : index
          %v469 = arith.remui %v467, %c64_index : index
          %v470 = memref.load %B[%v468, %v469] : memref<64x64xf16, #gpu.address_space<global>>
          %v471 = arith.divui %v468, %c8_index : index
          %v472 = arith.remui %v468, %c8_index : index
          %v473 = arith.divui %v469, %c8_index : index
          %v474 = arith.remui %v469, %c8_index : index
          %v475 = arith.muli %v471, %c512_index : index
          %v476 = arith.muli %v473, %c64_index : index
          %v477 = arith.muli %v474, %c8_index : index
          %v478 = arith.addi %v475, %v476 : index
          %v479 = arith.addi %v478, %v477 : index
          %v480 = arith.addi %v479, %v472 : index
          memref.store %v470, %sb[%v480] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v481 = arith.addi %tid, %c3840_index : index
          %v482 = arith.divui %v481, %c64_index : index
          %v483 = arith.remui %v481, %c64_index : index
          %v484 = memref.load %B[%v482, %v483] : memref<64x64xf16, #gpu.address_space<global>>
          %v485 = arith.divui %v482, %c8_index : index
          %v486 = arith.remui %v482, %c8_index : index
          %v487 = arith.divui %v483, %c8_index : index
          %v488 = arith.remui %v483, %c8_index : index
          %v489 = arith.muli %v485, %c512_index : index
          %v490 = arith.muli %v487, %c64_index : index
          %v491 = arith.muli %v488, %c8_index : index
          %v492 = arith.addi %v489, %v490 : index
          %v493 = arith.addi %v492, %v491 : index
          %v494 = arith.addi %v493, %v486 : index
          memref.store %v484, %sb[%v494] : memref<4096xf16, #gpu.address_space<workgroup>>
          %v495 = arith.addi %tid, %c3968_index : index
          %v496 = arith.divui %v495, %c64_index : index
          %v497 = arith.remui %v495, %c64_index : index
          %v498 = memref.load %B[%v496, %v497] : memref<64x64xf16, #gpu.address_space<global>>
          %v499 = arith.divui %v496, %c8_index : index
          %v500 = arith.remui %v496, %c8_index : index
          %v501 = arith.divui %v497, %c8_index : index
          %v502 = arith.remui %v497, %c8_index : index
          %v503 = arith.muli %v499, %c512_index : index
          %v504 = arith.muli %v501, %c64_index : index
          %v505 = arith.muli %v502, %c8_index : index
          %v506 = arith.addi %v503, %v504 : index
          %v507 = arith.addi %v506, %v505 : index
          %v508 = arith.addi %v507, %v500 : index
          memref.store %v498, %sb[%v508] : memref<4096xf16, #gpu.address_space<workgroup>>
          "nvvm.fence.proxy"() {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>} : () -> ()
          gpu.barrier
          %v509 = memref.extract_aligned_pointer_as_index %sa : memref<4096xf16, #gpu.address_space<workgroup>> -> index
          %v510 = arith.index_cast %v509 : index to i64
          %v511 = arith.andi %v510, %c262143_i64 : i64
          %v512 = arith.shrui %v511, %c4_i64 : i64
          %v513 = arith.ori %v512, %c34363932672_i64 : i64
          %v514 = memref.extract_aligned_pointer_as_index %sb : memref<4096xf16, #gpu.address_space<workgroup>> -> index
          %v515 = arith.index_cast %v514 : index to i64
          %v516 = arith.andi %v515, %c262143_i64 : i64
          %v517 = arith.shrui %v516, %c4_i64 : i64
          %v518 = arith.ori %v517, %c34363932672_i64 : i64
          %v519 = llvm.mlir.zero : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          nvvm.wgmma.fence.aligned
          %v520 = arith.addi %v513, %c0_i64 : i64
          %v521 = arith.addi %v518, %c0_i64 : i64
          %v522 = nvvm.wgmma.mma_async %v520, %v521, %v519, #nvvm.shape<m = 64, n = 64, k = 16>, D [<f32>, #nvvm.wgmma_scale_out<one>], A [<f16>, #nvvm.wgmma_scale_in<one>, <row>], B [<f16>, #nvvm.wgmma_scale_in<one>, <col>] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v523 = arith.addi %v513, %c128_i64 : i64
          %v524 = arith.addi %v518, %c128_i64 : i64
          %v525 = nvvm.wgmma.mma_async %v523, %v524, %v522, #nvvm.shape<m = 64, n = 64, k = 16>, D [<f32>, #nvvm.wgmma_scale_out<one>], A [<f16>, #nvvm.wgmma_scale_in<one>, <row>], B [<f16>, #nvvm.wgmma_scale_in<one>, <col>] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v526 = arith.addi %v513, %c256_i64 : i64
          %v527 = arith.addi %v518, %c256_i64 : i64
          %v528 = nvvm.wgmma.mma_async %v526, %v527, %v525, #nvvm.shape<m = 64, n = 64, k = 16>, D [<f32>, #nvvm.wgmma_scale_out<one>], A [<f16>, #nvvm.wgmma_scale_in<one>, <row>], B [<f16>, #nvvm.wgmma_scale_in<one>, <col>] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v529 = arith.addi %v513, %c384_i64 : i64
          %v530 = arith.addi %v518, %c384_i64 : i64
          %v531 = nvvm.wgmma.mma_async %v529, %v530, %v528, #nvvm.shape<m = 64, n = 64, k = 16>, D [<f32>, #nvvm.wgmma_scale_out<one>], A [<f16>, #nvvm.wgmma_scale_in<one>, <row>], B [<f16>, #nvvm.wgmma_scale_in<one>, <col>] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          nvvm.wgmma.commit.group.sync.aligned
          nvvm.wgmma.wait.group.sync.aligned 0
          %v532 = arith.divui %tid, %c32_index : index
          %v533 = arith.remui %tid, %c32_index : index
          %v534 = arith.muli %v532, %c16_index : index
          %v535 = arith.divui %v533, %c4_index : index
          %v536 = arith.addi %v534, %v535 : index
          %v537 = arith.remui %v533, %c4_index : index
          %v538 = arith.muli %v537, %c2_index : index
          %v539 = llvm.extractvalue %v531[0] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v540 = arith.addi %v536, %c0_index : index
          %v541 = arith.addi %v538, %c0_index : index
          memref.store %v539, %C[%v540, %v541] : memref<64x64xf32, #gpu.address_space<global>>
          %v542 = llvm.extractvalue %v531[1] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v543 = arith.addi %v536, %c0_index : index
          %v544 = arith.addi %v538, %c1_index : index
          memref.store %v542, %C[%v543, %v544] : memref<64x64xf32, #gpu.address_space<global>>
          %v545 = llvm.extractvalue %v531[2] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v546 = arith.addi %v536, %c8_index : index
          %v547 = arith.addi %v538, %c0_index : index
          memref.store %v545, %C[%v546, %v547] : memref<64x64xf32, #gpu.address_space<global>>
          %v548 = llvm.extractvalue %v531[3] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v549 = arith.addi %v536, %c8_index : index
          %v550 = arith.addi %v538, %c1_index : index
          memref.store %v548, %C[%v549, %v550] : memref<64x64xf32, #gpu.address_space<global>>
          %v551 = llvm.extractvalue %v531[4] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v552 = arith.addi %v536, %c0_index : index
          %v553 = arith.addi %v538, %c8_index : index
          memref.store %v551, %C[%v552, %v553] : memref<64x64xf32, #gpu.address_space<global>>
          %v554 = llvm.extractvalue %v531[5] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v555 = arith.addi %v536, %c0_index : index
          %v556 = arith.addi %v538, %c9_index : index
          memref.store %v554, %C[%v555, %v556] : memref<64x64xf32, #gpu.address_space<global>>
          %v557 = llvm.extractvalue %v531[6] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v558 = arith.addi %v536, %c8_index : index
          %v559 = arith.addi %v538, %c8_index : index
          memref.store %v557, %C[%v558, %v559] : memref<64x64xf32, #gpu.address_space<global>>
          %v560 = llvm.extractvalue %v531[7] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v561 = arith.addi %v536, %c8_index : index
          %v562 = arith.addi %v538, %c9_index : index
          memref.store %v560, %C[%v561, %v562] : memref<64x64xf32, #gpu.address_space<global>>
          %v563 = llvm.extractvalue %v531[8] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v564 = arith.addi %v536, %c0_index : index
          %v565 = arith.addi %v538, %c16_index : index
          memref.store %v563, %C[%v564, %v565] : memref<64x64xf32, #gpu.address_space<global>>
          %v566 = llvm.extractvalue %v531[9] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v567 = arith.addi %v536, %c0_index : index
          %v568 = arith.addi %v538, %c17_index : index
          memref.store %v566, %C[%v567, %v568] : memref<64x64xf32, #gpu.address_space<global>>
          %v569 = llvm.extractvalue %v531[10] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v570 = arith.addi %v536, %c8_index : index
          %v571 = arith.addi %v538, %c16_index : index
          memref.store %v569, %C[%v570, %v571] : memref<64x64xf32, #gpu.address_space<global>>
          %v572 = llvm.extractvalue %v531[11] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v573 = arith.addi %v536, %c8_index : index
          %v574 = arith.addi %v538, %c17_index : index
          memref.store %v572, %C[%v573, %v574] : memref<64x64xf32, #gpu.address_space<global>>
          %v575 = llvm.extractvalue %v531[12] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v576 = arith.addi %v536, %c0_index : index
          %v577 = arith.addi %v538, %c24_index : index
          memref.store %v575, %C[%v576, %v577] : memref<64x64xf32, #gpu.address_space<global>>
          %v578 = llvm.extractvalue %v531[13] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v579 = arith.addi %v536, %c0_index : index
          %v580 = arith.addi %v538, %c25_index : index
          memref.store %v578, %C[%v579, %v580] : memref<64x64xf32, #gpu.address_space<global>>
          %v581 = llvm.extractvalue %v531[14] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v582 = arith.addi %v536, %c8_index : index
          %v583 = arith.addi %v538, %c24_index : index
          memref.store %v581, %C[%v582, %v583] : memref<64x64xf32, #gpu.address_space<global>>
          %v584 = llvm.extractvalue %v531[15] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v585 = arith.addi %v536, %c8_index : index
          %v586 = arith.addi %v538, %c25_index : index
          memref.store %v584, %C[%v585, %v586] : memref<64x64xf32, #gpu.address_space<global>>
          %v587 = llvm.extractvalue %v531[16] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v588 = arith.addi %v536, %c0_index : index
          %v589 = arith.addi %v538, %c32_index : index
          memref.store %v587, %C[%v588, %v589] : memref<64x64xf32, #gpu.address_space<global>>
          %v590 = llvm.extractvalue %v531[17] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v591 = arith.addi %v536, %c0_index : index
          %v592 = arith.addi %v538, %c33_index : index
          memref.store %v590, %C[%v591, %v592] : memref<64x64xf32, #gpu.address_space<global>>
          %v593 = llvm.extractvalue %v531[18] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v594 = arith.addi %v536, %c8_index : index
          %v595 = arith.addi %v538, %c32_index : index
          memref.store %v593, %C[%v594, %v595] : memref<64x64xf32, #gpu.address_space<global>>
          %v596 = llvm.extractvalue %v531[19] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v597 = arith.addi %v536, %c8_index : index
          %v598 = arith.addi %v538, %c33_index : index
          memref.store %v596, %C[%v597, %v598] : memref<64x64xf32, #gpu.address_space<global>>
          %v599 = llvm.extractvalue %v531[20] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v600 = arith.addi %v536, %c0_index : index
          %v601 = arith.addi %v538, %c40_index : index
          memref.store %v599, %C[%v600, %v601] : memref<64x64xf32, #gpu.address_space<global>>
          %v602 = llvm.extractvalue %v531[21] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v603 = arith.addi %v536, %c0_index : index
          %v604 = arith.addi %v538, %c41_index : index
          memref.store %v602, %C[%v603, %v604] : memref<64x64xf32, #gpu.address_space<global>>
          %v605 = llvm.extractvalue %v531[22] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v606 = arith.addi %v536, %c8_index : index
          %v607 = arith.addi %v538, %c40_index : index
          memref.store %v605, %C[%v606, %v607] : memref<64x64xf32, #gpu.address_space<global>>
          %v608 = llvm.extractvalue %v531[23] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v609 = arith.addi %v536, %c8_index : index
          %v610 = arith.addi %v538, %c41_index : index
          memref.store %v608, %C[%v609, %v610] : memref<64x64xf32, #gpu.address_space<global>>
          %v611 = llvm.extractvalue %v531[24] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v612 = arith.addi %v536, %c0_index : index
          %v613 = arith.addi %v538, %c48_index : index
          memref.store %v611, %C[%v612, %v613] : memref<64x64xf32, #gpu.address_space<global>>
          %v614 = llvm.extractvalue %v531[25] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v615 = arith.addi %v536, %c0_index : index
          %v616 = arith.addi %v538, %c49_index : index
          memref.store %v614, %C[%v615, %v616] : memref<64x64xf32, #gpu.address_space<global>>
          %v617 = llvm.extractvalue %v531[26] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v618 = arith.addi %v536, %c8_index : index
          %v619 = arith.addi %v538, %c48_index : index
          memref.store %v617, %C[%v618, %v619] : memref<64x64xf32, #gpu.address_space<global>>
          %v620 = llvm.extractvalue %v531[27] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v621 = arith.addi %v536, %c8_index : index
          %v622 = arith.addi %v538, %c49_index : index
          memref.store %v620, %C[%v621, %v622] : memref<64x64xf32, #gpu.address_space<global>>
          %v623 = llvm.extractvalue %v531[28] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v624 = arith.addi %v536, %c0_index : index
          %v625 = arith.addi %v538, %c56_index : index
          memref.store %v623, %C[%v624, %v625] : memref<64x64xf32, #gpu.address_space<global>>
          %v626 = llvm.extractvalue %v531[29] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v627 = arith.addi %v536, %c0_index : index
          %v628 = arith.addi %v538, %c57_index : index
          memref.store %v626, %C[%v627, %v628] : memref<64x64xf32, #gpu.address_space<global>>
          %v629 = llvm.extractvalue %v531[30] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v630 = arith.addi %v536, %c8_index : index
          %v631 = arith.addi %v538, %c56_index : index
          memref.store %v629, %C[%v630, %v631] : memref<64x64xf32, #gpu.address_space<global>>
          %v632 = llvm.extractvalue %v531[31] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
          %v633 = arith.addi %v536, %c8_index : index
          %v634 = arith.addi %v538, %c57_index : index
          memref.store %v632, %C[%v633, %v634] : memref<64x64xf32, #gpu.address_space<global>>
          return
        }
      }
    }
  }
  util.func public @probe(%arg0: !hal.buffer_view, %arg1: !hal.buffer_view) -> !hal.buffer_view attributes {iree.abi.stub, iree.reflection = {iree.abi.declaration = "sync func @probe(%input0: tensor<64x64xf16>, %input1: tensor<64x64xf16>) -> (%output0: tensor<64x64xf32>)"}} {
    %c0 = arith.constant 0 : index
    %c16384 = arith.constant 16384 : index
    %c8192 = arith.constant 8192 : index
    %c64 = arith.constant 64 : index
    %element_type_f16 = hal.element_type<f16> : i32
    %dense_row_major = hal.encoding_type<dense_row_major> : i32
    hal.buffer_view.assert<%arg0 : !hal.buffer_view> message("input0") shape([%c64, %c64]) type(%element_type_f16) encoding(%dense_row_major)
    %0 = stream.tensor.import on(#hal.device.affinity<@__device_0>) %arg0 : !hal.buffer_view -> tensor<64x64xf16> in !stream.resource<external>{%c8192}
    hal.buffer_view.assert<%arg1 : !hal.buffer_view> message("input1") shape([%c64, %c64]) type(%element_type_f16) encoding(%dense_row_major)
    %1 = stream.tensor.import on(#hal.device.affinity<@__device_0>) %arg1 : !hal.buffer_view -> tensor<64x64xf16> in !stream.resource<external>{%c8192}
    %result, %result_timepoint = stream.resource.alloca uninitialized on(#hal.device.affinity<@__device_0>) : !stream.resource<external>{%c16384} => !stream.timepoint
    %2 = stream.cmd.execute on(#hal.device.affinity<@__device_0>) await(%result_timepoint) => with(%0 as %arg2: !stream.resource<external>{%c8192}, %1 as %arg3: !stream.resource<external>{%c8192}, %result as %arg4: !stream.resource<external>{%c16384}) {
      stream.cmd.dispatch @probe_dispatch_0::@cuda_nvptx_fb::@probe_dispatch_0_matmul_64x64x64_f16xf16xf32 {
        ro %arg2[%c0 for %c8192] : !stream.resource<external>{%c8192},
        ro %arg3[%c0 for %c8192] : !stream.resource<external>{%c8192},
        wo %arg4[%c0 for %c16384] : !stream.resource<external>{%c16384}
      }
    } => !stream.timepoint
    %3 = stream.timepoint.await %2 => %result : !stream.resource<external>{%c16384}
    %4 = stream.tensor.export on(#hal.device.affinity<@__device_0>) %3 : tensor<64x64xf32> in !stream.resource<external>{%c16384} -> !hal.buffer_view
    util.return %4 : !hal.buffer_view
  }
}