/* blocks: on-disk block layouts, byte-identical to ggml's ggml-common.h.
 * Sizes are pinned with static_assert below; a layout change is a format break. */
#ifndef BRISK_QUANT_BLOCKS_H
#define BRISK_QUANT_BLOCKS_H

#include <assert.h>
#include <stdint.h>

#define BRISK_K_SCALE_SIZE 12

typedef struct { uint16_t d; uint8_t qs[16]; } brisk_block_q4_0;                 /* d: fp16 scale; 32 x 4-bit */
typedef struct { uint16_t d, m; uint8_t qs[16]; } brisk_block_q4_1;              /* d, m: fp16 scale and min */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } brisk_block_q5_0;  /* qh: 5th bits */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } brisk_block_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } brisk_block_q8_0;
typedef struct { uint16_t d, s; int8_t qs[32]; } brisk_block_q8_1;               /* s = d * sum(qs) */

typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } brisk_block_q2_k;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } brisk_block_q3_k;
typedef struct { uint16_t d, dmin; uint8_t scales[BRISK_K_SCALE_SIZE]; uint8_t qs[128]; } brisk_block_q4_k;
typedef struct { uint16_t d, dmin; uint8_t scales[BRISK_K_SCALE_SIZE]; uint8_t qh[32]; uint8_t qs[128]; } brisk_block_q5_k;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } brisk_block_q6_k;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } brisk_block_q8_k;  /* bsums: sums of 16-groups */

/* 4-bit lookup-table formats: each nibble indexes a table of 16 int8 values
 * (brisk_iq4nl_values / brisk_mxfp4_values, convert.h); element j of a
 * 32-element group is the low nibble of qs[j] (j < 16) or the high nibble of
 * qs[j - 16], as in Q4_0. */
typedef struct { uint16_t d; uint8_t qs[16]; } brisk_block_iq4_nl;              /* d: fp16 scale */
typedef struct { uint8_t e; uint8_t qs[16]; } brisk_block_mxfp4;                /* e: E8M0 scale (a power of two) */
/* 256 elements in 8 groups of 32, group j scaled by d * (ls_j - 32) with the
 * 6-bit ls_j = low nibble j of scales_l (byte j/2, nibble j%2) | bit pair j of scales_h << 4 */
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } brisk_block_iq4_xs;

static_assert(sizeof(brisk_block_q4_0) == 2 + 16, "q4_0 block");
static_assert(sizeof(brisk_block_q4_1) == 4 + 16, "q4_1 block");
static_assert(sizeof(brisk_block_q5_0) == 2 + 4 + 16, "q5_0 block");
static_assert(sizeof(brisk_block_q5_1) == 4 + 4 + 16, "q5_1 block");
static_assert(sizeof(brisk_block_q8_0) == 2 + 32, "q8_0 block");
static_assert(sizeof(brisk_block_q8_1) == 4 + 32, "q8_1 block");
static_assert(sizeof(brisk_block_q2_k) == 16 + 64 + 4, "q2_K block");
static_assert(sizeof(brisk_block_q3_k) == 32 + 64 + 12 + 2, "q3_K block");
static_assert(sizeof(brisk_block_q4_k) == 4 + 12 + 128, "q4_K block");
static_assert(sizeof(brisk_block_q5_k) == 4 + 12 + 32 + 128, "q5_K block");
static_assert(sizeof(brisk_block_q6_k) == 128 + 64 + 16 + 2, "q6_K block");
static_assert(sizeof(brisk_block_q8_k) == 4 + 256 + 32, "q8_K block");
static_assert(sizeof(brisk_block_iq4_nl) == 2 + 16, "iq4_nl block");
static_assert(sizeof(brisk_block_mxfp4) == 1 + 16, "mxfp4 block");
static_assert(sizeof(brisk_block_iq4_xs) == 2 + 2 + 4 + 128, "iq4_xs block");

#endif
