/*
 * hash.h - the two hash tables of the evaluator (sema.c): NameMap, name -> the one visible
 * declaration of that name (scopes), and PosSet, the source positions that already carry an
 * error. Open addressing with linear probing in the compile's arena; every operation is O(1)
 * expected, so name lookup and error de-duplication cost the same in a program of any size.
 */
#ifndef MSCCLC_HASH_H
#define MSCCLC_HASH_H

#include <stdbool.h>

#include "ast.h"   /* Arena */
#include "plan.h"  /* PlanLoc */

typedef struct NameMap NameMap;
typedef struct PosSet PosSet;

/* Both tables allocate from `a` (old slot arrays are abandoned there when a table grows) and
 * die with it; on out-of-memory they longjmp like arena_must. */
NameMap *names_new(Arena *a);
void *names_get(const NameMap *m, const char *name);        /* NULL when absent */
void names_put(NameMap *m, const char *name, void *value);  /* `name` (borrowed) must be absent */
void names_remove(NameMap *m, const char *name);            /* no-op when absent */

PosSet *pos_new(Arena *a);
bool pos_add(PosSet *s, PlanLoc at);                        /* false if it was already there */

#endif
