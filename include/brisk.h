/* brisk.h: the public C API of the brisk inference engine.
 *
 * Handles are opaque. Every fallible call returns brisk_status (BRISK_OK = 0,
 * errors negative) and, when given a brisk_error, fills it with a message that
 * names what was wrong. Nothing here calls exit() or abort() on bad input.
 *
 * Thread safety: a loaded brisk_model is immutable and may be shared by any
 * number of threads. A brisk_context (and the sequences in it) belongs to one
 * thread at a time. Samplers own their RNG and are not shared.
 *
 * This header includes only standard headers and compiles as C++. */
#ifndef BRISK_H
#define BRISK_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and errors ----------------------------------------------------- */

typedef enum brisk_status {
    BRISK_OK               =  0,
    BRISK_ERR_INVALID_ARG  = -1,  /* a parameter, flag or token id out of range */
    BRISK_ERR_IO           = -2,  /* open/read/map/write failed */
    BRISK_ERR_FORMAT       = -3,  /* a file is malformed (bad magic, bad offsets ...) */
    BRISK_ERR_UNSUPPORTED  = -4,  /* well-formed but not supported (architecture, type) */
    BRISK_ERR_NOMEM        = -5,  /* an allocation failed */
    BRISK_ERR_CAPACITY     = -6,  /* a request does not fit a configured limit (KV, batch) */
    BRISK_ERR_TEMPLATE     = -7,  /* a chat template failed to render */
    BRISK_ERR_NUMERIC      = -8,  /* the model computed NaN or infinite logits (bad weights) */
} brisk_status;

/* Caller-owned error report; msg is always NUL-terminated. */
typedef struct brisk_error {
    brisk_status status;
    char msg[512];
} brisk_error;

/* Static name of a status ("invalid argument", ...). */
const char *brisk_status_str(brisk_status st);

/* ---- models ------------------------------------------------------------------------
 * A model is a GGUF file mapped read-only plus its vocabulary. Immutable once
 * loaded; share it between contexts and threads. */

typedef struct brisk_model brisk_model;

brisk_status brisk_model_load(const char *path, brisk_model **out, brisk_error *err);
void brisk_model_free(brisk_model *m);   /* NULL is a no-op */

typedef struct brisk_model_info {
    const char *arch;          /* "llama", "qwen2", "qwen3"; borrowed, valid while the model lives */
    /* n_vocab: rows of the embedding/output matrices = the width of a logits
     * row = the range of valid token ids [0, n_vocab). n_vocab_tokens: the
     * entries of tokenizer.ggml.tokens (<= n_vocab). Ids in [n_vocab_tokens,
     * n_vocab) are padding (common in real conversions): valid input, they
     * detokenize to "", their logits are -INFINITY, so no sampler picks them. */
    int32_t n_vocab, n_vocab_tokens;
    int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    uint64_t n_params;
    size_t weight_bytes;       /* bytes of tensor data mapped */
    /* With BRISK_PACK_CACHE set (off by default: "auto" = a file beside the model, or a
     * directory), one line on what the packed-layout cache did at load ("used PATH (N MiB)",
     * "wrote PATH ...", "PATH refused (why); repacked and rewrote it"); NULL when it is off.
     * A cache problem is never a load error. Borrowed, valid while the model lives. */
    const char *pack_cache;
} brisk_model_info;
void brisk_model_get_info(const brisk_model *m, brisk_model_info *out);

/* ---- vocabulary (the model's tokenizer) -------------------------------------------- */

int32_t brisk_token_bos(const brisk_model *m);    /* -1 when the vocabulary has none */
int32_t brisk_token_eos(const brisk_model *m);
bool brisk_token_is_eog(const brisk_model *m, int32_t id);   /* end of generation */
bool brisk_vocab_adds_bos(const brisk_model *m);
/* The token's text as stored in the vocabulary (not NUL-terminated; borrowed,
 * valid while the model lives). NULL for an out-of-range id. */
const char *brisk_token_text(const brisk_model *m, int32_t id, size_t *len);
/* The chat template stored in the model (tokenizer.chat_template), or NULL.
 * Not NUL-terminated; borrowed, valid while the model lives. */
const char *brisk_model_chat_template(const brisk_model *m, size_t *len);
/* Tokenize len bytes of text. add_special adds BOS/EOS as the vocabulary
 * prescribes; parse_special turns control-token text into their ids. *ids is
 * malloc'd (caller frees). */
brisk_status brisk_tokenize_text(const brisk_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                                 int32_t **ids, size_t *n_ids, brisk_error *err);

/* Streaming detokenizer: never emits half a UTF-8 character. */
typedef struct brisk_text_stream brisk_text_stream;
brisk_status brisk_text_stream_init(const brisk_model *m, brisk_text_stream **out, brisk_error *err);
void brisk_text_stream_free(brisk_text_stream *s);
/* Append a token; *text (borrowed until the next call) holds the newly complete bytes. */
brisk_status brisk_text_stream_push(brisk_text_stream *s, int32_t id, const char **text, size_t *len, brisk_error *err);
/* Whatever bytes remain at the end of generation. */
void brisk_text_stream_flush(brisk_text_stream *s, const char **text, size_t *len);

/* ---- contexts and batches ----------------------------------------------------------
 * A context holds the paged KV cache for up to n_seq sequences, shared by all
 * of them (one pool of kv_tokens token slots), and the scratch for batches of
 * up to n_batch tokens of which up to n_outputs_max keep their logits. All
 * memory is sized and reported at init; a context that would not fit fails
 * there with BRISK_ERR_CAPACITY. */

typedef struct brisk_context brisk_context;

typedef struct brisk_context_params {
    int32_t n_ctx_seq;   /* tokens one sequence may hold (its context); 0 = the model's training context */
    /* KV pool: token slots shared by all sequences (plus one partial block per
     * extra sequence, so kv_tokens spread over n_seq sequences always fit).
     * 0 = n_ctx_seq. Sequences draw blocks from it as they grow; a batch that
     * needs more than is free (after evicting unreferenced prefix-cache
     * blocks) fails with BRISK_ERR_CAPACITY and changes nothing. */
    int32_t kv_tokens;
    int32_t n_batch;     /* max tokens per brisk_decode; 0 = min(512, n_ctx_seq) */
    /* Logit rows one decode may produce (tokens with logits[i] = 1); a batch
     * asking for more is refused with BRISK_ERR_CAPACITY. 0 = min(n_batch,
     * 64 * n_seq): enough for every sequence's speculative verification, and
     * 39 MB rather than 311 MB at a 152K vocabulary and n_batch 512. Set it to
     * n_batch to keep every token's logits (perplexity). */
    int32_t n_outputs_max;
    int32_t n_seq;       /* sequences; 0 = 1 */
    /* 0 = number of online CPUs. Contexts of one process with the same count
     * share one thread pool (a target and its draft model), so their workers
     * never compete; passes of contexts used from different threads take
     * turns on it. */
    int32_t n_threads;
    /* Windowed attention (StreamingLLM-style; approximate, changes outputs):
     * a token at position p attends to positions < attn_sink and to
     * p - attn_window + 1 .. p, so attention costs the same at any context
     * length. 0 = full attention (the default). Speculative decoding uses it
     * for draft models only: verification keeps full attention. */
    int32_t attn_window;
    int32_t attn_sink;
    /* KV cache storage types (brisk_cache_type), as llama.cpp's -ctk/-ctv:
     * 0 = F16, the default. Rows are quantized when written; attention reads
     * them in their type (docs/KV.md). */
    int32_t type_k, type_v;
    /* KV retention (docs/KV.md, src/kv/policy.h): kv_policy 0 = none (every
     * slot kept, the default), 1 = streaming (sinks + recent), 2 = random
     * (sinks + window + a seeded random choice), 3 = h2o, 4 = snapkv, 5 =
     * tova, 6 = oracle (brisk_seq_oracle), 7 = memdecay, 8 = role (JSON
     * punctuation first, keys last; docs/KV.md). Before each decode, a
     * sequence that would hold more than kv_budget slots is cut to kv_budget
     * minus its tokens in the batch, and the survivors are compacted so their
     * blocks return to the pool (positions kept). kv_sink: first slots always
     * kept; kv_window (>= 1): last slots always kept; both inside the budget. */
    int32_t kv_policy, kv_budget, kv_sink, kv_window;
    uint64_t kv_seed;
    /* Per-head selection (docs/KV.md "Per-head selection"): with kv_policy
     * h2o, snapkv, tova, oracle or memdecay, each layer's KV heads rank and keep their own
     * slots (as the papers select), each keeping kv_budget, so the same
     * blocks are freed. Not with kv_pin, windowed attention or k4/k2 K;
     * a sequence whose heads differ cannot be saved (brisk_seq_save). */
    bool kv_per_head;
    /* Pinned roles (docs/KV.md "Pinning"): bit (1u << role) for each
     * brisk_kv_role whose slots no retention policy evicts and no context
     * shift discards (brisk_seq_set_role tags the slots). 0 = none. */
    uint32_t kv_pin;
    /* Store K rotated by a Walsh-Hadamard transform per head, the queries
     * rotated alike (q.k unchanged up to rounding), so that the K cache's
     * quantization error spreads evenly over each block instead of following
     * its outlier channels (QuaRot; ik_llama.cpp's -khad). Needs a q8_0 or
     * q4_0 K (type_k); not for multi-head latent attention. Fidelity in
     * docs/KV.md. false = off, the default. */
    bool k_hadamard;
} brisk_context_params;

