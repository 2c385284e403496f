/* options: the one option table of the brisk command line, the parser every
 * command uses, and the --help generated from both.
 *
 * A row is a flag's spellings (llama.cpp's where the meaning is the same, so
 * scripts written for llama-cli work), its type, its bounds, its default and
 * its help. Commands list the rows they take (cli_use) and may give their own
 * default; bounds and meaning are the row's everywhere. The exceptions follow
 * llama.cpp's own tools and are rows of their own whose help says so: bench's
 * -p/-n/-r/-o are llama-bench's (prompt tokens, generated tokens,
 * repetitions, output format), where everywhere else they are the prompt, the
 * tokens to predict, a reverse prompt and an output path. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define I32MAX 2147483647.0

static const cli_opt table[CLI_O_COUNT] = {
    [CLI_O_HELP] = {{"-h", "--help"}, .type = CLI_T_FLAG, .help = "print this help and exit"},
    [CLI_O_VERSION] = {{"--version"}, .type = CLI_T_FLAG, .help = "print the version and exit"},
    [CLI_O_VERBOSE] = {{"-v", "--verbose", "--log-verbose"}, .type = CLI_T_FLAG,
                       .help = "more detail on stderr: the memory plan of each context (weights, KV cache, scratch, logits)"},
    [CLI_O_MODEL] = {{"-m", "--model"}, .type = CLI_T_PATH, .meta = "PATH", .help = "GGUF model"},
    [CLI_O_PROMPT] = {{"-p", "--prompt"}, .type = CLI_T_STR, .meta = "TEXT",
                      .help = "prompt text, used as is (-e processes escapes)"},
    [CLI_O_FILE] = {{"-f", "--file"}, .type = CLI_T_PATH, .meta = "PATH",
                    .help = "read the text from a file, its bytes as they are ('-' = stdin)"},
    [CLI_O_N_PREDICT] = {{"-n", "--n-predict", "--predict"}, .type = CLI_T_INT, .meta = "N", .lo = -1, .hi = 1 << 24,
                         .def = "-1", .help = "tokens to generate; -1 = until end of generation or a full context"},
    [CLI_O_CTX_SIZE] = {{"-c", "--ctx-size"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = I32MAX,
                        .def_help = "4096, or the model's training context when smaller",
                        .help = "context size in tokens; 0 = the model's training context (more than that is allowed, "
                                "with a warning)"},
    [CLI_O_BATCH] = {{"-b", "--batch-size", "--batch"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 65536, .def = "512",
                     .help = "tokens per forward pass"},
    [CLI_O_THREADS] = {{"-t", "--threads"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 1024,
                       .def_help = "$BRISK_THREADS, else all CPUs", .help = "worker threads"},
    [CLI_O_NGL] = {{"-ngl", "--gpu-layers", "--n-gpu-layers"}, .type = CLI_T_INT, .meta = "N", .lo = -1, .hi = I32MAX,
                   .help = "accepted for llama.cpp scripts; no effect (brisk runs on the CPU)"},
    [CLI_O_MAX_INPUT] = {{"--max-input-bytes"}, .type = CLI_T_SIZE, .meta = "N", .lo = 1, .hi = (double)(1ll << 40),
                         .def = CLI_MAX_INPUT_DEFAULT,
                         .help = "largest input file (or stdin) read, in bytes (K, M, G suffixes)"},
    [CLI_O_OUTPUT] = {{"-o", "--output"}, .type = CLI_T_PATH, .meta = "PATH",
                      .help = "output file: written beside it and renamed into place; '-' = stdout"},

    [CLI_O_TEMP] = {{"--temp"}, .type = CLI_T_FLOAT, .meta = "T", .lo = 0, .hi = 100, .def = "0.8",
                    .help = "temperature; 0 = greedy"},
    [CLI_O_TOP_K] = {{"--top-k"}, .type = CLI_T_INT, .meta = "K", .lo = 0, .hi = 1 << 24, .def = "40",
                     .help = "keep the K most likely tokens; 0 = off"},
    [CLI_O_TOP_P] = {{"--top-p"}, .type = CLI_T_FLOAT, .meta = "P", .lo = 0, .hi = 1, .def = "0.95",
                     .help = "nucleus sampling; 1 = off"},
    [CLI_O_MIN_P] = {{"--min-p"}, .type = CLI_T_FLOAT, .meta = "P", .lo = 0, .hi = 1, .def = "0.05",
                     .help = "drop tokens below P x the top probability; 0 = off"},
    [CLI_O_REPEAT_PENALTY] = {{"--repeat-penalty"}, .type = CLI_T_FLOAT, .meta = "X", .lo = 1e-3, .hi = 1e3, .def = "1",
                              .help = "penalise tokens of the last --repeat-last-n; 1 = off"},
    [CLI_O_REPEAT_LAST_N] = {{"--repeat-last-n"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 1 << 20, .def = "64",
                             .help = "penalty window in tokens"},
    [CLI_O_REPEAT_MODE] = {{"--repeat-penalty-mode"}, .type = CLI_T_CHOICE, .meta = "MODE", .choices = "classic|logprob",
                           .def = "classic",
                           .help = "classic (llama.cpp: logit/X if > 0 else logit*X) or logprob (subtract ln X from the "
                                   "log-probability; independent of the logits' arbitrary offset)"},
    [CLI_O_FREQ_PENALTY] = {{"--frequency-penalty"}, .type = CLI_T_FLOAT, .meta = "X", .lo = -100, .hi = 100, .def = "0",
                            .help = "subtract X per occurrence in the window"},
    [CLI_O_PRESENCE_PENALTY] = {{"--presence-penalty"}, .type = CLI_T_FLOAT, .meta = "X", .lo = -100, .hi = 100,
                                .def = "0", .help = "subtract X once if present in the window"},
    [CLI_O_SEED] = {{"-s", "--seed"}, .type = CLI_T_SEED, .meta = "SEED", .def = "-1",
                    .help = "RNG seed; -1 = random (the seed used is printed to stderr, so a run can be repeated)"},
    [CLI_O_TYPICAL] = {{"--typical"}, .type = CLI_T_FLOAT, .meta = "P", .lo = 0, .hi = 1, .def = "1",
                       .help = "locally typical sampling; 1 = off"},
    [CLI_O_TOP_NSIGMA] = {{"--top-nsigma", "--top-n-sigma"}, .type = CLI_T_FLOAT, .meta = "N", .lo = -1, .hi = 1e3,
                          .def = "-1", .help = "keep logits within N standard deviations of the best; <= 0 = off"},
    [CLI_O_XTC_PROB] = {{"--xtc-probability"}, .type = CLI_T_FLOAT, .meta = "P", .lo = 0, .hi = 1, .def = "0",
                        .help = "chance per token of XTC (exclude top choices); 0 = off"},
    [CLI_O_XTC_THRESH] = {{"--xtc-threshold"}, .type = CLI_T_FLOAT, .meta = "P", .lo = 0, .hi = 1, .def = "0.1",
                          .help = "XTC removes every token with p >= P but the least likely of them; > 0.5 = off"},
    [CLI_O_MIROSTAT] = {{"--mirostat"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 2, .def = "0",
                        .help = "2 = mirostat v2 (replaces top-k, top-p, min-p, typical, XTC, DRY and the penalties, as "
                                "in llama.cpp); 0 = off; 1 (mirostat v1) is not supported"},
    [CLI_O_MIROSTAT_LR] = {{"--mirostat-lr"}, .type = CLI_T_FLOAT, .meta = "ETA", .lo = 0, .hi = 1e3, .def = "0.1",
                           .help = "mirostat learning rate"},
    [CLI_O_MIROSTAT_ENT] = {{"--mirostat-ent"}, .type = CLI_T_FLOAT, .meta = "TAU", .lo = 0, .hi = 1e3, .def = "5",
                            .help = "mirostat target entropy (surprise, bits)"},
    [CLI_O_MIN_KEEP] = {{"--min-keep"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 1 << 24, .def = "0",
                        .help = "top-p, min-p, typical and XTC keep at least N tokens"},
    [CLI_O_SAMPLERS] = {{"--samplers"}, .type = CLI_T_STR, .meta = "LIST",
                        .def = "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature",
                        .help = "the samplers in order, separated by ';' (llama.cpp's names and aliases)"},
    [CLI_O_DRY_MULT] = {{"--dry-multiplier"}, .type = CLI_T_FLOAT, .meta = "X", .lo = 0, .hi = 1e3, .def = "0",
                        .help = "DRY repetition penalty multiplier; 0 = off"},
    [CLI_O_DRY_BASE] = {{"--dry-base"}, .type = CLI_T_FLOAT, .meta = "X", .lo = 0, .hi = 1e3, .def = "1.75",
                        .help = "DRY penalty base: X^(repeat length - allowed length); < 1 = off"},
    [CLI_O_DRY_ALLOWED] = {{"--dry-allowed-length"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 1 << 20, .def = "2",
                           .help = "repeats longer than N tokens are penalised by DRY"},
    [CLI_O_DRY_LAST_N] = {{"--dry-penalty-last-n"}, .type = CLI_T_INT, .meta = "N", .lo = -1, .hi = 1 << 20, .def = "64",
                          .help = "tokens DRY scans for repeats; 0 = off, -1 = the context size"},
    [CLI_O_DRY_BREAKER] = {{"--dry-sequence-breaker"}, .type = CLI_T_LIST, .meta = "TEXT",
                           .def_help = "\\n : \" *",
                           .help = "a DRY sequence breaker, replacing the defaults (repeatable; 'none' = no breakers)"},

    [CLI_O_NO_BOS] = {{"--no-bos"}, .type = CLI_T_FLAG, .help = "do not add the BOS token"},
    [CLI_O_PARSE_SPECIAL] = {{"--parse-special"}, .type = CLI_T_FLAG,
                             .help = "parse control-token text (<|im_start|> ...) in the text as special tokens"},
    [CLI_O_NO_DISPLAY_PROMPT] = {{"--no-display-prompt"}, .type = CLI_T_FLAG,
                                 .help = "print only the generated text (default: the prompt, then the text)"},
    [CLI_O_ESCAPE] = {{"-e", "--escape"}, {"--no-escape"}, .type = CLI_T_FLAG,
                      .help = "process escapes (\\n \\t \\r \\\\ \\\" \\' \\xHH ...) in -p, -sys and -r; off by default: "
                              "code prompts contain backslashes"},
    [CLI_O_SYSTEM] = {{"-sys", "--system-prompt", "--system"}, .type = CLI_T_STR, .meta = "TEXT", .help = "system prompt"},
    [CLI_O_REVERSE] = {{"-r", "--reverse-prompt"}, .type = CLI_T_LIST, .meta = "TEXT",
                       .help = "stop when the generated text ends with TEXT (repeatable)"},
    [CLI_O_IGNORE_EOS] = {{"--ignore-eos"}, .type = CLI_T_FLAG,
                          .help = "do not stop at end of generation: end-of-generation tokens are never sampled"},
    [CLI_O_CONVERSATION] = {{"-cnv", "--conversation"}, {"-no-cnv", "--no-conversation"}, .type = CLI_T_FLAG,
                            .help = "conversation mode: run brisk chat with the same flags"},
    [CLI_O_COLOR] = {{"-co", "--color"}, .type = CLI_T_FLAG,
                     .help = "color the prompt (and chat's input marker) when stdout is a terminal"},
    [CLI_O_PROMPT_CACHE] = {{"--prompt-cache"}, .type = CLI_T_PATH, .meta = "FILE",
                            .help = "KV state file (as llama-cli's): load it when it exists, reuse the longest prefix it shares "
                                    "with the prompt and prefill only the rest, then save the prompt's KV to it. One from "
                                    "another model or context is ignored with a warning and rewritten; a corrupted one is "
                                    "an error and is left as it is"},
    [CLI_O_PROMPT_CACHE_ALL] = {{"--prompt-cache-all"}, .type = CLI_T_FLAG,
                                .help = "with --prompt-cache: save the generated tokens' KV too, at the end"},
    [CLI_O_PROMPT_CACHE_RO] = {{"--prompt-cache-ro"}, .type = CLI_T_FLAG,
                               .help = "with --prompt-cache: load it, never write it"},
    [CLI_O_ATTN_WINDOW] = {{"--attn-window"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = I32MAX,
                           .help = "windowed attention for the model itself (StreamingLLM-style, approximate: changes the "
                                   "output): each token sees the first --attn-sink positions and the last N"},
    [CLI_O_ATTN_SINK] = {{"--attn-sink"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = I32MAX, .def_help = "4",
                         .help = "sink positions with --attn-window"},

    [CLI_O_MODEL_DRAFT] = {{"-md", "--model-draft"}, .type = CLI_T_PATH, .meta = "PATH",
                           .help = "draft model (same vocabulary as -m)"},
    [CLI_O_SPEC] = {{"--spec"}, .type = CLI_T_CHOICE, .meta = "MODE", .choices = "none|draft|ngram|auto", .def = "none",
                    .help = "none, draft (needs -md), ngram (prompt lookup) or auto (adaptive draft length from the "
                            "measured cost curve, n-gram plus the draft model when -md is given; falls back to plain "
                            "decoding when speculation does not pay)"},
    [CLI_O_DRAFT_MAX] = {{"--draft-max"}, .type = CLI_T_INT, .meta = "K", .lo = 1, .hi = 32,
                         .def_help = "4 / 8 / 16 for draft / ngram / auto",
                         .help = "draft tokens per target pass: fixed for draft/ngram, the upper bound for auto"},
    [CLI_O_DRAFT_WIDTH] = {{"--draft-width"}, .type = CLI_T_INT, .meta = "W", .lo = 1, .hi = 4, .def = "1",
                           .help = "draft trees with up to W children per node (1 = chains), verified in one target pass "
                                   "with a tree attention mask. n-gram: the continuations of W distinct matches (also "
                                   "when sampling: multi-candidate rejection sampling); draft model (temperature 0 "
                                   "only): up to W-1 runners-up per position, where the draft gives the path to them "
                                   ">= 5%; auto: the cost model picks chain, tree or plain decoding every round"},
    [CLI_O_DRAFT_TREE] = {{"--draft-tree"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 32,
                          .def_help = "min(32, W * K)", .help = "at most N tree nodes per pass"},
    [CLI_O_DRAFT_WINDOW] = {{"--draft-window"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = I32MAX,
                            .help = "the draft model attends only to its first --draft-sink positions and the last N, so "
                                    "drafting costs the same at any context length (verification keeps full attention: "
                                    "output unchanged, only acceptance can drop)"},
    [CLI_O_DRAFT_SINK] = {{"--draft-sink"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = I32MAX, .def_help = "4",
                          .help = "sink positions with --draft-window"},
    [CLI_O_NGRAM_MIN] = {{"--ngram-min"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 64, .def = "2",
                         .help = "shortest suffix match the n-gram drafter uses"},
    [CLI_O_NO_CALIBRATE] = {{"--no-calibrate"}, .type = CLI_T_FLAG, .help = "auto: measure only the single-token cost at start"},
    [CLI_O_SPEC_COMPARE] = {{"--spec-compare"}, .type = CLI_T_FLAG,
                            .help = "afterwards, rerun the prompt plainly (no output) and report the speedup and whether "
                                    "the tokens are identical"},
    [CLI_O_SPEC_COST] = {{"--spec-cost"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 256,
                         .help = "after generation, print the target's cost per pass of 1..N tokens at the current "
                                 "position (min of --spec-cost-reps runs)"},
    [CLI_O_SPEC_COST_REPS] = {{"--spec-cost-reps"}, .type = CLI_T_INT, .meta = "R", .lo = 1, .hi = 1000, .def = "5",
                              .help = "runs per --spec-cost measurement"},

    [CLI_O_CHAT_TEMPLATE] = {{"--chat-template", "--chat-template-file"}, .type = CLI_T_PATH, .meta = "FILE",
                             .help = "a file holding the Jinja chat template to use instead of the model's (unlike "
                                     "llama.cpp's --chat-template, which takes the template text)"},
    [CLI_O_ALL] = {{"--all"}, .type = CLI_T_FLAG, .help = "print arrays whole (default: their length and first elements)"},
    [CLI_O_CACHE_TYPE_K] = {{"-ctk", "--cache-type-k"}, .type = CLI_T_STR, .meta = "TYPE", .def = "f16",
                            .help = "KV cache type for K: f16, f32, q8_0, q4_0 (llama.cpp's names, any case), k4, k2 (KIVI: per-channel K; docs/KV.md), "
                                    "hyb4, hyb2 (k4/k2 with the sinks, the newest block and the 5% most attended slots in F16; K and V together)"},
    [CLI_O_CACHE_TYPE_V] = {{"-ctv", "--cache-type-v"}, .type = CLI_T_STR, .meta = "TYPE", .def = "f16",
                            .help = "KV cache type for V: f16, f32, q8_0, q4_0, k4, k2 (KIVI: per-token V), hyb4, hyb2 (with -ctk hyb4/hyb2)"},
    [CLI_O_K_HADAMARD] = {{"-khad", "--k-hadamard"}, .type = CLI_T_FLAG,
                          .help = "store K rotated by a Hadamard transform per head, the queries alike (q.k unchanged): a q8_0 or "
                                  "q4_0 K loses less (docs/KV.md); needs -ctk q8_0 or q4_0"},
    [CLI_O_FLASH_ATTN] = {{"-fa", "--flash-attn"}, .type = CLI_T_CHOICE, .meta = "on|off|auto", .choices = "on|off|auto", .def = "auto",
                          .help = "accepted for llama.cpp compatibility; brisk's attention is always tiled (flash) attention"},
    [CLI_O_KLD_BASE] = {{"--kl-divergence-base"}, .type = CLI_T_PATH, .meta = "FILE",
                        .help = "llama-perplexity's log-probability file: written (alone) or read (with --kl-divergence)"},
    [CLI_O_KLD] = {{"--kl-divergence"}, .type = CLI_T_FLAG,
                   .help = "KL divergence against --kl-divergence-base's file, printed as llama-perplexity does"},
    [CLI_O_KV_POLICY] = {{"--kv-policy"}, .type = CLI_T_CHOICE, .meta = "none|streaming|random|h2o|snapkv|tova|oracle|memdecay|role",
                         .choices = "none|streaming|random|h2o|snapkv|tova|oracle|memdecay|role", .def = "none",
                         .help = "KV retention, beside the sinks and the window: streaming keeps the newest slots, random a seeded random "
                                 "rest, h2o the most attention over every query, snapkv the most (pooled) attention of the last --kv-window "
                                 "queries, tova the most attention of the newest query, oracle (perplexity only, a reference) the most "
                                 "attention of the queries still to come, memdecay the slots attended most recently (decaying by role), role by each token's role in the JSON around it (punctuation first, keys last); evicted slots are compacted and their blocks freed (docs/KV.md)"},
    [CLI_O_KV_BUDGET] = {{"--kv-budget"}, .type = CLI_T_STR, .meta = "N|F",
                         .help = "KV slots per sequence with --kv-policy, sinks and window included: an integer >= 1, or a fraction "
                                 "0 < F < 1 of -c"},
    [CLI_O_KV_SINK] = {{"--kv-sink"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = I32MAX, .def = "4",
                       .help = "first slots a --kv-policy always keeps (attention sinks)"},
    [CLI_O_KV_WINDOW] = {{"--kv-window"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = I32MAX, .def = "32",
                         .help = "last slots a --kv-policy always keeps (the recent window)"},
    [CLI_O_KV_PER_HEAD] = {{"--kv-per-head"}, .type = CLI_T_FLAG,
                           .help = "with --kv-policy h2o, snapkv, tova, oracle or memdecay: each layer's KV heads rank and keep their own slots (the papers' "
                                   "per-head selection), each keeping --kv-budget, so the same blocks are freed (docs/KV.md)"},
    [CLI_O_CONTEXT_SHIFT] = {{"--context-shift"}, {"--no-context-shift"}, .type = CLI_T_FLAG, .def_help = "off",
                             .help = "when generation reaches -c (with --kv-policy: the model's trained context), drop the oldest "
                                     "unpinned half after the first --kv-sink slots and move the rest to smaller positions, re-rotating K "
                                     "(llama.cpp's context shift), and go on; --no-context-shift stops there (finish reason length)"},
    [CLI_O_KV_PIN] = {{"--kv-pin"}, .type = CLI_T_LIST, .meta = "ROLE",
                      .help = "never evict (--kv-policy) nor shift out (--context-shift) the slots of ROLE; repeatable. run: prompt, "
                              "generated; chat and run -cnv: system, user, assistant, tool"},
    [CLI_O_CHUNKS] = {{"--chunks"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = I32MAX, .def_help = "all",
                      .help = "score at most N chunks"},
    [CLI_O_TOKENS] = {{"--tokens"}, .type = CLI_T_PATH, .meta = "PATH",
                      .help = "input token ids, int32 little-endian ('-' = stdin)"},
    [CLI_O_SHAPE] = {{"--shape"}, .type = CLI_T_STR, .meta = "NAME", .help = "the tensor shapes to write (list below)"},
    [CLI_O_SYNTH_VOCAB] = {{"--vocab"}, .type = CLI_T_PATH, .meta = "FILE.gguf",
                           .help = "copy every tokenizer.* key of FILE (a model or a vocabulary-only GGUF) and size token_embd and "
                                   "output to its token count: the model tokenizes as FILE does (its count overrides the shape's)"},
    [CLI_O_TYPE] = {{"--type"}, .type = CLI_T_STR, .meta = "TYPE",
                    .help = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4"},
    [CLI_O_IDS] = {{"--ids"}, .type = CLI_T_FLAG, .help = "print only the ids, separated by spaces, on one line"},
    [CLI_O_MESSAGES] = {{"--messages"}, .type = CLI_T_PATH, .meta = "FILE",
                        .help = "the conversation, a JSON array ('-' reads stdin)"},
    [CLI_O_ADD_GEN_PROMPT] = {{"--add-generation-prompt"}, .type = CLI_T_FLAG, .help = "end with the assistant turn header"},
    [CLI_O_VAR] = {{"--var"}, .type = CLI_T_LIST, .meta = "NAME=JSON",
                   .help = "set a template variable to a JSON value, e.g. --var enable_thinking=false or --var "
                           "'bos_token=\"<s>\"'; repeatable, later wins"},

    [CLI_O_BENCH_N_PROMPT] = {{"-p", "--n-prompt"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 1 << 20, .def = "512",
                              .help = "prompt tokens for pp; 0 = skip (llama-bench's -p)"},
    [CLI_O_BENCH_N_GEN] = {{"-n", "--n-gen"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 1 << 20, .def = "128",
                           .help = "generated tokens for tg; 0 = skip (llama-bench's -n)"},
    [CLI_O_BENCH_REPS] = {{"-r", "--repetitions"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 1000, .def = "5",
                          .help = "timed repetitions after one warm-up (llama-bench's -r)"},
    [CLI_O_BENCH_FORMAT] = {{"-o", "--output"}, .type = CLI_T_CHOICE, .meta = "FORMAT", .choices = "md|json", .def = "md",
                            .help = "md or json (llama-bench's field names); llama-bench's -o: a format, not a path"},
    [CLI_O_NO_ROOFLINE] = {{"--no-roofline"}, .type = CLI_T_FLAG, .help = "skip the bandwidth measurement"},
    [CLI_O_BENCH_N_DEPTH] = {{"-d", "--n-depth"}, .type = CLI_T_STR, .meta = "LIST", .def = "0",
                             .help = "context depths, comma-separated: pp and tg are timed after N tokens are already in the "
                                     "KV cache (filled first, untimed; llama-bench's -d)"},
    [CLI_O_UBATCH] = {{"-ub", "--ubatch-size"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 65536, .def = "512",
                      .help = "tokens per forward pass (the physical batch; -b is the logical one)"},
    [CLI_O_NPP] = {{"-npp"}, .type = CLI_T_STR, .meta = "LIST", .def = "128",
                   .help = "prompt lengths to test, comma-separated (e.g. 128,256,512)"},
    [CLI_O_NTG] = {{"-ntg"}, .type = CLI_T_STR, .meta = "LIST", .def = "128", .help = "tokens to generate per sequence, comma-separated"},
    [CLI_O_NPL] = {{"-npl"}, .type = CLI_T_STR, .meta = "LIST", .def = "1", .help = "parallel sequences, comma-separated (e.g. 1,2,4,8,16)"},
    [CLI_O_PPS] = {{"-pps"}, .type = CLI_T_FLAG,
                   .help = "the sequences share one prompt: computed once for sequence 0, then forked (its KV blocks shared)"},
    [CLI_O_BB_FORMAT] = {{"--output-format"}, .type = CLI_T_CHOICE, .meta = "FORMAT", .choices = "md|jsonl", .def = "md",
                         .help = "md: llama-batched-bench's table; jsonl: one JSON object per line with its field names"},
    [CLI_O_BB_SPEC] = {{"--spec"}, .type = CLI_T_CHOICE, .meta = "MODE", .choices = "off|ngram|auto", .def = NULL,
                       .def_help = "not given: llama-batched-bench's loop (random tokens, no sampling)",
                       .help = "run through the scheduler (brisk_sched), each sequence sampled greedily, with speculation "
                               "off (the baseline), ngram (n-gram drafts whenever they match) or auto (drafts only when the "
                               "measured cost curve says they pay)"},
    [CLI_O_ISA] = {{"--isa"}, .type = CLI_T_STR, .meta = "NAME",
                   .help = "kernel table to run: ref, avx2, avx2-vnni, avx512, neon, neon-dotprod, neon-i8mm (as BRISK_ISA=NAME; "
                           "one this CPU lacks is refused); default: the best this CPU runs"},
    /* drafter-only compression (kv_flags.c: cli_kv_draft): the draft model's cache, never the target's */
    [CLI_O_CACHE_TYPE_K_DRAFT] = {{"-ctkd", "--cache-type-k-draft"}, .type = CLI_T_STR, .meta = "TYPE", .def_help = "f16",
                                  .help = "the draft model's KV cache type for K (f16, f32, q8_0, q4_0, k4, k2, as -ctk); the target's "
                                          "cache is unchanged, so only the acceptance rate can change (docs/KV.md)"},
    [CLI_O_CACHE_TYPE_V_DRAFT] = {{"-ctvd", "--cache-type-v-draft"}, .type = CLI_T_STR, .meta = "TYPE", .def_help = "f16",
                                  .help = "the draft model's KV cache type for V (as -ctv)"},
    [CLI_O_KV_POLICY_DRAFT] = {{"--kv-policy-draft"}, .type = CLI_T_STR, .meta = "NAME", .def_help = "none",
                               .help = "the draft model's KV retention policy (the names of --kv-policy): its evicted slots are "
                                       "compacted and its pool holds only --kv-budget-draft slots; the target keeps its full cache"},
    [CLI_O_KV_BUDGET_DRAFT] = {{"--kv-budget-draft"}, .type = CLI_T_STR, .meta = "N|F",
                               .help = "the draft's KV slots with --kv-policy-draft, sinks and window included: an integer >= 1, "
                                       "or a fraction 0 < F < 1 of -c (as --kv-budget)"},
    [CLI_O_KV_SINK_DRAFT] = {{"--kv-sink-draft"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = I32MAX, .def = "4",
                             .help = "first slots --kv-policy-draft always keeps (as --kv-sink)"},
    [CLI_O_KV_WINDOW_DRAFT] = {{"--kv-window-draft"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = I32MAX, .def = "32",
                               .help = "last slots --kv-policy-draft always keeps (as --kv-window)"},
    [CLI_O_PACK_CACHE] = {{"--pack-cache"}, .type = CLI_T_STR, .meta = "auto|off|DIR",
                          .def_help = "$BRISK_PACK_CACHE, else off",
                          .help = "keep the weights' packed-GEMM layout in a cache file and map it at later loads instead of "
                                  "repacking (faster start-up; the file is about the model's size): auto = beside the model "
                                  "(MODEL.ISA.brisk-pack), DIR = in that directory; a stale or foreign cache is refused and "
                                  "rewritten (docs/PERFORMANCE.md)"},

    [CLI_O_HOST] = {{"--host"}, .type = CLI_T_STR, .meta = "ADDR", .def = "127.0.0.1",
                    .help = "address to listen on (an IPv4 or IPv6 address or a host name; 0.0.0.0 exposes the server)"},
    [CLI_O_PORT] = {{"--port"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 65535, .def = "8080",
                    .help = "TCP port; 0 = any free port (the address printed at startup says which)"},
    [CLI_O_KV_SIZE] = {{"--kv-size"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = I32MAX,
                       .def_help = "what fits in half the memory available after the weights, at least one -c request",
                       .help = "tokens in the KV pool that all requests share (-c is each request's own cap)"},
    [CLI_O_MAX_RUNNING] = {{"-np", "--max-running", "--parallel"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 256,
                           .def = "8", .help = "requests computed at once (llama-server's -np/--parallel; -c is never divided by it)"},
    [CLI_O_MAX_QUEUE] = {{"--max-queue"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 1 << 20, .def = "64",
                         .help = "requests waiting at most; one more is answered 429 with Retry-After"},
    [CLI_O_ALIAS] = {{"-a", "--alias"}, .type = CLI_T_STR, .meta = "NAME", .def_help = "the model file's name",
                     .help = "the model's name in responses and /v1/models (any requested name is accepted)"},
    [CLI_O_API_KEY] = {{"--api-key"}, .type = CLI_T_STR, .meta = "KEY",
                       .help = "require this key (Authorization: Bearer KEY or X-Api-Key: KEY) on every endpoint but /health "
                               "and the web page"},
    [CLI_O_MAX_BODY] = {{"--max-body"}, .type = CLI_T_SIZE, .meta = "N", .lo = 1024, .hi = (double)(1ll << 30), .def = "8M",
                        .help = "largest request body in bytes (K, M, G suffixes); more is answered 413"},
    [CLI_O_MAX_PROMPT_TOKENS] = {{"--max-prompt-tokens"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = I32MAX,
                                 .def_help = "-c", .help = "longest prompt in tokens; longer is answered 400 context_length_exceeded"},
    [CLI_O_CONN_LIMIT] = {{"--max-connections"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 1 << 20, .def = "4096",
                          .help = "open connections at most"},
    [CLI_O_PER_IP_LIMIT] = {{"--max-connections-per-ip"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 1 << 20, .def = "1024",
                            .help = "open connections per client address at most (0 = no limit)"},
    [CLI_O_TIMEOUT] = {{"-to", "--timeout"}, .type = CLI_T_INT, .meta = "S", .lo = 0, .hi = 86400, .def = "600",
                       .help = "close a connection idle this many seconds (0 = never); a streaming reply is never idle"},
    [CLI_O_HTTP_THREADS] = {{"--threads-http"}, .type = CLI_T_INT, .meta = "N", .lo = 1, .hi = 64, .def = "2",
                            .help = "HTTP threads (event-driven: each serves many connections)"},
    [CLI_O_DRAIN_TIMEOUT] = {{"--drain-timeout"}, .type = CLI_T_FLOAT, .meta = "S", .lo = 0, .hi = 86400, .def = "30",
                             .help = "on SIGTERM or SIGINT, seconds to let running requests finish before they are cancelled"},

    [CLI_O_ALLOW_REQUANTIZE] = {{"--allow-requantize"}, .type = CLI_T_FLAG,
                                .help = "quantize tensors that are already quantized (dequantized first; loses quality)"},
    [CLI_O_LEAVE_OUTPUT] = {{"--leave-output-tensor"}, .type = CLI_T_FLAG, .help = "copy output.weight as it is"},
    [CLI_O_PURE] = {{"--pure"}, .type = CLI_T_FLAG,
                    .help = "no mixture: every quantizable tensor gets TYPE's own type (shape fallbacks still apply)"},
    [CLI_O_IMATRIX] = {{"--imatrix"}, .type = CLI_T_PATH, .meta = "FILE",
                       .help = "importance matrix of llama-imatrix (GGUF or legacy .dat)"},
    [CLI_O_OUTPUT_TENSOR_TYPE] = {{"--output-tensor-type"}, .type = CLI_T_STR, .meta = "TYPE",
                                  .help = "type of output.weight (ggml's names: q8_0, q6_K, f16 ...)"},
    [CLI_O_TOKEN_EMBD_TYPE] = {{"--token-embedding-type"}, .type = CLI_T_STR, .meta = "TYPE",
                               .help = "type of token_embd.weight"},
    [CLI_O_TENSOR_TYPE] = {{"--tensor-type"}, .type = CLI_T_LIST, .meta = "REGEX=TYPE",
                           .help = "tensors whose name matches REGEX (lowercased, searched) get TYPE; repeatable, the first "
                                   "match wins"},
    [CLI_O_OVERRIDE_KV] = {{"--override-kv"}, .type = CLI_T_LIST, .meta = "KEY=TYPE:VALUE",
                           .help = "set a metadata key in the output: int (stored as u32 of |VALUE|), float, bool or str "
                                   "(at most 127 bytes); repeatable"},
    [CLI_O_INCLUDE_WEIGHTS] = {{"--include-weights"}, .type = CLI_T_LIST, .meta = "NAME",
                               .help = "use the importance matrix only for tensors whose name contains NAME; repeatable"},
    [CLI_O_EXCLUDE_WEIGHTS] = {{"--exclude-weights"}, .type = CLI_T_LIST, .meta = "NAME",
                               .help = "do not use the importance matrix for tensors whose name contains NAME; repeatable"},
    [CLI_O_API_KEY_FILE] = {{"--api-key-file"}, .type = CLI_T_PATH, .meta = "FILE",
                            .help = "accept every key in FILE (one per line; blank lines and lines starting with # skipped), "
                                    "as --api-key does"},
    [CLI_O_CORS_ORIGINS] = {{"--cors-origins"}, .type = CLI_T_STR, .meta = "LIST",
                            .help = "allow these browser origins (comma-separated, or *) to call the API; CORS is off unless given"},
    [CLI_O_LOG_PROMPTS] = {{"--log-prompts"}, .type = CLI_T_FLAG,
                           .help = "write each request's prompt text to the log (otherwise only its token counts)"},
    [CLI_O_MAX_STALL] = {{"--max-stall"}, .type = CLI_T_FLOAT, .meta = "F", .lo = 0, .hi = 1000, .def = "0",
                         .help = "while requests decode, a step's prompt tokens may add at most F times the decode time "
                                 "(measured), so streams keep their pace while a long prompt is read: inter-token time "
                                 "<= (1 + F) x the current decode step (measured by decode-only probe steps); 0 = no limit (prompt chunks "
                                 "fill -b). 1 suits interactive multi-user serving: docs/SERVER.md \"Stall-bounded prefill\""},
    [CLI_O_PREFILL_BUDGET] = {{"--prefill-budget"}, .type = CLI_T_INT, .meta = "N", .lo = 0, .hi = 1 << 20, .def = "0",
                              .help = "while requests decode, a step computes at most N prompt tokens, so streams keep their pace "
                                      "while a long prompt is read (it then takes longer to its first token); 0 = no limit "
                                      "(prompt chunks fill -b). See docs/SERVER.md"},
    [CLI_O_BATCH_WINDOW] = {{"--batch-window"}, .type = CLI_T_FLOAT, .meta = "MS", .lo = 0, .hi = 10000, .def = "0",
                            .help = "with nothing running, start the first step once no request has arrived for MS "
                                    "milliseconds (at most 10 x MS after the first; at once when -np requests wait), so a "
                                    "burst of arrivals is prefilled in one pass and decodes in lockstep; 0 = start at the "
                                    "first arrival. See docs/SERVER.md"},
    [CLI_O_QUEUE_TIMEOUT] = {{"--queue-timeout"}, .type = CLI_T_FLOAT, .meta = "S", .lo = 0, .hi = 86400, .def = "600",
                             .help = "a request not given a slot within S seconds gets 503 queue_timeout (0 = wait forever)"},
    [CLI_O_HEADER_TIMEOUT] = {{"--header-timeout"}, .type = CLI_T_FLOAT, .meta = "S", .lo = 0.1, .hi = 3600, .def = "10",
                              .help = "close a connection whose request headers are not complete within S seconds of its "
                                      "opening or of its previous response (slowloris)"},
    [CLI_O_STREAM_QUANTUM] = {{"--stream-quantum"}, .type = CLI_T_FLOAT, .meta = "MS", .lo = 0, .hi = 10000, .def = "0",
                              .help = "stream on a fixed schedule: one write every MS milliseconds, padded to a multiple of "
                                      "512 bytes, so packet timing and size do not tell how many tokens each step made "
                                      "(0 = off: each token as soon as it is sampled)"},
    [CLI_O_KV_DIR] = {{"--kv-dir"}, .type = CLI_T_STR, .meta = "DIR",
                      .help = "enable POST /kv/save and /kv/restore: KV states named NAME are DIR/NAME.kvstate (names of "
                              "A-Z a-z 0-9 _ - . only)"},
    [CLI_O_SERVE_SPEC] = {{"--spec"}, .type = CLI_T_CHOICE, .meta = "MODE", .choices = "off|ngram|auto|draft", .def = "off",
                          .help = "speculative decoding for requests that do not choose (their \"spec\" field): off, ngram "
                                  "(prompt-lookup drafts), auto (n-gram drafts only when the measured cost curve says they "
                                  "pay) or draft (the -md draft model, its draft length per request from the cost curve, "
                                  "the draft's cost and its acceptance)"},
    [CLI_O_GRAMMAR] = {{"--grammar"}, .type = CLI_T_STR, .meta = "GBNF",
                       .help = "constrain the output to a GBNF grammar (llama.cpp's format; rule 'root')"},
    [CLI_O_GRAMMAR_FILE] = {{"--grammar-file"}, .type = CLI_T_PATH, .meta = "FILE", .help = "the same, from a .gbnf file"},
    [CLI_O_JSON_SCHEMA] = {{"-j", "--json-schema"}, .type = CLI_T_STR, .meta = "SCHEMA",
                           .help = "constrain the output to JSON valid under a JSON Schema (unsupported keywords are errors)"},
    [CLI_O_JSON_SCHEMA_FILE] = {{"--json-schema-file"}, .type = CLI_T_PATH, .meta = "FILE", .help = "the same, from a file"},
    [CLI_O_REGEX] = {{"--regex"}, .type = CLI_T_STR, .meta = "RE",
                     .help = "constrain the output to match a regular expression as a whole (ECMAScript subset)"},
    [CLI_O_CHOICE] = {{"--choice"}, .type = CLI_T_STR, .meta = "A,B,C",
                      .help = "the output is exactly one of the comma-separated strings (write a comma in one as \\,)"},
};

static const cli_use implicit[] = {{.id = CLI_O_HELP}, {.id = CLI_O_VERSION}, {.id = CLI_O_END}};

const cli_opt *cli_opt_get(cli_opt_id id) { return &table[id]; }

/* The long spelling (the last of the first two), for messages about unset flags. */
const char *cli_opt_name(cli_opt_id id) {
    const cli_opt *o = &table[id];
    return o->names[1] ? o->names[1] : o->names[0];
}

typedef struct use_iter {
    const cli_spec *spec;
    int part, k;
} use_iter;

/* Every option of the command in --help order: its own, then -h and --version. */
static const cli_use *next_use(use_iter *it) {
    for (;;) {
        const cli_use *list = it->part == 0 ? it->spec->uses : it->part == 1 ? implicit : NULL;
        if (!list) return NULL;
        const cli_use *u = &list[it->k];
        if (u->id == CLI_O_END) {
            it->part++;
            it->k = 0;
            continue;
        }
        it->k++;
        return u;
    }
}

/* Parse one value into a (quiet: no message; for checking the defaults). */
static bool parse_value(const char *cmd, const cli_use *u, const char *flag, const char *v, cli_args *a, bool from_argv) {
    const cli_opt *o = &table[u->id];
    const double lo = u->has_range ? u->lo : o->lo, hi = u->has_range ? u->hi : o->hi;
    const cli_opt_id id = u->id;
    switch (o->type) {
    case CLI_T_INT: return cli_parse_int(cmd, flag, v, (int64_t)lo, (int64_t)hi, &a->i[id]);
    case CLI_T_SIZE: return cli_parse_size(cmd, flag, v, (int64_t)lo, (int64_t)hi, &a->i[id]);
    case CLI_T_FLOAT: return cli_parse_float(cmd, flag, v, lo, hi, &a->f[id]);
    case CLI_T_SEED: return cli_parse_seed(cmd, flag, v, &a->u[id]);
    case CLI_T_STR: case CLI_T_PATH: a->s[id] = v; return true;
    case CLI_T_LIST:
        if (from_argv) a->list[id][a->n_list[id]++] = v;
        return true;
    case CLI_T_CHOICE: {
        const char *c = o->choices;
        const size_t n = strlen(v);
        for (int k = 0; *c; k++) {
            const char *bar = strchr(c, '|');
            const size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (len == n && !memcmp(c, v, n)) {
                a->i[id] = k;
                a->s[id] = v;
                return true;
            }
            c += len + (bar != NULL);
        }
        fprintf(stderr, "brisk %s: %s: '%s' is not one of %s\n", cmd, flag, v, o->choices);
        return false;
    }
    case CLI_T_FLAG: return true;
    }
    return false;
}

/* A name of the command's options, and whether it is a negative spelling. */
static const cli_use *find_name(const cli_spec *spec, const char *name, size_t n, bool *neg) {
    use_iter it = {spec, 0, 0};
    for (const cli_use *u; (u = next_use(&it));) {
        if (u->id == CLI_O_HEADING) continue;
        const cli_opt *o = &table[u->id];
        for (int k = 0; k < 4 && o->names[k]; k++)
            if (strlen(o->names[k]) == n && !memcmp(o->names[k], name, n)) { *neg = false; return u; }
        for (int k = 0; k < 3 && o->neg[k]; k++)
            if (strlen(o->neg[k]) == n && !memcmp(o->neg[k], name, n)) { *neg = true; return u; }
    }
    return NULL;
}

/* Two options of one command spelled alike would make one of them
 * unreachable: a programmer error, caught on every parse (it is cheap). */
static void check_spec(const cli_spec *spec) {
    use_iter it = {spec, 0, 0};
    for (const cli_use *u; (u = next_use(&it));) {
        if (u->id == CLI_O_HEADING) continue;
        const cli_opt *o = &table[u->id];
        for (int k = 0; k < 7; k++) {
            const char *nm = k < 4 ? o->names[k] : o->neg[k - 4];
            if (!nm) continue;
            bool neg;
            const cli_use *f = find_name(spec, nm, strlen(nm), &neg);
            if (f != u) {
                fprintf(stderr, "brisk %s: internal error: option '%s' is declared twice\n", spec->name, nm);
                abort();
            }
        }
    }
}

static void suggest(const cli_spec *spec, const char *arg, size_t n) {
    char name[80];
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, arg, n);
    name[n] = 0;
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    use_iter it = {spec, 0, 0};
    for (const cli_use *u; (u = next_use(&it));) {
        if (u->id == CLI_O_HEADING) continue;
        const cli_opt *o = &table[u->id];
        for (int k = 0; k < 7; k++) {
            const char *cand = k < 4 ? o->names[k] : o->neg[k - 4];
            if (!cand) continue;
            const size_t cl = strlen(cand);
            /* a prefix either way (--temperature for --temp, --thread for --threads) is as close as one edit */
            const bool prefix = cl >= 4 && n >= 4 && (!strncmp(cand, name, cl < n ? cl : n));
            const size_t d = prefix ? 1 : cli_edit_distance(name, cand);
            if (d < best_d) { best_d = d; best = cand; }
        }
    }
    /* an option of another command */
    for (int id = CLI_O_HELP; id < CLI_O_COUNT; id++)
        for (int k = 0; k < 4 && table[id].names[k]; k++)
            if (!strcmp(table[id].names[k], name)) {
                fprintf(stderr, "brisk %s: unknown option '%s': brisk %s does not take it (see brisk %s --help)\n",
                        spec->name, name, spec->name, spec->name);
                return;
            }
    const size_t limit = n / 3 > 2 ? n / 3 : 2;
    if (best && best_d <= limit) {
        fprintf(stderr, "brisk %s: unknown option '%s' (did you mean '%s'?)\n", spec->name, name, best);
        return;
    }
    fprintf(stderr, "brisk %s: unknown option '%s' (see brisk %s --help)\n", spec->name, name, spec->name);
}

bool cli_parse(const cli_spec *spec, int argc, char **argv, cli_args *a, int *exit_code) {
    memset(a, 0, sizeof *a);
    a->spec = spec;
    *exit_code = CLI_EXIT_USAGE;
    check_spec(spec);
    const char *cmd = spec->name;
    /* defaults, parsed like any value: a default outside its bounds is a bug */
    use_iter it = {spec, 0, 0};
    for (const cli_use *u; (u = next_use(&it));) {
        if (u->id == CLI_O_HEADING) continue;
        const cli_opt *o = &table[u->id];
        a->given[u->id] = cli_opt_name(u->id);
        if (o->type == CLI_T_LIST && !a->list[u->id]) {
            a->list[u->id] = calloc((size_t)argc + 1, sizeof(char *));
            if (!a->list[u->id]) {
                fprintf(stderr, "brisk %s: out of memory\n", cmd);
                *exit_code = CLI_EXIT_RUNTIME;
                return false;
            }
        }
        const char *def = u->def ? u->def : o->def;
        a->has_default[u->id] = def != NULL;
        if (def && !parse_value(cmd, u, cli_opt_name(u->id), def, a, false)) {
            fprintf(stderr, "brisk %s: internal error: bad default '%s' for %s\n", cmd, def, cli_opt_name(u->id));
            abort();
        }
    }
    if (spec->max_positional > 0) {
        a->pos = calloc((size_t)spec->max_positional, sizeof(char *));
        if (!a->pos) {
            fprintf(stderr, "brisk %s: out of memory\n", cmd);
            *exit_code = CLI_EXIT_RUNTIME;
            return false;
        }
    }
    bool only_positional = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const bool looks_like_flag = !only_positional && arg[0] == '-' && arg[1] != 0;
        if (looks_like_flag && !strcmp(arg, "--")) { only_positional = true; continue; }
        if (!looks_like_flag) {
            if (spec->max_positional <= 0) {
                fprintf(stderr, "brisk %s: unexpected argument '%s' (see brisk %s --help)\n", cmd, arg, cmd);
                return false;
            }
            if (a->n_pos == spec->max_positional) {
                fprintf(stderr, "brisk %s: one %s at a time ('%s' is extra)\n", cmd, spec->positional, arg);
                return false;
            }
            a->pos[a->n_pos++] = arg;
            continue;
        }
        /* --name=value for long options */
        const char *eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
        const size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
        bool neg = false;
        const cli_use *u = find_name(spec, arg, n, &neg);
        if (!u) {
            suggest(spec, arg, n);
            return false;
        }
        const cli_opt *o = &table[u->id];
        snprintf(a->given_buf[u->id], sizeof a->given_buf[u->id], "%.*s", (int)n, arg);
        const char *flag = a->given_buf[u->id];
        a->given[u->id] = flag;
        a->set[u->id] = true;
        if (o->type == CLI_T_FLAG) {
            if (eq) {
                fprintf(stderr, "brisk %s: %s takes no value\n", cmd, flag);
                return false;
            }
            a->i[u->id] = !neg;
            if (u->id == CLI_O_HELP) {
                cli_print_help(spec, stdout);
                *exit_code = cli_stdout_finish(cmd, CLI_EXIT_OK);
                return false;
            }
            if (u->id == CLI_O_VERSION) {
                printf("brisk %s\n", CLI_VERSION);
                *exit_code = cli_stdout_finish(cmd, CLI_EXIT_OK);
                return false;
            }
            continue;
        }
        const char *v;
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else {
            fprintf(stderr, "brisk %s: %s needs a value (see brisk %s --help)\n", cmd, flag, cmd);
            return false;
        }
        if (!parse_value(cmd, u, flag, v, a, true)) return false;
    }
    *exit_code = CLI_EXIT_OK;
    return true;
}

void cli_args_free(cli_args *a) {
    for (int id = 0; id < CLI_O_COUNT; id++) free(a->list[id]);
    free(a->pos);
    memset(a, 0, sizeof *a);
}

/* ---- --help ------------------------------------------------------------------------ */

#define HELP_COL 28
#define HELP_WIDTH 80

/* Word-wrap text from column col (already there) to HELP_WIDTH, continuing at HELP_COL. */
static void wrap(FILE *f, const char *text, int col) {
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        const char *w = p;
        while (*p && *p != ' ') p++;
        const int len = (int)(p - w);
        if (len == 0) break;
        if (col > HELP_COL && col + 1 + len > HELP_WIDTH) {
            fprintf(f, "\n%*s", HELP_COL, "");
            col = HELP_COL;
        } else if (col > HELP_COL) {
            fputc(' ', f);
            col++;
        }
        fwrite(w, 1, (size_t)len, f);
        col += len;
    }
    fputc('\n', f);
}

void cli_print_help(const cli_spec *spec, FILE *f) {
    fprintf(f, "usage: brisk %s %s\n", spec->name, spec->usage);
    if (spec->about) fprintf(f, "\n%s", spec->about);
    fprintf(f, "\noptions:\n");
    use_iter it = {spec, 0, 0};
    for (const cli_use *u; (u = next_use(&it));) {
        if (u->id == CLI_O_HEADING) {
            fprintf(f, "\n%s\n", u->heading);
            continue;
        }
        const cli_opt *o = &table[u->id];
        char names[160];
        int len = snprintf(names, sizeof names, "  ");
        for (int k = 0; k < 4 && o->names[k]; k++)
            len += snprintf(names + len, sizeof names - (size_t)len, "%s%s", k ? ", " : "", o->names[k]);
        for (int k = 0; k < 3 && o->neg[k]; k++)
            len += snprintf(names + len, sizeof names - (size_t)len, ", %s", o->neg[k]);
        if (o->meta) len += snprintf(names + len, sizeof names - (size_t)len, " %s", o->meta);
        fputs(names, f);
        int col = len;
        if (col + 2 > HELP_COL) {
            fprintf(f, "\n%*s", HELP_COL, "");
        } else {
            fprintf(f, "%*s", HELP_COL - col, "");
        }
        col = HELP_COL;
        char help[1024];
        const char *def = u->def_help ? u->def_help : u->def ? u->def : o->def_help ? o->def_help : o->def;
        snprintf(help, sizeof help, "%s%s%s%s", u->help ? u->help : o->help, def ? " (default: " : "", def ? def : "",
                 def ? ")" : "");
        /* start the text one column later so wrap() puts no space first */
        const char *p = help;
        while (*p == ' ') p++;
        const char *w = p;
        while (*p && *p != ' ') p++;
        fwrite(w, 1, (size_t)(p - w), f);
        wrap(f, p, col + (int)(p - w));
    }
    if (spec->epilog) fprintf(f, "\n%s", spec->epilog);
}
