# h3 build. `make` builds build/h3 (CPU backend, FFmpeg media); `make test` runs the test suite.
#   make CUDA=1   adds the CUDA backend (nvcc: sm_80, sm_90a, compute_90 PTX; cuBLASLt/cuDNN), into build-cuda/
#   make MEDIA=0  builds without FFmpeg (media commands then fail with a clear error), into build-nomedia/
#   make SAN=1    builds with ASan/UBSan into build-san/
#   make install PREFIX=/usr/local [DESTDIR=...]   installs include/h3.h, libh3.so (soname libh3.so.$(H3_SOVERSION)),
#                 libh3.a, lib/pkgconfig/h3.pc and bin/h3; make uninstall removes them (docs/api.md)
# Each configuration has its own default build folder (make does not track flags, so one folder per set of
# flags keeps a CPU build's objects out of a CUDA link); BUILD=DIR overrides it.
# `make` alone builds `all` (rules for generated files come before it below)
.DEFAULT_GOAL := all
CC      ?= cc
NVCC    ?= nvcc
CUDA    ?= 0
MEDIA   ?= 1
SAN     ?= 0
BUILD   ?= build$(if $(filter 1,$(CUDA)),-cuda)$(if $(filter 0,$(MEDIA)),-nomedia)

CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration -fopenmp -ffp-contract=off -g
ifeq ($(SAN),1)
  BUILD   = build-san
  OPT     = -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDSAN   = -fsanitize=address,undefined
else
  OPT     = -O2 -march=x86-64-v3 -mtune=generic
endif
# -fPIC: the objects also make libh3.so; -fvisibility=hidden: only what include/h3.h marks H3_PUBLIC is exported
CFLAGS  += $(CFLAGS_BASE) $(OPT) -fPIC -fvisibility=hidden -Isrc -Iinclude
# OpenBLAS's OpenMP build shares one thread pool with our OpenMP loops (the pthread build and
# OpenMP spin against each other); fall back to the default libopenblas when it is absent.
OPENBLAS_OMP ?= /usr/lib/x86_64-linux-gnu/openblas-openmp
ifneq ($(wildcard $(OPENBLAS_OMP)/libopenblas.so),)
  CFLAGS += -I/usr/include/x86_64-linux-gnu/openblas-openmp
  BLAS    = -L$(OPENBLAS_OMP) -Wl,-rpath,$(OPENBLAS_OMP) -lopenblas
else
  BLAS    = -lopenblas
endif
LDLIBS  = $(BLAS) -ljansson -lutf8proc -lm -lpthread
LDFLAGS += -fopenmp $(LDSAN)