/* What a KV slot holds, as the caller tagged it (brisk_seq_set_role), for
 * pinning. BRISK_ROLE_NONE is what untagged slots get. */
typedef enum brisk_kv_role {
    BRISK_ROLE_NONE = 0,
    BRISK_ROLE_SYSTEM = 1,      /* a chat's system message */
    BRISK_ROLE_USER = 2,        /* a chat's user messages */
    BRISK_ROLE_ASSISTANT = 3,   /* a chat's assistant messages (earlier replies and the one being generated) */
    BRISK_ROLE_TOOL = 4,        /* a chat's tool messages */
    BRISK_ROLE_PROMPT = 5,      /* a plain prompt (brisk run -p/-f) */
    BRISK_ROLE_GENERATED = 6,   /* tokens generated after a plain prompt */
} brisk_kv_role;
#define BRISK_KV_N_ROLES 7
/* "none", "system", "user", "assistant", "tool", "prompt", "generated" ("?" outside
 * the enum); the role named (case-insensitive), or -1. */
const char *brisk_kv_role_name(int role);
int brisk_kv_role_parse(const char *name);

/* KV cache storage types (llama.cpp's names: f16, f32, q8_0, q4_0; and KIVI's
 * k4, k2: K quantized per channel over each block of 32 slots, V per token,
 * asymmetric, docs/KV.md). */
typedef enum brisk_cache_type {
    BRISK_CACHE_F16 = 0,
    BRISK_CACHE_F32 = 1,
    BRISK_CACHE_Q8_0 = 2,   /* llama.cpp's block_q8_0: 8.5 bits per element */
    BRISK_CACHE_Q4_0 = 3,   /* block_q4_0: 4.5 bits per element */
    BRISK_CACHE_K4 = 4,     /* 4-bit codes, F16 scale and min per 32: 5 bits per element */
    BRISK_CACHE_K2 = 5,     /* 2-bit codes, F16 scale and min per 32: 3 bits per element */
    /* hybrid precision, for K and V together: k4 / k2, with the sinks, the
     * query's own block and the 5% of slots that received the most attention
     * kept in F16 (docs/KV.md "hyb4 and hyb2") */
    BRISK_CACHE_HYB4 = 6,
    BRISK_CACHE_HYB2 = 7,
} brisk_cache_type;
/* The type named (case-insensitive), or -1; the name of a type ("?" if unknown). */
int brisk_cache_type_parse(const char *name);
const char *brisk_cache_type_name(int type);
brisk_context_params brisk_context_default_params(void);

/* The memory a context would take, computed without allocating. Every byte
 * count is what the corresponding allocation will be (kv and scratch equal
 * brisk_context_memory's after init). */
typedef struct brisk_memory_plan {
    size_t weights;     /* the model's tensor data: mapped file pages plus packed copies */
    size_t kv;          /* the KV cache pool */
    size_t scratch;     /* forward-pass scratch (activations, quantized rows, ...) */
    size_t logits;      /* n_outputs_max x n_vocab floats */
    size_t total;       /* the sum of the four */
    /* Memory this process may still use when planned: MemAvailable (and the
     * cgroup's limit minus its usage when lower), plus the model's packed
     * weights, which are already allocated and so already left out of
     * MemAvailable. 0 = unknown (no /proc): the check then passes. */
    size_t available;
} brisk_memory_plan;
brisk_status brisk_context_plan(const brisk_model *m, const brisk_context_params *p, brisk_memory_plan *out, brisk_error *err);
/* Sum n plans (a target's and its draft model's) and refuse with
 * BRISK_ERR_CAPACITY, the plan in the message, when the total exceeds the
 * memory available. brisk_context_init checks its own plan this way. */
brisk_status brisk_memory_plan_check(const brisk_memory_plan *plans, int n, brisk_error *err);
/* "weights 636.1 MiB + KV 128.0 MiB + scratch 9.9 MiB + logits 0.5 MiB = 774.5 MiB
 * (available: 21432.0 MiB)", NUL-terminated, truncated to cap. */
void brisk_memory_plan_format(const brisk_memory_plan *p, char *buf, size_t cap);

brisk_status brisk_context_init(const brisk_model *m, const brisk_context_params *p, brisk_context **out, brisk_error *err);
void brisk_context_free(brisk_context *c);
/* Bytes held by the KV cache and by scratch buffers. */
void brisk_context_memory(const brisk_context *c, size_t *kv_bytes, size_t *scratch_bytes);
int32_t brisk_context_n_ctx(const brisk_context *c);   /* n_ctx_seq: tokens per sequence */
int32_t brisk_context_kv_tokens(const brisk_context *c);
int32_t brisk_context_n_batch(const brisk_context *c);
int32_t brisk_context_n_outputs_max(const brisk_context *c);
int32_t brisk_context_n_seq(const brisk_context *c);
/* Name of the kernel set in use ("ref", "avx2", ...). */
const char *brisk_context_isa(const brisk_context *c);

/* Tokens of several sequences evaluated together. Positions must continue
 * each sequence: the next token of sequence s has pos == brisk_seq_next_pos(c, s)
 * (brisk_seq_len(c, s) unless a retention policy dropped slots).
 */
typedef struct brisk_batch {
    int32_t n_tokens;
    const int32_t *token;    /* [n_tokens] */
    const int32_t *pos;      /* [n_tokens] */
    const int32_t *seq;      /* [n_tokens] sequence ids in [0, n_seq) */
    const uint8_t *logits;   /* [n_tokens] 1 = keep this token's logits */
} brisk_batch;

