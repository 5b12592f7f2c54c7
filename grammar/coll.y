/*
 * coll.y - the grammar of the .coll language (bison, pure/reentrant, with locations).
 * Actions only build the AST (ast_new_*); every meaning (ops, chunk references, header keys) is
 * given by sema/lower, so calls, members and named arguments are generic expressions here.
 * Errors recover at the statement (line) level, so one run reports several syntax errors.
 */
%define api.pure full
%locations
%define parse.error detailed
%param {yyscan_t scanner}
%parse-param {ParseState *ps}

%code requires {
#include "ast.h"
#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif
}

%code {
#include "diag.h"
#include "lex.h"

static void yyerror(YYLTYPE *l, yyscan_t scanner, ParseState *ps, const char *msg);
/* The AST location of a bison location: first byte and width on its first line. */
static SrcLoc L(YYLTYPE l) {
    SrcLoc s;
    s.at.line = l.first_line;
    s.at.col = l.first_column;
    s.width = l.last_line == l.first_line && l.last_column > l.first_column
                  ? l.last_column - l.first_column : 1;
    return s;
}
#define A (ps->arena)
}

%union {
    int64_t ival;
    const char *str;
    Expr *expr;
    Stmt *stmt;
    Iter *iter;
    HeaderItem *hdr;
    AstList list;
}

%token <ival> TK_INT "integer"
%token <str>  TK_ID "identifier"
%token <str>  TK_STR "string"
%token TK_NL "end of line"
%token TK_PARAM "param" TK_REQUIRE "require" TK_LET "let" TK_PROGRAM "program" TK_DEF "def"
%token TK_SCRATCH "scratch" TK_CHANNEL "channel" TK_SEMAPHORE "semaphore"
%token TK_FOR "for" TK_IN "in" TK_IF "if" TK_ELSE "else" TK_STEP "step"
%token TK_DOTDOT ".." TK_ARROW "->" TK_EQ "==" TK_NE "!=" TK_LE "<=" TK_GE ">="
%token TK_AND "&&" TK_OR "||"

%left TK_OR
%left TK_AND
%left TK_EQ TK_NE
%left '<' TK_LE '>' TK_GE
%left '+' '-'
%left '*' '/' '%'
%precedence UNARY

%type <list> stmts block_body block iters args args1 elems elems1 header_lines hargs params params1
%type <stmt> stmt if_stmt
%type <expr> target expr postfix primary range arg elem harg filter_opt place_opt
%type <iter> iter
%type <hdr> header_line

%%

/* program = stmts */
program
    : block_body                    { ps->prog->stmts = $1; }
    ;

term
    : TK_NL
    | ';'
    ;

/* stmts = (stmt? term)*  -- `error term` resynchronises at the end of the line */
stmts
    : %empty                        { memset(&$$, 0, sizeof $$); }
    | stmts stmt term               { $$ = $1; if ($2) ast_list_push(A, &$$, $2); }
    | stmts term                    { $$ = $1; }
    | stmts error term              { $$ = $1; yyerrok; }
    ;

/* the last statement of a block or file needs no terminator */
block_body
    : stmts                         { $$ = $1; }
    | stmts stmt                    { $$ = $1; if ($2) ast_list_push(A, &$$, $2); }
    ;

block
    : '{' block_body '}'            { $$ = $2; }
    | '{' stmts error '}'           { $$ = $2; yyerrok; }
    ;

stmt
    : TK_PARAM TK_ID '=' expr       { $$ = ast_new_stmt(A, ST_PARAM, L(@$)); $$->name = $2; $$->e = $4;
                                      $$->loc = L(@2); }
    | TK_REQUIRE expr ',' TK_STR    { $$ = ast_new_stmt(A, ST_REQUIRE, L(@2)); $$->e = $2; $$->msg = $4; }
    | TK_REQUIRE expr               { $$ = ast_new_stmt(A, ST_REQUIRE, L(@2)); $$->e = $2; }
    | TK_LET TK_ID '=' expr         { $$ = ast_new_stmt(A, ST_LET, L(@2)); $$->name = $2; $$->e = $4; }
    | TK_PROGRAM TK_ID '{' header_lines '}'
                                    { $$ = ast_new_stmt(A, ST_PROGRAM, L(@2)); $$->name = $2; $$->header = $4; }
    | TK_PROGRAM TK_ID '{' header_lines header_line '}'
                                    { $$ = ast_new_stmt(A, ST_PROGRAM, L(@2)); $$->name = $2; $$->header = $4;
                                      ast_list_push(A, &$$->header, $5); }
    | TK_SCRATCH TK_ID '[' expr ']' { $$ = ast_new_stmt(A, ST_SCRATCH, L(@2)); $$->name = $2; $$->e = $4; }
    | TK_CHANNEL target '=' expr   { $$ = ast_new_stmt(A, ST_CHANNEL, L(@2)); $$->target = $2; $$->e = $4; }
    | TK_SEMAPHORE target '=' expr { $$ = ast_new_stmt(A, ST_SEMAPHORE, L(@2)); $$->target = $2; $$->e = $4; }
    | TK_FOR iters filter_opt block { $$ = ast_new_stmt(A, ST_FOR, L(@1)); $$->iters = $2; $$->e = $3; $$->body = $4; }
    | TK_DEF TK_ID '(' params ')' block
                                    { $$ = ast_new_stmt(A, ST_DEF, L(@2)); $$->name = $2; $$->params = $4;
                                      $$->body = $6; }
    | if_stmt                       { $$ = $1; }
    | postfix place_opt             { $$ = ast_new_stmt(A, ST_OP, L(@1)); $$->e = $1; $$->place = $2; }
    | postfix block                 { $$ = ast_new_stmt(A, ST_PIPELINE, L(@1)); $$->e = $1; $$->body = $2; }
    ;

