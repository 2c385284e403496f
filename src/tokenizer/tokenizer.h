/* tokenizer: text <-> token ids with exact parity with llama.cpp's vocabularies.
 *
 * One brisk_vocab is built from a GGUF file's tokenizer.ggml.* metadata. Its
 * tokenizer.ggml.model picks the algorithm and tokenizer.ggml.pre the
 * pre-tokenizer (a data table in pretok.c):
 *   "llama"          SentencePiece-style BPE over scores, byte fallback   (spm.c)
 *   "gpt2", "gemma4" byte-level BPE over merges with a regex pre-tokenizer (bpe.c)
 *   "bert"           WordPiece, greedy longest match                       (wpm.c)
 * Special tokens are split out of the text first (tokenize.c); control tokens
 * are only recognised in user text when parse_special is set.
 *
 * Threads: a loaded vocab is immutable and may be shared by any number of
 * threads; every call allocates its own scratch. A brisk_detok belongs to one
 * thread at a time.
 *
 * Behaviour on hostile input (invalid UTF-8, NUL bytes, huge inputs) is
 * documented in docs/TOKENIZER.md; nothing here aborts on bad input. */
#ifndef BRISK_TOKENIZER_H
#define BRISK_TOKENIZER_H

#include "base/base.h"
#include "gguf/gguf.h"

typedef struct brisk_vocab brisk_vocab;

typedef enum brisk_vocab_type {
    BRISK_VOCAB_SPM = 1,   /* tokenizer.ggml.model = "llama" */
    BRISK_VOCAB_BPE = 2,   /* "gpt2", "gemma4" */
    BRISK_VOCAB_WPM = 3,   /* "bert" */
    BRISK_VOCAB_TEST = 4,  /* "test": llama.cpp's test fixtures (5-byte chunks hashed to ids, pieces are hex ids) */
    BRISK_VOCAB_NONE = 5,  /* "none" / "no_vocab": ids only, text cannot be tokenized */
} brisk_vocab_type;

/* Token attributes (a bit set, as llama.cpp's llama_token_attr). */
typedef enum brisk_token_attr {
    BRISK_TOKEN_UNDEFINED    = 0,
    BRISK_TOKEN_UNKNOWN      = 1 << 0,
    BRISK_TOKEN_UNUSED       = 1 << 1,
    BRISK_TOKEN_NORMAL       = 1 << 2,
    BRISK_TOKEN_CONTROL      = 1 << 3,
    BRISK_TOKEN_USER_DEFINED = 1 << 4,
    BRISK_TOKEN_BYTE         = 1 << 5,
    BRISK_TOKEN_LSTRIP       = 1 << 7,   /* eat whitespace before it when split out of text */
    BRISK_TOKEN_RSTRIP       = 1 << 8,   /* eat whitespace after it */
} brisk_token_attr;

/* Build a vocabulary from g's metadata. Everything needed is copied: g may be
 * closed afterwards. Errors name the key (missing tokens, wrong types, an
 * unknown tokenizer model or pre-tokenizer, a bad merge ...). */
brisk_status brisk_vocab_load(const brisk_gguf *g, brisk_vocab **out, brisk_error *err);
void brisk_vocab_free(brisk_vocab *v);   /* NULL is a no-op */

int32_t brisk_vocab_size(const brisk_vocab *v);
brisk_vocab_type brisk_vocab_get_type(const brisk_vocab *v);
const char *brisk_vocab_type_name(const brisk_vocab *v);   /* "SPM", "BPE", "WPM" */
const char *brisk_vocab_pre_name(const brisk_vocab *v);    /* resolved pre-tokenizer ("llama3", "default", ...) */

/* Special ids; -1 when the vocabulary has none. */
int32_t brisk_vocab_bos(const brisk_vocab *v);
int32_t brisk_vocab_eos(const brisk_vocab *v);
int32_t brisk_vocab_eot(const brisk_vocab *v);
int32_t brisk_vocab_unk(const brisk_vocab *v);
int32_t brisk_vocab_pad(const brisk_vocab *v);
int32_t brisk_vocab_sep(const brisk_vocab *v);
/* From tokenizer.ggml.add_bos_token / add_eos_token, else the model type's
 * default as in llama.cpp (SPM and WPM add BOS; BPE only for llama3-style pre). */
bool brisk_vocab_add_bos(const brisk_vocab *v);
bool brisk_vocab_add_eos(const brisk_vocab *v);
/* End of generation: eos, eot, eom and the end-of-turn tokens llama.cpp
 * recognises by text (<|im_end|>, <end_of_turn>, <|eot_id|>, ...). */
bool brisk_vocab_is_eog(const brisk_vocab *v, int32_t id);
bool brisk_vocab_is_control(const brisk_vocab *v, int32_t id);
/* Bit set of brisk_token_attr; 0 for an out-of-range id. */
uint32_t brisk_vocab_token_attr(const brisk_vocab *v, int32_t id);
/* The token's text as stored in the vocabulary (borrowed, valid until
 * brisk_vocab_free; not NUL-terminated). NULL for an out-of-range id. */
