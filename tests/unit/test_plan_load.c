/*
 * test_plan_load.c - the plan loader and validator: every compat plan loads; each class of
 * invalid plan (spec §2.7 index spaces, §2.8 limits, §6.2 pairing, types, strings, JSON syntax)
 * is rejected with its exact message. Cases mutate tests/plans/loader_base.json, a small valid
 * 2-rank plan that uses every kind of channel, remote buffer, semaphore, barrier, tbg and pipeline.
 */
#include "../harness.h"
#include "test_plan_util.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char *base_text;

/* One edit of the base plan: path "gpus/0/threadblocks/1/id" (array indices are numbers);
 * value is raw JSON text put there verbatim, NULL deletes the key, a leading '+' adds the key
 * a second time. */
typedef struct {
    const char *path, *value;
} Edit;

static char *apply_edits(const Edit *ed, int n) {
    cJSON *root = cJSON_Parse(base_text);
    if (!root) return NULL;
    for (int k = 0; k < n; k++) {
        char path[256];
        snprintf(path, sizeof path, "%s", ed[k].path);
        cJSON *cur = root;
        char *save = NULL, *seg = strtok_r(path, "/", &save), *next;
        for (; seg && (next = strtok_r(NULL, "/", &save)); seg = next) {
            cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, atoi(seg))
                                     : cJSON_GetObjectItemCaseSensitive(cur, seg);
            if (!cur) {
                fprintf(stderr, "bad edit path %s at %s\n", ed[k].path, seg);
                cJSON_Delete(root);
                return NULL;
            }
        }
        const char *v = ed[k].value;
        if (!v) {
            if (cJSON_IsArray(cur)) cJSON_DeleteItemFromArray(cur, atoi(seg));
            else cJSON_DeleteItemFromObjectCaseSensitive(cur, seg);
        } else if (v[0] == '+') {
            cJSON_AddItemToObject(cur, seg, cJSON_CreateRaw(v + 1));
        } else if (cJSON_IsArray(cur)) {
            cJSON_ReplaceItemInArray(cur, atoi(seg), cJSON_CreateRaw(v));
        } else if (cJSON_GetObjectItemCaseSensitive(cur, seg)) {
            cJSON_ReplaceItemInObjectCaseSensitive(cur, seg, cJSON_CreateRaw(v));
        } else {
            cJSON_AddItemToObject(cur, seg, cJSON_CreateRaw(v));
        }
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* Loads the edited base plan; returns "" on success or the error message (static buffer). */
static const char *load_edited(const Edit *ed, int n) {
    static PlanErr e;
    char *text = apply_edits(ed, n);
    if (!text) return "(edit failed)";
    Plan *p = plan_parse(text, strlen(text), "plan.json", &e);
    free(text);
    if (!p) return e.msg;
    plan_free(p);
    return "";
}

static const char *load_text(const char *text, size_t len) {
    static PlanErr e;
    Plan *p = plan_parse(text, len, "plan.json", &e);
    if (!p) return e.msg;
    plan_free(p);
    return "";
}

#define TB0 "gpus/0/threadblocks/0/"
#define TB1 "gpus/0/threadblocks/1/"
#define P0 "plan.json: gpus[0].threadblocks[0]."
#define P1 "plan.json: gpus[0].threadblocks[1]."

typedef struct {
    const char *name;
    Edit ed[3];
    const char *want;          /* exact message */
} Case;

static const Case cases[] = {
    /* structure and types */
    {"missing_key", {{"gpus/1/threadblocks", NULL}},
     "plan.json: gpus[1]: missing required key 'threadblocks'"},
    {"missing_index", {{TB0 "ops/3/src_buff/0/index", NULL}},
     P0 "ops[3].src_buff[0]: missing required key 'index'"},
    {"wrong_type", {{"gpus/0/input_chunks", "\"2\""}},
     "plan.json: gpus[0].input_chunks: expected an integer, got a string"},
    {"wrong_type_array", {{TB0 "ops", "{}"}},
     P0 "ops: expected an array, got an object"},
    {"bool_type", {{"inplace", "1"}}, "plan.json: inplace: expected true or false, got a number"},
    {"duplicate_key", {{"name", "+\"again\""}}, "plan.json: key 'name' appears twice"},
    {"not_integer", {{TB0 "ops/3/src_buff/0/index", "1.5"}},
     P0 "ops[3].src_buff[0].index: 1.5 is not an integer"},
    {"negative", {{TB0 "ops/3/src_buff/0/index", "-1"}},
     P0 "ops[3].src_buff[0].index: -1 is negative"},
    {"u32_overflow", {{"gpus/0/scratch_chunks", "4294967296"}},
     "plan.json: gpus[0].scratch_chunks: 4294967296 is larger than 4294967295"},
    {"u64_overflow", {{"max_message_size", "18446744073709551616"}},
     "plan.json: max_message_size: 18446744073709551616 is larger than 18446744073709551615"},
    {"min_above_max", {{"min_message_size", "2199023255552"}},
     "plan.json: min_message_size: 2199023255552 is larger than max_message_size 1099511627776"},
    {"gpu_id", {{"gpus/1/id", "0"}},
     "plan.json: gpus[1].id: 0 must equal the position 1 in 'gpus' (\"GPU rank does not match\")"},
    {"tb_id", {{TB1 "id", "0"}},
     P1 "id: 0 must equal the position 1 in 'threadblocks' (the block index is the position, "
        "channel tables are keyed by id)"},
    /* strings */
    {"glre", {{TB0 "ops/0/name", "\"glre\""}},
     P0 "ops[0].name: op 'glre' is not supported: MSCCL++'s executor only runs it fused with a "
        "following gstore as 'glres' (\"Invalid operation type: glre\")"},
    {"unknown_op", {{TB0 "ops/0/name", "\"rdcs\""}}, P0 "ops[0].name: unknown op 'rdcs'"},
    {"unknown_buffer", {{TB0 "ops/3/src_buff/0/type", "\"x\""}},
     P0 "ops[3].src_buff[0].type: unknown buffer type 'x' (expected \"i\", \"o\" or \"s\")"},
    {"unknown_channel", {{TB0 "ops/1/channel_type", "\"nvlink\""}},
     P0 "ops[1].channel_type: unknown channel type 'nvlink' (expected \"memory\", \"port\", "
        "\"switch\" or \"none\")"},
    {"unknown_collective", {{"collective", "\"allscatter\""}},
     "plan.json: collective: unknown collective 'allscatter' (expected allreduce, allgather, "
     "reducescatter, alltoall, broadcast, sendrecv, reduce, gather, scatter, test or custom)"},
    {"unknown_protocol", {{"protocol", "\"ll\""}},
     "plan.json: protocol: unknown protocol 'll' (expected \"LL\" or \"Simple\")"},
    {"unknown_reduce_op", {{TB0 "ops/6/reduce_op", "\"xor\""}},
     P0 "ops[6].reduce_op: unknown reduce_op 'xor' (expected sum, prod, min, max or avg)"},
    /* top-level limits */
    {"threads_zero", {{"num_threads_per_block", "0"}},
     "plan.json: num_threads_per_block: 0 is outside 1..1024"},
    {"threads_big", {{"num_threads_per_block", "2048"}},
     "plan.json: num_threads_per_block: 2048 is outside 1..1024"},
    {"alignment", {{"buffer_alignment", "12"}},
     "plan.json: buffer_alignment: 12 must be a power of two, at least 4"},
    {"input_chunks_zero", {{"gpus/0/input_chunks", "0"}},
     "plan.json: gpus[0].input_chunks: must be at least 1 (the executor divides by it)"},
    /* chunk ranges */
    {"local_index", {{TB0 "ops/3/src_buff/0/index", "9"}},
     P0 "ops[3].src_buff[0].index: 9 is outside input (2 chunks)"},
    {"remote_index", {{TB0 "ops/3/dst_buff/0/index", "2"}},
     P0 "ops[3].dst_buff[0].index: 2 is outside rank 1's scratch (2 chunks)"},
    {"local_size", {{TB0 "ops/9/ops/0/src_buff/0/size", "3"}},
     P0 "ops[9].ops[0].src_buff[0].size: 3 chunks from index 0 go past the end of scratch "
        "(2 chunks)"},
    {"size_mismatch", {{TB0 "ops/6/src_buff/1/size", "2"}},
     P0 "ops[6].src_buff[1].size: 2 differs from src_buff[0].size 1 (all entries of an op move "
        "the same number of chunks)"},
    {"packet_room", {{TB1 "ops/4/dst_buff/0/index", "1"}},
     P1 "ops[4].dst_buff[0]: packets of chunks 1..2 need 4 chunks of scratch, which has 2 "
        "(scratch is doubled only for protocol \"LL\")"},
    {"packet_needs_scratch", {{TB1 "ops/4/dst_buff/0/type", "\"o\""}},
     P1 "ops[4].dst_buff[0].type: 'cpkt' needs scratch (\"s\") here, not output"},
    /* index spaces (spec §2.7) */
    {"tb_channel", {{TB0 "channels/0/channel_ids", "[1]"}},
     P0 "channels: memory channel_ids: 1 is outside the rank's 1 memory channel(s)"},
    {"op_channel", {{TB0 "ops/1/channel_ids", "[3]"}},
     P0 "ops[1].channel_ids[0]: 3 is outside the thread block's 1 memory channel(s)"},
    {"buffer_id", {{TB0 "ops/3/dst_buff/0/buffer_id", "2"}},
     P0 "ops[3].dst_buff[0].buffer_id: 2 is outside the thread block's 2 memory remote buffer "
        "ref(s)"},
    {"switch_id", {{TB1 "ops/2/src_buff/0/switch_channel_id", "1"}},
     P1 "ops[2].src_buff[0].switch_channel_id: 1 is outside the thread block's 1 switch "
        "channel(s)"},
    {"semaphore_id", {{TB0 "ops/8/semaphore_ids", "[1]"}},
     P0 "ops[8].semaphore_ids[0]: 1 is outside the rank's 1 semaphore(s)"},
    {"barrier_16", {{TB0 "ops/7/barrier_id", "16"}, {TB1 "ops/0/barrier_id", "16"}},
     P0 "ops[7].barrier_id: 16 is outside 0..15 (the executor has 16 grid barriers)"},
    {"barrier_users", {{TB1 "ops/0/barrier_id", "1"}},
     "plan.json: gpus[0]: barrier 0 has num_threadblocks 2 but 1 thread block(s) use it "
     "(participants would hang)"},
    {"num_threadblocks", {{TB0 "ops/7/num_threadblocks", "3"}},
     P0 "ops[7].num_threadblocks: 3 is outside 1..2 (the rank's thread blocks)"},
    {"remote_rank", {{"gpus/0/remote_buffers/1/rank", "5"}},
     "plan.json: gpus[0].remote_buffers[1]: rank 5 is outside 0..1"},
    {"remote_self", {{"gpus/0/remote_buffers/1/rank", "0"}},
     "plan.json: gpus[0].remote_buffers[1]: rank 0 names itself"},
    {"remote_ref_id", {{TB0 "remote_buffer_refs/0/remote_buffer_ids", "[0,2]"}},
     P0 "remote_buffer_refs: memory remote_buffer_ids: 2 is outside the rank's 2 remote "
        "buffer(s)"},
    {"remote_ref_access", {{TB0 "remote_buffer_refs/1/remote_buffer_ids", "[1]"}},
     P0 "remote_buffer_refs: port remote_buffer_ids: remote buffer 1 is not accessible through "
        "\"port\" (its access_channel_types lack it)"},
    {"access_empty", {{"gpus/0/remote_buffers/1/access_channel_types", "[]"}},
     "plan.json: gpus[0].remote_buffers[1]: access_channel_types is empty (expected \"memory\" "
     "and/or \"port\")"},
    /* channels and pairing (spec §6.2) */
    {"self_channel", {{"gpus/0/channels/0/connected_to", "[0]"}},
     "plan.json: gpus[0].channels: memory channel 0 connects rank 0 to itself"},
    {"peer_range", {{"gpus/0/channels/0/connected_to", "[7]"}},
     "plan.json: gpus[0].channels: memory channel 0 connects to rank 7, outside 0..1"},
    {"unpaired", {{"gpus/0/channels/0/connected_to", "[1,1]"}, {TB0 "channels/0/channel_ids", "[1]"}},
     P0 "ops[1].channel_ids[0]: memory channel 1 (to rank 1) has no partner: rank 1 declares 1 "
        "memory channel(s) to rank 0, and a rank's k-th channel to a peer pairs with the peer's "
        "k-th channel back (mscclrt-plan(5), Validation)"},
    {"switch_mismatch", {{"gpus/1/channels/2/buffer_type", "\"i\""}},
     "plan.json: gpus[0] switch channel 0: rank 1 does not declare the same switch channel (same "
     "ranks, same buffer, same order): multicast groups are created collectively"},
    {"missing_channel_type", {{TB0 "ops/1/channel_type", NULL}},
     P0 "ops[1]: 'signal' needs channel_type \"memory\" or \"port\""},
    {"wrong_entry_kind", {{TB0 "ops/3/dst_buff/0", "{\"type\":\"s\",\"index\":0,\"size\":1}"}},
     P0 "ops[3].dst_buff[0]: 'put' needs a remote entry ('buffer_id') here, not a local entry "
        "('type')"},
    {"two_entry_kinds", {{TB0 "ops/3/dst_buff/0/type", "\"s\""}},
     P0 "ops[3].dst_buff[0]: has more than one of 'type', 'buffer_id' and 'switch_channel_id'"},
    /* executor limits (spec §2.8) */
    {"op_channels_9", {{TB0 "ops/1/channel_ids", "[0,0,0,0,0,0,0,0,0]"}},
     P0 "ops[1].channel_ids: 9 entries, more than the limit of 8 channels per op"},
    {"tb_channels_17", {{TB0 "channels/0/channel_ids", "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"}},
     P0 "channels[0].channel_ids: 17 memory channels in this thread block, more than the "
        "executor's limit of 16"},
    {"entries_11", {{TB1 "ops/4/src_buff", "[{\"type\":\"i\",\"index\":0,\"size\":1},"
        "{\"type\":\"i\",\"index\":0,\"size\":1},{\"type\":\"i\",\"index\":0,\"size\":1},"
        "{\"type\":\"i\",\"index\":0,\"size\":1},{\"type\":\"i\",\"index\":0,\"size\":1},"
        "{\"type\":\"i\",\"index\":0,\"size\":1},{\"type\":\"i\",\"index\":0,\"size\":1},"
        "{\"type\":\"i\",\"index\":0,\"size\":1},{\"type\":\"i\",\"index\":0,\"size\":1},"
        "{\"type\":\"i\",\"index\":0,\"size\":1},{\"type\":\"i\",\"index\":0,\"size\":1}]"}},
     P1 "ops[4].src_buff: 11 entries, more than the executor's limit of 10"},
    {"tbg_id", {{TB0 "ops/9/ops/0/tbg_info/tb_id", "2"}},
     P0 "ops[9].ops[0].tbg_info.tb_id: 2 is outside 0..1 (tbg_size is 2)"},
    {"tbg_size_zero", {{TB0 "ops/9/ops/0/tbg_info/tbg_size", "0"}},
     P0 "ops[9].ops[0].tbg_info.tbg_size: 0 must be at least 1"},
    {"tbg_size_big", {{TB0 "ops/9/ops/0/tbg_info/tbg_size", "3"}},
     P0 "ops[9].ops[0].tbg_info.tbg_size: 3 is outside 1..2 (the rank's thread blocks)"},
    {"unit_size_zero", {{TB0 "ops/9/iter_context/unit_size", "0"}},
     P0 "ops[9].iter_context.unit_size: 0 is outside 1..4294967295 bytes"},
    {"num_chunks_zero", {{TB0 "ops/9/iter_context/num_chunks", "0"}},
     P0 "ops[9].iter_context.num_chunks: must be at least 1"},
    {"nested_pipeline", {{TB0 "ops/9/ops/0", "{\"name\":\"pipeline\",\"iter_context\":"
        "{\"unit_size\":1,\"num_chunks\":1},\"ops\":[]}"}},
     P0 "ops[9].ops[0].name: nested pipelines are not supported"},
};

static void t_compat(void) {
    for (int i = 0; i < NCOMPAT; i++) {
        char path[256];
        snprintf(path, sizeof path, COMPAT_DIR "%s.json", compat_plans[i]);
        PlanErr e;
        Plan *p = plan_load_file(path, &e);
        if (!p) fprintf(stderr, "%s\n", e.msg);
        CHECK(p != NULL);
        plan_free(p);
    }
    /* a few facts of the loaded models */
    PlanErr e;
    Plan *p = plan_load_file(COMPAT_DIR "allreduce.json", &e);
    CHECK(p && p->ngpus == 2 && p->gpus[0].ntbs == 8 && p->gpus[0].npeers[0] == 8);
    CHECK(p && p->max_size == UINT64_MAX && p->alignment == 16 && p->threads == 1024);
    plan_free(p);
    p = plan_load_file(COMPAT_DIR "reduce_nvls.json", &e);
    CHECK(p && p->gpus[1].nswitch == 1 && p->gpus[1].switches[0].buf == PLAN_BUF_INPUT &&
          p->gpus[1].tbs[0].ops[5].kind == PLAN_OP_GLRES);
    plan_free(p);
    p = plan_load_file(COMPAT_DIR "transfer_pack.json", &e);
    CHECK(p && p->collective == PLAN_COLL_ALLGATHER && p->protocol_ll &&
          p->gpus[0].ntbs == 2 && p->gpus[1].ntbs == 3);
    plan_free(p);
}

static void t_base_valid(void) {
    CHECK_STR("", load_edited(NULL, 0));
    /* legacy "buff" key in a TB channel entry is ignored, as MSCCL++ does */
    Edit buff[] = {{TB0 "channels/0/buff", "\"i\""}};
    CHECK_STR("", load_edited(buff, 1));
    /* with LL, the packet buffer has room */
    Edit ll[] = {{"protocol", "\"LL\""}, {TB1 "ops/4/dst_buff/0/index", "1"}};
    CHECK_STR("", load_edited(ll, 2));
    /* exact 64-bit sizes */
    Edit big[] = {{"max_message_size", "18446744073709551615"},
                  {"min_message_size", "9007199254740993"}};
    char *text = apply_edits(big, 2);
    PlanErr e;
    Plan *p = text ? plan_parse(text, strlen(text), "plan.json", &e) : NULL;
    CHECK(p && p->max_size == UINT64_MAX && p->min_size == 9007199254740993ull);
    plan_free(p);
    free(text);
    /* unknown keys are ignored; "tags" and "producer" are ours */
    Edit ext[] = {{"tags", "[\"a\",\"b\"]"}, {"producer", "\"mscclc\""}, {"extra", "{\"x\":[1]}"}};
    text = apply_edits(ext, 3);
    p = text ? plan_parse(text, strlen(text), "plan.json", &e) : NULL;
    CHECK(p && p->ntags == 2 && strcmp(p->tags[1], "b") == 0);
    plan_free(p);
    free(text);
}

static void t_cases(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const Case *c = &cases[i];
        int n = 0;
        while (n < 3 && c->ed[n].path) n++;
        const char *got = load_edited(c->ed, n);
        if (strcmp(got, c->want) != 0) fprintf(stderr, "case %s:\n", c->name);
        CHECK_STR(c->want, got);
    }
}

