/*
 * diag.h - compiler diagnostics in GCC/Clang form: "file:line:col: error: message", the source
 * line and a caret. Every stage (parser, sema, lowering, passes) reports through one Diag, which
 * counts errors and stops everything past the error limit. The driver prints "N errors generated."
 */
#ifndef MSCCLC_DIAG_H
#define MSCCLC_DIAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "plan.h"   /* PlanLoc: line/col, both counted from 1; 0:0 means "no position" */

typedef struct Diag Diag;

/* `source` (len bytes, borrowed; must outlive the Diag) is used to print the line under a
 * message. Messages go to `out` (or, when out is NULL, are collected for diag_text). */
Diag *diag_new(const char *filename, const char *source, size_t len, FILE *out, int error_limit);
void diag_free(Diag *d);
void diag_error(Diag *d, PlanLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_warning(Diag *d, PlanLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_note(Diag *d, PlanLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* An error with a caret range of `width` bytes (~ under the range). */
void diag_error_range(Diag *d, PlanLoc loc, int width, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Records that the statement at `stmt` was reached inside function `fn` (borrowed name) called
 * at `call`; the first call recorded for a statement wins. Once diag_call_notes_on(d) was
 * called, an error located at a recorded statement gets a note "in the call of 'fn'" at the
 * call: the passes see only the plan, whose ops carry the body's positions. (Sema adds these
 * notes itself, so it turns them on only when it is done.) */
void diag_add_call_site(Diag *d, PlanLoc stmt, PlanLoc call, const char *fn);
void diag_call_notes_on(Diag *d);
/* The error limit was reached: nothing more is reported or counted, and every stage should
 * stop (the scanner ends the input, the evaluator stops executing statements). */
bool diag_stopped(const Diag *d);
int diag_errors(const Diag *d);
int diag_warnings(const Diag *d);
const char *diag_text(const Diag *d);   /* collected text when out == NULL; "" otherwise */

#endif