SRC := $(wildcard src/core/*.c src/io/*.c src/backend/*.c src/backend/cpu/*.c src/model/*.c src/pipeline/*.c src/api/*.c)
ifeq ($(MEDIA),1)
  SRC    += $(wildcard src/media/*.c)
  LDLIBS += -lavformat -lavcodec -lswscale -lswresample -lavutil -ljpeg
else
  SRC    += $(wildcard src/media/none/*.c)
endif

CU_OBJ :=
ifeq ($(CUDA),1)
  CFLAGS  += -DH3_CUDA
  CU_SRC  := $(wildcard src/backend/cuda/*.cu)
  CU_OBJ  := $(CU_SRC:%.cu=$(BUILD)/%.o)
  LDLIBS  += -L/usr/local/cuda/lib64 -lcudart -lcublasLt -lcublas -lcudnn -lnccl -lstdc++
endif

# EDIT=1: the interactive session's line editor with history (libedit, docs/model/features.md 3); default when installed
EDIT ?= $(if $(wildcard /usr/include/editline/readline.h),1,0)
TOOL_LIBS :=
ifeq ($(EDIT),1)
  TOOL_CFLAGS := -DH3_EDITLINE
  TOOL_LIBS   := -ledit
endif

# `h3 serve` (docs/serve.md) needs libmicrohttpd (libmicrohttpd-dev); without it the command is left out
SERVE ?= $(shell pkg-config --exists libmicrohttpd && echo 1 || echo 0)
SERVE_SRC := $(wildcard tools/h3/cmd_serve*.c)
ifeq ($(SERVE),1)
  TOOL_CFLAGS += -DH3_SERVE $(shell pkg-config --cflags libmicrohttpd) -I$(BUILD)/gen
  TOOL_LIBS   += $(shell pkg-config --libs libmicrohttpd)
endif

OBJ      := $(SRC:%.c=$(BUILD)/%.o) $(CU_OBJ)
TOOL_SRC := $(filter-out $(if $(filter 1,$(SERVE)),,$(SERVE_SRC)),$(wildcard tools/h3/*.c))
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)
$(TOOL_OBJ): CFLAGS += $(TOOL_CFLAGS)
# the page (web/index.html) as a C array, included by cmd_serve_page.c
$(BUILD)/gen/serve_page.h: web/index.html
	@mkdir -p $(dir $@)
	{ echo 'static const unsigned char serve_page_data[] = {'; od -An -v -tx1 $< | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; echo '};'; } >$@.tmp && mv $@.tmp $@
$(BUILD)/tools/h3/cmd_serve_page.o: $(BUILD)/gen/serve_page.h
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all test clean fuzz bench cuda-tests install uninstall examples
all: $(BUILD)/h3 $(TEST_BIN) $(BUILD)/libh3.so

$(BUILD)/libh3.a: $(OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# The shared library: the same objects; tools/libh3.map exports h3_* only (the linker's own symbols stay local),
# -fvisibility=hidden keeps the internal h3_* functions out (docs/api.md "Symbols").
H3_SOVERSION = 1
$(BUILD)/libh3.so: $(OBJ) tools/libh3.map
	$(CC) -shared -Wl,-soname,libh3.so.$(H3_SOVERSION) -Wl,--version-script=tools/libh3.map -Wl,--no-undefined \
	  $(LDFLAGS) -o $@.$(H3_SOVERSION) $(OBJ) $(LDLIBS)
	ln -sf libh3.so.$(H3_SOVERSION) $@

PREFIX  ?= /usr/local
DESTDIR ?=
H3_VERSION = $(shell sed -n 's/^\#define H3_VERSION_STRING "\(.*\)"/\1/p' include/h3.h)
# pkg-config (written at install, for its PREFIX): Libs links libh3.so; Libs.private is what a static link
# (pkg-config --static) adds
H3_PC = 'prefix=$(PREFIX)' 'includedir=$${prefix}/include' 'libdir=$${prefix}/lib' '' 'Name: h3' \
  'Description: native inference engine for MiniMax-H3 (text/image to video + audio)' 'Version: $(H3_VERSION)' \
  'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lh3' 'Libs.private: -fopenmp $(LDLIBS)'

install: $(BUILD)/h3 $(BUILD)/libh3.a $(BUILD)/libh3.so
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/h3.h $(DESTDIR)$(PREFIX)/include/h3.h
	install -m 644 $(BUILD)/libh3.a $(DESTDIR)$(PREFIX)/lib/libh3.a
	install -m 755 $(BUILD)/libh3.so.$(H3_SOVERSION) $(DESTDIR)$(PREFIX)/lib/libh3.so.$(H3_SOVERSION)
	ln -sf libh3.so.$(H3_SOVERSION) $(DESTDIR)$(PREFIX)/lib/libh3.so
	printf '%s\n' $(H3_PC) >$(DESTDIR)$(PREFIX)/lib/pkgconfig/h3.pc
	install -m 755 $(BUILD)/h3 $(DESTDIR)$(PREFIX)/bin/h3

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/h3.h $(DESTDIR)$(PREFIX)/lib/libh3.a $(DESTDIR)$(PREFIX)/lib/libh3.so \
	  $(DESTDIR)$(PREFIX)/lib/libh3.so.$(H3_SOVERSION) $(DESTDIR)$(PREFIX)/lib/pkgconfig/h3.pc $(DESTDIR)$(PREFIX)/bin/h3

# examples/ built against this build tree's libh3.so (tests/cli/api.sh builds them against an installed copy)
EXAMPLE_BIN := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
examples: $(EXAMPLE_BIN)
$(BUILD)/examples/%: examples/%.c include/h3.h $(BUILD)/libh3.so
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -O2 -Iinclude -o $@ $< -L$(BUILD) -Wl,-rpath,$(abspath $(BUILD)) -lh3

$(BUILD)/h3: $(TOOL_OBJ) $(BUILD)/libh3.a
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libh3.a $(LDLIBS) $(TOOL_LIBS)

$(BUILD)/tests/%: tests/%.c tests/test.h tests/test_data.h $(BUILD)/libh3.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(BUILD)/libh3.a $(LDLIBS)

# the backend-ops harness is one translation unit: its case files are headers (tests/backend_ops/, docs/testing.md)
$(BUILD)/tests/test_backend_ops: $(wildcard tests/backend_ops/*.h)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libh3.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libh3.a $(LDLIBS)

bench: $(BENCH_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

# --fmad=false: like the CPU build's -ffp-contract=off (kernels write fmaf where they mean it).
# Targets: sm_80 (A100, and by binary compatibility every 8.x GPU: A10, RTX 30/40, L4, L40S), sm_90a (H100/H200: the
# wgmma attention kernel of cuda_flash_sm90.cu needs the arch-specific target) and compute_90 PTX, which the driver
# compiles for newer GPUs (Blackwell) at first use. Off sm_90 the attention runs on cuDNN SDPA or the own mma.sync
# kernel. Only sm_90 has been run (the lent H200s). NVCC_ARCH=-gencode=arch=compute_90a,code=sm_90a builds H100/H200 only.
NVCC_ARCH ?= -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90
$(BUILD)/%.o: %.cu $(wildcard src/backend/cuda/*.h src/backend/*.h src/core/*.h src/io/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) -O3 $(NVCC_ARCH) -std=c++17 --fmad=false -Isrc -DH3_CUDA -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -c -o $@ $<

test: all
	H3_BUILD=$(BUILD) bash tests/run_tests.sh

# CUDA op parity tests and micro-benchmarks (tests/cuda/, outside the CPU `make test` wildcard) and the
# backend-ops harness (tests/test_backend_ops.c, which `make test` runs on the CPU); built here, run on a GPU
# machine with tests/cuda/run_device.sh / tests/cuda/run_harness_device.sh.
ifneq ($(filter cuda-tests,$(MAKECMDGOALS)),)
ifneq ($(CUDA),1)
$(error cuda-tests needs CUDA=1, e.g. make CUDA=1 MEDIA=0 BUILD=build-cuda cuda-tests)
endif
endif
cuda-tests: $(BUILD)/tests/test_backend_ops $(BUILD)/tests/cuda/bench_cuda_ops $(BUILD)/tests/cuda/dit_block_cuda $(BUILD)/tests/cuda/test_cuda_bench $(BUILD)/tests/cuda/cmp_dumps \
            $(BUILD)/tests/cuda/test_flash_sm90 $(BUILD)/tests/cuda/vae_decode_cuda \
            $(BUILD)/tests/cuda/test_cuda_upload $(BUILD)/tests/cuda/test_cuda_stream $(BUILD)/tests/cuda/test_comm_nccl \
            $(BUILD)/tests/cuda/test_cuda_gguf $(BUILD)/tests/cuda/test_cuda_lora64

# libFuzzer targets (clang, ASan + UBSan): `make fuzz`, then e.g.
#   build-fuzz/fuzz_safetensors -max_total_time=600 fuzz/corpus/safetensors
#   build-fuzz/fuzz_config -max_total_time=600 fuzz/corpus/config
# Each target links the core + io sources plus its own extras (FUZZ_EXTRA_<name>, FUZZ_LIBS_<name>).
FUZZ_SRC  := $(wildcard fuzz/fuzz_*.c)
FUZZ_BIN  := $(FUZZ_SRC:fuzz/%.c=build-fuzz/%)
FUZZ_CORE := $(wildcard src/core/*.c src/io/*.c)
FUZZ_EXTRA_fuzz_tokenizer := src/model/tokenizer.c
FUZZ_EXTRA_fuzz_media := $(wildcard src/media/*.c)
FUZZ_EXTRA_fuzz_session := tools/h3/session_parse.c
FUZZ_EXTRA_fuzz_serve := tools/h3/cmd_serve_parse.c
FUZZ_EXTRA_fuzz_lora := src/model/dit_lora.c src/model/dit_lora_peft.c src/model/dit_config.c src/backend/cpu/cpu_lora.c
FUZZ_LIBS_fuzz_media := -lavformat -lavcodec -lswscale -lswresample -lavutil -ljpeg
# the config parsers live in the model files, which link the backend (CPU ops through OpenBLAS; OpenMP pragmas off)
FUZZ_EXTRA_fuzz_config := $(wildcard src/backend/*.c src/backend/cpu/*.c src/model/*.c) src/media/resize.c
FUZZ_LIBS_fuzz_config := $(filter -I%,$(CFLAGS)) $(BLAS) -lgomp
fuzz: $(FUZZ_BIN)
.SECONDEXPANSION:
build-fuzz/%: fuzz/%.c $(FUZZ_CORE) $$(FUZZ_EXTRA_$$*)
	@mkdir -p build-fuzz
	clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -Isrc -Iinclude -o $@ $< $(FUZZ_CORE) $(FUZZ_EXTRA_$*) -ljansson -lutf8proc -lm -lpthread $(FUZZ_LIBS_$*)

# Every build folder: build/ and every build-*/ (build-cuda/, build-cuda-media/, build-san/, build-fuzz/, the BUILD=build-NAME
# folders docs/conventions.md suggests, tools/build_ffmpeg_min.sh's build-ffmpeg/) and BUILD=DIR.
clean:
	rm -rf build build-*/ $(BUILD)

-include $(OBJ:.o=.d) $(TOOL_OBJ:.o=.d)
