// PyTorch F.scaled_dot_product_attention(q, k, v, attn_mask=<bool (1,1,128,128)>), q/k/v (1,4,128,64) f16,
// exported by iree-turbine 3.9.0 with torch 2.13.0 (aot.export(...).save_mlir): IREE forms an
// iree_linalg_ext.attention with an i1 mask, stored one byte per element (issue 15: taken by the flash-attention kernels).
module @module {
  func.func @main(%arg0: !torch.vtensor<[1,4,128,64],f16>, %arg1: !torch.vtensor<[1,4,128,64],f16>, %arg2: !torch.vtensor<[1,4,128,64],f16>, %arg3: !torch.vtensor<[1,1,128,128],i1>) -> !torch.vtensor<[1,4,128,64],f16> attributes {torch.assume_strict_symbolic_shapes} {
    %float0.000000e00 = torch.constant.float 0.000000e+00
    %false = torch.constant.bool false
    %none = torch.constant.none
    %false_0 = torch.constant.bool false
    %0 = torch.aten.scaled_dot_product_attention %arg0, %arg1, %arg2, %arg3, %float0.000000e00, %false, %none, %false_0 : !torch.vtensor<[1,4,128,64],f16>, !torch.vtensor<[1,4,128,64],f16>, !torch.vtensor<[1,4,128,64],f16>, !torch.vtensor<[1,1,128,128],i1>, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[1,4,128,64],f16>
    return %0 : !torch.vtensor<[1,4,128,64],f16>
  }
}