const char *brisk_vocab_token_text(const brisk_vocab *v, int32_t id, size_t *len);
/* Largest piece any token renders to, in bytes (sizes detokenizer buffers). */
size_t brisk_vocab_max_piece_len(const brisk_vocab *v);

/* ---- text -> ids ----------------------------------------------------------- */

typedef struct brisk_tokenize_opts {
    bool add_special;    /* add BOS/EOS (SPM, BPE) or CLS/SEP (WPM) as the vocab wants */
    bool parse_special;  /* recognise control tokens written in the text */
} brisk_tokenize_opts;

/* Tokenize text[0..len) (any bytes; NUL is an ordinary byte). *ids is
 * malloc'd (caller frees; NULL when *n_ids is 0). */
brisk_status brisk_tokenize(const brisk_vocab *v, const char *text, size_t len, brisk_tokenize_opts opts,
                            int32_t **ids, size_t *n_ids, brisk_error *err);

/* ---- ids -> text ------------------------------------------------------------ */

/* The bytes a token renders to, as the detokenizer emits it: byte tokens give
 * their byte, SPM's U+2581 becomes a space, byte-level BPE text is mapped back
 * to bytes, user-defined tokens give their text. Control and unknown tokens
 * render as nothing (as llama.cpp with special=false); use
 * brisk_token_to_piece_special to see their text. *len is set to the piece
 * length; if it exceeds cap, nothing is written and BRISK_ERR_CAPACITY is
 * returned. An out-of-range id is BRISK_ERR_INVALID_ARG. */
brisk_status brisk_token_to_piece(const brisk_vocab *v, int32_t id, char *buf, size_t cap, size_t *len, brisk_error *err);
/* As above; special = true renders control/unknown tokens as their text. */
brisk_status brisk_token_to_piece_special(const brisk_vocab *v, int32_t id, bool special, char *buf, size_t cap,
                                          size_t *len, brisk_error *err);

typedef struct brisk_detokenize_opts {
    bool special;        /* render control/unknown tokens as their text */
    bool strip_leading;  /* drop the leading space the SPM dummy prefix adds (llama.cpp's remove_space) */
    bool clean_spaces;   /* apply the vocab's clean_up_tokenization_spaces rule (BPE/WPM, " ," -> ",") */
} brisk_detokenize_opts;

/* One-shot detokenization of ids[0..n) into a malloc'd, NUL-terminated
 * buffer (*len excludes the NUL; caller frees). Bytes are emitted raw: an
 * incomplete UTF-8 tail stays as it is. */
brisk_status brisk_detokenize(const brisk_vocab *v, const int32_t *ids, size_t n, brisk_detokenize_opts opts,
                              char **out, size_t *len, brisk_error *err);

/* ---- streaming detokenizer ---------------------------------------------------
 * Emits only complete UTF-8 characters. Bytes of a character split across
 * tokens (byte-fallback or byte-level pieces) are held until the character is
 * complete. A byte that cannot start or continue a valid character (and a
 * character cut short by a byte that is not a continuation) is emitted as
 * U+FFFD, so the output stream is always valid UTF-8. No leading space is
 * stripped (generated text continues a prompt). */
typedef struct brisk_detok brisk_detok;

/* v is borrowed and must outlive the detokenizer. */
brisk_status brisk_detok_init(brisk_detok **out, const brisk_vocab *v, brisk_error *err);
void brisk_detok_free(brisk_detok *d);   /* NULL is a no-op */
/* Append token id and write the bytes that became complete to out[0..*len).
 * Never allocates. All or nothing: when the output does not fit in cap, it
 * returns BRISK_ERR_CAPACITY with *len = the size needed and the token is not
 * consumed. cap >= brisk_detok_push_cap(d) always suffices; that bound is per
 * vocabulary: 256 is enough for SPM vocabularies and for Llama 3, Qwen2,
 * GPT-2, Gemma 4 (pieces up to 128 bytes), not for vocabularies with longer
 * whitespace/punctuation pieces (GPT-NeoX/MPT: 524, StarCoder/Refact: 268).
 * Control and unknown tokens render as nothing (as brisk_token_to_piece). */
brisk_status brisk_detok_push(brisk_detok *d, int32_t id, char *out, size_t cap, size_t *len, brisk_error *err);
/* The output capacity that always suffices for one push. */
size_t brisk_detok_push_cap(const brisk_detok *d);
/* Emit what is still held (an incomplete character becomes U+FFFD, 3 bytes),
 * write at most cap bytes, return the count, and reset the stream. cap >= 3
 * always suffices. */
size_t brisk_detok_flush(brisk_detok *d, char *out, size_t cap);
/* Forget held bytes without emitting them. */
void brisk_detok_reset(brisk_detok *d);

#endif
