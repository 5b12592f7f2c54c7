# runtime/cuda/module.mk - the test double of the CUDA driver and the test that runs on it;
# included by the top Makefile. tests/tools/fake_cuda.c becomes $(BUILD)/tests/fake_cuda/
# libcuda.so.1, alone in its directory so that LD_LIBRARY_PATH=$(BUILD)/tests/fake_cuda swaps the
# driver and nothing else. The tests that load it depend on it, so that `make test-sanitize`
# builds it with the sanitizer flags too.
# (The top Makefile's "-include */*/module.mk" already picks this file up: no line to add.)

FAKE_CUDA := $(BUILD)/tests/fake_cuda/libcuda.so.1
$(FAKE_CUDA): tests/tools/fake_cuda.c runtime/cuda/cuda_driver.h runtime/include/mscclrt.h \
              runtime/cuda/module.mk | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call Q,CC)$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -fPIC -shared -Wl,-soname,libcuda.so.1 \
	  $(LDFLAGS) -o $@ $< -lpthread
fake-cuda: $(FAKE_CUDA)
.PHONY: fake-cuda

# mscclrt_comm_init_all's failure paths on the fake driver; --wrap=calloc lets the test fail the
# calloc of one communicator with no allocation hook in the library
$(BUILD)/tests/test_comm_init_fail: $(BUILD)/obj/tests/unit/test_comm_init_fail.o $(LIBRT_A) \
                                    $(LIBMSCCLC_A) $(FAKE_CUDA)
	@mkdir -p $(@D)
	$(call Q,LINK)$(CC) $(LDFLAGS) -Wl,--wrap=calloc -o $@ $< $(LIBRT_A) $(LIBMSCCLC_A) $(LDLIBS)

# the port proxy's thread runs on the fake driver (tests/unit/test_proxy_thread.c)
$(BUILD)/tests/test_proxy_thread: | $(FAKE_CUDA)

# the allocation trace (runtime/cuda/cu_trace.c) and the primary-context reference
# (cu_primary.c) on the fake driver
$(BUILD)/tests/test_cu_trace: | $(FAKE_CUDA)
$(BUILD)/tests/test_cu_primary: | $(FAKE_CUDA)
