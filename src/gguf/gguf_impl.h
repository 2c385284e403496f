/* gguf_impl.h: encoding helpers shared by the GGUF reader (gguf.c) and writer
 * (gguf_write.c). Not part of the module's interface.
 *
 * GGUF is little-endian on disk. Values are decoded byte by byte, so the code is
 * independent of host byte order and of the alignment of pointers into the file. */
#ifndef BRISK_GGUF_IMPL_H
#define BRISK_GGUF_IMPL_H

#include "gguf/gguf.h"

#define BRISK_GGUF_KEY_ALIGNMENT "general.alignment"

static inline uint16_t brisk_gguf_rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}
static inline uint32_t brisk_gguf_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t brisk_gguf_rd64(const uint8_t *p) {
    return (uint64_t)brisk_gguf_rd32(p) | (uint64_t)brisk_gguf_rd32(p + 4) << 32;
}
static inline void brisk_gguf_wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void brisk_gguf_wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void brisk_gguf_wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline bool brisk_gguf_is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

/* Encoded bytes of one element of a fixed-size type; 0 for STRING and ARRAY. */
size_t brisk_gguf_type_size(brisk_gguf_type t);

/* Validate count elements of type elem, GGUF-encoded at [data, data + nbytes), that
 * must fill that range exactly. Nested arrays may go depth_left - 1 levels deeper.
 * The message names the element ("element 3: bool value 2 is not 0 or 1"). */
brisk_status brisk_gguf_check_elems(brisk_gguf_type elem, uint64_t count, const uint8_t *data,
                                    size_t nbytes, int depth_left, brisk_error *err);

#endif