/* params = (identifier ("," identifier)*)?   -- a function's parameters, bound to values */
params
    : %empty                        { memset(&$$, 0, sizeof $$); }
    | params1                       { $$ = $1; }
    ;

params1
    : TK_ID                         { memset(&$$, 0, sizeof $$); ast_list_push(A, &$$, ast_new_name(A, L(@1), $1)); }
    | params1 ',' TK_ID             { $$ = $1; ast_list_push(A, &$$, ast_new_name(A, L(@3), $3)); }
    ;

/* if_stmt = "if" expr block ("else" (block | if_stmt))? */
if_stmt
    : TK_IF expr block              { $$ = ast_new_stmt(A, ST_IF, L(@1)); $$->e = $2; $$->body = $3; }
    | TK_IF expr block TK_ELSE block
                                    { $$ = ast_new_stmt(A, ST_IF, L(@1)); $$->e = $2; $$->body = $3; $$->orelse = $5; }
    | TK_IF expr block TK_ELSE if_stmt
                                    { $$ = ast_new_stmt(A, ST_IF, L(@1)); $$->e = $2; $$->body = $3;
                                      ast_list_push(A, &$$->orelse, $5); }
    ;

/* target = identifier ("[" expr "]")*   -- a declared name, scalar or array element */
target
    : TK_ID                         { $$ = ast_new_name(A, L(@1), $1); }
    | target '[' expr ']'           { $$ = ast_new_node(A, L(@$), EX_INDEX, $1, $3, NULL); }
    ;

place_opt
    : %empty                        { $$ = NULL; }
    | '@' postfix                   { $$ = $2; }
    ;

filter_opt
    : %empty                        { $$ = NULL; }
    | TK_IF expr                    { $$ = $2; }
    ;

iters
    : iter                          { memset(&$$, 0, sizeof $$); ast_list_push(A, &$$, $1); }
    | iters ',' iter                { $$ = $1; ast_list_push(A, &$$, $3); }
    ;

/* `in expr` without `..` parses too, so that sema can say what to write instead (Python's
 * range(N) is 0..N) rather than leave a bare syntax error */
iter
    : TK_ID TK_IN range             { $$ = ast_new_iter(A, L(@1), $1, $3); }
    | TK_ID TK_IN expr              { $$ = ast_new_iter(A, L(@1), $1, $3); }
    ;

/* range = expr ".." expr ("step" expr)? */
range
    : expr TK_DOTDOT expr           { $$ = ast_new_node(A, L(@$), EX_RANGE, $1, $3, NULL); }
    | expr TK_DOTDOT expr TK_STEP expr
                                    { $$ = ast_new_node(A, L(@$), EX_RANGE, $1, $3, $5); }
    ;

/* header_lines = (header_line? term)* inside program { } */
header_lines
    : %empty                        { memset(&$$, 0, sizeof $$); }
    | header_lines header_line term { $$ = $1; ast_list_push(A, &$$, $2); }
    | header_lines term             { $$ = $1; }
    | header_lines error term       { $$ = $1; yyerrok; }
    ;

header_line
    : TK_ID                         { $$ = ast_new_header(A, L(@1), $1); }
    | TK_ID hargs                   { $$ = ast_new_header(A, L(@1), $1); $$->args = $2; }
    ;

hargs
    : harg                          { memset(&$$, 0, sizeof $$); ast_list_push(A, &$$, $1); }
    | hargs ',' harg                { $$ = $1; ast_list_push(A, &$$, $3); }
    ;

/* header arguments: values, words, ranges with open ends (`sizes 1M ..`), named values */
harg
    : expr                          { $$ = $1; }
    | expr TK_DOTDOT expr           { $$ = ast_new_node(A, L(@$), EX_RANGE, $1, $3, NULL); }
    | expr TK_DOTDOT                { $$ = ast_new_node(A, L(@$), EX_RANGE, $1, NULL, NULL); }
    | TK_DOTDOT expr                { $$ = ast_new_node(A, L(@$), EX_RANGE, NULL, $2, NULL); }
    | TK_ID '=' expr                { $$ = ast_new_node(A, L(@$), EX_NAMED, $3, NULL, NULL); $$->name = $1; }
    | TK_IN '=' expr                { $$ = ast_new_node(A, L(@$), EX_NAMED, $3, NULL, NULL); $$->name = "in"; }
    ;

