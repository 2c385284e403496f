/* constrain_fuzz.h: what the constrained-decoding fuzz targets (fuzz_gbnf, fuzz_regex, fuzz_schema)
 * share: a vocabulary of the 256 single bytes and an end token, and the mask walk that checks every
 * mask against the brute-force definition (byte b allowed iff advancing by it leaves the parse alive;
 * the end token iff complete). */
#ifndef BRISK_CONSTRAIN_FUZZ_H
#define BRISK_CONSTRAIN_FUZZ_H

#include "fuzz_check.h"
#include "constrain/constrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The byte vocabulary, made on first use and kept for the process. */
static cst_vocab *fuzz_byte_vocab(void) {
    static cst_vocab *vocab;
    if (!vocab) {
        static uint8_t pieces[256];
        static uint32_t off[258];
        for (int i = 0; i < 256; i++) { pieces[i] = (uint8_t)i; off[i] = (uint32_t)i; }
        off[256] = off[257] = 256;
        const int32_t eos = 256;
        brisk_error e = {0};
        FUZZ_CHECK(cst_vocab_new(257, pieces, off, &eos, 1, &vocab, &e) == BRISK_OK);
    }
    return vocab;
}

/* A walk of up to 64 steps over g (freed here), each taking the allowed byte the input's own bytes
 * choose, with every mask checked against the brute force, until a mask reports that the state space
 * ran out (it must then allow only the end token). */
static void fuzz_walk_masks(cst_grammar *g, const uint8_t *data, size_t size) {
    uint32_t mask[(257 + 31) / 32];
    int32_t s = cst_start(g);
    for (int step = 0; step < 64 && s != CST_DEAD; step++) {
        if (!cst_mask(g, s, mask)) {
            /* the state-space budget ran out (a grammar whose parses multiply, e.g. left recursion that a
             * walk of a dozen bytes makes explode): by cst_mask's contract only the end tokens are allowed,
             * and the walk ends there */
            for (int t = 0; t < 256; t++) FUZZ_CHECK(!(mask[t >> 5] >> (t & 31) & 1u));
            FUZZ_CHECK(mask[256 >> 5] >> (256 & 31) & 1u);
            break;
        }
        int allowed = 0, pick = -1;
        const int want_pick = size ? data[step % size] : 0;
        for (int t = 0; t < 256; t++) {
            const int got = (int)(mask[t >> 5] >> (t & 31) & 1u);
            const int want = cst_advance(g, s, t) != CST_DEAD;
            FUZZ_CHECK(got == want);
            if (got) {
                if (pick < 0 || t <= want_pick) pick = t;
                allowed++;
            }
        }
        FUZZ_CHECK((int)(mask[256 >> 5] >> (256 & 31) & 1u) == (int)cst_accepting(g, s));
        if (!allowed) break;
        s = cst_advance(g, s, pick);
        FUZZ_CHECK(s != CST_DEAD);
    }
    cst_grammar_free(g);
}

#endif
