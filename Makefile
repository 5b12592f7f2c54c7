# Makefile - the whole build of mscclc and libmscclrt, out of tree into $(BUILD).
# Directories add sources just by existing (wildcards below); each may add rules in its own
# module.mk. `make` builds everything, `make test` runs every host-only test,
# `make test-gpu` the GPU tests, `make install PREFIX=...` installs.

BUILD     ?= build
PREFIX    ?= /usr/local
DESTDIR   ?=
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda) /usr/local/cuda)
VERSION   := 0.1.0
MAJOR     := 0

CC        ?= cc
CFLAGS    ?= -O2 -g
WARN      := -std=c11 -Wall -Wextra -Wshadow -Wwrite-strings -Wstrict-prototypes \
             -Wmissing-prototypes -Wno-unused-parameter
# -Werror in CI (.ci/run sets WERROR=1) and whenever asked; our code must build warning-free
ifdef WERROR
WARN      += -Werror
endif
# Generated C (bison, flex, embedded kernels) is not ours: relaxed warnings.
GENWARN   := -std=gnu11 -w
CPPFLAGS  += -D_GNU_SOURCE -Iruntime/include -Iruntime -Iruntime/plan -Ikernels -Icompiler \
             -I$(BUILD)/gen -isystem $(CUDA_HOME)/include
LDLIBS    := -lcjson -lpthread -ldl -lm

ifdef DEBUG
CFLAGS    := -O0 -g
endif
# float-cast-overflow: a double out of an integer type's range converted to it (GCC's
# -fsanitize=undefined leaves it out; clang's includes it)
ifdef SAN
CFLAGS    += -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer \
             -fno-sanitize-recover=undefined,float-cast-overflow
LDFLAGS   += -fsanitize=address,undefined,float-cast-overflow
endif
ifdef UBSAN
CFLAGS    += -fsanitize=undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS   += -fsanitize=undefined,float-cast-overflow
endif
ifdef TSAN
CFLAGS    += -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS   += -fsanitize=thread
endif

MAKEFLAGS += -r
.SECONDARY:   # keep intermediate objects (no relinking on every run)
ifndef V
Q = @printf '  %-7s %s\n' $(1) $@;
endif

.PHONY: run all test test-gpu test-sanitize install uninstall clean check-man help deps
all:

# ---- dependencies: installed by the build itself when missing (Debian) -----------------------
DEPS_STAMP := $(BUILD)/.deps-ok
$(DEPS_STAMP): .ci/install-deps.sh
	@mkdir -p $(@D)
	@sh .ci/install-deps.sh
	@touch $@
deps: $(DEPS_STAMP)