static void t_too_many_ops(void) {
    char ops[65 * 20 + 8] = "[";
    for (int i = 0; i < 65; i++) strcat(ops, i ? ",{\"name\":\"nop\"}" : "{\"name\":\"nop\"}");
    strcat(ops, "]");
    /* MSCCL++'s limit binds only plans that say they are for it */
    Edit ed[] = {{TB1 "ops", ops}, {"target", "\"mscclpp\""}};
    CHECK_STR(P1 "ops: more than 64 ops after flattening pipelines (reached at "
                 "gpus[0].threadblocks[1].ops[64]): exceeds MSCCL++'s executor's device plan "
                 "(the plan's \"target\" is \"mscclpp\")",
              load_edited(ed, 2));
    /* ours and MSCCL++'s own plans (no "target") run long thread blocks: what fails is the
     * barrier those nops replaced, not the length */
    Edit ours[] = {{TB1 "ops", ops}, {"target", "\"mscclrt\""}};
    CHECK_CONTAINS(load_edited(ours, 2), "barrier 0 has num_threadblocks 2");
    CHECK_CONTAINS(load_edited(ed, 1), "barrier 0 has num_threadblocks 2");
    Edit bad[] = {{"target", "\"cuda\""}};
    CHECK_STR("plan.json: target: unknown target \"cuda\" (mscclrt or mscclpp)", load_edited(bad, 1));
}

