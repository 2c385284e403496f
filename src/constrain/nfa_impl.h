/* nfa_impl: the NFA's layout, shared by the builder (nfa.c) and the runtime (automaton.c). */
#ifndef BRISK_CONSTRAIN_NFA_IMPL_H
#define BRISK_CONSTRAIN_NFA_IMPL_H

#include "constrain/constrain.h"

enum { CST_E_EPS = 0, CST_E_RANGE = 1, CST_E_CALL = 2 };

typedef struct cst_edge {
    int32_t from, to;
    int32_t rule;        /* CALL: the rule run before continuing at to */
    uint8_t lo, hi;      /* RANGE: bytes lo..hi */
    uint8_t kind;
} cst_edge;

struct cst_nfa {
    int32_t n_states, cap_states;
    uint8_t *final;              /* [n_states] 1: the end of a rule's body */
    cst_edge *e;
    int64_t n_e, cap_e;
    int32_t *rule_start, *rule_end;
    uint8_t *rule_nullable;      /* 1: the rule provably matches the empty string (0: no or unknown) */
    int64_t *rule_width;         /* parse positions one expansion of the rule can reach without a byte */
    int32_t n_rules, cap_rules;
    int32_t call_repeats;        /* big repeats made as chains of calls (the grammar then checks their width once built) */
    bool failed;
    char err[384];
};

#endif