/* Evaluate a batch. On error nothing is appended to any sequence. */
brisk_status brisk_decode(brisk_context *c, const brisk_batch *b, brisk_error *err);
/* Evaluate a batch of token trees (speculative verification of several
 * branches in one pass). parent[i] (borrowed for the call) is the batch index
 * (< i, same sequence) of token i's parent, or -1 when it follows the
 * sequence's cached tokens directly; pos[i] must be pos[parent[i]] + 1
 * (brisk_seq_len for -1); anything else is refused with BRISK_ERR_INVALID_ARG.
 * Each token attends to the cached tokens, its ancestors and itself only, and
 * its logits are bitwise those it gets when its root-to-token path is decoded
 * as a plain chain. The r-th token of sequence s in the batch takes KV slot
 * brisk_seq_len + r, so a tree of n tokens uses n slots of the context;
 * afterwards brisk_seq_len counts them all, and a sequence that received a
 * branching tree must be resolved with brisk_seq_keep_path (or truncated to
 * at most its length before the tree) before it is decoded again. parent ==
 * NULL is brisk_decode: each token follows the previous one of its sequence. */
brisk_status brisk_decode_tree(brisk_context *c, const brisk_batch *b, const int32_t *parent, brisk_error *err);
/* Logits of the i-th token that asked for them in the last decode (0-based);
 * n_vocab floats, borrowed until the next decode. NULL when out of range.
 * Padding ids (>= n_vocab_tokens) hold -INFINITY; any other non-finite logit
 * fails the decode with BRISK_ERR_NUMERIC instead of reaching a sampler. */
const float *brisk_get_logits(const brisk_context *c, int32_t i);
int32_t brisk_n_logits(const brisk_context *c);
/* The final hidden state (after the output norm, before the output matrix)
 * of the i-th token that asked for logits in the last decode: n_embd floats,
 * borrowed until the next decode, NULL when out of range. Embeddings pool it. */
const float *brisk_get_hidden(const brisk_context *c, int32_t i);

/* KV slots seq holds (its tokens, unless a retention policy dropped some). */
int32_t brisk_seq_len(const brisk_context *c, int32_t seq);
/* The position seq's next token takes: one past its newest slot's (0 when
 * empty; -1 for an unknown seq). Equals brisk_seq_len until a retention
 * policy (kv_policy) drops slots: positions are kept, so RoPE stays right. */
int32_t brisk_seq_next_pos(const brisk_context *c, int32_t seq);
/* With a retention policy (kv_policy): the most tokens seq's next batch may
 * bring for the policy's cuts to fall where a token-by-token feed's would, so
 * that the output does not depend on how the caller chunks its tokens. Below
 * the budget it is what fills it (at most budget - sink - window); at the
 * budget, what one token's cut frees. 0 when pinned slots, sinks and window
 * fill the budget; INT32_MAX without a policy; -1 for an unknown seq. Feed
 * batches of any size from 1 to this (brisk_sched does). */
int32_t brisk_seq_policy_room(const brisk_context *c, int32_t seq);
/* Keep the first n_keep tokens of seq (0 clears it). After a tree decode only
 * its leading chain is in position order; keeping more is refused. */
brisk_status brisk_seq_truncate(brisk_context *c, int32_t seq, int32_t n_keep, brisk_error *err);
/* After a decode that added tokens to seq (a tree, or a chain): keep the
 * tokens at batch indices path[0..n_path) — path[0] a root (parent -1), each
 * next one a child of the previous — and drop the rest of that decode's tokens
 * of seq. The sequence then holds its earlier tokens plus the path, in
 * position order (brisk_seq_len = length before the decode + n_path), and
 * continues as if the path had been decoded alone. path holds the batch
 * indices of the decode that last added tokens to seq, which need not be the
 * last decode: tree state is kept per sequence, so a scheduler may resolve
 * each sequence's tree after other decodes. Valid until seq itself changes
 * (a decode, truncation, fork or sync of it, or this call); a decode that
 * added more than 64 tokens to seq only until the next decode of any
 * sequence. Otherwise BRISK_ERR_INVALID_ARG. Copies n_path rows per layer at
 * most; allocates nothing. */
brisk_status brisk_seq_keep_path(brisk_context *c, int32_t seq, const int32_t *path, int32_t n_path, brisk_error *err);

/* ---- roles, and generation past the context (docs/KV.md) ----------------------------------
 * Every KV slot records a role (brisk_kv_role). brisk_context_params.kv_pin
 * names the pinned roles: a retention policy never evicts their slots (a
 * batch that cannot fit beside them fails with BRISK_ERR_CAPACITY) and a
 * context shift never discards them.
 *
 * A context shift (llama.cpp's) lets generation go on past the context or
 * past the model's trained positions: some slots are dropped and the rest are
 * given new, smaller positions, their K re-rotated by RoPE for the difference
 * (RoPE's angle is linear in the position, so rotating K already rotated at p
 * by the angle of d gives K at p + d up to rounding). V is unchanged. With a
 * quantized K (q8_0, q4_0) each moved row is dequantized, rotated and
 * quantized again: one more rounding per shift. The shifted blocks are never
 * put in the prefix cache (their rows are not bitwise a fresh computation's).
 * Models with multi-head latent attention (deepseek2) are refused. */

/* The role the slots seq writes from now on get (until the next call; a new
 * context's sequences start with BRISK_ROLE_NONE). A fork copies the current role. */
brisk_status brisk_seq_set_role(brisk_context *c, int32_t seq, int32_t role, brisk_error *err);
/* kv_policy 6, "oracle" (a reference row; docs/KV.md): the slots are ranked by
 * the attention the queries still to come give them, which only a caller
 * that knows the whole text can provide (brisk perplexity). record = true:
 * seq is emptied, and its next decodes (positions 0, 1, ... in order) keep
 * every slot (the pool must hold them: kv_tokens) and record every query's
 * attention by position, summed over heads and layers, in a table of n_ctx x
 * n_ctx sums per sequence (8 bytes each; refused above 256 MiB in all).
 * record = false: what was recorded is sealed and seq emptied; feeding the
 * same tokens again from position 0, each eviction keeps the slots that the
 * recorded queries at and after the batch's first position attend to most.
 * BRISK_ERR_INVALID_ARG without the oracle policy, or for a replay without a
 * recording of positions 0 .. n - 1. */
brisk_status brisk_seq_oracle(brisk_context *c, int32_t seq, bool record, brisk_error *err);
/* Add delta to the positions of slots [from_slot, brisk_seq_len) of seq and
 * re-rotate their K (llama_memory_seq_add). The new positions must stay above
 * slot from_slot - 1's (and >= 0): BRISK_ERR_INVALID_ARG otherwise, as for a
 * token tree; BRISK_ERR_CAPACITY when a shared block cannot be copied. On an
 * error nothing changed. The next token continues at brisk_seq_next_pos. */
brisk_status brisk_seq_shift(brisk_context *c, int32_t seq, int32_t from_slot, int32_t delta, brisk_error *err);
/* llama.cpp's context shift on seq: drop the n_discard oldest slots after the
 * first n_keep that are not pinned (fewer when fewer are unpinned), then
 * renumber the slots from n_keep on to consecutive positions after slot
 * n_keep - 1's, re-rotating K (this also closes the gaps a retention policy
 * left). *n_dropped (optional) = the slots dropped. Afterwards the sequence's
 * positions are at most brisk_seq_len - 1 + (the gaps among the first n_keep). */
brisk_status brisk_seq_context_shift(brisk_context *c, int32_t seq, int32_t n_keep, int32_t n_discard, int32_t *n_dropped,
                                     brisk_error *err);