static void t_syntax(void) {
    CHECK_STR("plan.json:1:10: JSON syntax error near '}' (or nesting deeper than 1000)",
              load_text("{\"name\": }", 10));
    CHECK_STR("plan.json:3:5: JSON syntax error near '2}' (or nesting deeper than 1000)",
              load_text("{\n\"a\": 1,\n\"b\" 2}", 16));
    CHECK_STR("plan.json:1:1: JSON syntax error at the end of the text (truncated file?)",
              load_text("", 0));
    /* truncated base plan */
    size_t half = strlen(base_text) / 2;
    CHECK_CONTAINS(load_text(base_text, half), "JSON syntax error at the end of the text");
    /* trailing junk */
    char junk[64];
    snprintf(junk, sizeof junk, "{} x");
    CHECK_STR("plan.json:1:4: JSON syntax error near 'x' (or nesting deeper than 1000)",
              load_text(junk, strlen(junk)));
    /* deep nesting */
    static char deep[4001];
    memset(deep, '[', 4000);
    CHECK_CONTAINS(load_text(deep, 4000), "JSON syntax error");
    CHECK_STR("plan.json:1:3: NUL byte in the plan text", load_text("{ \0 }", 5));
    CHECK_STR("plan.json: expected a JSON object at the top level, got an array",
              load_text("[1,2]", 5));
    CHECK_STR("plan.json: missing required key 'name'", load_text("{}", 2));
    PlanErr e;
    CHECK(plan_load_file("tests/plans/does-not-exist.json", &e) == NULL);
    CHECK_STR("tests/plans/does-not-exist.json: cannot open: No such file or directory", e.msg);
    CHECK(plan_load_file("tests/plans", &e) == NULL);
    CHECK_STR("tests/plans: a directory, not a regular file", e.msg);
    struct stat st;   /* not /dev/null: as root, `mscclc -o /dev/null` can make it a file */
    if (stat("/dev/zero", &st) == 0 && S_ISCHR(st.st_mode)) {
        CHECK(plan_load_file("/dev/zero", &e) == NULL);
        CHECK_STR("/dev/zero: a character device, not a regular file", e.msg);
    }
}