expr
    : postfix                       { $$ = $1; }
    | '-' expr %prec UNARY          { $$ = ast_new_unary(A, L(@$), '-', $2); }
    | '!' expr %prec UNARY          { $$ = ast_new_unary(A, L(@$), '!', $2); }
    | expr '+' expr                 { $$ = ast_new_binary(A, L(@$), '+', $1, $3); }
    | expr '-' expr                 { $$ = ast_new_binary(A, L(@$), '-', $1, $3); }
    | expr '*' expr                 { $$ = ast_new_binary(A, L(@$), '*', $1, $3); }
    | expr '/' expr                 { $$ = ast_new_binary(A, L(@$), '/', $1, $3); }
    | expr '%' expr                 { $$ = ast_new_binary(A, L(@$), '%', $1, $3); }
    | expr '<' expr                 { $$ = ast_new_binary(A, L(@$), '<', $1, $3); }
    | expr '>' expr                 { $$ = ast_new_binary(A, L(@$), '>', $1, $3); }
    | expr TK_LE expr               { $$ = ast_new_binary(A, L(@$), TK_LE, $1, $3); }
    | expr TK_GE expr               { $$ = ast_new_binary(A, L(@$), TK_GE, $1, $3); }
    | expr TK_EQ expr               { $$ = ast_new_binary(A, L(@$), TK_EQ, $1, $3); }
    | expr TK_NE expr               { $$ = ast_new_binary(A, L(@$), TK_NE, $1, $3); }
    | expr TK_AND expr              { $$ = ast_new_binary(A, L(@$), TK_AND, $1, $3); }
    | expr TK_OR expr               { $$ = ast_new_binary(A, L(@$), TK_OR, $1, $3); }
    ;

postfix
    : primary                       { $$ = $1; }
    | postfix '(' args ')'          { $$ = ast_new_node(A, L(@$), EX_CALL, $1, NULL, NULL); $$->args = $3; }
    | postfix '[' expr ']'          { $$ = ast_new_node(A, L(@$), EX_INDEX, $1, $3, NULL); }
    | postfix '[' expr ':' expr ']' { $$ = ast_new_node(A, L(@$), EX_SLICE, $1, $3, $5); }
    | postfix '.' TK_ID             { $$ = ast_new_node(A, L(@$), EX_MEMBER, $1, NULL, NULL); $$->name = $3;
                                      $$->loc = L(@3); }
    ;

primary
    : TK_INT                        { $$ = ast_new_int(A, L(@1), $1); }
    | TK_ID                         { $$ = ast_new_name(A, L(@1), $1); }
    | TK_SEMAPHORE                  { $$ = ast_new_name(A, L(@1), "semaphore"); }
    | TK_STR                        { $$ = ast_new_expr(A, EX_STR, L(@1)); $$->str = $1; }
    | '(' expr ')'                  { $$ = $2; }
    | '[' elems ']'                 { $$ = ast_new_expr(A, EX_LIST, L(@$)); $$->args = $2; }
    | '[' expr TK_FOR iters filter_opt ']'
                                    { $$ = ast_new_node(A, L(@$), EX_COMP, $2, NULL, NULL); $$->iters = $4;
                                      $$->cond = $5; }
    ;

args
    : %empty                        { memset(&$$, 0, sizeof $$); }
    | args1                         { $$ = $1; }
    ;

args1
    : arg                           { memset(&$$, 0, sizeof $$); ast_list_push(A, &$$, $1); }
    | args1 ',' arg                 { $$ = $1; ast_list_push(A, &$$, $3); }
    ;

arg
    : expr                          { $$ = $1; }
    | range                         { $$ = $1; }
    | expr TK_ARROW expr            { $$ = ast_new_node(A, L(@$), EX_ARROW, $1, $3, NULL); }
    | TK_ID '=' expr                { $$ = ast_new_node(A, L(@$), EX_NAMED, $3, NULL, NULL); $$->name = $1; }
    | TK_ID '=' range               { $$ = ast_new_node(A, L(@$), EX_NAMED, $3, NULL, NULL); $$->name = $1; }
    ;

elems
    : %empty                        { memset(&$$, 0, sizeof $$); }
    | elems1                        { $$ = $1; }
    | elems1 ','                    { $$ = $1; }
    ;

elems1
    : elem                          { memset(&$$, 0, sizeof $$); ast_list_push(A, &$$, $1); }
    | elems1 ',' elem               { $$ = $1; ast_list_push(A, &$$, $3); }
    ;

elem
    : expr                          { $$ = $1; }
    | range                         { $$ = $1; }
    ;

%%

static void yyerror(YYLTYPE *l, yyscan_t scanner, ParseState *ps, const char *msg) {
    (void)scanner;
    PlanLoc at = {l->first_line, l->first_column};
    int w = l->last_line == l->first_line && l->last_column > l->first_column
                ? l->last_column - l->first_column : 1;
    diag_error_range(ps->diag, at, w, "%s", msg);
    ps->errors++;
    ps->depth = 0;   /* an unbalanced ( must not swallow the newlines recovery needs */
}
