/*
 * hash.c - NameMap and PosSet (hash.h): open addressing with linear probing, at most half
 * full, in the compile's arena. Removal shifts the following entries of the probe run back
 * (no tombstones), so a table whose scopes open and close forever never degrades.
 */
#include "hash.h"

#include <stdint.h>
#include <string.h>

typedef struct {
    const char *name;   /* borrowed (the declaration's AST string); NULL = empty slot */
    uint64_t hash;
    void *value;
} NameSlot;

struct NameMap {
    Arena *arena;
    NameSlot *slots;    /* [cap], cap a power of two */
    size_t cap, used;
};

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h ^ (h >> 31);
}

NameMap *names_new(Arena *a) {
    NameMap *m = arena_must(a, sizeof *m);
    m->arena = a;
    m->cap = 64;
    m->slots = arena_must(a, m->cap * sizeof *m->slots);
    return m;
}

/* The slot holding `name`, or the empty slot where it would go. */
static size_t name_slot(const NameMap *m, const char *name, uint64_t h) {
    size_t mask = m->cap - 1, j = (size_t)h & mask;
    while (m->slots[j].name &&
           !(m->slots[j].hash == h && (m->slots[j].name == name || strcmp(m->slots[j].name, name) == 0)))
        j = (j + 1) & mask;
    return j;
}

void *names_get(const NameMap *m, const char *name) {
    const NameSlot *e = &m->slots[name_slot(m, name, hash_str(name))];
    return e->name ? e->value : NULL;
}

void names_put(NameMap *m, const char *name, void *value) {
    if ((m->used + 1) * 2 > m->cap) {
        size_t cap = m->cap * 2;
        NameSlot *old = m->slots;
        size_t oldcap = m->cap;
        m->slots = arena_must(m->arena, cap * sizeof *m->slots);
        m->cap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].name) m->slots[name_slot(m, old[i].name, old[i].hash)] = old[i];
    }
    uint64_t h = hash_str(name);
    NameSlot *e = &m->slots[name_slot(m, name, h)];
    if (!e->name) m->used++;
    *e = (NameSlot){name, h, value};
}

void names_remove(NameMap *m, const char *name) {
    size_t mask = m->cap - 1, j = name_slot(m, name, hash_str(name));
    if (!m->slots[j].name) return;
    m->used--;
    /* backward shift: move later members of the run into the hole when their home allows it */
    for (size_t k = (j + 1) & mask;; k = (k + 1) & mask) {
        if (!m->slots[k].name) break;
        size_t home = (size_t)m->slots[k].hash & mask;
        /* k may fill hole j unless its home lies cyclically in (j, k] */
        bool stays = j <= k ? (home > j && home <= k) : (home > j || home <= k);
        if (stays) continue;
        m->slots[j] = m->slots[k];
        j = k;
    }
    m->slots[j] = (NameSlot){0};
}

/* ---- positions -------------------------------------------------------------------------- */
struct PosSet {
    Arena *arena;
    uint64_t *keys;     /* [cap]; line << 32 | col, plus 1; 0 = empty slot */
    size_t cap, used;
};

PosSet *pos_new(Arena *a) {
    PosSet *s = arena_must(a, sizeof *s);
    s->arena = a;
    s->cap = 64;
    s->keys = arena_must(a, s->cap * sizeof *s->keys);
    return s;
}

static size_t pos_slot(const PosSet *s, uint64_t key) {
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    size_t mask = s->cap - 1, j = (size_t)(h >> 17) & mask;
    while (s->keys[j] && s->keys[j] != key) j = (j + 1) & mask;
    return j;
}

bool pos_add(PosSet *s, PlanLoc at) {
    uint64_t key = (uint64_t)(uint32_t)at.line << 32 | (uint32_t)at.col;
    key += 1;   /* 0:0 ("no position") must not look like an empty slot */
    size_t j = pos_slot(s, key);
    if (s->keys[j]) return false;
    if ((s->used + 1) * 2 > s->cap) {
        uint64_t *old = s->keys;
        size_t oldcap = s->cap;
        s->cap *= 2;
        s->keys = arena_must(s->arena, s->cap * sizeof *s->keys);
        for (size_t i = 0; i < oldcap; i++)
            if (old[i]) s->keys[pos_slot(s, old[i])] = old[i];
        j = pos_slot(s, key);
    }
    s->keys[j] = key;
    s->used++;
    return true;
}
