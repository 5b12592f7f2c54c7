# runtime/net/module.mk - the network transport of port channels; included by the top Makefile.
# runtime/net/*.c go into libmscclrt with the other runtime directories (RT_SRC's wildcard);
# this fragment adds what only the net tests need: the fake libibverbs the verbs tests dlopen
# through MSCCLRT_IBVERBS_LIB.

NET_FAKE_IBV := $(BUILD)/tests/libfake_ibverbs.so.1

$(NET_FAKE_IBV): tests/net/fake_ibverbs.c runtime/net/ibv_min.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call Q,CC)$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -fPIC -shared -Wl,-soname,libibverbs.so.1 \
	  $(LDFLAGS) -o $@ $<

ifneq ($(wildcard tests/net/fake_ibverbs.c),)
test: $(NET_FAKE_IBV)
$(BUILD)/tests/test_net_ib: $(NET_FAKE_IBV)
endif

# the transport's benchmark (tests/speed/net_bench.c; BENCHMARKS.md "Port channels between nodes")
NET_BENCH := $(BUILD)/tests/speed/net_bench
$(NET_BENCH): $(BUILD)/obj/tests/speed/net_bench.o $(LIBRT_A) $(LIBMSCCLC_A)
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) $(LDFLAGS) -o $@ $< $(LIBRT_A) $(LIBMSCCLC_A) $(LDLIBS)
net-bench: $(NET_BENCH)
.PHONY: net-bench