/* ---- sequences that know their tokens, and the prefix cache ------------------------------
 * The KV cache records the token id of every slot, shares blocks of 32 slots
 * between sequences (reference counted; a shared partial block is copied on
 * its first write), and keeps an automatic prefix cache: every full block of
 * a sequence is indexed by (the block before it, its 32 token ids), and when
 * no sequence holds it any more it stays cached inside the pool, unreferenced,
 * until an allocation needs the room (least recently used first). The pool's
 * size does not change (brisk_context_params.kv_tokens), and the cache never
 * allocates. Lossless: a sequence's logits are bitwise the same whether its
 * prefix came from the cache, from a fork, or was computed (batch invariance).
 *
 * A client that holds a conversation as a token list (a chat CLI, a server
 * request) calls brisk_seq_sync with the whole list each turn instead of
 * tracking what the cache holds; it then samples from brisk_get_logits(c, 0). */

/* The token ids sequence seq holds, in slot order: *n_tokens (set whenever
 * seq is valid) = brisk_seq_len; tokens (caller-owned, cap entries) receives
 * them when cap >= *n_tokens, else BRISK_ERR_CAPACITY and nothing is written
 * (tokens = NULL, cap = 0 asks for the count). After a branching tree decode
 * the slots past the leading chain hold the tree's tokens in batch order,
 * until brisk_seq_keep_path. After a per-head eviction (kv_per_head) each
 * KV head holds its own tokens below the newest slots: these are layer 0's
 * first head's. */
brisk_status brisk_seq_tokens(const brisk_context *c, int32_t seq, int32_t *tokens, int32_t cap, int32_t *n_tokens, brisk_error *err);
/* dst becomes a copy of src: dst's own tokens are dropped, then it shares
 * every one of src's blocks (no K/V is copied; a shared partial block is
 * copied when either sequence next writes into it). src must be in position
 * order (no unresolved tree), else BRISK_ERR_INVALID_ARG. src == dst changes
 * nothing. Both then continue independently. Allocates nothing. */
brisk_status brisk_seq_fork(brisk_context *c, int32_t src, int32_t dst, brisk_error *err);
/* Make seq hold exactly tokens[0..n) (borrowed for the call): keep the
 * longest prefix that seq already holds or that the prefix cache has (whole
 * blocks; the longer wins), drop the rest of seq, and prefill the remainder
 * in chunks of n_batch tokens (brisk_decode calls). The last token is always
 * computed, so on success brisk_get_logits(c, 0) holds tokens[n - 1]'s
 * logits (n_logits = 1; none when n = 0, which clears seq). *n_reused
 * (optional) = tokens not recomputed. Token ids and n <= n_ctx_seq are checked
 * before anything changes; a later failure (BRISK_ERR_CAPACITY when the pool
 * is full of other sequences' blocks, BRISK_ERR_NUMERIC) leaves seq holding a
 * prefix of tokens (brisk_seq_len says how long). Like any decode of seq, it
 * ends the window in which brisk_seq_keep_path applies to seq. */
brisk_status brisk_seq_sync(brisk_context *c, int32_t seq, const int32_t *tokens, int32_t n, int32_t *n_reused, brisk_error *err);

/* The KV pool's blocks: in_use (held by a sequence) + cached (in the prefix
 * cache only) + free == n_blocks, always. */
typedef struct brisk_cache_stats {
    int32_t n_blocks;      /* pool size, in blocks */
    int32_t block_tokens;  /* token slots per block (32) */
    int32_t in_use, cached, free;
    int64_t hit_tokens;    /* tokens brisk_seq_sync took from the prefix cache so far */
    int64_t evicted;       /* cached blocks evicted so far to make room */
    int32_t in_use_max;    /* high-water mark of in_use since the context was made */
    size_t block_bytes;    /* K and V bytes of one block, all layers: in_use_max * block_bytes is the KV memory's peak */
    int64_t dropped;       /* slots a retention policy or a context shift dropped so far (kv_policy) */
    /* hyb4/hyb2: the hot rows of one sequence (their F16 K and V, slot index,
     * masses), beside the pool's blocks; 0 for the other types */
    size_t hot_bytes_per_seq;
    size_t f16_block_bytes;   /* block_bytes of an F16 cache of the same shape, for comparison */
} brisk_cache_stats;
void brisk_context_cache_stats(const brisk_context *c, brisk_cache_stats *out);

/* ---- saving and loading a sequence's KV ---------------------------------------------------
 * A sequence's KV cache (its token ids, positions and K/V rows, byte for byte as stored, in an
 * order that does not depend on which pool blocks held them) and, optionally, a sampler's state
 * (the RNG of every stage, penalty and DRY history, mirostat's mu), as one self-checking blob: a
 * file (brisk_seq_save/load, what `brisk run --prompt-cache` uses) or memory (the state_get/set
 * pair, for a server). The format is in docs/KVSTATE.md.
 *
 * Lossless: loading a state into any context of the same model with the same KV type and shape,
 * into any sequence id, makes that sequence hold exactly the saved tokens, and decoding goes on
 * bitwise as if it had never stopped. The sequence has no logits after a load: brisk_seq_sync
 * with its own tokens (brisk_seq_tokens) recomputes only the last token, whose logits are then
 * bitwise those of the saved run (batch invariance).
 *
 * A state records the model's fingerprints: a hash of the GGUF header, metadata, tensor table and
 * file size (taken at every model load), and a hash of every tensor byte (taken the first time a
 * state is saved or loaded with the model, once per model, thread-safe).
 *
 * A load checks everything before it changes anything: on any error no sequence, block, prefix
 * cache entry, statistic or sampler has changed. Errors:
 *   BRISK_ERR_FORMAT       not a KV state, truncated, a checksum mismatch (a corrupted byte), a
 *                          malformed section (positions out of order, a sampler field)
 *   BRISK_ERR_UNSUPPORTED  a format version this build does not read; a sampler stage without a
 *                          saved form (a custom stage, or the mask while a mask is set)
 *   BRISK_ERR_INVALID_ARG  another model (either fingerprint), KV storage type or shape; a token
 *                          id outside the vocabulary; a sampler chain that differs from smp's (or
 *                          smp given and the state holds none); bad ids or pointers
 *   BRISK_ERR_CAPACITY     more tokens than n_ctx_seq; not enough blocks in the pool (free,
 *                          cached, or the sequence's own)
 *   BRISK_ERR_IO, BRISK_ERR_NOMEM
 * Saving refuses a sequence that holds an unresolved tree (brisk_seq_keep_path first). The
 * context's thread rules apply; the model may be shared. */
struct brisk_sampler;   /* brisk_sampler, declared in the sampling section */

/* The state of sequence seq (and of smp, when not NULL; borrowed for the call) into buf (caller's,
 * cap bytes). *n_bytes (set whenever the arguments are valid) is the state's size; when cap <
 * *n_bytes (buf = NULL, cap = 0 asks for the size) nothing is written and BRISK_ERR_CAPACITY is
 * returned. */
brisk_status brisk_seq_state_get(const brisk_context *c, int32_t seq, const struct brisk_sampler *smp, void *buf, size_t cap,
                                 size_t *n_bytes, brisk_error *err);
/* The same into *out, malloc'd (the caller frees it), *n_bytes long. */
brisk_status brisk_seq_state_get_alloc(const brisk_context *c, int32_t seq, const struct brisk_sampler *smp, uint8_t **out,
                                       size_t *n_bytes, brisk_error *err);
/* Make sequence seq hold the state in buf[0..len) (borrowed for the call; untrusted); when smp is
 * not NULL it takes the saved sampler state too. seq's previous tokens are dropped (its full
 * blocks stay in the prefix cache); the loaded sequence's full blocks join the prefix cache. */
brisk_status brisk_seq_state_set(brisk_context *c, int32_t seq, struct brisk_sampler *smp, const void *buf, size_t len,
                                 brisk_error *err);
/* brisk_seq_state_get into a file, written atomically (a temporary file beside it, renamed; a
 * FIFO or device is never replaced). */
