# runtime/nccl/module.mk - the NCCL drop-in, libmscclrt_nccl.so, and its test helpers; included
# by the top Makefile. runtime/nccl/*.c never go into libmscclrt: they are linked, with
# libmscclrt.a (static: its symbols stay hidden), into a library that exports exactly the nccl*
# and pnccl* names of nccl_funcs.def. It is linked twice, from the same objects:
#   $(BUILD)/lib/libmscclrt_nccl.so.2, soname libmscclrt_nccl.so.2, with the development link
#     libmscclrt_nccl.so: what `-lmscclrt_nccl` finds and records, so a program linked against
#     the drop-in runs the drop-in (with soname libnccl.so.2 it recorded libnccl.so.2, and the
#     loader gave it NVIDIA's NCCL);
#   $(BUILD)/lib/nccl/libnccl.so.2, soname libnccl.so.2 (and the link libnccl.so): the stand-in
#     for NCCL, for LD_LIBRARY_PATH and LD_PRELOAD (once preloaded its soname satisfies a
#     program's dependency on libnccl.so.2, so NVIDIA's is not loaded beside it); kept apart from
#     $(BUILD)/lib so that LD_LIBRARY_PATH=$(BUILD)/lib does not swap NCCL out by accident.
NCCL_SRC     := $(wildcard runtime/nccl/*.c)
NCCL_OBJ     := $(call obj,$(NCCL_SRC))
NCCL_DEF     := runtime/nccl/nccl_funcs.def
NCCL_HDR     := runtime/nccl/nccl_abi.h
# the entry points (nccl_api*.c); the library is built only once they exist
NCCL_API_SRC := $(wildcard runtime/nccl/nccl_api*.c)
NCCL_MAJOR   := 2
NCCL_SO      := $(BUILD)/lib/libmscclrt_nccl.so
NCCL_SO_REAL := $(BUILD)/lib/libmscclrt_nccl.so.$(NCCL_MAJOR)
NCCL_STANDIN := $(BUILD)/lib/nccl/libnccl.so.2
NCCL_OBJS_A  := $(BUILD)/lib/libmscclrt_nccl_objs.a
NCCL_MAP     := $(BUILD)/gen/libmscclrt_nccl.map
NCCL_TWINS   := $(BUILD)/gen/nccl_twins.ld
FAKE_NCCL    := $(BUILD)/tests/libfake_nccl.so $(BUILD)/tests/libfake_nccl_old.so \
                $(BUILD)/tests/libfake_nccl_marked.so
NCCL_WHEEL   := $(BUILD)/third_party/nccl-2.28.9/.ok

ifneq ($(NCCL_API_SRC),)
all: $(NCCL_SO)
endif

# ---- generated from nccl_funcs.def by the C preprocessor ---------------------------------------
# the version script: every nccl* row and its pnccl* twin, the shim marker, and libmscclrt's
# public mscclrt_* API (so that a program holding the preloaded drop-in, e.g. python/mscclrt,
# registers algorithms and selectors in the very registry the drop-in selects from); nothing else
$(NCCL_MAP): $(NCCL_DEF) runtime/nccl/module.mk
	@mkdir -p $(@D)
	$(call Q,GEN)printf '%s\n' '#define NCCL_FN(ret, name, params, args) name; p##name;' \
	    '#define NCCL_INT_FN(ret, name, params, args) name;' '#include "nccl_funcs.def"' \
	  | $(CC) -E -P -x c -I runtime/nccl - > $@.cpp
	@{ echo '{ global:'; echo '    ncclMscclrtShim;'; echo '    mscclrt_*;'; \
	  tr ';' '\n' < $@.cpp | sed -n 's/^ *\([a-zA-Z_][a-zA-Z0-9_]*\) *$$/    \1;/p'; \
	  echo '  local: *;'; echo '};'; } > $@
	@rm -f $@.cpp
# the pnccl* twins: linker-script assignments, so pncclX is ncclX's address, as in NCCL
$(NCCL_TWINS): $(NCCL_DEF) runtime/nccl/module.mk
	@mkdir -p $(@D)
	$(call Q,GEN)printf '%s\n' '#define NCCL_FN(ret, name, params, args) p##name = name;' \
	    '#define NCCL_INT_FN(ret, name, params, args)' '#include "nccl_funcs.def"' \
	  | $(CC) -E -P -x c -I runtime/nccl - > $@.cpp
	@tr ';' '\n' < $@.cpp | sed -n 's/^ *\(p[a-zA-Z0-9_]* = [a-zA-Z0-9_]*\) *$$/\1;/p' > $@
	@rm -f $@.cpp

# ---- the library ---------------------------------------------------------------------------------
$(NCCL_OBJS_A): $(NCCL_OBJ)
	@mkdir -p $(@D)
	@rm -f $@
	$(call Q,AR)ar rcs $@ $^

# every nccl.h function must be defined here: --no-undefined makes a missing one a link error;
# -Bsymbolic: the drop-in's own calls (mscclrt_* included) bind inside it, whatever else the
# process has loaded; the whole of libmscclrt.a, so that all of the mscclrt_* API is there;
# not under sanitizers, whose runtime (clang: linked into executables only) the program supplies
NCCL_NOUNDEF := $(if $(SAN)$(UBSAN)$(TSAN),,-Wl,--no-undefined)
NCCL_LINK = $(CC) -shared -Wl,--version-script=$(NCCL_MAP) -Wl,-Bsymbolic $(NCCL_NOUNDEF) \
  $(LDFLAGS) $(NCCL_OBJ) $(NCCL_TWINS) -Wl,--whole-archive $(LIBRT_A) -Wl,--no-whole-archive \
  $(LIBMSCCLC_A) $(LDLIBS)
$(NCCL_SO_REAL): $(NCCL_OBJ) $(LIBRT_A) $(LIBMSCCLC_A) $(NCCL_MAP) $(NCCL_TWINS)
	@mkdir -p $(@D) $(BUILD)/include
	$(call Q,LINK)$(NCCL_LINK) -Wl,-soname,libmscclrt_nccl.so.$(NCCL_MAJOR) -o $@
	@cp $(NCCL_HDR) $(BUILD)/include/nccl.h
	@cp $(NCCL_DEF) $(BUILD)/include/nccl_funcs.def
$(NCCL_SO): $(NCCL_SO_REAL) $(NCCL_STANDIN)
	@ln -sf libmscclrt_nccl.so.$(NCCL_MAJOR) $@
$(NCCL_STANDIN): $(NCCL_OBJ) $(LIBRT_A) $(LIBMSCCLC_A) $(NCCL_MAP) $(NCCL_TWINS)
	@mkdir -p $(@D)
	@rm -f $@   # was a link to the drop-in before it had a soname of its own
	$(call Q,LINK)$(NCCL_LINK) -Wl,-soname,libnccl.so.2 -o $@
	@ln -sf libnccl.so.2 $(@D)/libnccl.so

# ---- test helpers: unit tests of runtime/nccl link its objects; the fake NCCL libraries ----------
$(BUILD)/tests/test_nccl_%: $(BUILD)/obj/tests/unit/test_nccl_%.o $(NCCL_OBJS_A) $(LIBRT_A) \
                            $(LIBMSCCLC_A)
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) $(LDFLAGS) -o $@ $< $(NCCL_OBJS_A) $(LIBRT_A) $(LIBMSCCLC_A) $(LDLIBS)

FAKE_NCCL_DEPS := tests/tools/fake_nccl.c $(NCCL_HDR) $(NCCL_DEF) | $(DEPS_STAMP)
FAKE_NCCL_CC = $(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -fPIC -shared -Wl,-soname,libnccl.so.2 $(LDFLAGS)
$(BUILD)/tests/libfake_nccl.so: $(FAKE_NCCL_DEPS)
	@mkdir -p $(@D)
	$(call Q,CC)$(FAKE_NCCL_CC) -o $@ $<
$(BUILD)/tests/libfake_nccl_old.so: $(FAKE_NCCL_DEPS)
	@mkdir -p $(@D)
	$(call Q,CC)$(FAKE_NCCL_CC) -DFAKE_NCCL_OLD -o $@ $<
$(BUILD)/tests/libfake_nccl_marked.so: $(FAKE_NCCL_DEPS)
	@mkdir -p $(@D)
	$(call Q,CC)$(FAKE_NCCL_CC) -DFAKE_NCCL_MARKED -o $@ $<

# nccl_forward on NVIDIA's libnccl.so.2 (tests/cases/nccl_abi.sh runs it on the wheel's)
NCCL_LOAD_REAL := $(BUILD)/tests/nccl_abi/load_real
$(NCCL_LOAD_REAL): $(BUILD)/obj/tests/nccl_abi/load_real.o $(NCCL_OBJS_A) $(LIBRT_A)
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) $(LDFLAGS) -o $@ $< $(NCCL_OBJS_A) $(LIBRT_A) $(LDLIBS)

test: $(FAKE_NCCL) $(NCCL_LOAD_REAL)

# NVIDIA's nccl.h, nccl_device headers and libnccl.so.2 2.28.9 from the nvidia-nccl-cu13 wheel
# (pip download, once; the tests check our ABI against it, GPU tests forward to it)
nccl-wheel: $(NCCL_WHEEL)
$(NCCL_WHEEL): tests/tools/fetch_nccl.sh
	@sh tests/tools/fetch_nccl.sh $(@D)
.PHONY: nccl-wheel

# ---- install -------------------------------------------------------------------------------------
ifneq ($(NCCL_API_SRC),)
install: install-nccl
install-nccl: all
	install -d $(DESTDIR)$(PREFIX)/lib/nccl $(DESTDIR)$(PREFIX)/include/mscclrt_nccl
	install -m 755 $(NCCL_SO_REAL) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libmscclrt_nccl.so.$(NCCL_MAJOR) $(DESTDIR)$(PREFIX)/lib/libmscclrt_nccl.so
	rm -f $(DESTDIR)$(PREFIX)/lib/nccl/libnccl.so.2
	install -m 755 $(NCCL_STANDIN) $(DESTDIR)$(PREFIX)/lib/nccl/
	ln -sf libnccl.so.2 $(DESTDIR)$(PREFIX)/lib/nccl/libnccl.so
	install -m 644 $(NCCL_HDR) $(DESTDIR)$(PREFIX)/include/mscclrt_nccl/nccl.h
	install -m 644 $(NCCL_DEF) $(DESTDIR)$(PREFIX)/include/mscclrt_nccl/
.PHONY: install-nccl
endif
uninstall: uninstall-nccl
uninstall-nccl:
	rm -f $(DESTDIR)$(PREFIX)/lib/libmscclrt_nccl.so $(DESTDIR)$(PREFIX)/lib/libmscclrt_nccl.so.*
	rm -rf $(DESTDIR)$(PREFIX)/lib/nccl $(DESTDIR)$(PREFIX)/include/mscclrt_nccl
.PHONY: uninstall-nccl