# ---- sources ---------------------------------------------------------------------------------
PLAN_SRC  := $(wildcard runtime/plan/*.c)
RT_SRC    := $(filter-out runtime/cmd/% runtime/nccl/%,$(wildcard runtime/*/*.c))
CMD_SRC   := $(wildcard runtime/cmd/*.c)
MSCCLC_SRC:= $(filter-out compiler/main.c,$(wildcard compiler/*.c))
GRAMMAR   := $(wildcard grammar/coll.y)
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
# (tests/tools/fake_*.c are shared libraries: runtime/nccl/module.mk and runtime/net/module.mk
# build them)
TOOL_SRC  := $(filter-out tests/tools/fake_%.c,$(wildcard tests/tools/*.c))
KERNEL_FILES := $(sort $(wildcard kernels/*.cuh kernels/*.h kernels/*.def))
STDLIB_FILES := $(sort $(wildcard stdlib/*/*.coll))
# what the compiler's output depends on: hashed into the embedded stdlib's compiler id, which
# keys the on-disk plan cache (a changed compiler never reads plans an older one wrote)
COMPILER_ID_FILES := $(sort $(wildcard compiler/*.c compiler/*.h grammar/* runtime/plan/*.c \
                     runtime/plan/*.h kernels/ops.def))

# the lists themselves: a file added or removed (a branch switched) changes a list, and the
# embedded sources must follow though no listed file is newer (a removed program stayed embedded)
EMBED_LISTS := $(BUILD)/gen/embed_lists.txt
EMBED_LIST_TEXT := $(KERNEL_FILES) : $(STDLIB_FILES) : $(COMPILER_ID_FILES)
$(shell mkdir -p $(BUILD)/gen && { echo '$(EMBED_LIST_TEXT)' | cmp -s - $(EMBED_LISTS) || \
        echo '$(EMBED_LIST_TEXT)' > $(EMBED_LISTS); })

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
RT_OBJ     := $(call obj,$(RT_SRC)) $(BUILD)/obj/gen/kernel_sources.o \
              $(BUILD)/obj/gen/stdlib_sources.o
# the compiler without the plan model (which libmscclrt already has): libmscclrt.so links it in
# for the default collection (runtime/algo compiles the embedded stdlib in process); the static
# libmscclrt.a stays runtime-only and is linked together with libmscclc.a
COMPILER_OBJ := $(call obj,$(MSCCLC_SRC))
ifneq ($(GRAMMAR),)
COMPILER_OBJ += $(BUILD)/obj/gen/parse.o $(BUILD)/obj/gen/lex.o
endif
MSCCLC_OBJ := $(COMPILER_OBJ) $(call obj,$(PLAN_SRC))

LIBRT_SO   := $(BUILD)/lib/libmscclrt.so.$(MAJOR)
LIBRT_A    := $(BUILD)/lib/libmscclrt.a
LIBMSCCLC_A:= $(BUILD)/lib/libmscclc.a
LIBMSCCLC_SO:= $(BUILD)/lib/libmscclc.so.$(MAJOR)
MSCCLC     := $(BUILD)/bin/mscclc
CMDS       := $(patsubst runtime/cmd/%.c,$(BUILD)/bin/%,$(subst _,-,$(CMD_SRC)))
UNIT_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
TOOL_BIN   := $(patsubst tests/tools/%.c,$(BUILD)/tests/tools/%,$(TOOL_SRC))

all: $(DEPS_STAMP) $(LIBRT_SO) $(LIBRT_A) $(LIBMSCCLC_A) $(LIBMSCCLC_SO) $(if $(wildcard compiler/main.c),$(MSCCLC)) $(CMDS)

# ---- compile rules -----------------------------------------------------------------------------
$(BUILD)/obj/%.o: %.c Makefile | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call Q,CC)$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(call Q,CC)$(CC) $(CPPFLAGS) $(GENWARN) $(CFLAGS) -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

# bison and flex (reentrant, locations); the scanner needs the parser's header
$(BUILD)/gen/parse.c $(BUILD)/gen/parse.h &: grammar/coll.y | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call Q,BISON)bison -Wall -Werror --header=$(BUILD)/gen/parse.h -o $(BUILD)/gen/parse.c $<
$(BUILD)/gen/lex.c $(BUILD)/gen/lex.h &: grammar/coll.l | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call Q,FLEX)flex --header-file=$(BUILD)/gen/lex.h -o $(BUILD)/gen/lex.c $<
$(BUILD)/obj/gen/lex.o: $(BUILD)/gen/parse.h
$(BUILD)/obj/gen/parse.o: $(BUILD)/gen/lex.h
$(call obj,$(MSCCLC_SRC)): $(if $(GRAMMAR),$(BUILD)/gen/parse.h $(BUILD)/gen/lex.h)

# the device library, embedded as C strings so NVRTC needs no install tree
$(BUILD)/tools/embed: runtime/codegen/tools/embed.c
	@mkdir -p $(@D)
	$(call Q,CC)$(CC) $(WARN) $(CFLAGS) $< -o $@
$(BUILD)/gen/kernel_sources.c: $(BUILD)/tools/embed $(KERNEL_FILES) $(EMBED_LISTS)
	@mkdir -p $(@D)
	$(call Q,EMBED)$(BUILD)/tools/embed $@ $(KERNEL_FILES)
# the stdlib .coll programs, for the default collection (runtime/algo/algo_default.c)
$(BUILD)/gen/stdlib_sources.c: $(BUILD)/tools/embed $(STDLIB_FILES) $(COMPILER_ID_FILES) $(EMBED_LISTS)
	@mkdir -p $(@D)
	$(call Q,EMBED)$(BUILD)/tools/embed --stdlib stdlib $@ $(STDLIB_FILES) --id $(COMPILER_ID_FILES)

# ---- libraries and programs ---------------------------------------------------------------------
$(LIBRT_A): $(RT_OBJ)
	@mkdir -p $(@D)
	@rm -f $@
	$(call Q,AR)ar rcs $@ $^
$(LIBMSCCLC_A): $(MSCCLC_OBJ)
	@mkdir -p $(@D)
	@rm -f $@
	$(call Q,AR)ar rcs $@ $^
$(LIBRT_SO): $(RT_OBJ) $(COMPILER_OBJ) runtime/libmscclrt.map
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) -shared -Wl,-soname,libmscclrt.so.$(MAJOR) \
	  -Wl,--version-script=runtime/libmscclrt.map $(LDFLAGS) -o $@ $(RT_OBJ) $(COMPILER_OBJ) \
	  $(LDLIBS)
	@ln -sf libmscclrt.so.$(MAJOR) $(BUILD)/lib/libmscclrt.so

# the compiler as a shared library for other languages (python/mscclrt compiles through it):
# only compiler/mscclc_api.c's functions are exported
$(LIBMSCCLC_SO): $(MSCCLC_OBJ) compiler/libmscclc.map
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) -shared -Wl,-soname,libmscclc.so.$(MAJOR) \
	  -Wl,--version-script=compiler/libmscclc.map $(LDFLAGS) -o $@ $(MSCCLC_OBJ) $(LDLIBS)
	@ln -sf libmscclc.so.$(MAJOR) $(BUILD)/lib/libmscclc.so

$(MSCCLC): $(BUILD)/obj/compiler/main.o $(LIBMSCCLC_A)
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# commands: runtime/cmd/mscclrt_run.c -> build/bin/mscclrt-run, static against libmscclrt
$(BUILD)/bin/%: $(LIBRT_A) $(LIBMSCCLC_A)
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) $(LDFLAGS) -o $@ $(BUILD)/obj/runtime/cmd/$(subst -,_,$*).o \
	  $(LIBRT_A) $(LIBMSCCLC_A) $(LDLIBS)
$(foreach c,$(CMD_SRC),$(eval $(BUILD)/bin/$(subst _,-,$(notdir $(basename $(c)))): $(call obj,$(c))))

# unit tests: tests/unit/test_x.c -> build/tests/test_x, linked against both static libraries
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBRT_A) $(LIBMSCCLC_A)
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) $(LDFLAGS) -o $@ $< $(LIBRT_A) $(LIBMSCCLC_A) $(LDLIBS)

# the README's main job: compile a stdlib allreduce for 8 ranks, summarise it (DUMP=full: every
# op), run it
run: all
	@BUILD=$(BUILD) DUMP=$(DUMP) sh examples/demo.sh

# test helper programs (tests/tools/x.c -> build/tests/tools/x), built with the same flags so
# sanitizer builds link; test scripts run them, the driver does not
$(BUILD)/tests/tools/%: $(BUILD)/obj/tests/tools/%.o $(LIBRT_A) $(LIBMSCCLC_A)
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) $(LDFLAGS) -o $@ $< $(LIBRT_A) $(LIBMSCCLC_A) $(LDLIBS)

# ---- tests -----------------------------------------------------------------------------------------
test: all $(UNIT_BIN) $(TOOL_BIN)
	@BUILD=$(BUILD) UPDATE=$(UPDATE) sh tests/run.sh

test-gpu: all $(UNIT_BIN) $(TOOL_BIN)
	@BUILD=$(BUILD) sh tests/gpu/run.sh

# the plan loader, the compiler, the CPU backend, the threaded checks, the algorithm layer, the
# failure paths of mscclrt_comm_init_all (on the fake CUDA driver) and the commands' option
# parsing under ASan+UBSan (with the socket transport's header fuzzer for 60 s instead of make
# test's 5), then the CPU backend, the proxy FIFO, the threaded checks and the algorithm
# collection (registering from 8 threads) under TSan, then the commands' option parsing under
# clang's UBSan (when clang is installed: it is not a build dependency, and the ASan stage
# already checks float-to-integer overflow with $(CC)); each in its own build directory.
# `make test` runs it too (tests/cases/sanitize.sh).
SAN_ASAN_ONLY := test_plan test_cpu test_proxy test_check_rank test_passes test_launch_sim test_diag test_hash \
                 test_mscclc test_comm_init_fail \
                 test_numarg cmd_args cpu_compat cpu_run compat_coll test_algo fuzz_net test_net_hostile \
                 test_peermem test_boot_fdpass test_p2pcoll test_native_net
SAN_TSAN_ONLY := test_cpu test_proxy test_check_rank tsan test_algo_registry test_algo_tuning
SAN_UBSAN_ONLY:= test_numarg cmd_args cpu_run
CLANG     ?= $(shell command -v clang 2>/dev/null)
test-sanitize:
	$(MAKE) --no-print-directory BUILD=$(BUILD)-asan SAN=1 all \
	  $(patsubst $(BUILD)/%,$(BUILD)-asan/%,$(UNIT_BIN) $(TOOL_BIN))
	BUILD=$(BUILD)-asan FUZZ_NET_SECONDS=60 ONLY="$(SAN_ASAN_ONLY)" sh tests/run.sh
	$(MAKE) --no-print-directory BUILD=$(BUILD)-tsan TSAN=1 all \
	  $(patsubst $(BUILD)/%,$(BUILD)-tsan/%,$(UNIT_BIN) $(TOOL_BIN))
	BUILD=$(BUILD)-tsan ONLY="$(SAN_TSAN_ONLY)" sh tests/run.sh
ifneq ($(CLANG),)
	$(MAKE) --no-print-directory BUILD=$(BUILD)-ubsan CC=$(CLANG) UBSAN=1 all \
	  $(BUILD)-ubsan/tests/test_numarg
	BUILD=$(BUILD)-ubsan ONLY="$(SAN_UBSAN_ONLY)" sh tests/run.sh
else
	@echo "test-sanitize: clang not found: skipping the clang UBSan stage (the ASan stage checks" \
	  "float-to-integer overflow with $(CC))"
endif

# every page renders without a warning, each command's --help and its page's OPTIONS agree, and
# no page cites an unshipped document (tests/cases/check_man.sh)
check-man: all
	@BUILD=$(BUILD) sh tests/cases/check_man.sh | grep -v ' \.\.\. passed$$'; \
	  BUILD=$(BUILD) sh tests/cases/check_man.sh >/dev/null && echo "man pages ok"

-include $(wildcard */module.mk */*/module.mk)

# ---- install -------------------------------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/share/mscclc/stdlib
	install -m 755 $(MSCCLC) $(CMDS) $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(LIBRT_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libmscclrt.so.$(MAJOR) $(DESTDIR)$(PREFIX)/lib/libmscclrt.so
	install -m 755 $(LIBMSCCLC_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libmscclc.so.$(MAJOR) $(DESTDIR)$(PREFIX)/lib/libmscclc.so
	install -m 644 $(LIBRT_A) $(LIBMSCCLC_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 runtime/include/*.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)$(PREFIX)/include/mscclc
	install -m 644 compiler/mscclc.h runtime/plan/plan.h kernels/ops.def $(DESTDIR)$(PREFIX)/include/mscclc/
	cp -r stdlib/. $(DESTDIR)$(PREFIX)/share/mscclc/stdlib/
	for m in man/*.[0-9]; do s=$${m##*.}; install -d $(DESTDIR)$(PREFIX)/share/man/man$$s; \
	  install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/; done
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' runtime/mscclrt.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/mscclrt.pc
	install -d $(DESTDIR)$(PREFIX)/lib/mscclrt/python/mscclrt/torch
	install -m 644 python/mscclrt/*.py $(DESTDIR)$(PREFIX)/lib/mscclrt/python/mscclrt/
	install -m 644 python/mscclrt/torch/*.py $(DESTDIR)$(PREFIX)/lib/mscclrt/python/mscclrt/torch/
	sed -e 's|@PREFIX@|$(PREFIX)|g' python/scripts/mscclrt-tune.in > $(DESTDIR)$(PREFIX)/bin/mscclrt-tune
	chmod 755 $(DESTDIR)$(PREFIX)/bin/mscclrt-tune

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/mscclc $(patsubst $(BUILD)/bin/%,$(DESTDIR)$(PREFIX)/bin/%,$(CMDS))
	rm -f $(DESTDIR)$(PREFIX)/bin/mscclrt-tune
	rm -rf $(DESTDIR)$(PREFIX)/lib/mscclrt
	rm -f $(DESTDIR)$(PREFIX)/lib/libmscclrt.* $(DESTDIR)$(PREFIX)/lib/libmscclc.*
	rm -f $(DESTDIR)$(PREFIX)/lib/pkgconfig/mscclrt.pc $(DESTDIR)$(PREFIX)/include/mscclrt.h
	rm -rf $(DESTDIR)$(PREFIX)/include/mscclc
	rm -rf $(DESTDIR)$(PREFIX)/share/mscclc

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-ubsan

help:
	@echo "make [all|test|test-gpu|test-sanitize|install PREFIX=..|clean|check-man] [V=1 DEBUG=1 SAN=1]"

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# a variable's value, for test scripts that build harnesses from the same source lists
# (tests/cases/fuzz_plan.sh: make -s print-PLAN_SRC)
print-%:
	@echo $($*)