brisk_status brisk_seq_save(const brisk_context *c, int32_t seq, const struct brisk_sampler *smp, const char *path, brisk_error *err);
/* brisk_seq_state_set from a file (mapped read-only; it is never read past its size). */
brisk_status brisk_seq_load(brisk_context *c, int32_t seq, struct brisk_sampler *smp, const char *path, brisk_error *err);

/* ---- sampling ------------------------------------------------------------------------ */

typedef enum brisk_repeat_mode {
    /* llama.cpp's multiplicative penalty: logit/θ when logit > 0, logit·θ
     * otherwise. It reads the raw logit's arbitrary zero point, so the same θ
     * means a different operation on every model. Kept for compatibility. */
    BRISK_REPEAT_CLASSIC = 0,
    /* Gauge-invariant: on log-probabilities, lp -= ln θ for every repeated
     * token (divides its probability by θ before renormalising). Adding a
     * constant to all logits changes nothing. */
    BRISK_REPEAT_LOGPROB = 1,
} brisk_repeat_mode;

/* A bias added to one token's logit before any other stage (-INFINITY bans it). */
typedef struct brisk_logit_bias {
    int32_t token;
    float bias;
} brisk_logit_bias;

typedef struct brisk_sampler_params {
    float temp;              /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off */
    int32_t repeat_last_n;   /* window of recent tokens the penalties see (0: off) */
    float freq_penalty;      /* subtract count * this */
    float presence_penalty;  /* subtract this once if present */
    brisk_repeat_mode repeat_mode;
    uint64_t seed;           /* BRISK_SEED_RANDOM (the default): drawn from the OS at init */
    /* ---- llama.cpp's other samplers, each off at its default (llama.cpp's flag in brackets) ---- */
    float typical_p;         /* locally typical sampling [--typical]; >= 1: off (default 1) */
    float top_n_sigma;       /* keep logits within n standard deviations of the best [--top-nsigma]; <= 0: off (default -1) */
    float xtc_probability;   /* chance per token that XTC runs [--xtc-probability]; <= 0: off (default 0) */
    float xtc_threshold;     /* XTC removes all but the least likely token with p >= this [--xtc-threshold]; > 0.5: off (default 0.1) */
    int32_t mirostat;        /* 0: off; 2: mirostat v2 [--mirostat 2], which then replaces the filter stages: the chain is
                              * logit bias -> mask -> temperature -> mirostat v2, as in llama.cpp. 1 is not supported. */
    float mirostat_tau;      /* target surprise in bits [--mirostat-ent] (default 5) */
    float mirostat_eta;      /* learning rate [--mirostat-lr] (default 0.1) */
    int32_t min_keep;        /* top-p, min-p, typical and XTC keep at least this many candidates (default 0) */
    /* The filter order [--samplers]: names separated by ';' among penalties, dry, top_n_sigma, top_k, typ_p, top_p,
     * min_p, xtc, temperature (and llama.cpp's aliases: top-k, topk, nucleus, temp, typ, ...). NULL: llama.cpp's
     * default order "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature". Borrowed during
     * brisk_sampler_init only. A stage that is off is left out of the chain. */
    const char *samplers;
    const brisk_logit_bias *logit_bias;  /* borrowed during brisk_sampler_init only (copied); the chain's first stage */
    int32_t n_logit_bias;
    /* DRY, "don't repeat yourself" (llama.cpp's, from koboldcpp): a token that would extend a repeat of the last
     * dry_penalty_last_n tokens longer than dry_allowed_length loses dry_multiplier * dry_base^(length - allowed)
     * from its logit. dry_multiplier 0 [--dry-multiplier] (default) or dry_penalty_last_n 0 is off; dry_base
     * [--dry-base] 1.75 (< 1: off), dry_allowed_length [--dry-allowed-length] 2, dry_penalty_last_n
     * [--dry-penalty-last-n] 64. A repeat never reaches back across a sequence breaker: dry_breakers holds them as
     * token sequences, flat, each as its length then its tokens (see brisk_dry_breakers for llama.cpp's
     * text breakers, --dry-sequence-breaker); borrowed during brisk_sampler_init only (copied). Its place in the
     * order is the name "dry" (default: right after penalties). */
    float dry_multiplier, dry_base;
    int32_t dry_allowed_length, dry_penalty_last_n;
    const int32_t *dry_breakers;
    int32_t n_dry_breakers;   /* int32s in dry_breakers */
} brisk_sampler_params;

#define BRISK_SEED_RANDOM UINT64_MAX

typedef struct brisk_sampler brisk_sampler;

/* llama.cpp's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, penalty 1 over 64, random seed; typical,
 * top-n-sigma, XTC, DRY and mirostat off. */
brisk_sampler_params brisk_sampler_default_params(void);
/* Builds the chain: logit bias -> mask -> the stages of p->samplers that are on -> the final softmax. All scratch
 * is sized here for n_vocab; applying the chain allocates nothing. */
brisk_status brisk_sampler_init(brisk_sampler **out, const brisk_sampler_params *p, int32_t n_vocab, brisk_error *err);
void brisk_sampler_free(brisk_sampler *s);
/* The seed in use (the drawn one when BRISK_SEED_RANDOM was asked for), so a run can be repeated. */
uint64_t brisk_sampler_seed(const brisk_sampler *s);
/* Record a token of the context (prompt or generated): every stage's accept (penalty history, the mask's
 * constraint, mirostat's mu: that one only for a token drawn from the distribution the last
 * brisk_sampler_dist / brisk_sampler_sample computed). */
void brisk_sampler_accept(brisk_sampler *s, int32_t token);
/* Forget the history and restart the RNGs from the seed (every stage's reset). */
void brisk_sampler_reset(brisk_sampler *s);
/* The chain's final distribution (zeros where filtered); probs has n_vocab entries. A mask that allows
 * none of the survivors leaves probs all zero. */
void brisk_sampler_dist(brisk_sampler *s, const float *logits, float *probs);
/* Apply the chain and draw a token (does not accept it). Greedy (temp <= 0) takes the best candidate and draws no random number. */
int32_t brisk_sampler_sample(brisk_sampler *s, const float *logits);
/* A deep copy with the same state (history, RNGs, mu, custom stages through their clone), so it draws the
 * same tokens from here on. *out is NULL on failure (BRISK_ERR_NOMEM; BRISK_ERR_UNSUPPORTED for a custom
 * stage without clone). */
brisk_status brisk_sampler_clone(const brisk_sampler *s, brisk_sampler **out, brisk_error *err);

/* ---- the chain's stages --------------------------------------------------------------------
 * A stage is a small vtable over a candidate set, like llama.cpp's llama_sampler_i. Stages see the
 * candidates in the order the previous stage left them; the first sees all n_vocab tokens in id order
 * (data[i].id == i). A stage may change logits, reorder, or shrink size (never grow it); sorted says
 * that data is in descending logit order with ties by lower id (a stage that reorders or changes a
 * logit must set it accurately). p is scratch for the stage; the chain never reads it. */
typedef struct brisk_token_data {
    int32_t id;
    float logit;
    float p;
} brisk_token_data;

typedef struct brisk_token_array {
    brisk_token_data *data;   /* borrowed from the chain, valid during apply */
    int32_t size;
    bool sorted;
} brisk_token_array;

typedef struct brisk_stage_i {
    const char *name;
    void (*apply)(void *ctx, brisk_token_array *cur);   /* required; must not allocate */
    void (*accept)(void *ctx, int32_t token);           /* may be NULL */
    void (*reset)(void *ctx);                           /* may be NULL */
    void *(*clone)(const void *ctx);                    /* may be NULL (the sampler is then not clonable); NULL: out of memory */
    void (*free)(void *ctx);                            /* may be NULL */
} brisk_stage_i;

