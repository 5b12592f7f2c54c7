/*
 * main.c - compares every fact of facts.def between our nccl_abi.h (ours.c) and NVIDIA's
 * headers (real.cc); one "testing nccl_abi/GROUP ... passed|failed" line per group, and each
 * difference on stderr as "expression: ours X, NVIDIA's Y".
 */
#include <stdio.h>
#include <string.h>

int abi_ours(long long *out);
int abi_real(long long *out);

static const struct { const char *group, *expr; } facts[] = {
#define FACT(group, e) {#group, #e},
#include "facts.def"
#undef FACT
};
#define NFACTS (int)(sizeof facts / sizeof facts[0])

int main(void) {
    static long long ours[NFACTS], real[NFACTS];
    int n_ours = abi_ours(ours), n_real = abi_real(real), failed = 0;

    if (n_ours != NFACTS || n_real != NFACTS) {
        fprintf(stderr, "nccl_abi: %d facts, ours.c gave %d, real.cc %d\n", NFACTS, n_ours, n_real);
        return 1;
    }
    for (int i = 0; i < NFACTS; i++) {
        int bad = 0, seen = 0;
        for (int j = 0; j < i; j++) seen |= strcmp(facts[j].group, facts[i].group) == 0;
        if (seen) continue;                 /* this group was reported at its first fact */
        int count = 0;
        for (int j = i; j < NFACTS; j++) {
            if (strcmp(facts[j].group, facts[i].group) != 0) continue;
            count++;
            if (ours[j] != real[j]) {
                fprintf(stderr, "%s: ours %lld, NVIDIA's %lld\n", facts[j].expr, ours[j], real[j]);
                bad++;
            }
        }
        printf("testing nccl_abi/%s (%d facts) ... %s\n", facts[i].group, count,
               bad ? "failed" : "passed");
        failed += bad;
    }
    fprintf(stderr, "%d facts compared, %d differ\n", NFACTS, failed);
    return failed ? 1 : 0;
}
