/* test_server: the server's threaded core without HTTP (src/server/engine.c,
 * stop.c, request.c): jobs submitted from several threads at once through the
 * bounded admission queue, refused when it is full, drained, cancelled while
 * running; greedy output the same for every job and equal to a plain decode
 * loop; stop strings and n = 2 through the engine. Runs under TSan (label
 * tsan), so the job/notify/take protocol is checked for races. */
#include "brisk.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/stop.h"
#include "server/tools.h"
#include "test.h"

#include <pthread.h>
#include <string.h>

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int events;
} waiter;

static void on_event(void *user) {
    waiter *w = user;
    pthread_mutex_lock(&w->mu);
    w->events++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Everything a job produced, text per choice, until done. */
typedef struct result {
    char text[2][4096];
    size_t len[2];
    srv_finish finish[2];
    int32_t n_events;
} result;

static void collect(srv_job *j, waiter *w, result *r) {
    memset(r, 0, sizeof *r);
    for (;;) {
        pthread_mutex_lock(&w->mu);
        const int seen = w->events;
        pthread_mutex_unlock(&w->mu);
        int32_t n = 0;
        bool done = false;
        srv_event *ev = srv_job_take(j, &n, &done);
        for (int32_t k = 0; k < n; k++) {
            const int c = ev[k].choice;
            if (r->len[c] + ev[k].len < sizeof r->text[c]) {
                memcpy(r->text[c] + r->len[c], ev[k].text ? ev[k].text : "", ev[k].len);
                r->len[c] += ev[k].len;
            }
            if (ev[k].finish) r->finish[c] = ev[k].finish;
        }
        r->n_events += n;
        srv_events_free(ev, n);
        if (done) return;
        pthread_mutex_lock(&w->mu);
        while (w->events == seen) pthread_cond_wait(&w->cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
    }
}

static const brisk_model *g_model;
static srv_engine *g_engine;
static int32_t g_prompt[64], g_n_prompt;

static srv_job *make_job(waiter *w, int32_t n_cap, int32_t n, char *const *stop, int32_t n_stop, bool ignore_eos) {
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = 0;
    srv_job_params p = {.prompt = g_prompt, .n_prompt = g_n_prompt, .n_cap = n_cap, .n = n, .sampling = sp,
                        .ignore_eos = ignore_eos, .stop = stop, .n_stop = n_stop, .notify = on_event, .user = w};
    return srv_job_new(&p);
}

typedef struct thread_arg {
    result r;
    srv_admit admit;
    int32_t prompt, completion;
} thread_arg;

/* the usage of every job that ran, summed (main thread), to compare with the metrics */
static int64_t g_sum_prompt, g_sum_completion, g_jobs;
static void add_usage(srv_job *j) {
    int32_t p, cached, comp;
    srv_job_usage(j, &p, &cached, &comp);
    g_sum_prompt += p;
    g_sum_completion += comp;
    g_jobs++;
}

/* the value of a metrics line "NAME VALUE" */
static double metric(const char *text, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

static void *client(void *arg) {
    thread_arg *t = arg;
    waiter w = {.events = 0};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    srv_job *j = make_job(&w, 24, 1, NULL, 0, false);
    t->admit = srv_engine_submit(g_engine, j);
    if (t->admit == SRV_ADMIT_OK) {
        collect(j, &w, &t->r);
        int32_t cached;
        srv_job_usage(j, &t->prompt, &cached, &t->completion);
    }
    srv_job_detach(j);
    srv_job_unref(j);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return NULL;
}

static void test_stop_unit(void) {
    char *stops[] = {"abc", "xy"};
    srv_stop s;
    srv_stop_init(&s, stops, 2);
    const char *o;
    size_t n;
    char out[64] = {0};
    size_t w = 0;
    const char *pieces[] = {"12a", "b", "x", "q", "ab", "c", "never"};
    for (int k = 0; k < 7; k++) {
        CHECK(srv_stop_push(&s, pieces[k], strlen(pieces[k]), &o, &n));
        memcpy(out + w, o, n);
        w += n;
    }
    srv_stop_flush(&s, &o, &n);
    memcpy(out + w, o, n);
    w += n;
    CHECKF(w == 6 && memcmp(out, "12abxq", 6) == 0, "got '%.*s'", (int)w, out);
    CHECK(s.hit);
    srv_stop_free(&s);
}

static void test_request_unit(void) {
    const srv_limits lim = srv_limits_default(100, 4);
    const brisk_sampler_params def = brisk_sampler_default_params();
    srv_request r;
    srv_error e;
    const char *ok = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
                     "\"n\":2,\"stop\":\"x\",\"logit_bias\":{\"5\":-100},\"seed\":3}";
    CHECK(srv_request_parse((const uint8_t *)ok, strlen(ok), SRV_CHAT, &lim, &def, &r, &e));
    CHECK(r.n == 2 && r.n_stop == 1 && r.n_bias == 1 && r.bias[0].token == 5 && r.sampling.seed == 3);
    CHECK(r.messages_json && strstr(r.messages_json, "\"ab\"") != NULL);
    srv_request_free(&r);
    const char *bad = "{\"prompt\":\"x\",\"top_k\":1.5}";
    CHECK(!srv_request_parse((const uint8_t *)bad, strlen(bad), SRV_COMPLETION, &lim, &def, &r, &e));
    CHECK(e.http == 400 && !strcmp(e.code, "invalid_type") && !strcmp(e.param, "top_k"));
    const char *ids = "{\"prompt\":[1,100]}";
    CHECK(!srv_request_parse((const uint8_t *)ids, strlen(ids), SRV_COMPLETION, &lim, &def, &r, &e));
    CHECK(!strcmp(e.param, "prompt[1]") && !strcmp(e.code, "invalid_value"));
}

/* The tool-call parser on hand-written outputs of each format: the final split into content and calls, and
 * what a stream sends (content and arguments, re-parsed after every byte) adds up to that split. */
typedef struct tool_case {
    srv_tool_format f;
    const char *text;
    const char *content;   /* the final content */
    int32_t n_calls;
    const char *name0, *args0, *name1, *args1;
    bool cut;              /* a call cut short: the stream announced it, the end turns it into content */
} tool_case;

static void test_tools_unit(void) {
    char *const names[] = {"add", "get_weather"};
    static const tool_case cases[] = {
        {SRV_TOOLFMT_HERMES, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": \"}\"}}\n</tool_call>", "", 1, "add",
         "{\"a\": 1, \"b\": \"}\"}", NULL, NULL, false},
        {SRV_TOOLFMT_HERMES, "Let me see.\n\n<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
                             "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\u00fcrich\"}}\n</tool_call>",
         "Let me see.", 2, "add", "{}", "get_weather", "{\"city\": \"Z\u00fcrich\"}", false},
        {SRV_TOOLFMT_HERMES, "plain text < not a tag", "plain text < not a tag", 0, NULL, NULL, NULL, NULL, false},
        {SRV_TOOLFMT_HERMES, "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>", 0, NULL, NULL, NULL, NULL, false},   /* an unknown tool */
        {SRV_TOOLFMT_HERMES, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1", "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1",
         0, NULL, NULL, NULL, NULL, true},   /* cut */
        {SRV_TOOLFMT_LLAMA3, "{\"name\": \"add\", \"parameters\": {\"a\": 2}}", "", 1, "add", "{\"a\": 2}", NULL, NULL, false},
        {SRV_TOOLFMT_LLAMA3, "  <|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"u\": [1, {}]}}", "", 1, "get_weather",
         "{\"u\": [1, {}]}", NULL, NULL, false},
        {SRV_TOOLFMT_LLAMA3, "{\"x\": 1}", "{\"x\": 1}", 0, NULL, NULL, NULL, NULL, false},
        {SRV_TOOLFMT_LLAMA3, "def f(): pass", "def f(): pass", 0, NULL, NULL, NULL, NULL, false},
        {SRV_TOOLFMT_MISTRAL, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}, \"id\": \"abcDEF123\"}, {\"name\": \"add\", "
                              "\"arguments\": {\"a\": 2}}]", "", 2, "add", "{\"a\": 1}", "add", "{\"a\": 2}", false},
        {SRV_TOOLFMT_MISTRAL, "Hi [TOOL_CALLS] x", "Hi [TOOL_CALLS] x", 0, NULL, NULL, NULL, NULL, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const tool_case *tc = &cases[i];
        const size_t n = strlen(tc->text);
        srv_tool_parse p;
        srv_tools_parse(tc->f, tc->text, n, true, names, 2, &p);
        CHECKF(p.n_calls == tc->n_calls, "case %zu: %d calls, want %d", i, p.n_calls, tc->n_calls);
        CHECKF(p.content_len == strlen(tc->content) && !memcmp(tc->text, tc->content, p.content_len), "case %zu: content %.*s", i,
               (int)p.content_len, tc->text);
        for (int32_t k = 0; k < p.n_calls && k < 2; k++) {
            const char *name = k ? tc->name1 : tc->name0, *args = k ? tc->args1 : tc->args0;
            CHECKF(p.call[k].name_len == strlen(name) && !memcmp(tc->text + p.call[k].name_off, name, strlen(name)), "case %zu call %d name", i, k);
            CHECKF(p.call[k].args_len == strlen(args) && !memcmp(tc->text + p.call[k].args_off, args, strlen(args)), "case %zu call %d args", i, k);
        }
        if (tc->cut) continue;
        /* a stream: after every byte, send what the parse allows; at the end it must add up to the final split */
        size_t sent = 0, args_sent[SRV_MAX_TOOL_CALLS] = {0};
        int32_t started = 0;
        char content[512] = "", args[2][256] = {"", ""};
        for (size_t k = 0; k <= n; k++) {
            srv_tool_parse q;
            srv_tools_parse(tc->f, tc->text, k, k == n, names, 2, &q);
            if (q.content_len > sent) {
                memcpy(content + sent, tc->text + sent, q.content_len - sent);
                sent = q.content_len;
            }
            for (int32_t c = 0; c < q.n_calls && c < 2; c++) {
                if (c == started && q.call[c].name_done) started++;
                if (c < started && q.call[c].args_len > args_sent[c]) {
                    memcpy(args[c] + args_sent[c], tc->text + q.call[c].args_off + args_sent[c], q.call[c].args_len - args_sent[c]);
                    args_sent[c] = q.call[c].args_len;
                }
            }
        }
        CHECKF(sent == p.content_len && !memcmp(content, tc->text, sent), "case %zu: streamed content %zu bytes, final %zu", i, sent, p.content_len);
        CHECKF(started == p.n_calls, "case %zu: streamed %d calls, final %d", i, started, p.n_calls);
        for (int32_t c = 0; c < p.n_calls && c < 2; c++)
            CHECKF(args_sent[c] == p.call[c].args_len && !memcmp(args[c], tc->text + p.call[c].args_off, args_sent[c]), "case %zu call %d: streamed args", i, c);
    }
    static const char hermes[] = "{{ '<tool_call>\\n{\"name\": \"' }}";
    CHECK(srv_tool_format_of(hermes, strlen(hermes)) == SRV_TOOLFMT_HERMES);
    CHECK(srv_tool_format_of("<tool_call>", 11) == SRV_TOOLFMT_NONE);   /* no JSON call shown */
    CHECK(srv_tool_format_of("[TOOL_CALLS]", 12) == SRV_TOOLFMT_MISTRAL);
    CHECK(srv_tool_format_of("<|start_header_id|> \"parameters\"", 32) == SRV_TOOLFMT_LLAMA3);
    CHECK(srv_tool_format_of("{{ messages }}", 14) == SRV_TOOLFMT_NONE);
    CHECK(srv_tool_format_of("<tool_call>\n<function=f>", 24) == SRV_TOOLFMT_NONE);   /* Qwen3-Coder's XML calls */
    CHECK(srv_tool_format_of("[TOOL_CALLS]f[ARGS]{}", 21) == SRV_TOOLFMT_NONE);       /* Mistral v11 */
    char id[48];
    srv_tool_call_id(SRV_TOOLFMT_MISTRAL, "chatcmpl-abc", 0, 1, id);
    CHECK(strlen(id) == 9);
    srv_tool_call_id(SRV_TOOLFMT_HERMES, "chatcmpl-abc", 0, 1, id);
    CHECK(!strncmp(id, "call_", 5));
}

int main(void) {
    test_stop_unit();
    test_request_unit();
    test_tools_unit();
    char path[1024];
    snprintf(path, sizeof path, "%s/models/pycode-target-f16.gguf", BRISK_SOURCE_DIR);
    if (access(path, R_OK) != 0) TEST_SKIP("%s absent", path);
    brisk_error err = {0};
    brisk_model *m = NULL;
    if (brisk_model_load(path, &m, &err)) TEST_SKIP("%s: %s", path, err.msg);
    g_model = m;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    /* over one KV block (32 tokens), so later jobs take whole blocks of it from the prefix cache */
    static const char prompt_text[] = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n\n\ndef div(a, b):";
    CHECK(brisk_tokenize_text(m, prompt_text, strlen(prompt_text), true, false, &ids, &n_ids, &err) == BRISK_OK);
    CHECK(n_ids > 32 && n_ids <= 64);
    g_n_prompt = (int32_t)n_ids;
    memcpy(g_prompt, ids, n_ids * sizeof *ids);
    free(ids);

    /* the reference: a plain greedy loop on its own context */
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = 256;
    cp.n_threads = 1;
    brisk_context *ref = NULL;
    CHECK(brisk_context_init(m, &cp, &ref, &err) == BRISK_OK);
    char want[4096];
    size_t want_len = 0;
    {
        brisk_text_stream *ts = NULL;
        brisk_text_stream_init(m, &ts, &err);
        brisk_seq_sync(ref, 0, g_prompt, g_n_prompt, NULL, &err);
        brisk_model_info info;
        brisk_model_get_info(m, &info);
        for (int k = 0; k < 24; k++) {
            const float *lg = brisk_get_logits(ref, 0);
            int32_t best = 0;
            for (int32_t i = 1; i < info.n_vocab; i++) best = lg[i] > lg[best] ? i : best;
            if (brisk_token_is_eog(m, best)) break;
            const char *t;
            size_t tn;
            brisk_text_stream_push(ts, best, &t, &tn, &err);
            memcpy(want + want_len, t, tn);
            want_len += tn;
            int32_t pos = brisk_seq_len(ref, 0), s0 = 0;
            uint8_t one = 1;
            brisk_batch b = {1, &best, &pos, &s0, &one};
            brisk_decode(ref, &b, &err);
        }
        const char *t;
        size_t tn;
        brisk_text_stream_flush(ts, &t, &tn);
        memcpy(want + want_len, t, tn);
        want_len += tn;
        brisk_text_stream_free(ts);
    }
    brisk_context_free(ref);

    cp.n_seq = 2;
    cp.kv_tokens = 512;
    brisk_context *c = NULL;
    CHECK(brisk_context_init(m, &cp, &c, &err) == BRISK_OK);
    srv_metrics *metrics = srv_metrics_new();
    CHECK(metrics != NULL);
    srv_engine_params ep = {.max_running = 2, .max_queue = 2, .metrics = metrics};
    CHECK(srv_engine_init(&g_engine, m, c, &ep, &err) == BRISK_OK);

    /* 8 clients at once: at most 4 are held, the others are refused; every admitted one gets the reference text */
    enum { N_CLIENTS = 8 };
    pthread_t th[N_CLIENTS];
    thread_arg args[N_CLIENTS];
    memset(args, 0, sizeof args);
    for (int k = 0; k < N_CLIENTS; k++) pthread_create(&th[k], NULL, client, &args[k]);
    int admitted = 0, full = 0;
    for (int k = 0; k < N_CLIENTS; k++) {
        pthread_join(th[k], NULL);
        if (args[k].admit == SRV_ADMIT_OK) {
            admitted++;
            g_sum_prompt += args[k].prompt;
            g_sum_completion += args[k].completion;
            g_jobs++;
            CHECKF(args[k].r.len[0] == want_len && memcmp(args[k].r.text[0], want, want_len) == 0, "client %d: '%.*s' vs '%.*s'", k,
                   (int)args[k].r.len[0], args[k].r.text[0], (int)want_len, want);
            CHECK(args[k].r.finish[0] == SRV_FINISH_LENGTH || args[k].r.finish[0] == SRV_FINISH_STOP);
        } else {
            full += args[k].admit == SRV_ADMIT_FULL;
        }
    }
    CHECKF(admitted >= 4 && admitted + full == N_CLIENTS, "admitted %d, refused %d", admitted, full);

    /* a stop string in the middle, and n = 2 */
    {
        waiter w = {.events = 0};
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        char stop[8];
        memcpy(stop, want + 4, 5);
        stop[5] = 0;
        char *stops[] = {stop};
        srv_job *j = make_job(&w, 24, 2, stops, 1, false);
        CHECK(srv_engine_submit(g_engine, j) == SRV_ADMIT_OK);
        result r;
        collect(j, &w, &r);
        for (int ch = 0; ch < 2; ch++)
            CHECKF(r.len[ch] == 4 && memcmp(r.text[ch], want, 4) == 0 && r.finish[ch] == SRV_FINISH_STOP, "choice %d '%.*s' stop '%s'", ch,
                   (int)r.len[ch], r.text[ch], stop);
        int32_t p, cached, comp;
        srv_job_usage(j, &p, &cached, &comp);
        CHECK(p == g_n_prompt && comp > 0);
        /* both choices stop at the stop string and stop computing there: nothing sampled past it */
        srv_cost cost;
        srv_job_cost(j, &cost);
        CHECKF(cost.sampled == comp && cost.flops > 0 && cost.bytes_read > 0, "sampled %d, returned %d", cost.sampled, comp);
        /* the prompt was computed by the 8 clients: whole blocks of it come from the cache */
        CHECKF(cached == (g_n_prompt - 1) / 32 * 32 && cost.cached_tokens == cached, "cached %d of %d", cached, g_n_prompt);
        add_usage(j);
        srv_job_detach(j);
        srv_job_unref(j);
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.mu);
    }

    /* cancel while running: the job ends CANCELLED and its slot is free again */
    {
        waiter w = {.events = 0};
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        srv_job *j = make_job(&w, 200, 1, NULL, 0, true);
        CHECK(srv_engine_submit(g_engine, j) == SRV_ADMIT_OK);
        pthread_mutex_lock(&w.mu);
        while (w.events == 0) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        srv_engine_cancel(g_engine, j);
        result r;
        collect(j, &w, &r);
        CHECK(r.finish[0] == SRV_FINISH_CANCELLED);
        add_usage(j);
        srv_job_detach(j);
        srv_job_unref(j);
        for (int k = 0; k < 500 && srv_engine_held(g_engine) > 0; k++) usleep(2000);
        CHECK(srv_engine_held(g_engine) == 0);
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.mu);
    }

    /* drain: later submits are refused; a job queued before drain still runs */
    {
        waiter w = {.events = 0};
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        srv_job *j = make_job(&w, 8, 1, NULL, 0, false);
        CHECK(srv_engine_submit(g_engine, j) == SRV_ADMIT_OK);
        srv_engine_drain(g_engine);
        srv_job *j2 = make_job(&w, 8, 1, NULL, 0, false);
        CHECK(srv_engine_submit(g_engine, j2) == SRV_ADMIT_DRAINING);
        result r;
        collect(j, &w, &r);
        CHECK(r.finish[0] == SRV_FINISH_LENGTH || r.finish[0] == SRV_FINISH_STOP);
        add_usage(j);
        srv_job_detach(j);
        srv_job_unref(j);
        srv_job_unref(j2);
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.mu);
    }
    srv_engine_free(g_engine);
    /* the metrics (recorded on the inference thread) add up to the usage the jobs reported */
    char *text = srv_metrics_render(metrics, NULL);
    CHECK(text != NULL);
    if (text) {
        CHECKF(metric(text, "brisk:generation_tokens_total") == (double)g_sum_completion, "generated %g vs %lld",
               metric(text, "brisk:generation_tokens_total"), (long long)g_sum_completion);
        CHECK(metric(text, "brisk:prompt_tokens_total") == (double)g_sum_prompt);
        CHECK(metric(text, "brisk:e2e_request_latency_seconds_count") == (double)g_jobs);
        CHECK(metric(text, "brisk:requests_cancelled_total") == 1);
        CHECK(metric(text, "brisk:requests_rejected_total{reason=\"queue_full\"}") == (double)(N_CLIENTS - admitted));
        CHECK(metric(text, "brisk:requests_rejected_total{reason=\"draining\"}") == 1);
    }
    free(text);
    srv_metrics_free(metrics);
    brisk_context_free(c);
    brisk_model_free(m);
    return test_finish();
}