/* Insert a stage before position pos (0 = first, -1 or the count = last, before the final softmax).
 * iface is borrowed and must outlive the sampler; takes ownership of ctx on success (freed through
 * iface->free with the sampler); on failure ctx stays the caller's. */
brisk_status brisk_sampler_add_stage(brisk_sampler *s, int32_t pos, const brisk_stage_i *iface, void *ctx, brisk_error *err);
int32_t brisk_sampler_n_stages(const brisk_sampler *s);
/* The i-th stage's name ("logit_bias", "mask", "penalties", "top_k", ...), NULL when out of range. */
const char *brisk_sampler_stage_name(const brisk_sampler *s, int32_t i);

/* The mask stage (always in the chain, right after the logit bias): what constrained decoding plugs
 * into. fill sets bit t (allowed[t / 32] >> (t % 32) & 1) for every token allowed after the tokens
 * accepted so far; allowed arrives all clear, (n_vocab + 31) / 32 words. accept and reset (may be NULL)
 * follow the sampler's. Because the mask is part of the chain's final distribution, the speculative
 * verifier stays lossless under it. */
typedef struct brisk_mask {
    void *user;   /* borrowed, passed back to the callbacks */
    void (*fill)(void *user, uint32_t *allowed, int32_t n_vocab);
    void (*accept)(void *user, int32_t token);
    void (*reset)(void *user);
} brisk_mask;
/* m is copied; NULL removes the mask. The callbacks must stay valid while set. */
void brisk_sampler_set_mask(brisk_sampler *s, const brisk_mask *m);

/* ---- constrained decoding (src/constrain, docs/CONSTRAIN.md) -----------------------------------
 * JSON output allows up to 20 whitespace characters between two tokens (a model cannot stall in
 * whitespace), properties in the schema's order. A constraint compiles a JSON Schema, a regular expression, a GBNF grammar (llama.cpp's format) or a
 * finite set of strings against a model's vocabulary; brisk_constraint_mask plugs it into a sampler's
 * mask stage, so only tokens that keep the output inside the language can be drawn, and an end-of-
 * generation token only once the output is complete. Masks are computed lazily and cached per parser
 * state. A constraint belongs to one sampler (one sequence) at a time; it is not thread-safe. */
typedef enum brisk_constraint_kind {
    BRISK_CONSTRAINT_JSON_SCHEMA = 1,   /* src: a JSON Schema; an unsupported keyword is BRISK_ERR_UNSUPPORTED naming it */
    BRISK_CONSTRAINT_REGEX = 2,         /* src: a regular expression (ECMAScript subset) the whole output matches */
    BRISK_CONSTRAINT_GBNF = 3,          /* src: a GBNF grammar; its rule "root" is the output */
    BRISK_CONSTRAINT_CHOICE = 4,        /* src: "A,B,C": the output is one of them (a comma in one is written \\,) */
    BRISK_CONSTRAINT_JSON_SCHEMA_COMPACT = 5,   /* as JSON_SCHEMA, whitespace only as json.dumps writes it (", " ": ") */
} brisk_constraint_kind;
typedef struct brisk_constraint brisk_constraint;
brisk_status brisk_constraint_init(brisk_constraint **out, const brisk_model *m, brisk_constraint_kind kind, const char *src,
                                   size_t len, brisk_error *err);
void brisk_constraint_free(brisk_constraint *c);   /* NULL is a no-op */
/* The mask for brisk_sampler_set_mask. Set it after the prompt's tokens went through brisk_sampler_accept:
 * from then on every accepted token advances the constraint (a sampler reset resets it). */
brisk_mask brisk_constraint_mask(brisk_constraint *c);
/* Advance by one token; false when the token was not allowed (the constraint then allows only end tokens). */
bool brisk_constraint_accept(brisk_constraint *c, int32_t token);
/* The output so far is complete (an end token is allowed, or was accepted). */
bool brisk_constraint_complete(brisk_constraint *c);
void brisk_constraint_reset(brisk_constraint *c);
/* Is text, from the start, a complete output of the constraint? (independent of the current state) */
bool brisk_constraint_matches(brisk_constraint *c, const char *text, size_t len);
/* Finish within a token budget: the output (its end token included) may take n_tokens tokens from the
 * constraint's start or last reset; the constraint counts the tokens it accepts. Far from the limit the
 * mask is unchanged; once the limit is near it keeps only tokens after which the output can still be
 * completed in the tokens left (one token per byte at worst, then the end token), so a budget at least
 * the shortest output's bytes + 1 always ends complete. n_tokens < 0 removes the budget. Returns false
 * (and sets none) when the vocabulary lacks a token for some single byte: no bound can then be promised. */
bool brisk_constraint_set_token_budget(brisk_constraint *c, int64_t n_tokens);
/* The fewest bytes from the current state to a complete output (0: complete; INT32_MAX: dead). */
int32_t brisk_constraint_min_bytes(brisk_constraint *c);
/* What the last accepted token is in the output, for JSON Schema constraints (a streaming JSON lexer over
 * the output bytes; exact, since the output is valid JSON): a byte of an object key (quotes included), of
 * a string value, of a number or true/false/null, or punctuation and whitespace. A token's role is that
 * of its first byte that is not punctuation or whitespace. GBNF, regex and choice outputs are TEXT. */
typedef enum brisk_token_role {
    BRISK_ROLE_TEXT = 0,
    BRISK_ROLE_PUNCT = 1,     /* { } [ ] , : and whitespace */
    BRISK_ROLE_KEY = 2,
    BRISK_ROLE_STRING = 3,    /* a string value */
    BRISK_ROLE_SCALAR = 4,    /* a number, true, false or null */
} brisk_token_role;
brisk_token_role brisk_constraint_last_token_role(const brisk_constraint *c);
/* The role of each byte of the last accepted token (up to cap written); returns its byte count. */
size_t brisk_constraint_last_token_roles(const brisk_constraint *c, uint8_t *roles, size_t cap);

/* DRY's sequence breakers from text, as llama.cpp derives them from its --dry-sequence-breaker strings: for
 * every token whose text (detokenized alone) contains a breaker, the token by itself; for every token whose
 * text ends with a proper prefix of a breaker, the token followed by the rest of the breaker tokenized (at
 * most 20 tokens). Breakers are cut to 40 bytes; empty ones are skipped. *out (malloc'd, caller frees) is in
 * brisk_sampler_params.dry_breakers' flat format, *n_out ints. One detokenization per vocabulary entry: call
 * once per model, not per request. */
brisk_status brisk_dry_breakers(const brisk_model *m, const char *const *breakers, int32_t n, int32_t **out,
                                int32_t *n_out, brisk_error *err);

/* Logprobs: the k most likely tokens of log_softmax(logits) (raw logits, before any stage), in
 * descending order with ties by lower id, into ids[k] and logprobs[k]. Returns min(k, n_vocab). */
int32_t brisk_logprobs_top_k(const float *logits, int32_t n_vocab, int32_t k, int32_t *ids, float *logprobs);

