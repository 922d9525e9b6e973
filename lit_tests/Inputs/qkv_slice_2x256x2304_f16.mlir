// GPT-2's Q, K and V taken out of its fused QKV projection's 2x256x2304 result: IREE copies each
// strided 2x256x768 slice in a dispatch of its own (slow_memcpy). (lit_tests/isa/copy.test)
func.func @qkv(%qkv: tensor<2x256x2304xf16>) -> (tensor<2x256x768xf16>, tensor<2x256x768xf16>) {
  %k = tensor.extract_slice %qkv[0, 0, 768] [2, 256, 768] [1, 1, 1] : tensor<2x256x2304xf16> to tensor<2x256x768xf16>
  %v = tensor.extract_slice %qkv[0, 0, 1536] [2, 256, 768] [1, 1, 1] : tensor<2x256x2304xf16> to tensor<2x256x768xf16>
  return %k, %v : tensor<2x256x768xf16>, tensor<2x256x768xf16>
}
