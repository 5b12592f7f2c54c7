# runtime/net/module.mk - the network transport of port channels; included by the top Makefile.
# runtime/net/*.c go into libmscclrt with the other runtime directories (RT_SRC's wildcard) and
# tests/unit/test_net_*.c are built like every unit test; this fragment adds the benchmark
# and the fake libibverbs of the ib tests.
# (The top Makefile's "-include */*/module.mk" already picks this file up: no line to add.)

# the transport's benchmark (tests/speed/net_bench.c; BENCHMARKS.md "Port channels between nodes")
NET_BENCH := $(BUILD)/tests/speed/net_bench
$(NET_BENCH): $(BUILD)/obj/tests/speed/net_bench.o $(LIBRT_A) $(LIBMSCCLC_A)
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) $(LDFLAGS) -o $@ $< $(LIBRT_A) $(LIBMSCCLC_A) $(LDLIBS)
net-bench: $(NET_BENCH)
.PHONY: net-bench

# the fake libibverbs the ib transport's tests load through MSCCLRT_IBVERBS_LIB
# (tests/tools/fake_ibverbs.c; needs only libibverbs-dev's headers, which install-deps ensures)
FAKE_IBVERBS := $(BUILD)/tests/libfake_ibverbs.so
$(FAKE_IBVERBS): tests/tools/fake_ibverbs.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call Q,CC)$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -fPIC -shared -Wl,-soname,libibverbs.so.1 \
	  $(LDFLAGS) -o $@ $< -lpthread
fake-ibverbs: $(FAKE_IBVERBS)
.PHONY: fake-ibverbs
test: $(FAKE_IBVERBS)

# test_net_tcp runs device mode on the fake CUDA driver (runtime/cuda/module.mk builds it)
$(BUILD)/tests/test_net_tcp: | $(BUILD)/tests/fake_cuda/libcuda.so.1
# test_native_net too: the native context's host packet slots across nodes (algo_native_net.c)
$(BUILD)/tests/test_native_net: | $(BUILD)/tests/fake_cuda/libcuda.so.1