/* ---- the scheduler ------------------------------------------------------------------------------
 * Continuous batching over one context: requests come in (a prompt, sampler
 * settings, a token limit), and each brisk_sched_step builds ONE batch from
 * the running requests' decode tokens first (with speculative drafts when a
 * request asks for them), then prefill chunks of admitted requests under a
 * token budget, runs it in forward passes of at most n_ubatch tokens
 * (brisk_decode), samples every sequence with its request's own sampler and
 * reports each token through the request's callback. The context's n_seq
 * sequences are the slots; its KV pool is shared by all of them, and a
 * prompt's whole blocks come from the prefix cache when an earlier request
 * computed them.
 *
 * When the pool is full even after the prefix cache's least recently used
 * blocks are evicted, the youngest running request is preempted: its
 * sequences are released (their full blocks stay in the prefix cache), it
 * goes back to the front of the waiting queue with its generated tokens, and
 * on resumption its sequences are rebuilt from prompt + generated tokens,
 * mostly from the cache. Its samplers are untouched, so its output is what it
 * would have been without the preemption. A request that does not fit the
 * pool even alone finishes with BRISK_FINISH_CONTEXT_FULL.
 *
 * Batch invariance: a request's tokens and logits are bitwise the same alone
 * or among others, from the prefix cache or computed, in any chunking,
 * preempted or not; greedy tokens are the same with speculation on or off
 * (sampled ones are then distributed the same, not drawn the same).
 *
 * Thread safety: brisk_sched_add, brisk_sched_cancel and brisk_sched_pending
 * may be called from any thread at any time. brisk_sched_step, init and free
 * belong to one thread (the context's owner; nothing else may use the context
 * meanwhile), and the callbacks run on it, inside brisk_sched_step; they may
 * call brisk_sched_add and brisk_sched_cancel. */

typedef struct brisk_sched brisk_sched;

typedef enum brisk_finish {
    BRISK_FINISH_NONE = 0,          /* a generated token; the request goes on */
    BRISK_FINISH_EOG = 1,           /* it generated an end-of-generation token (delivered just before) */
    BRISK_FINISH_LENGTH = 2,        /* it generated max_tokens tokens */
    BRISK_FINISH_CANCELLED = 3,     /* brisk_sched_cancel, or brisk_sched_free while it was live */
    BRISK_FINISH_CONTEXT_FULL = 4,  /* the KV pool cannot hold it even alone */
    BRISK_FINISH_ERROR = 5,         /* its forward pass failed (BRISK_ERR_NUMERIC: non-finite logits) */
} brisk_finish;

/* Static name of a finish reason ("eog", "length", ...). */
const char *brisk_finish_str(brisk_finish f);

typedef enum brisk_sched_spec {
    BRISK_SCHED_SPEC_OFF = 0,
    BRISK_SCHED_SPEC_NGRAM = 1,     /* n-gram (prompt lookup) drafts whenever the history has a match */
    /* n-gram drafts only when the pass's measured cost curve says they raise
     * the expected tokens per second (at 16 sequences the pass is
     * compute-bound and they rarely do) */
    BRISK_SCHED_SPEC_AUTO = 2,
    /* the draft model of brisk_sched_params.draft: each speculating choice has a draft sequence (the one of
     * its slot's index), and its draft length per step comes from the measured cost curve, the draft's
     * measured cost per pass and its acceptance, as auto's (a probe of 2 drafts now and then keeps them
     * measured); the drafts of all such choices are made in shared draft passes and verified in the step's
     * batch. Greedy output is the same as without speculation; sampled output is distributed the same */
    BRISK_SCHED_SPEC_DRAFT = 3,
} brisk_sched_spec;

/* Called for every generated token (finish = BRISK_FINISH_NONE), then once
 * with token -1 and the reason the choice finished. id is the request's (from
 * brisk_sched_add), choice its completion index in [0, n). */
typedef void (*brisk_sched_token_fn)(void *user, int64_t id, int32_t choice, int32_t token, brisk_finish finish);
/* Optional: the logits (n_vocab floats, borrowed for the call) each generated
 * token was sampled from, just before its token callback (logprobs, tests). */
typedef void (*brisk_sched_logits_fn)(void *user, int64_t id, int32_t choice, int32_t token, const float *logits, int32_t n_vocab);
/* With prompt_logits: the logits after prompt position pos (0 .. n_prompt - 2), from which next (the
 * prompt's token pos + 1) would be predicted, once per position in order (evaluation harnesses' echo). */
typedef void (*brisk_sched_prompt_logits_fn)(void *user, int64_t id, int32_t pos, int32_t next, const float *logits, int32_t n_vocab);

typedef struct brisk_sched_request {
    const int32_t *prompt;          /* [n_prompt] token ids, borrowed during brisk_sched_add only (copied) */
    int32_t n_prompt;               /* >= 1; n_prompt + max_tokens <= the context's n_ctx_seq (retention: below) */
    /* The request's sampler chain (brisk_sampler_init; its pointers are
     * borrowed during brisk_sched_add only). Choice i > 0 of n gets its own
     * chain from the same settings with the seed seed + i * 0x9E3779B97F4A7C15
     * (mod 2^64; BRISK_SEED_RANDOM draws choice 0's seed first, skipped as a
     * value), so choice 0 draws exactly what an n = 1 request draws. */
    brisk_sampler_params sampling;
    int32_t max_tokens;             /* >= 1: tokens generated per choice at most */
    int32_t min_tokens;             /* [0, max_tokens]: end-of-generation tokens are banned before this many (no drafts meanwhile) */
    /* Completions of the prompt, 1..max_running: the prompt is prefilled once,
     * then its sequence is forked (brisk_seq_fork) into n - 1 more slots. */
    int32_t n;
    bool ignore_eog;                /* go on past end-of-generation tokens (benchmarks) */
    brisk_sched_spec spec;
    int32_t spec_draft_max;         /* drafts per step at most, 0 = 8, up to 32 */
    brisk_sched_token_fn on_token;  /* required */
    brisk_sched_logits_fn on_logits;   /* optional */
    /* prompt_logits: on_prompt_logits gets every prompt position's logits. The
     * prompt is then computed whole (no prefix-cache hit: cached blocks have no
     * logits), in chunks of at most n_outputs_max tokens. */
    bool prompt_logits;
    brisk_sched_prompt_logits_fn on_prompt_logits;
    void *user;                     /* borrowed, passed back to the callbacks */
    /* Constrained decoding: choice i's sampler gets the mask masks[i] (brisk_sampler_set_mask), set after the
     * prompt went through it (brisk_constraint_mask gives one). The array is borrowed during brisk_sched_add
     * only; each mask's callbacks and user must stay valid until that choice's finish callback. NULL: none. */
    const brisk_mask *masks;
    /* Roles (docs/KV.md "Pinning"), which matter when the context pins some (kv_pin): roles[i] is prompt token
     * i's brisk_kv_role (borrowed during brisk_sched_add only; NULL: every prompt token BRISK_ROLE_PROMPT), and
     * gen_role the generated tokens' (0 = BRISK_ROLE_GENERATED; a chat's reply: BRISK_ROLE_ASSISTANT). */
    const uint8_t *roles;
    int32_t gen_role;
} brisk_sched_request;
/* One completion, greedy sampling, 16 tokens, speculation off; prompt and on_token to fill in. */
brisk_sched_request brisk_sched_default_request(void);