/* A FIFO is refused without waiting for a writer (open() used to block forever); alarm()
 * turns a hang into a failure. */
static void t_fifo(void) {
    char dir[] = "/tmp/test_plan_load.XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/f.json", dir);
    CHECK(mkfifo(path, 0600) == 0);
    PlanErr e;
    alarm(20);
    CHECK(plan_load_file(path, &e) == NULL);
    alarm(0);
    char want[128];
    snprintf(want, sizeof want, "%s: a FIFO, not a regular file", path);
    CHECK_STR(want, e.msg);
    unlink(path);
    rmdir(dir);
}

/* plan_validate on models built in memory (the compiler's path) */
static void t_validate_model(void) {
    PlanErr e;
    Plan *p = plan_load_file("tests/plans/loader_base.json", &e);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(plan_validate(p, "model", &e));
    p->gpus[1].tbs[0].ops[3].src[0].index = 7;
    CHECK(!plan_validate(p, "model", &e));
    CHECK_STR("model: gpus[1].threadblocks[0].ops[3].src_buff[0].index: 7 is outside input (2 "
              "chunks)", e.msg);
    p->gpus[1].tbs[0].ops[3].src[0].index = 0;
    p->gpus[0].tbs[0].nchan[PLAN_CHAN_MEMORY] = 17;
    CHECK(!plan_validate(p, "model", &e));
    CHECK_STR("model: gpus[0].threadblocks[0].channels: 17 memory channels, outside 0..16", e.msg);
    p->gpus[0].tbs[0].nchan[PLAN_CHAN_MEMORY] = 1;
    p->gpus[0].tbs[0].ops[1].kind = PLAN_OP_COUNT;
    CHECK(!plan_validate(p, "model", &e));
    CHECK_STR("model: gpus[0].threadblocks[0].ops[1]: invalid op kind 30", e.msg);
    p->gpus[0].tbs[0].ops[1].kind = PLAN_OP_SIGNAL;
    CHECK(plan_validate(p, "model", &e));
    plan_free(p);
}

int main(void) {
    base_text = tp_read_file("tests/plans/loader_base.json", NULL);
    if (!base_text) {
        fprintf(stderr, "cannot read tests/plans/loader_base.json (run from the repo root)\n");
        return 1;
    }
    TEST("plan_load/compat", t_compat());
    TEST("plan_load/base_valid", t_base_valid());
    TEST("plan_load/validation_messages", t_cases());
    TEST("plan_load/too_many_ops", t_too_many_ops());
    TEST("plan_load/syntax_and_files", t_syntax());
    TEST("plan_load/fifo", t_fifo());
    TEST("plan_load/validate_model", t_validate_model());
    free(base_text);
    return harness_report();
}
