/* avx2_kernels: the x86-64 AVX2 (+FMA, F16C) kernel table.
 *
 * Activations are quantized the way ggml's CPU backend does on x86 with AVX
 * (brisk_q8_0_quantize_x86: scale 127/amax, ties to even), so this table
 * reproduces llama.cpp's activations bit for bit on the machines the golden
 * logits come from. Formats without an AVX2 kernel yet use the reference one. */
#include "kernels/kernels.h"
#include "quant/convert.h"

static const brisk_kernels avx2_table = {
    .isa = "avx2",
    .vec_dot = {
        [BRISK_Q_F32] = brisk_vec_dot_f32_ref,
        [BRISK_Q_F16] = brisk_vec_dot_f16_ref,
        [BRISK_Q_BF16] = brisk_vec_dot_bf16_ref,
        [BRISK_Q_Q4_0] = brisk_vec_dot_q4_0_ref,
        [BRISK_Q_Q4_1] = brisk_vec_dot_q4_1_ref,
        [BRISK_Q_Q5_0] = brisk_vec_dot_q5_0_ref,
        [BRISK_Q_Q5_1] = brisk_vec_dot_q5_1_ref,
        [BRISK_Q_Q8_0] = brisk_vec_dot_q8_0_ref,
        [BRISK_Q_Q2_K] = brisk_vec_dot_q2_k_ref,
        [BRISK_Q_Q3_K] = brisk_vec_dot_q3_k_ref,
        [BRISK_Q_Q4_K] = brisk_vec_dot_q4_k_ref,
        [BRISK_Q_Q5_K] = brisk_vec_dot_q5_k_ref,
        [BRISK_Q_Q6_K] = brisk_vec_dot_q6_k_ref,
    },
    .quantize_act = {
        [BRISK_Q_F32] = brisk_f32_quantize,
        [BRISK_Q_F16] = brisk_f16_quantize,
        [BRISK_Q_BF16] = brisk_bf16_quantize,
        [BRISK_Q_Q8_0] = brisk_q8_0_quantize_x86,
        [BRISK_Q_Q8_1] = brisk_q8_1_quantize_x86,
        [BRISK_Q_Q8_K] = brisk_q8_k_quantize,
    },
};

const brisk_kernels *brisk_kernels_avx2(void) { return &avx2_table; }