typedef struct brisk_sched_params {
    int32_t n_batch;     /* tokens per step (llama.cpp's -b); 0 = the context's n_batch */
    int32_t n_ubatch;    /* tokens per forward pass (-ub), <= the context's n_batch; 0 = min(n_batch, the context's) */
    int32_t max_running; /* sequences (slots) running at once, <= n_seq; 0 = n_seq */
    int32_t max_queue;   /* requests waiting at most; a full queue refuses with BRISK_ERR_CAPACITY; 0 = 1024 */
    /* Stall-bounded chunked prefill (as Sarathi-Serve): while requests decode, the prompt tokens of a step may
     * add at most max_stall times the step's decode-only time, so a decoding stream's inter-token time stays
     * within (1 + max_stall) of its decode-only step while a long prompt is prefilled. The decode-only time is
     * measured: a step whose decode size was never measured alone, and one after every 8 decoding steps in a
     * row with prompt tokens, decodes alone (a probe). At least one prompt token per other step is computed,
     * so prompts always progress, and at least as many as get the prompts in before the KV pool fills with
     * the decoding streams' growth (else the prompt would be preempted again and again; this floor applies
     * to prefill_budget too). 0 = no limit (prompt chunks fill n_batch). */
    double max_stall;
    /* While requests decode, a step computes at most this many prompt tokens (0 = no limit; with max_stall
     * the smaller allowance wins): a fixed share of the step for prefills, so a decoding stream's inter-token
     * time stays near its undisturbed one while a long prompt is read, at the cost of that prompt's TTFT
     * (a prompt arriving with nothing decoding still fills n_batch; more than N only when the KV pool would
     * otherwise fill before the prompt is in: see max_stall). */
    int32_t prefill_budget;
    /* The draft model's context for BRISK_SCHED_SPEC_DRAFT (borrowed, must outlive the scheduler; NULL =
     * none, and such requests are refused): at least as many sequences as c's, all empty, n_ctx_seq at least
     * c's, and the target's vocabulary. Sequence i drafts for the choice in slot i; it is cleared whenever
     * the slot is released (its full blocks stay in the draft's prefix cache). */
    brisk_context *draft;
    /* Generation past the context (docs/KV.md, docs/SERVER.md "Retention"). With a retention policy on the
     * context (kv_policy), a sequence keeps at most kv_budget slots and its positions grow past n_ctx_seq up
     * to the model's trained context; without one, positions and slots end at n_ctx_seq. With context_shift,
     * a sequence whose next token would pass that limit is shifted first (brisk_seq_context_shift: the first
     * shift_keep slots kept, without a policy half of the rest dropped, the rest renumbered), so a request
     * may ask for any max_tokens; without it, n_prompt + max_tokens must fit the limit. Requests of such a
     * scheduler cannot speculate. A sequence with a policy is fed on a fixed schedule (its chunks never cross
     * the point where the policy cuts it, and a cut brings at most the tokens that one cut of a decode
     * leaves room for), so its cuts, shifts and output depend on its own tokens only. */
    bool context_shift;
    int32_t shift_keep;  /* first slots a context shift keeps (4 by default: --kv-sink) */
} brisk_sched_params;
brisk_sched_params brisk_sched_default_params(void);

typedef struct brisk_sched_info {
    int32_t n_decoded;       /* tokens generated this step (all choices) */
    int32_t n_prefill;       /* prompt (or rebuilt) tokens computed this step */
    int32_t n_drafts;        /* draft tokens verified this step */
    int32_t n_passes;        /* forward passes (brisk_decode calls) this step, refused ones included */
    int32_t n_running;       /* requests holding slots after the step */
    int32_t n_seq_running;   /* ... and the sequences (slots) they hold */
    int32_t n_waiting;       /* requests waiting after the step (new and preempted) */
    int64_t n_preemptions;   /* so far */
    int64_t n_drafted, n_accepted;   /* draft tokens so far: verified, and accepted */
    /* when the last preemption happened: the pool's free + cached blocks, and
     * the blocks the refused pass needed at least (its sequences' new blocks) */
    int32_t preempt_free_blocks, preempt_need_blocks;
    /* the KV pool after the step: blocks held by sequences (shared: by more
     * than one), cached (prefix index only) and free */
    int32_t kv_blocks_used, kv_blocks_shared, kv_blocks_cached, kv_blocks_free;
    /* prompts that waited this step for a prefix they share in whole blocks with a prompt another request
     * is computing (they take its blocks from the prefix cache when written: shared prefixes arriving
     * together are computed once) */
    int32_t n_prefix_held;
    int64_t n_shifts;        /* context shifts so far (brisk_sched_params.context_shift) */
} brisk_sched_info;

/* c: borrowed; must outlive the scheduler, which uses all its sequences
 * (they must be empty). */
brisk_status brisk_sched_init(brisk_sched **out, brisk_context *c, const brisk_sched_params *p, brisk_error *err);
/* Finishes every live request with BRISK_FINISH_CANCELLED (callbacks on the calling thread), releases its
 * sequences; NULL is a no-op. */
void brisk_sched_free(brisk_sched *s);
/* Validate and queue a request (nothing is admitted half): token ids in
 * range, n_prompt + max_tokens <= n_ctx_seq, 1 <= n <= max_running, the
 * sampler settings, the queue not full. *id (> 0) names it. */
brisk_status brisk_sched_add(brisk_sched *s, const brisk_sched_request *r, int64_t *id, brisk_error *err);
/* Ask for a request to stop; its callback gets BRISK_FINISH_CANCELLED at the
 * next step and its sequences are released. false when no live request has
 * that id (finished, or never added). */
bool brisk_sched_cancel(brisk_sched *s, int64_t id);
/* One step (see above). Per-request failures end that request (its finish
 * reason says why); an error returned here is the scheduler's own. info is
 * optional. */
brisk_status brisk_sched_step(brisk_sched *s, brisk_sched_info *info, brisk_error *err);
/* Requests live (waiting or running): anything left for brisk_sched_step to do. */
int32_t brisk_sched_pending(brisk_sched *s);

/* Ask for one choice (completion index) of a request to stop: its callback
 * gets BRISK_FINISH_CANCELLED at the next step and its sequence is released;
 * the other choices go on (a request with n > 1 whose prompt is not forked
 * yet keeps the cancel until the fork). false when no live request has that
 * id or choice is out of range. Any thread. */
bool brisk_sched_cancel_choice(brisk_sched *s, int64_t id, int32_t choice);

/* One request's accounting so far. The cost figures are an estimate from
 * the model's shapes: every weight is a multiply-add per token (2 FLOPs; the
 * output matrix only for rows whose logits are computed), attention 4 FLOPs
 * per head element and attended position; a pass reads the weights once
 * (shared out by tokens) and each of its sequences' K/V (F16) once. */
typedef struct brisk_sched_request_info {
    int32_t n_prompt;
    int32_t n_prompt_cached;    /* prompt tokens taken from the prefix cache at its first admission */
    int32_t n_prompt_computed;  /* prompt tokens computed (n_prompt - n_prompt_cached once its prompt is done) */
    int32_t n_recomputed;       /* tokens computed again to rebuild it after preemptions */
    int32_t n_prefilled;        /* = n_prompt_computed + n_recomputed */
    int32_t n_generated;        /* tokens sampled, all choices */
    int32_t n_preemptions, n_passes;
    int32_t n_shifts;           /* context shifts of its sequences (brisk_sched_params.context_shift) */
    int64_t n_drafted, n_accepted;
    double flops, bytes_read;
    /* brisk_time_now() at brisk_sched_add, first admission, first sampled token; 0 = not yet */
    double t_added, t_admitted, t_first_token;
} brisk_sched_request_info;
/* The stepping thread only (inside the request's callbacks, its last finish
 * callback included, or between steps): false when no live request has that id. */
bool brisk_sched_request_info_get(brisk_sched *s, int64_t id, brisk_sched_request_info *out);

/* A free sequence of the context for the caller's own use between steps (KV
 * save/restore in a server): it counts as running for admission until it is
 * returned. -1 when every slot is taken. The stepping thread only, between
 * steps; return it empty or not (brisk_sched_return_slot clears it: its full
 * blocks stay in the prefix cache). */
int32_t brisk_sched_borrow_slot(brisk_sched *s);
void brisk_sched_return_slot(brisk_sched *s, int32_t seq);

#ifdef __cplusplus
}
#endif
#endif /* BRISK_H */
